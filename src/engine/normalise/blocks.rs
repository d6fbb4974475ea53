//! The block pass: complete plain lines copied 64 bytes at a time, each `\r\n` becoming `\n`.
//!
//! Walking the stops costs some instructions and a copy per line (~100 bytes in a log); a
//! block of plain lines costs a few vector instructions here whatever its line count. A block
//! holding anything else (a lone `\r`, DEL, `C2`, an escape other than a colour) stops the
//! pass: the stops' walk takes the lines around it, and asks again after it.
//!
//! Two forms, one result: with AVX-512 VBMI2 one `vpcompressb` drops a block's `\r` bytes;
//! with AVX2 the block is stored whole and, for each run of bytes to drop (the `\r` of a
//! `\r\n`: most blocks of a log have none or one), the bytes after it are stored again that
//! many places further left, 64 at a time (each store overwrites the tail of the one before,
//! so the slack past the end is scratch). Both forms drop the escapes that change nothing on
//! a line (colours, mostly), as the walk does: the AVX2 form the same way, the AVX-512 form in
//! the same `vpcompressb`. Other CPUs walk the stops.

use super::simd::Level;
#[cfg(target_arch = "x86_64")]
use super::terminal::ESC;
#[cfg(any(target_arch = "x86_64", test))]
use super::terminal::inert_csi_len;

/// Bytes taken per step.
const BLOCK: usize = 64;
/// Bytes the AVX2 pass reads from a block's start: the block, the 64 its stores read from
/// one place further on (the block's last byte and the next block's), and one more for the
/// store that drops a `\r` at the block's end, or none.
const WINDOW: usize = 2 * BLOCK + 1;

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
/// block at a time, each `\r\n` becoming `\n`, with the widest form `level` allows. Plain
/// means what the stops' walk passes ([`super::scan::Stops`]), less `C2` (rare: it goes the
/// slow way); the escapes it drops ([`inert_csi_len`]) are dropped here too.
#[cfg(target_arch = "x86_64")]
pub(super) fn plain_line_blocks(
    text: &str,
    start: usize,
    out: &mut String,
    level: Level,
) -> Blocks {
    // Both forms keep `out` valid UTF-8: they only ever make it longer by whole lines of
    // `text`, less some `\r` bytes (ASCII, so never part of a longer char).
    if level.avx512() {
        // SAFETY: a `Level` allows AVX-512 only where the CPU has it; UTF-8 kept, as above.
        unsafe { plain_line_blocks_avx512(text.as_bytes(), start, out.as_mut_vec()) }
    } else if level.avx2() {
        let bytes = text.as_bytes();
        // SAFETY: UTF-8 kept, as above.
        let out = unsafe { out.as_mut_vec() };
        if ends_in_crlf(bytes, start) {
            // SAFETY: a `Level` allows AVX2 only where the CPU has it.
            unsafe { plain_line_blocks_avx2::<true>(bytes, start, out) }
        } else {
            // SAFETY: as above.
            unsafe { plain_line_blocks_avx2::<false>(bytes, start, out) }
        }
    } else {
        Blocks::none(start)
    }
}

/// Whether the line at `start` ends in `\r\n` (within the next 256 bytes): the AVX2 pass
/// then expects a `\r` in most blocks, and drops the first without asking.
#[cfg(target_arch = "x86_64")]
fn ends_in_crlf(bytes: &[u8], start: usize) -> bool {
    let line = &bytes[start..bytes.len().min(start + 4 * BLOCK)];
    memchr::memchr(b'\n', line).is_some_and(|end| end > 0 && line[end - 1] == b'\r')
}

/// See the x86-64 version: other CPUs take the stops' way.
#[cfg(not(target_arch = "x86_64"))]
pub(super) fn plain_line_blocks(_: &str, start: usize, _: &mut String, _: Level) -> Blocks {
    Blocks::none(start)
}

