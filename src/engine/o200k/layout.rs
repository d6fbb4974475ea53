//! How o200k's static tables are laid out: the hash, the table's size and what a slot holds.
//! `build.rs` includes this file (and only this one: it cannot use the crate) to lay the
//! tables out, and [`super::rank`] probes them with the same function.

/// Slots of the open-addressed table: a power of two, about 2.6 per token, so a failed look-up
/// (most of BPE's, pairs that are no token) ends after one or two probes.
pub const TABLE_SLOTS: usize = 1 << 19;

/// Bits of a slot that hold its token's rank plus one (0: an empty slot); the bits above hold
/// the top of the token's hash, so most probes of other tokens end without comparing bytes.
pub const RANK_BITS: u32 = 18;

/// The hash both sides use: FxHash's step over 8-byte words, then a final mix so the low
/// bits (the slot) and the high bits (the tag) both depend on every byte.
pub fn hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let step = |h: u64, word: u64| (h.rotate_left(5) ^ word).wrapping_mul(K);
    let mut h = bytes.len() as u64;
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        h = step(h, u64::from_le_bytes(w));
    }
    let mut rest = [0u8; 8];
    rest[..words.remainder().len()].copy_from_slice(words.remainder());
    h = step(h, u64::from_le_bytes(rest));
    h ^= h >> 32;
    h = h.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^ (h >> 29)
}

/// The tag a slot keeps of a token's hash: the bits above [`RANK_BITS`].
pub fn tag(hash: u64) -> u32 {
    (hash >> (64 - (32 - RANK_BITS))) as u32
}

/// The slot a probe for `hash` starts at.
pub fn first_slot(hash: u64) -> usize {
    hash as usize & (TABLE_SLOTS - 1)
}
