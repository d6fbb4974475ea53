//! Finding line ends 64 bytes at a time (AVX2 where the CPU has it, SSE2 else, a plain loop
//! elsewhere), so the outline walks a piece's lines without a search per line.

/// The newlines of a piece in order, found 64 bytes at a time as bit masks (a window of
/// blocks at once, with the widest vectors the CPU has) and laid out as a list of positions
/// per window: on lines of a hundred bytes, a search call per line costs more than finding
/// them all, and so does walking the masks bit by bit as lines are asked for (whether a block
/// of 64 bytes holds a newline is a branch the CPU guesses wrong every other time; 35 ms of a
/// 256 MiB `run --no-tty`, the writer's largest cost after the kernel's copy).
pub(super) struct Newlines<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) avx2: bool,
    /// The newlines of the window found, as offsets from its start (the first `count`).
    ends: [u16; ENDS],
    /// Where the window found starts (a multiple of 64), where the next one does.
    start: usize,
    next_start: usize,
    /// Newlines in the window, and how many of them were walked.
    count: usize,
    at: usize,
}

/// Blocks of 64 bytes whose masks are found in one go (2 KiB of text).
const MASK_WINDOW: usize = 32;

/// Room for a window's newlines, each of its bytes one at worst.
const ENDS: usize = MASK_WINDOW * 64;

impl<'a> Newlines<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Newlines<'a> {
        Newlines {
            bytes,
            #[cfg(target_arch = "x86_64")]
            avx2: std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(not(target_arch = "x86_64"))]
            avx2: false,
            ends: [0; ENDS],
            start: 0,
            next_start: 0,
            count: 0,
            at: 0,
        }
    }

    /// Finds the newlines of the next window that has any; false at the end of the text.
    fn fill(&mut self) -> bool {
        let mut masks = [0u64; MASK_WINDOW];
        loop {
            let start = self.next_start;
            let Some(window) = self.bytes.get(start..).filter(|w| !w.is_empty()) else {
                return false;
            };
            let window = &window[..window.len().min(MASK_WINDOW * 64)];
            let (blocks, rest) = window.as_chunks::<64>();
            newline_masks(blocks, &mut masks, self.avx2);
            let mut len = blocks.len();
            if !rest.is_empty() {
                // Only the text's last window ends with a short block, so there is room.
                masks[len] = newline_mask_slowly(rest);
                len += 1;
            }
            self.start = start;
            self.next_start = start + window.len();
            self.count = lay_out(&masks[..len], &mut self.ends);
            self.at = 0;
            if self.count > 0 {
                return true;
            }
        }
    }
}

/// Writes the positions of the set bits of `masks` (block `j`'s bit `k` is byte `64 j + k`) to
/// `ends` in order; returns how many there are. Only the blocks that hold a newline are
/// visited (a bit each, in `holding`), and a block's first newline is written before asking
/// whether it has more, which on lines of more than 64 bytes it seldom has: the branches the
/// CPU must guess are then taken the same way nearly every time.
fn lay_out(masks: &[u64], ends: &mut [u16; ENDS]) -> usize {
    let holding = masks.iter().enumerate().fold(0u32, |holding, (j, &mask)| {
        holding | u32::from(mask != 0) << j
    });
    let mut n = 0;
    let mut blocks = holding;
    while blocks != 0 {
        let j = blocks.trailing_zeros() as usize;
        blocks &= blocks - 1;
        let base = (j * 64) as u16;
        let mut bits = masks[j];
        ends[n] = base + bits.trailing_zeros() as u16;
        n += 1;
        bits &= bits - 1;
        while bits != 0 {
            ends[n] = base + bits.trailing_zeros() as u16;
            n += 1;
            bits &= bits - 1;
        }
    }
    n
}

impl Iterator for Newlines<'_> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.at == self.count && !self.fill() {
            return None;
        }
        let at = self.start + usize::from(self.ends[self.at]);
        self.at += 1;
        Some(at)
    }
}

