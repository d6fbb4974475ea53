//! Finding the end of plain text, 64 bytes at a time.
//!
//! The fast path copies runs of plain text as they are and stops only at bytes that need the
//! terminal model: C0 controls other than tab (`\r`, `\n`, ESC, ...), DEL, and C1 controls
//! (U+0080..=U+009F, encoded `C2 80`..=`C2 9F`). Most log lines are ~100 bytes ending in
//! `\r\n`, so what matters is the cost per line: the stops of a window of blocks are found at
//! once as bit masks, in one tight loop (AVX2 when the [`Level`] allows, else SSE2, on x86-64),
//! and walked with `trailing_zeros`, instead of classifying byte after byte.

use super::simd::Level;

/// Bytes classified per mask.
const BLOCK: usize = 64;
/// Most blocks classified in one go (8 KiB of text).
const WINDOW: usize = 128;
/// Blocks classified after a jump; each further window of the walk doubles, up to [`WINDOW`],
/// so a walk that soon ends again classifies little it does not use.
const JUMP_WINDOW: usize = 2;

/// Walks the stops of one text: the bytes at which a run of plain text ends. Meant to be
/// asked forwards through the text (a position behind the window is classified again).
pub(super) struct Stops<'a> {
    bytes: &'a [u8],
    level: Level,
    /// The block whose mask is `masks[0]`.
    first: usize,
    /// How many of `masks` hold the masks of blocks `first..`.
    len: usize,
    /// Bit `k` of `masks[j]` set: byte `(first + j) * BLOCK + k` may end a run (a control,
    /// DEL, or the lead byte `C2`).
    masks: [u64; WINDOW],
}

impl<'a> Stops<'a> {
    /// `bytes` must be valid UTF-8 (so `C2` is always followed by a continuation byte).
    pub(super) fn new(bytes: &'a [u8], level: Level) -> Stops<'a> {
        Stops {
            bytes,
            level,
            first: 0,
            len: 0,
            masks: [0; WINDOW],
        }
    }

    /// The vector instructions the walk uses, for the passes beside it.
    pub(super) fn level(&self) -> Level {
        self.level
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

    /// The first stop at or after `from`, or the text's length.
    fn next(&mut self, from: usize) -> usize {
        // `j` indexes `masks`; a block before the window wraps around to a huge `j`.
        let mut j = (from / BLOCK).wrapping_sub(self.first);
        if j >= self.len {
            if from >= self.bytes.len() {
                return self.bytes.len();
            }
            // A jump (past blocks the block pass took): the walk may soon end again.
            self.classify(from / BLOCK, JUMP_WINDOW);
            j = 0;
        }
        let mut mask = self.masks[j] & (u64::MAX << (from % BLOCK));
        while mask == 0 {
            j += 1;
            if j == self.len {
                let block = self.first + j;
                if block * BLOCK >= self.bytes.len() {
                    return self.bytes.len();
                }
                self.classify(block, (2 * self.len).min(WINDOW));
                j = 0;
            }
            mask = self.masks[j];
        }
        (self.first + j) * BLOCK + mask.trailing_zeros() as usize
    }

    /// Fills up to `count` of `masks` from block `first` (which starts inside the text) on; a
    /// short last block is padded with spaces, which never stop.
    fn classify(&mut self, first: usize, count: usize) {
        let (blocks, rest) = self.bytes[first * BLOCK..].as_chunks::<BLOCK>();
        let whole = blocks.len().min(count);
        classify_blocks(&blocks[..whole], &mut self.masks[..whole], self.level);
        self.first = first;
        self.len = whole;
        if whole < count && !rest.is_empty() {
            let mut padded = [b' '; BLOCK];
            padded[..rest.len()].copy_from_slice(rest);
            classify_blocks(&[padded], &mut self.masks[whole..=whole], self.level);
            self.len += 1;
        }
    }
}

/// Sets `masks[j]` to the stops of `blocks[j]`, with the widest vectors `level` allows.
#[cfg(target_arch = "x86_64")]
fn classify_blocks(blocks: &[[u8; BLOCK]], masks: &mut [u64], level: Level) {
    if level.avx2() {
        // SAFETY: a `Level` allows AVX2 only where the CPU has it.
        unsafe { classify_avx2(blocks, masks) }
    } else {
        for (mask, block) in masks.iter_mut().zip(blocks) {
            *mask = classify_sse2(block);
        }
    }
}

/// Sets `masks[j]` to the stops of `blocks[j]`.
#[cfg(not(target_arch = "x86_64"))]
fn classify_blocks(blocks: &[[u8; BLOCK]], masks: &mut [u64], _: Level) {
    for (mask, block) in masks.iter_mut().zip(blocks) {
        *mask = slow_stops(block);
    }
}

/// [`classify_sse2`] with 32-byte vectors, over a window at once: the loop and the
/// intrinsics compile together, which halves the instructions per block.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn classify_avx2(blocks: &[[u8; BLOCK]], masks: &mut [u64]) {
    use std::arch::x86_64::{
        _mm256_andnot_si256, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_min_epu8,
        _mm256_movemask_epi8, _mm256_or_si256, _mm256_set1_epi8,
    };
    for (mask, block) in masks.iter_mut().zip(blocks) {
        *mask = 0;
        for (k, lane) in block.as_chunks::<32>().0.iter().enumerate() {
            // SAFETY: `lane` is 32 readable bytes, and `loadu` needs no alignment.
            let v = unsafe { _mm256_loadu_si256(lane.as_ptr().cast()) };
            let c0 = _mm256_cmpeq_epi8(_mm256_min_epu8(v, _mm256_set1_epi8(0x1F)), v);
            let tab = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\t' as i8));
            let del = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(0x7F));
            let c2 = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(0xC2_u8 as i8));
            let stop = _mm256_or_si256(_mm256_andnot_si256(tab, c0), _mm256_or_si256(del, c2));
            *mask |= u64::from(_mm256_movemask_epi8(stop) as u32) << (32 * k);
        }
    }
}

