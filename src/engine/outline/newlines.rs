//! Finding line ends 64 bytes at a time (AVX2 where the CPU has it, SSE2 else, a plain loop
//! elsewhere), so the outline walks a piece's lines without a search per line.

/// The newlines of a piece in order, found 64 bytes at a time as bit masks (a window of
/// blocks at once, with the widest vectors the CPU has) and walked with `trailing_zeros`: on
/// lines of a hundred bytes, a search call per line costs more than finding them all.
pub(super) struct Newlines<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) avx2: bool,
    /// `masks[j]`: bit `k` set when byte `(first + j) * 64 + k` is a newline.
    pub(super) masks: [u64; MASK_WINDOW],
    pub(super) first: usize,
    /// Masks of the window found, the one being walked, and its bits not yet walked.
    pub(super) len: usize,
    pub(super) at: usize,
    pub(super) mask: u64,
}

/// Blocks of 64 bytes whose masks are found in one go (2 KiB of text).
const MASK_WINDOW: usize = 32;

impl<'a> Newlines<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Newlines<'a> {
        Newlines {
            bytes,
            #[cfg(target_arch = "x86_64")]
            avx2: std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(not(target_arch = "x86_64"))]
            avx2: false,
            masks: [0; MASK_WINDOW],
            first: 0,
            len: 0,
            at: 0,
            mask: 0,
        }
    }

    /// Finds the masks of the next window; false at the end of the text.
    fn fill(&mut self) -> bool {
        let first = self.first + self.len;
        let Some(window) = self.bytes.get(first * 64..).filter(|w| !w.is_empty()) else {
            return false;
        };
        let (blocks, rest) = window[..window.len().min(MASK_WINDOW * 64)].as_chunks::<64>();
        newline_masks(blocks, &mut self.masks, self.avx2);
        self.len = blocks.len();
        if !rest.is_empty() {
            // Only the text's last window ends with a short block, so there is room.
            self.masks[self.len] = newline_mask_slowly(rest);
            self.len += 1;
        }
        self.first = first;
        self.at = 0;
        true
    }
}

impl Iterator for Newlines<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        while self.mask == 0 {
            self.at += 1;
            if self.at >= self.len && !self.fill() {
                return None;
            }
            self.mask = self.masks[self.at];
        }
        let at = (self.first + self.at) * 64 + self.mask.trailing_zeros() as usize;
        self.mask &= self.mask - 1;
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