/// Sets `masks[j]` to the newlines of `blocks[j]`.
#[cfg(target_arch = "x86_64")]
fn newline_masks(blocks: &[[u8; 64]], masks: &mut [u64], avx2: bool) {
    if avx2 {
        // SAFETY: `avx2` is only set where the CPU has AVX2.
        unsafe { newline_masks_avx2(blocks, masks) }
    } else {
        for (mask, block) in masks.iter_mut().zip(blocks) {
            *mask = newline_mask_sse2(block);
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn newline_masks(blocks: &[[u8; 64]], masks: &mut [u64], _avx2: bool) {
    for (mask, block) in masks.iter_mut().zip(blocks) {
        *mask = newline_mask_slowly(block);
    }
}

/// [`newline_mask_sse2`] with 32-byte vectors, over a window at once.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn newline_masks_avx2(blocks: &[[u8; 64]], masks: &mut [u64]) {
    use std::arch::x86_64::{
        _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_set1_epi8,
    };
    let newline = _mm256_set1_epi8(b'\n' as i8);
    for (mask, block) in masks.iter_mut().zip(blocks) {
        *mask = 0;
        for (k, lane) in block.as_chunks::<32>().0.iter().enumerate() {
            // SAFETY: `lane` is 32 readable bytes, and `loadu` needs no alignment.
            let v = unsafe { _mm256_loadu_si256(lane.as_ptr().cast()) };
            let newlines = _mm256_movemask_epi8(_mm256_cmpeq_epi8(v, newline)) as u32;
            *mask |= u64::from(newlines) << (32 * k);
        }
    }
}

/// Bit `k` set when `block[k]` is a newline.
#[cfg(target_arch = "x86_64")]
fn newline_mask_sse2(block: &[u8; 64]) -> u64 {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8};
    let mut mask = 0;
    for (k, lane) in block.as_chunks::<16>().0.iter().enumerate() {
        // SAFETY: SSE2 is part of x86-64's baseline, so every x86-64 CPU has these
        // instructions; `lane` is 16 readable bytes, and `loadu` needs no alignment.
        let newlines = unsafe {
            let v = _mm_loadu_si128(lane.as_ptr().cast());
            _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'\n' as i8)))
        };
        mask |= u64::from(newlines as u16) << (16 * k);
    }
    mask
}

/// Bit `k` set when `block[k]` (at most 64 bytes) is a newline, byte at a time: the definition
/// the vector versions follow.
fn newline_mask_slowly(block: &[u8]) -> u64 {
    block
        .iter()
        .enumerate()
        .fold(0, |mask, (k, &b)| mask | u64::from(b == b'\n') << k)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn text() -> impl Strategy<Value = Vec<u8>> {
        // Newlines dense (runs of them) and sparse; windows with none come from the long
        // lines the test inserts.
        prop::collection::vec(prop_oneof![3 => Just(b'\n'), 7 => Just(b'x')], 0..6000)
    }

    proptest! {
        /// Every newline, in order, with either vector width: what a search for each finds.
        #[test]
        fn the_newlines_are_those_a_search_finds(
            bytes in text(),
            long_lines in prop::collection::vec(0usize..5000, 0..4),
        ) {
            let mut bytes = bytes;
            for at in long_lines {
                let at = at.min(bytes.len());
                bytes.splice(at..at, std::iter::repeat_n(b'z', 2500));
            }
            let expected: Vec<usize> = memchr::memchr_iter(b'\n', &bytes).collect();
            for avx2 in [false, true] {
                let mut newlines = Newlines::new(&bytes);
                newlines.avx2 &= avx2;
                prop_assert_eq!(&newlines.collect::<Vec<_>>(), &expected, "avx2: {}", avx2);
            }
        }
    }

    #[test]
    fn a_window_of_newlines_only_is_laid_out_whole() {
        let bytes = vec![b'\n'; MASK_WINDOW * 64 * 2 + 3];
        let found: Vec<usize> = Newlines::new(&bytes).collect();
        assert_eq!(found, (0..bytes.len()).collect::<Vec<_>>());
    }
}