/// Bit `k` set when `block[k]` may end a run of plain text.
#[cfg(target_arch = "x86_64")]
fn classify_sse2(block: &[u8; BLOCK]) -> u64 {
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

/// Bit `k` set when `block[k]` may end a run of plain text, byte at a time: the definition
/// the vector versions follow.
#[cfg(any(test, not(target_arch = "x86_64")))]
fn slow_stops(block: &[u8; BLOCK]) -> u64 {
    block
        .iter()
        .enumerate()
        .fold(0, |mask, (k, &b)| mask | u64::from(is_stop(b)) << k)
}

/// Whether `b` may end a run of plain text.
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
        for level in Level::supported() {
            let mut stops = Stops::new(text.as_bytes(), level);
            let mut ends = Vec::new();
            let mut from = 0;
            while from < text.len() {
                let end = stops.plain_end(from);
                ends.push(end);
                from = end + 1;
            }
            assert_eq!(ends, [10, 13, 15, 17, 18], "{level:?}");
        }
    }

    proptest! {
        #[test]
        fn masks_follow_the_byte_rule(block in proptest::array::uniform32(any::<u8>()),
                                      more in proptest::array::uniform32(any::<u8>())) {
            let mut whole = [0; BLOCK];
            whole[..32].copy_from_slice(&block);
            whole[32..].copy_from_slice(&more);
            let slow = slow_stops(&whole);
            for level in Level::supported() {
                let mut fast = [0];
                classify_blocks(&[whole], &mut fast, level);
                prop_assert_eq!(fast[0], slow, "{:?}", level);
            }
            #[cfg(target_arch = "x86_64")]
            prop_assert_eq!(classify_sse2(&whole), slow);
        }

        #[test]
        fn walking_a_long_text_meets_every_stop(
            text in "(\\PC{0,300}[\t\r\n\x1b\x7f\u{80}-\u{9f}]){0,80}\\PC{0,100}"
        ) {
            for level in Level::supported() {
                let mut stops = Stops::new(text.as_bytes(), level);
                let mut from = 0;
                while from < text.len() {
                    let end = stops.plain_end(from);
                    prop_assert_eq!(end, plain_end_slowly(&text, from));
                    from = text.ceil_char_boundary(end + 1);
                }
            }
        }

        #[test]
        fn plain_end_agrees_with_chars(text in "(\\PC|[\t\r\n\x1b\x7f\u{80}-\u{9f}]){0,300}",
                                       from in 0usize..300) {
            let from = text.floor_char_boundary(from.min(text.len()));
            for level in Level::supported() {
                let mut stops = Stops::new(text.as_bytes(), level);
                prop_assert_eq!(stops.plain_end(from), plain_end_slowly(&text, from));
            }
        }
    }
}