/// [`plain_line_blocks`] over bytes: compresses each block's kept bytes (all but the `\r` of
/// each `\r\n` and the escapes that change nothing on the line) into `out`'s spare room, and
/// only lengthens `out` up to the last `\n` taken.
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
    let mut taken = Taken::new(start);
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
        let stops = c0 & !lf & !crlf | is(0x7F) | is(0xC2);
        // A block with stops is taken if each is an escape to drop, and the next block starts
        // where the last one ends.
        let (dropped, past) = match stops {
            0 => (crlf, 0),
            _ => match inert_escapes(bytes, pos, stops, is(ESC)) {
                Some((escapes, past)) => (crlf | escapes, past),
                None => break pos + BLOCK,
            },
        };
        // SAFETY: at most `written + BLOCK <= blocks * BLOCK` bytes into `room`, which has
        // that many (reserved above: each block taken is at least BLOCK bytes of `bytes`);
        // `storeu` needs no alignment.
        unsafe {
            _mm512_storeu_si512(
                room.add(taken.written).cast(),
                _mm512_maskz_compress_epi8(!dropped, v),
            );
        }
        taken.block(pos, lf, dropped);
        pos += BLOCK + past;
    };
    // SAFETY: the first `done_out` bytes of `room` were written above (and `base + done_out`
    // is within the capacity reserved).
    unsafe { out.set_len(base + taken.done_out) };
    taken.blocks(stuck)
}

