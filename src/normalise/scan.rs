//! Finding the end of plain text, 64 bytes at a time.
//!
//! The fast path copies runs of plain text as they are and stops only at bytes that need the
//! terminal model: C0 controls other than tab (`\r`, `\n`, ESC, ...), DEL, and C1 controls
//! (U+0080..=U+009F, encoded `C2 80`..=`C2 9F`). Most log lines are ~100 bytes ending in
//! `\r\n`, so what matters is the cost per line: a block's stops are found at once as a bit
//! mask (SSE2 compares and a movemask on x86-64), kept, and walked with `trailing_zeros`,
//! instead of classifying byte after byte.

/// Bytes classified at once.
const BLOCK: usize = 64;

/// Walks the stops of one text: the bytes at which a run of plain text ends.
pub(super) struct Stops<'a> {
    bytes: &'a [u8],
    /// Start of the block whose mask is in `mask` (a multiple of [`BLOCK`]).
    base: usize,
    /// Bit `k` set: byte `base + k` may end a run (a control, DEL, or the lead byte `C2`).
    mask: u64,
}

impl<'a> Stops<'a> {
    /// `bytes` must be valid UTF-8 (so `C2` is always followed by a continuation byte).
    pub(super) fn new(bytes: &'a [u8]) -> Stops<'a> {
        Stops {
            bytes,
            base: 0,
            mask: block_mask(bytes, 0),
        }
    }

    /// Where the run of plain text starting at `from` ends: the position of the first control,
    /// DEL or C1 control at or after `from`, or the text's length. Plain text is printable
    /// ASCII, tab, and every non-ASCII char but the C1 controls.
    pub(super) fn plain_end(&mut self, mut from: usize) -> usize {
        loop {
            let at = self.next(from);
            match self.bytes.get(at..at + 2) {
                // U+00A0..=U+00BF share the lead byte with the C1 controls: plain.
                Some([0xC2, second]) if *second >= 0xA0 => from = at + 2,
                _ => return at,
            }
        }
    }

    /// The first masked byte at or after `from`, or the text's length.
    fn next(&mut self, from: usize) -> usize {
        let mut base = from - from % BLOCK;
        if base != self.base {
            self.load(base);
        }
        let mut mask = self.mask & (u64::MAX << (from - base));
        while mask == 0 {
            base += BLOCK;
            if base >= self.bytes.len() {
                return self.bytes.len();
            }
            self.load(base);
            mask = self.mask;
        }
        base + mask.trailing_zeros() as usize
    }

    fn load(&mut self, base: usize) {
        self.base = base;
        self.mask = block_mask(self.bytes, base);
    }
}

/// The mask of the block at `base`; a short last block is padded with spaces (never stops).
fn block_mask(bytes: &[u8], base: usize) -> u64 {
    match bytes.get(base..base + BLOCK) {
        Some(block) => stops(block.try_into().expect("a block is 64 bytes")),
        None => {
            let mut padded = [b' '; BLOCK];
            let rest = &bytes[base.min(bytes.len())..];
            padded[..rest.len()].copy_from_slice(rest);
            stops(&padded)
        }
    }
}

/// Bit `k` set when `block[k]` may end a run of plain text.
#[cfg(target_arch = "x86_64")]
fn stops(block: &[u8; BLOCK]) -> u64 {
    use std::arch::x86_64::{
        _mm_andnot_si128, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8,
        _mm_or_si128, _mm_set1_epi8,
    };
    let mut mask = 0;
    for (k, lane) in block.as_chunks::<16>().0.iter().enumerate() {
        // SAFETY: SSE2 is part of x86-64's baseline, so every x86-64 CPU has these
        // instructions; `lane` is 16 readable bytes, and `loadu` needs no alignment.
        let stop = unsafe {
            let v = _mm_loadu_si128(lane.as_ptr().cast());
            let c0 = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1F)), v);
            let tab = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\t' as i8));
            let del = _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7F));
            let c2 = _mm_cmpeq_epi8(v, _mm_set1_epi8(0xC2_u8 as i8));
            let stop = _mm_or_si128(_mm_andnot_si128(tab, c0), _mm_or_si128(del, c2));
            _mm_movemask_epi8(stop)
        };
        mask |= u64::from(stop as u16) << (16 * k);
    }
    mask
}

/// Bit `k` set when `block[k]` may end a run of plain text.
#[cfg(not(target_arch = "x86_64"))]
fn stops(block: &[u8; BLOCK]) -> u64 {
    block
        .iter()
        .enumerate()
        .fold(0, |mask, (k, &b)| mask | u64::from(is_stop(b)) << k)
}

/// The byte-at-a-time definition the masks follow.
#[cfg(any(test, not(target_arch = "x86_64")))]
fn is_stop(b: u8) -> bool {
    (b < 0x20 && b != b'\t') || b == 0x7F || b == 0xC2
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The plain run's end, byte at a time.
    fn plain_end_slowly(text: &str, from: usize) -> usize {
        text[from..]
            .char_indices()
            .find(|&(_, c)| c.is_control() && c != '\t')
            .map_or(text.len(), |(i, _)| from + i)
    }

    #[test]
    fn stops_at_controls_del_and_c1_but_not_tab_or_other_chars() {
        let text = "a\tb\u{e9}\u{a0}\u{bf}c\u{85}d\x7fe\x1bf\r\n";
        let mut stops = Stops::new(text.as_bytes());
        let mut ends = Vec::new();
        let mut from = 0;
        while from < text.len() {
            let end = stops.plain_end(from);
            ends.push(end);
            from = end + 1;
        }
        assert_eq!(ends, [10, 13, 15, 17, 18]);
    }

    proptest! {
        #[test]
        fn masks_follow_the_byte_rule(block in proptest::array::uniform32(any::<u8>()),
                                      more in proptest::array::uniform32(any::<u8>())) {
            let mut whole = [0; BLOCK];
            whole[..32].copy_from_slice(&block);
            whole[32..].copy_from_slice(&more);
            let slow = whole
                .iter()
                .enumerate()
                .fold(0, |mask, (k, &b)| mask | u64::from(is_stop(b)) << k);
            prop_assert_eq!(stops(&whole), slow);
        }

        #[test]
        fn plain_end_agrees_with_chars(text in "(\\PC|[\t\r\n\x1b\x7f\u{80}-\u{9f}]){0,300}",
                                       from in 0usize..300) {
            let from = text.floor_char_boundary(from.min(text.len()));
            let mut stops = Stops::new(text.as_bytes());
            prop_assert_eq!(stops.plain_end(from), plain_end_slowly(&text, from));
        }
    }
}
