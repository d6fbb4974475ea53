//! Finding the end of plain text, 64 bytes at a time.
//!
//! The fast path copies runs of plain text as they are and stops only at bytes that need the
//! terminal model: C0 controls other than tab (`\r`, `\n`, ESC, ...), DEL, and C1 controls
//! (U+0080..=U+009F, encoded `C2 80`..=`C2 9F`). Most log lines are ~100 bytes ending in
//! `\r\n`, so what matters is the cost per line: the stops of a window of blocks are found at
//! once as bit masks, in one tight loop (AVX2 when the CPU has it, else SSE2, on x86-64), and
//! walked with `trailing_zeros`, instead of classifying byte after byte.

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
    pub(super) fn new(bytes: &'a [u8]) -> Stops<'a> {
        Stops {
            bytes,
            first: 0,
            len: 0,
            masks: [0; WINDOW],
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

    /// The first stop at or after `from`, or the text's length.
    fn next(&mut self, from: usize) -> usize {
        // `j` indexes `masks`; a block before the window wraps around to a huge `j`.
        let mut j = (from / BLOCK).wrapping_sub(self.first);
        if j >= self.len {
            if from >= self.bytes.len() {
                return self.bytes.len();
            }
            // A jump (past blocks [`plain_line_blocks`] took): the walk may soon end again.
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
        classify_blocks(&blocks[..whole], &mut self.masks[..whole]);
        self.first = first;
        self.len = whole;
        if whole < count && !rest.is_empty() {
            let mut padded = [b' '; BLOCK];
            padded[..rest.len()].copy_from_slice(rest);
            classify_blocks(&[padded], &mut self.masks[whole..=whole]);
            self.len += 1;
        }
    }
}

/// What [`plain_line_blocks`] did.
pub(super) struct Blocks {
    /// The end of the last line copied (where the pass started when none).
    pub done: usize,
    /// Where the pass gave up: the end of the first block it could not take (a byte for the
    /// terminal model, or too little text left); `usize::MAX` when the CPU cannot do this, so
    /// the caller stops asking.
    pub stuck: usize,
    /// The lines copied.
    pub lines: u64,
}

impl Blocks {
    fn none(start: usize) -> Blocks {
        Blocks {
            done: start,
            stuck: usize::MAX,
            lines: 0,
        }
    }
}

/// Copies the complete plain lines of `text` from `start` (a line start) to `out`, a 64-byte
/// block at a time, each `\r\n` becoming `\n`: on a CPU with AVX-512 (VBMI2) a block of plain
/// lines costs a few instructions whatever its line count, where walking stops costs some per
/// line. Plain means what [`Stops`] passes, less `C2` (rare: it goes the slow way).
#[cfg(target_arch = "x86_64")]
pub(super) fn plain_line_blocks(text: &str, start: usize, out: &mut String) -> Blocks {
    use std::arch::is_x86_feature_detected as has;
    if has!("avx512bw") && has!("avx512vbmi2") && has!("popcnt") && has!("lzcnt") {
        // SAFETY: the CPU has these features, checked just above; `out` keeps valid UTF-8,
        // as `plain_line_blocks_avx512` only ever makes it longer by whole lines of `text`,
        // less some `\r` bytes (ASCII, so never part of a longer char).
        unsafe { plain_line_blocks_avx512(text.as_bytes(), start, out.as_mut_vec()) }
    } else {
        Blocks::none(start)
    }
}

/// See the x86-64 version: other CPUs take the stops' way.
#[cfg(not(target_arch = "x86_64"))]
pub(super) fn plain_line_blocks(_: &str, start: usize, _: &mut String) -> Blocks {
    Blocks::none(start)
}

/// [`plain_line_blocks`] over bytes: compresses each block's kept bytes (all but the `\r` of
/// each `\r\n`) into `out`'s spare room, and only lengthens `out` up to the last `\n` taken.
///
/// # Safety
/// The CPU must have AVX-512 BW and VBMI2, POPCNT and LZCNT.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw,avx512vbmi2,popcnt,lzcnt")]
unsafe fn plain_line_blocks_avx512(bytes: &[u8], start: usize, out: &mut Vec<u8>) -> Blocks {
    use std::arch::x86_64::{
        _mm512_cmpeq_epi8_mask, _mm512_cmplt_epu8_mask, _mm512_loadu_si512,
        _mm512_maskz_compress_epi8, _mm512_set1_epi8, _mm512_storeu_si512,
    };
    let blocks = (bytes.len() - start) / BLOCK;
    out.reserve(blocks * BLOCK);
    let base = out.len();
    let room = out.spare_capacity_mut().as_mut_ptr().cast::<u8>();
    // `written` bytes are in `room`; the first `done_out` of them are `bytes[start..done]`.
    let (mut written, mut done, mut done_out, mut lines) = (0, start, 0, 0);
    let mut pos = start;
    let stuck = loop {
        if pos + BLOCK > bytes.len() {
            break pos + BLOCK;
        }
        // SAFETY: `bytes[pos..pos + BLOCK]` is in bounds (checked above); `loadu` needs no
        // alignment.
        let v = unsafe { _mm512_loadu_si512(bytes.as_ptr().add(pos).cast()) };
        let is = |b: u8| _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b as i8));
        let (lf, cr) = (is(b'\n'), is(b'\r'));
        let lf_next = u64::from(bytes.get(pos + BLOCK) == Some(&b'\n')) << 63;
        let crlf = cr & (lf >> 1 | lf_next);
        let c0 = _mm512_cmplt_epu8_mask(v, _mm512_set1_epi8(0x20)) & !is(b'\t');
        if c0 & !lf & !crlf | is(0x7F) | is(0xC2) != 0 {
            break pos + BLOCK;
        }
        let keep = !crlf;
        // SAFETY: at most `written + BLOCK <= blocks * BLOCK` bytes into `room`, which has
        // that many (reserved above); `storeu` needs no alignment.
        unsafe {
            _mm512_storeu_si512(
                room.add(written).cast(),
                _mm512_maskz_compress_epi8(keep, v),
            );
        }
        if lf != 0 {
            lines += u64::from(lf.count_ones());
            let last = 63 - lf.leading_zeros();
            done = pos + last as usize + 1;
            done_out = written + (keep & u64::MAX >> (63 - last)).count_ones() as usize;
        }
        written += keep.count_ones() as usize;
        pos += BLOCK;
    };
    // SAFETY: the first `done_out` bytes of `room` were written above (and `base + done_out`
    // is within the capacity reserved).
    unsafe { out.set_len(base + done_out) };
    Blocks { done, stuck, lines }
}

/// Sets `masks[j]` to the stops of `blocks[j]`, with the widest vectors the CPU has.
#[cfg(target_arch = "x86_64")]
fn classify_blocks(blocks: &[[u8; BLOCK]], masks: &mut [u64]) {
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        unsafe { classify_avx2(blocks, masks) }
    } else {
        for (mask, block) in masks.iter_mut().zip(blocks) {
            *mask = classify_sse2(block);
        }
    }
}