/// [`plain_line_blocks`] over bytes with AVX2: stores each block whole into `out`'s spare
/// room, then, for each `\r` of a `\r\n`, the 64 bytes after it one place further left, and
/// only lengthens `out` up to the last `\n` taken. A block's last such store reads up to 65
/// bytes past the block ([`WINDOW`]), so the pass stops that far before the end of the text.
///
/// Per 32 bytes: the bytes one further on are loaded too, so a `\r\n` is found in one
/// vector (`\r` here, `\n` there) and a lone `\r` is simply a stop; the other stops come
/// from two nibble lookups (`vpshufb`), as in simdjson's classifier.
///
/// With `CRLF` (lines end in `\r\n`: a terminal's output), the first `\r` of each block is
/// dropped without a branch: whether a block of a log has one is a coin toss, and a
/// mispredicted branch costs more than the stores (with the line counts' branch gone too,
/// callgrind's branch simulator: 190 K -> 21.5 K mispredicted branches for the pass over 16
/// MiB of each kind of line end). With `\n` lines the branch is never taken, and the stores
/// would be wasted.
///
/// # Safety
/// The CPU must have AVX2, POPCNT, LZCNT and BMI1.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt,lzcnt,bmi1")]
unsafe fn plain_line_blocks_avx2<const CRLF: bool>(
    bytes: &[u8],
    start: usize,
    out: &mut Vec<u8>,
) -> Blocks {
    use std::arch::x86_64::{
        __m256i, _mm256_and_si256, _mm256_andnot_si256, _mm256_cmpeq_epi8, _mm256_loadu_si256,
        _mm256_movemask_epi8, _mm256_or_si256, _mm256_set1_epi8, _mm256_setr_epi8,
        _mm256_setzero_si256, _mm256_shuffle_epi8, _mm256_srli_epi16, _mm256_storeu_si256,
        _mm256_testz_si256,
    };
    if bytes.len() - start < WINDOW {
        return Taken::new(start).blocks(start + WINDOW);
    }
    // A block's stores reach up to 2 * BLOCK - 1 bytes past its output's start, which is at
    // most as far in as the block's start is past `start`, and a block is taken only if
    // WINDOW bytes of text start there.
    out.reserve(bytes.len() - start);
    let base = out.len();
    let room = out.spare_capacity_mut().as_mut_ptr().cast::<u8>();
    let (newline, cr, nibble) = (
        _mm256_set1_epi8(b'\n' as i8),
        _mm256_set1_epi8(b'\r' as i8),
        _mm256_set1_epi8(0x0F),
    );
    let zero = _mm256_setzero_si256();
    // A byte is a stop, `\n` and `\r` aside, when the bits its high nibble picks from `HIGH`
    // and its low nibble from `LOW` meet: bit 0 for 0x00..=0x0F but tab, `\n` and `\r`, bit 1
    // for 0x10..=0x1F, bit 2 for DEL, bit 3 for `C2`.
    #[rustfmt::skip]
    let (high, low) = (
        _mm256_setr_epi8(
            1, 2, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 8, 0, 0, 0,
            1, 2, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 8, 0, 0, 0,
        ),
        _mm256_setr_epi8(
            3, 3, 11, 3, 3, 3, 3, 3, 3, 2, 2, 3, 3, 2, 3, 7,
            3, 3, 11, 3, 3, 3, 3, 3, 3, 2, 2, 3, 3, 2, 3, 7,
        ),
    );
    // For the 32 bytes `v` and the 32 from one byte on, `next`: where `v` has a `\n`, where
    // it has the `\r` of a `\r\n`, and (as a vector, zero if none) its other stops.
    let classify = |v: __m256i, next: __m256i| {
        let is_cr = _mm256_cmpeq_epi8(v, cr);
        let crlf = _mm256_and_si256(is_cr, _mm256_cmpeq_epi8(next, newline));
        let classes = _mm256_and_si256(
            _mm256_shuffle_epi8(high, _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble)),
            _mm256_shuffle_epi8(low, _mm256_and_si256(v, nibble)),
        );
        let others = _mm256_or_si256(classes, _mm256_andnot_si256(crlf, is_cr));
        (_mm256_cmpeq_epi8(v, newline), crlf, others)
    };
    let bits = |lo: __m256i, hi: __m256i| {
        u64::from(_mm256_movemask_epi8(lo) as u32)
            | u64::from(_mm256_movemask_epi8(hi) as u32) << 32
    };
    let mut taken = Taken::new(start);
    let mut pos = start;
    let stuck = 'pass: loop {
        // The blocks without a stop: this loop calls nothing, so its constants stay in
        // registers (with the call below in it, four were loaded again for each block).
        let (stops, lf, crlf) = loop {
            if pos + WINDOW > bytes.len() {
                break 'pass pos + WINDOW;
            }
            let src = bytes[pos..pos + WINDOW].as_ptr();
            // SAFETY: `src` has WINDOW readable bytes, and each load is within them (the
            // stores' loads too: `at <= BLOCK`); `loadu` needs no alignment.
            let load = |at: usize| unsafe { _mm256_loadu_si256(src.add(at).cast()) };
            let (lo, hi) = (load(0), load(32));
            let (lf_lo, crlf_lo, others_lo) = classify(lo, load(1));
            let (lf_hi, crlf_hi, others_hi) = classify(hi, load(33));
            let others = _mm256_or_si256(others_lo, others_hi);
            let (lf, crlf) = (bits(lf_lo, lf_hi), bits(crlf_lo, crlf_hi));
            if _mm256_testz_si256(others, others) == 0 {
                let plain = bits(
                    _mm256_cmpeq_epi8(others_lo, zero),
                    _mm256_cmpeq_epi8(others_hi, zero),
                );
                break (!plain, lf, crlf);
            }
            // SAFETY: `dst` is `written` bytes into `room`, and each store below ends within
            // 2 * BLOCK bytes of `dst`, inside the capacity reserved above; `storeu` needs no
            // alignment.
            unsafe {
                let dst = room.add(taken.written);
                _mm256_storeu_si256(dst.cast(), lo);
                _mm256_storeu_si256(dst.add(32).cast(), hi);
                let (mut left, mut dropped) = (crlf, 0);
                if CRLF {
                    // With no `\r`, `at` is 64 and the stores land past the block's output, in
                    // the slack.
                    let at = crlf.trailing_zeros() as usize;
                    _mm256_storeu_si256(dst.add(at).cast(), load(at + 1));
                    _mm256_storeu_si256(dst.add(at + 32).cast(), load(at + 33));
                    (left, dropped) = (crlf & crlf.wrapping_sub(1), 1);
                }
                while left != 0 {
                    let at = left.trailing_zeros() as usize;
                    left &= left - 1;
                    let to = dst.add(at - dropped);
                    let (a, b) = (load(at + 1), load(at + 33));
                    _mm256_storeu_si256(to.cast(), a);
                    _mm256_storeu_si256(to.add(32).cast(), b);
                    dropped += 1;
                }
            }
            taken.block(pos, lf, crlf);
            pos += BLOCK;
        };
        // A block with stops is taken if each is an escape to drop.
        // SAFETY: as for the stores above; the CPU has AVX2 (this function's contract).
        let escapes = unsafe { escape_block(bytes, pos, stops, crlf, room.add(taken.written)) };
        let Some((dropped, past)) = escapes else {
            break pos + BLOCK;
        };
        taken.block(pos, lf, dropped);
        pos += BLOCK + past;
    };
    // SAFETY: the first `done_out` bytes of `room` were written above (and `base + done_out`
    // is within the capacity reserved).
    unsafe { out.set_len(base + taken.done_out) };
    taken.blocks(stuck)
}

