//! o200k's vocabulary (each token's bytes and rank) as static tables that `build.rs` lays out
//! at compile time and the binary carries in its read-only data, looked up here.
//!
//! Built at run time, the vocabulary cost the daemon 9 MiB of heap for good and a 59 MiB peak
//! while `tiktoken-rs`'s `CoreBPE` (the only way to its bytes) was built and dropped; with 16
//! runs in flight it held 41 MiB. Laid out at compile time, nothing is built: the tables are
//! pages of the executable, read from the page cache when a count first touches them, shared
//! by every spillway process and given back to the system under pressure like any file's
//! pages. `build.rs` lays the tables out with [`layout`], which this module probes them with.

mod layout;

use layout::{RANK_BITS, TABLE_SLOTS, first_slot, hash, tag};

/// Every token's bytes, in rank order (special tokens and unused ranks have none).
static BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k_bytes.bin"));
/// Where each rank's bytes end in [`BYTES`] (little-endian `u32`s; they start where the
/// rank before's end).
static ENDS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k_ends.bin"));
/// [`TABLE_SLOTS`] little-endian `u32` slots: tag and rank plus one, 0 for empty.
static TABLE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k_table.bin"));

fn word(table: &[u8], i: usize) -> u32 {
    table
        .get(i * 4..i * 4 + 4)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u32::from_le_bytes)
}

fn token(rank: usize) -> &'static [u8] {
    let start = if rank == 0 { 0 } else { word(ENDS, rank - 1) };
    BYTES
        .get(start as usize..word(ENDS, rank) as usize)
        .unwrap_or_default()
}

/// The rank of the token made of exactly `bytes`, if o200k has one (special tokens are
/// left out: `encode_ordinary` never makes them from text).
pub fn rank(bytes: &[u8]) -> Option<u32> {
    let h = hash(bytes);
    let tag = tag(h);
    let mut i = first_slot(h);
    loop {
        let slot = word(TABLE, i);
        if slot == 0 {
            return None;
        }
        let rank = (slot & ((1 << RANK_BITS) - 1)) as usize - 1;
        if slot >> RANK_BITS == tag && token(rank) == bytes {
            return Some(rank as u32);
        }
        i = (i + 1) & (TABLE_SLOTS - 1);
    }
}

#[cfg(test)]
mod tests {
    use super::rank;

    /// Every token `tiktoken-rs` decodes has its rank here, and no special token has one.
    #[test]
    fn every_token_has_its_rank() {
        let bpe = tiktoken_rs::o200k_base().unwrap();
        let special = bpe.special_tokens();
        let mut found = 0;
        for r in 0..=200_018 {
            let Ok(bytes) = bpe.decode_bytes(&[r]) else {
                continue;
            };
            if std::str::from_utf8(&bytes).is_ok_and(|t| special.contains(t)) {
                assert_eq!(rank(&bytes), None, "special token {r}");
                continue;
            }
            assert_eq!(rank(&bytes), Some(r), "token {r} {bytes:?}");
            found += 1;
        }
        assert!(found > 199_000, "{found}");
    }

    #[test]
    fn text_that_is_no_token_has_no_rank() {
        assert_eq!(rank(b""), None);
        assert_eq!(rank("zqxjzqxjzqxjzqxj\u{1}".as_bytes()), None);
        assert!(rank(b"hello").is_some());
        assert!(rank(b" the").is_some());
    }
}