/// Sets `masks[j]` to the stops of `blocks[j]`.
#[cfg(not(target_arch = "x86_64"))]
fn classify_blocks(blocks: &[[u8; BLOCK]], masks: &mut [u64]) {
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

    /// Runs [`plain_line_blocks`] from `start` and checks what it did: it copied whole plain
    /// lines only, `\r\n` as `\n`, up to `done`, and gave up past it. Returns `done`.
    fn check_blocks(text: &str, start: usize) -> Result<usize, TestCaseError> {
        let mut out = String::from("before");
        let Blocks { done, stuck, lines } = plain_line_blocks(text, start, &mut out);
        let taken = &text[start..done];
        prop_assert!(done == start || taken.ends_with('\n'));
        prop_assert!(stuck > done);
        prop_assert_eq!(lines, taken.matches('\n').count() as u64);
        prop_assert_eq!(out, format!("before{}", taken.replace("\r\n", "\n")));
        let lone_cr = taken.replace("\r\n", "").contains('\r');
        prop_assert!(
            !lone_cr
                && !taken.contains(|c: char| c.is_control() && c != '\t' && c != '\r' && c != '\n')
        );
        Ok(done)
    }

    #[test]
    fn blocks_of_plain_lines_are_taken_whole() {
        let text = "a line of plain text, tab\there, \u{e9}, ended by CR LF\r\n".repeat(100);
        let mut out = String::new();
        let done = plain_line_blocks(&text, 0, &mut out).done;
        if done == 0 {
            return; // this CPU cannot: the stops' walk does it all
        }
        // The last block is cut short and its line left for the walk.
        assert!(done > text.len() - 128 && text[..done].ends_with('\n'));
        assert_eq!(out, text[..done].replace("\r\n", "\n"));
    }

    proptest! {
        #[test]
        fn block_pass_copies_whole_plain_lines_only(
            lines in prop::collection::vec(
                ("[ -~\t\u{e9}]{0,120}", "(\r\n|\n|\r|\x1b|\x7f|\u{85}|\u{a0}|\x08|){0,1}\n?"),
                0..40,
            ),
            start in 0usize..200,
        ) {
            let text: String = lines.iter().map(|(l, end)| format!("{l}{end}")).collect();
            let start = text.floor_char_boundary(start.min(text.len()));
            let start = text[..start].rfind('\n').map_or(0, |i| i + 1);
            let done = check_blocks(&text, start)?;
            check_blocks(&text, done)?;
        }

        #[test]
        fn masks_follow_the_byte_rule(block in proptest::array::uniform32(any::<u8>()),
                                      more in proptest::array::uniform32(any::<u8>())) {
            let mut whole = [0; BLOCK];
            whole[..32].copy_from_slice(&block);
            whole[32..].copy_from_slice(&more);
            let slow = slow_stops(&whole);
            let mut fast = [0];
            classify_blocks(&[whole], &mut fast);
            prop_assert_eq!(fast[0], slow);
            #[cfg(target_arch = "x86_64")]
            prop_assert_eq!(classify_sse2(&whole), slow);
        }

        #[test]
        fn walking_a_long_text_meets_every_stop(
            text in "(\\PC{0,300}[\t\r\n\x1b\x7f\u{80}-\u{9f}]){0,80}\\PC{0,100}"
        ) {
            let mut stops = Stops::new(text.as_bytes());
            let mut from = 0;
            while from < text.len() {
                let end = stops.plain_end(from);
                prop_assert_eq!(end, plain_end_slowly(&text, from));
                from = text.ceil_char_boundary(end + 1);
            }
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