/// Takes the block at `pos`, with stops `stops` and the `\r` of each `\r\n` in `crlf`, when
/// each stop is an escape to drop ([`inert_escapes`]): stores it at `dst` as the AVX2 pass
/// does, each run of bytes to drop (an escape, a `\r`) followed by the bytes after it stored
/// again that many places further left. Returns the bytes dropped, as bits, and how many
/// bytes past the block its last escape reaches; `None`, with nothing stored, when the
/// block cannot be taken.
///
/// # Safety
/// The CPU must have AVX2, POPCNT, LZCNT and BMI1; `bytes` must have [`WINDOW`] bytes from
/// `pos`, and `dst` room for `2 * BLOCK`.
#[cfg(target_arch = "x86_64")]
#[cold]
#[target_feature(enable = "avx2,popcnt,lzcnt,bmi1")]
unsafe fn escape_block(
    bytes: &[u8],
    pos: usize,
    stops: u64,
    crlf: u64,
    dst: *mut u8,
) -> Option<(u64, usize)> {
    use std::arch::x86_64::{
        _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_set1_epi8,
        _mm256_storeu_si256,
    };
    let src = bytes[pos..pos + WINDOW].as_ptr();
    // SAFETY: `src` has WINDOW readable bytes, and each load is within them: a run to drop
    // ends within the block, so `at <= BLOCK`.
    let load = |at: usize| unsafe { _mm256_loadu_si256(src.add(at).cast()) };
    let is_esc = |at: usize| {
        let v = _mm256_cmpeq_epi8(load(at), _mm256_set1_epi8(ESC as i8));
        u64::from(_mm256_movemask_epi8(v) as u32)
    };
    let esc = is_esc(0) | is_esc(32) << 32;
    let (escapes, past) = inert_escapes(bytes, pos, stops, esc)?;
    let dropped = crlf | escapes;
    let (mut left, mut gone) = (dropped, 0);
    // SAFETY: each store ends within 2 * BLOCK bytes of `dst` (the caller's room); `storeu`
    // needs no alignment.
    unsafe {
        _mm256_storeu_si256(dst.cast(), load(0));
        _mm256_storeu_si256(dst.add(32).cast(), load(32));
        while left != 0 {
            let at = left.trailing_zeros() as usize;
            let run = (left >> at).trailing_ones() as usize;
            left &= u64::MAX.checked_shl((at + run) as u32).unwrap_or(0);
            let to = dst.add(at - gone);
            let (a, b) = (load(at + run), load(at + run + 32));
            _mm256_storeu_si256(to.cast(), a);
            _mm256_storeu_si256(to.add(32).cast(), b);
            gone += run;
        }
    }
    Some((dropped, past))
}

/// The bytes of the block at `pos` that its escapes take, as bits (the block's first byte
/// the lowest), and how many bytes past the block the last one reaches, when each of its
/// stops (`stops`) is the ESC (`esc`) of a whole escape that changes nothing on the line
/// ([`inert_csi_len`]: a colour, mostly). The stops' walk drops those too, but a line at a
/// time: with them dropped here, the normalise bench's coloured log (one line in twenty has
/// two) took 19-22 % less time (medians of 15 rounds, three runs in turn with the walk's, `cargo
/// bench --bench normalise`). `None` for any other stop, or an escape the text cuts short.
#[cfg(target_arch = "x86_64")]
fn inert_escapes(bytes: &[u8], pos: usize, stops: u64, esc: u64) -> Option<(u64, usize)> {
    if stops & !esc != 0 {
        return None;
    }
    let (mut taken, mut past, mut left) = (0u64, 0, esc);
    while left != 0 {
        let at = left.trailing_zeros() as usize;
        left &= left - 1;
        // A sequence holds no ESC but its first: each ESC starts one.
        let end = at + inert_csi_len(&bytes[pos + at..])?;
        let through = u64::MAX >> (BLOCK - end.min(BLOCK));
        taken |= through & u64::MAX << at;
        past = end.saturating_sub(BLOCK);
    }
    Some((taken, past))
}

/// What a pass has taken so far: `written` bytes are in `out`'s spare room, the first
/// `done_out` of them the text from the pass's start up to `done`, the end of its last line.
struct Taken {
    written: usize,
    done: usize,
    done_out: usize,
    lines: u64,
}

impl Taken {
    fn new(start: usize) -> Taken {
        Taken {
            written: 0,
            done: start,
            done_out: 0,
            lines: 0,
        }
    }

    /// Counts the block at `pos`, with newlines `lf`, whose `\r` bytes `crlf` were dropped.
    ///
    /// Without a branch on whether the block has a newline: in a log, about half do, at
    /// random, and a mispredicted branch costs more than the arithmetic.
    #[inline(always)]
    fn block(&mut self, pos: usize, lf: u64, crlf: u64) {
        let keep = !crlf;
        self.lines += u64::from(lf.count_ones());
        // Past the last newline (all 64 bytes when there is none, and then both sums below
        // are unused).
        let after = lf.leading_zeros();
        let through_last = keep & u64::MAX >> (after % 64);
        let (done, done_out) = (
            pos + BLOCK - after as usize,
            self.written + through_last.count_ones() as usize,
        );
        let ended = lf != 0;
        self.done = std::hint::select_unpredictable(ended, done, self.done);
        self.done_out = std::hint::select_unpredictable(ended, done_out, self.done_out);
        self.written += keep.count_ones() as usize;
    }

    fn blocks(self, stuck: usize) -> Blocks {
        Blocks {
            done: self.done,
            stuck,
            lines: self.lines,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Runs [`plain_line_blocks`] from `start` at `level` and checks what it did: it copied
    /// whole plain lines only, `\r\n` as `\n`, up to `done`, and gave up past it. Returns
    /// `done`.
    fn check_blocks(text: &str, start: usize, level: Level) -> Result<usize, TestCaseError> {
        let mut out = String::from("before");
        let Blocks { done, stuck, lines } = plain_line_blocks(text, start, &mut out, level);
        let taken = &text[start..done];
        prop_assert!(done == start || taken.ends_with('\n'));
        prop_assert!(stuck > done);
        prop_assert_eq!(lines, taken.matches('\n').count() as u64);
        let copied = copied(taken);
        prop_assert_eq!(out, format!("before{copied}"));
        // Nothing but plain text was taken: no lone `\r`, no escape the walk keeps.
        prop_assert!(!copied.contains(|c: char| c.is_control() && c != '\t' && c != '\n'));
        Ok(done)
    }

    /// `taken` as the stops' walk copies its plain lines: each escape that changes nothing on
    /// the line dropped, each `\r\n` made `\n`.
    fn copied(taken: &str) -> String {
        let bytes = taken.as_bytes();
        let mut kept = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            match inert_csi_len(&bytes[i..]) {
                Some(len) => i += len,
                None => {
                    kept.push(bytes[i]);
                    i += 1;
                }
            }
        }
        String::from_utf8(kept)
            .expect("whole sequences of ASCII dropped")
            .replace("\r\n", "\n")
    }

    /// The levels with a block pass that this CPU runs; says which it cannot, so a test that
    /// ran no form never passes silently.
    fn block_levels() -> Vec<Level> {
        let levels: Vec<Level> = Level::supported()
            .into_iter()
            .filter(|l| l.avx2())
            .collect();
        if !levels.iter().any(|l| l.avx512()) {
            println!("SKIPPED: no AVX-512 VBMI2 on this CPU, its block pass was not tested");
        }
        if levels.is_empty() {
            println!("SKIPPED: no AVX2 on this CPU, its block pass was not tested");
        }
        levels
    }

    #[test]
    fn blocks_of_plain_lines_are_taken_whole() {
        let text = "a line of plain text, tab\there, \u{e9}, ended by CR LF\r\n".repeat(100);
        for level in block_levels() {
            let mut out = String::new();
            let done = plain_line_blocks(&text, 0, &mut out, level).done;
            // The last blocks are left for the walk, their lines with them.
            assert!(done > text.len() - 256, "{level:?}");
            assert!(text[..done].ends_with('\n'), "{level:?}");
            assert_eq!(out, text[..done].replace("\r\n", "\n"), "{level:?}");
        }
    }

    #[test]
    fn coloured_lines_are_taken_whole_with_their_colours_dropped() {
        // Sequences of every length from 4 bytes to 40, so that some cross a block's end.
        let text: String = (0..200)
            .map(|i| {
                let colour = format!("\x1b[{}m", "1;".repeat(i % 19) + "31");
                format!("12:00:{i:02} {colour}ERROR\x1b[0m worker-{i} failed\r\n")
            })
            .collect();
        for level in block_levels() {
            let mut out = String::new();
            let done = plain_line_blocks(&text, 0, &mut out, level).done;
            assert!(done > text.len() - 256, "{level:?}: taken to {done}");
            assert_eq!(out, copied(&text[..done]), "{level:?}");
        }
    }

    #[test]
    fn a_block_of_short_crlf_lines_drops_every_cr() {
        let text = "a\r\n\r\nbc\r\n".repeat(64);
        for level in block_levels() {
            let mut out = String::new();
            let blocks = plain_line_blocks(&text, 0, &mut out, level);
            assert!(blocks.done > 0, "{level:?}");
            assert_eq!(out, text[..blocks.done].replace("\r\n", "\n"), "{level:?}");
        }
    }

    /// `count` lines, each of text matching `text` and ended by what matches `end` (regexes).
    fn lines_of(
        text: &'static str,
        end: &'static str,
        count: std::ops::Range<usize>,
    ) -> impl Strategy<Value = Vec<(String, String)>> {
        prop::collection::vec((text, end), count)
    }

    /// The text of `lines` (each its text and its end), and the start of the line that byte
    /// `start` is in (or the end's, past it).
    fn joined(lines: &[(String, String)], start: usize) -> (String, usize) {
        let text: String = lines.iter().map(|(l, end)| format!("{l}{end}")).collect();
        let start = text.floor_char_boundary(start.min(text.len()));
        let start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        (text, start)
    }

    #[test]
    fn the_baseline_leaves_every_line_to_the_walk() {
        let text = "plain\r\n".repeat(100);
        let baseline = Level::supported()[0];
        let blocks = plain_line_blocks(&text, 0, &mut String::new(), baseline);
        assert_eq!(
            (blocks.done, blocks.stuck, blocks.lines),
            (0, usize::MAX, 0)
        );
    }

    proptest! {
        #[test]
        fn block_pass_copies_whole_plain_lines_only(
            lines in lines_of(
                "[ -~\t\u{e9}]{0,120}",
                "(\r\n|\n|\r|\x1b|\x7f|\u{85}|\u{a0}|\x08|){0,1}\n?",
                0..40,
            ),
            start in 0usize..200,
        ) {
            let (text, start) = joined(&lines, start);
            for level in Level::supported() {
                let done = check_blocks(&text, start, level)?;
                check_blocks(&text, done, level)?;
            }
        }

        /// Escapes in plain lines: those that change nothing on the line are dropped, where
        /// they cross a block's end too; a line with any other is left to the walk.
        #[test]
        fn block_pass_drops_the_escapes_the_walk_drops(
            lines in prop::collection::vec(
                (prop::collection::vec(prop_oneof![
                    4 => "[ -~]{0,40}",
                    2 => "(1|31|0|38;5;[0-9]{1,3}|[0-9;:]{0,70})".prop_map(|p| format!("\x1b[{p}m")),
                    1 => Just("\x1b[?25l".to_string()),
                    1 => Just("\x1b[?1049h".to_string()),
                    1 => Just("\x1b[2K".to_string()),
                    1 => Just("\x1b[3".to_string()),
                    1 => Just("\x1b]0;title\x07".to_string()),
                ], 0..6), "(\r\n|\n)"),
                1..40,
            ),
            start in 0usize..200,
        ) {
            let lines: Vec<(String, String)> =
                lines.into_iter().map(|(parts, end)| (parts.concat(), end)).collect();
            let (text, start) = joined(&lines, start);
            for level in Level::supported() {
                let done = check_blocks(&text, start, level)?;
                check_blocks(&text, done, level)?;
            }
        }

        /// The AVX2 pass's two ways with `\r` (dropping a block's first one without a branch,
        /// or not) copy the same bytes, whatever the lines end in.
        #[test]
        fn avx2_crlf_forms_agree(
            lines in lines_of("[ -~\t]{0,90}", "(\r\n|\n|\r\n\r\n|\r|\x1b\\[1;31m|)", 1..60),
            start in 0usize..200,
        ) {
            let (text, start) = joined(&lines, start);
            if Level::supported().iter().any(|l| l.avx2()) {
                let run = |crlf: bool| {
                    let mut out = b"before".to_vec();
                    // SAFETY: the CPU has AVX2 (checked above); the bytes are only compared.
                    let blocks = unsafe {
                        if crlf {
                            plain_line_blocks_avx2::<true>(text.as_bytes(), start, &mut out)
                        } else {
                            plain_line_blocks_avx2::<false>(text.as_bytes(), start, &mut out)
                        }
                    };
                    (out, blocks.done, blocks.stuck, blocks.lines)
                };
                let with = run(true);
                prop_assert_eq!(&with, &run(false));
                let taken = copied(&text[start..with.1]);
                prop_assert_eq!(with.0, format!("before{taken}").into_bytes());
            } else {
                println!("SKIPPED: no AVX2 on this CPU, its block pass was not tested");
            }
        }

        /// The forms take the same lines, colours dropped, and give up at the same block, but
        /// near the text's end, where the AVX2 pass stops a block sooner: then one takes a part
        /// of what the other takes.
        #[test]
        fn avx2_and_avx512_passes_agree(
            lines in lines_of(
                "[ -~\t]{0,90}",
                "(\r\n|\n|\r\n\r\n|\x1b|\x1b\\[1;31m|\x1b\\[0m\r\n|\r|)",
                1..60,
            ),
        ) {
            let (text, _) = joined(&lines, 0);
            let levels = block_levels();
            let results: Vec<(String, Blocks)> = levels.iter().map(|&level| {
                let mut out = String::new();
                let blocks = plain_line_blocks(&text, 0, &mut out, level);
                (out, blocks)
            }).collect();
            for pair in results.windows(2) {
                let ((narrow, n), (wide, w)) = (&pair[0], &pair[1]);
                prop_assert!(wide.starts_with(narrow.as_str()) || narrow.starts_with(wide.as_str()));
                prop_assert!(w.done >= n.done);
                if w.stuck + (WINDOW - BLOCK) <= text.len() {
                    prop_assert_eq!((n.done, n.stuck), (w.done, w.stuck));
                }
            }
        }
    }
}
