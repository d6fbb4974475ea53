//! The prefilter's search with AVX2 (x86-64): Teddy, the packed search the library runs,
//! written for the prefilter's buckets and for what the highlighter asks of it.
//!
//! The highlighter asks where the next literal starts, from the end of the last line found:
//! in a log whose every fifth line holds `ERROR`, once every 600 bytes or so. The library's
//! search pays at each of those calls for its generality (the span checked, the searcher
//! picked, the pattern found and its end reported, its first chunk begun with nothing
//! carried over) and verifies a candidate by comparing the bucket's literals byte by byte: on
//! 64 MiB of the truncate bench's log, 300 instructions a line found. Here a start is a
//! verified position, a bucket's literals are checked by their first four bytes as one
//! number, and a call starts its first chunk where it is asked to.
//!
//! The search itself is the library's: for each of a literal's first [`COMPARED`] bytes, a
//! table for the byte's low nibble and one for its high nibble say which buckets hold a
//! literal with such a byte there (`vpshufb`), and a position where all four bytes' lookups
//! meet in a bucket is a candidate for that bucket's literals. One 32-byte load a step: the
//! lookups of the first three bytes are moved into place from those of the step before.
//!
//! Where the CPU has AVX-512 (and [`Level`] allows it), a step takes 64 positions, and each of
//! a literal's four bytes is looked up in a load of its own, one byte further on than the one
//! before: loads are cheaper than the moves that carry lookups from step to step across
//! 128-bit lanes, which AVX-512 can only do with a permutation per byte.

use std::arch::x86_64::{
    __m128i, __m256i, __m512i, _mm_loadu_si128, _mm256_alignr_epi8, _mm256_and_si256,
    _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_or_si256,
    _mm256_permute2x128_si256, _mm256_set1_epi8, _mm256_setzero_si256, _mm256_shuffle_epi8,
    _mm256_srli_epi16, _mm256_storeu_si256, _mm256_testz_si256, _mm512_and_si512,
    _mm512_broadcast_i32x4, _mm512_loadu_si512, _mm512_or_si512, _mm512_set1_epi8,
    _mm512_shuffle_epi8, _mm512_srli_epi16, _mm512_storeu_si512, _mm512_test_epi8_mask,
};

use crate::engine::normalise::Level;

/// The first bytes of a literal the search compares: every literal has at least as many.
const COMPARED: usize = 4;

/// Bytes one step of the search looks at.
const STEP: usize = 32;

/// Bytes one step of the AVX-512 search looks at.
const WIDE_STEP: usize = 64;

/// Buckets of literals, each a bit of a lookup's byte.
const BUCKETS: usize = 8;

/// The literals to look for, in [`BUCKETS`] buckets (the prefilter's, sorted so that each
/// stops the search seldom). Given by the prefilter, whose search this is.
pub(super) type Buckets = [&'static [&'static str]; BUCKETS];

/// The search over the literals of some [`Buckets`]. Made only where the CPU has AVX2
/// ([`Teddy::new`]), which every search rests on.
#[derive(Debug, Clone)]
pub(super) struct Teddy {
    /// For each of a literal's first [`COMPARED`] bytes, the buckets whose literals have a
    /// byte of each low nibble there (the 16 entries twice: `vpshufb` looks up each 128-bit
    /// half in its own).
    low: [[u8; 32]; COMPARED],
    /// The same for the high nibbles.
    high: [[u8; 32]; COMPARED],
    /// Each bucket's literals.
    buckets: [Vec<Literal>; BUCKETS],
    /// Whether the search takes 64 positions a step, with AVX-512 BW.
    wide: bool,
}

/// A literal and its first [`COMPARED`] bytes read as one number, compared first.
#[derive(Debug, Clone)]
struct Literal {
    first: u32,
    bytes: &'static [u8],
}

/// The tables of a [`Teddy`] in registers.
#[derive(Clone, Copy)]
struct Tables {
    low: [__m256i; COMPARED],
    high: [__m256i; COMPARED],
    nibble: __m256i,
}

/// The tables of a [`Teddy`] in registers of 64 bytes (each 16-entry table four times).
#[derive(Clone, Copy)]
struct WideTables {
    low: [__m512i; COMPARED],
    high: [__m512i; COMPARED],
    nibble: __m512i,
}

impl Teddy {
    /// The search for the literals of `buckets` (each at least [`COMPARED`] bytes long), with
    /// the widest vectors `level` allows, or `None` where it allows no AVX2.
    pub(super) fn new(buckets: &Buckets, level: Level) -> Option<Teddy> {
        if !level.avx2() {
            return None;
        }
        let mut teddy = Teddy {
            low: [[0; 32]; COMPARED],
            high: [[0; 32]; COMPARED],
            buckets: Default::default(),
            wide: level.avx512(),
        };
        for (b, literals) in buckets.iter().enumerate() {
            for literal in literals.iter().map(|l| l.as_bytes()) {
                for (i, &byte) in literal[..COMPARED].iter().enumerate() {
                    for half in [0, 16] {
                        teddy.low[i][half + usize::from(byte & 0x0F)] |= 1 << b;
                        teddy.high[i][half + usize::from(byte >> 4)] |= 1 << b;
                    }
                }
                teddy.buckets[b].push(Literal {
                    first: first_bytes(literal),
                    bytes: literal,
                });
            }
        }
        Some(teddy)
    }

    /// Where the leftmost literal at or after byte `from` of `text` starts.
    pub(super) fn find(&self, text: &[u8], from: usize) -> Option<usize> {
        if from >= text.len() {
            return None;
        }
        if self.wide {
            // SAFETY: a `Teddy` is wide only where its `Level` allowed AVX-512, which the
            // CPU then has.
            return unsafe { self.find_avx512(text, from) };
        }
        // SAFETY: a `Teddy` is only made where the CPU has AVX2.
        unsafe { self.find_avx2(text, from) }
    }

    /// [`Teddy::find`] with AVX-512 BW: each step takes the 64 positions from `start` as a
    /// literal's start, each of the literal's bytes looked up in the 64 bytes that many
    /// further on, two steps at a time for one test and one branch. The positions left, fewer
    /// than two steps' loads past them, go to [`Teddy::find_avx2`].
    ///
    /// # Safety
    /// The CPU must have AVX-512 BW (and so AVX2), and `from < text.len()`.
    #[target_feature(enable = "avx512bw")]
    unsafe fn find_avx512(&self, text: &[u8], from: usize) -> Option<usize> {
        let tables = self.wide_tables();
        let mut start = from;
        // As in the AVX2 loop, nothing here calls a function, so the tables stay in registers.
        while start + COMPARED - 1 + 2 * WIDE_STEP <= text.len() {
            let first = tables.candidates(text, start);
            let second = tables.candidates(text, start + WIDE_STEP);
            let either = _mm512_or_si512(first, second);
            if _mm512_test_epi8_mask(either, either) != 0 {
                for (at, candidates) in [(start, first), (start + WIDE_STEP, second)] {
                    let (lanes, buckets) = wide_lanes(candidates);
                    if let Some(found) = self.verify(text, at, lanes, &buckets) {
                        return Some(found);
                    }
                }
            }
            start += 2 * WIDE_STEP;
        }
        if start >= text.len() {
            return None;
        }
        // SAFETY: the CPU has AVX2 (it has AVX-512), and `start < text.len()`.
        unsafe { self.find_avx2(text, start) }
    }

    /// [`Teddy::find`] with AVX2. Each step takes the 32 positions from `start` on as a
    /// literal's start, from the 32 bytes three further on (each position's fourth byte) and
    /// the lookups of the step before; a call's first step has none before, and lets its first
    /// three positions through on the bytes it has. The last positions, fewer than a step's
    /// load past them, are taken from a copy padded with zeros ([`Teddy::find_in_tail`]).
    ///
    /// # Safety
    /// The CPU must have AVX2, and `from < text.len()`.
    #[target_feature(enable = "avx2")]
    unsafe fn find_avx2(&self, text: &[u8], from: usize) -> Option<usize> {
        let tables = self.tables();
        let all = _mm256_set1_epi8(-1);
        let mut before = [all; COMPARED - 1];
        let mut start = from;
        // Nothing in these loops calls a function, the verification included (inlined, and
        // comparing bytes itself rather than by `memcmp`), so the tables stay in registers: a
        // call takes every vector register, and with one in the loop the tables were loaded
        // again at every step (92 M instructions for 64 MiB of text with no literal, against
        // 81 M). Two steps at a time while the text has room for both, for one test and one
        // branch: 81 M -> 75 M.
        while start + COMPARED - 1 + 2 * STEP <= text.len() {
            let first = tables.step(text, start, &mut before);
            let second = tables.step(text, start + STEP, &mut before);
            let either = _mm256_or_si256(first, second);
            if _mm256_testz_si256(either, either) == 0 {
                for (at, candidates) in [(start, first), (start + STEP, second)] {
                    let (lanes, buckets) = lanes(candidates);
                    if let Some(found) = self.verify(text, at, lanes, &buckets) {
                        return Some(found);
                    }
                }
            }
            start += 2 * STEP;
        }
        while start + COMPARED - 1 + STEP <= text.len() {
            let candidates = tables.step(text, start, &mut before);
            let (lanes, buckets) = lanes(candidates);
            if let Some(at) = self.verify(text, start, lanes, &buckets) {
                return Some(at);
            }
            start += STEP;
        }
        self.find_in_tail(text, start)
    }

    /// The positions from `start` to the end of `text` (fewer than `STEP + 3`), each taken
    /// with its own four bytes from a copy of the text's end padded with zeros: a candidate
    /// the padding lets through is verified against the text itself.
    #[target_feature(enable = "avx2")]
    fn find_in_tail(&self, text: &[u8], mut start: usize) -> Option<usize> {
        let tables = self.tables();
        while start < text.len() {
            let mut padded = [0u8; STEP + COMPARED - 1];
            let rest = &text[start..text.len().min(start + padded.len())];
            padded[..rest.len()].copy_from_slice(rest);
            let mut candidates = _mm256_set1_epi8(-1);
            for i in 0..COMPARED {
                // SAFETY: the load's 32 bytes are within `padded` (`i <= COMPARED - 1`).
                let chunk = unsafe { _mm256_loadu_si256(padded.as_ptr().add(i).cast()) };
                candidates = _mm256_and_si256(candidates, tables.lookup(i, chunk));
            }
            let (lanes, buckets) = lanes(candidates);
            if let Some(at) = self.verify(text, start, lanes, &buckets) {
                return Some(at);
            }
            start += STEP;
        }
        None
    }

    /// The first of the `N` positions from `start` in `lanes` (a bit each) that starts a
    /// literal of one of the buckets its lane of `buckets` holds (a bit each).
    #[inline(always)]
    fn verify<const N: usize>(
        &self,
        text: &[u8],
        start: usize,
        mut lanes: u64,
        buckets: &[u8; N],
    ) -> Option<usize> {
        while lanes != 0 {
            let lane = lanes.trailing_zeros() as usize;
            lanes &= lanes - 1;
            let at = start + lane;
            if self.starts_literal(text.get(at..)?, buckets[lane]) {
                return Some(at);
            }
        }
        None
    }

    /// Whether `rest` starts with a literal of one of `buckets` (a bit set).
    #[inline(always)]
    fn starts_literal(&self, rest: &[u8], mut buckets: u8) -> bool {
        if rest.len() < COMPARED {
            return false;
        }
        let first = first_bytes(rest);
        while buckets != 0 {
            let b = buckets.trailing_zeros() as usize;
            buckets &= buckets - 1;
            let found = self.buckets[b].iter().any(|literal| {
                literal.first == first
                    && rest.len() >= literal.bytes.len()
                    && rest[COMPARED..]
                        .iter()
                        .zip(&literal.bytes[COMPARED..])
                        .all(|(a, b)| a == b)
            });
            if found {
                return true;
            }
        }
        false
    }

    /// Where the first newline of `text` at or after byte `from` is: the end of a line found.
    /// A line found is short, and `memchr`'s set-up for a long search was most of its cost: in
    /// 64 MiB of a log of error lines, 71 instructions a line against 36 here (and 40 against
    /// 17 for [`Teddy::line_start`] and `memrchr`).
    pub(super) fn newline_from(&self, text: &[u8], from: usize) -> Option<usize> {
        // SAFETY: a `Teddy` is only made where the CPU has AVX2.
        unsafe { newline_from_avx2(text, from) }
    }

    /// Where the line holding byte `at` of `text` starts: after the last newline before it.
    pub(super) fn line_start(&self, text: &[u8], at: usize) -> usize {
        assert!(at <= text.len(), "byte {at} of a text of {}", text.len());
        // SAFETY: a `Teddy` is only made where the CPU has AVX2; `at` is within `text`.
        unsafe { line_start_avx2(text, at) }
    }

    /// The tables, loaded.
    #[target_feature(enable = "avx2")]
    fn tables(&self) -> Tables {
        // SAFETY: each load's 32 bytes are one of the tables.
        let load = |table: &[u8; 32]| unsafe { _mm256_loadu_si256(table.as_ptr().cast()) };
        Tables {
            low: self.low.each_ref().map(load),
            high: self.high.each_ref().map(load),
            nibble: _mm256_set1_epi8(0x0F),
        }
    }

    /// The tables, loaded four times over into registers of 64 bytes.
    #[target_feature(enable = "avx512bw")]
    fn wide_tables(&self) -> WideTables {
        let load = |table: &[u8; 32]| {
            // SAFETY: the load's 16 bytes are the first half of one of the tables (which holds
            // the same 16 entries twice); `loadu` needs no alignment.
            let half = unsafe { _mm_loadu_si128(table.as_ptr().cast::<__m128i>()) };
            _mm512_broadcast_i32x4(half)
        };
        WideTables {
            low: self.low.each_ref().map(load),
            high: self.high.each_ref().map(load),
            nibble: _mm512_set1_epi8(0x0F),
        }
    }
}

impl WideTables {
    /// The candidates of the 64 positions from `start`: the buckets whose literals' first
    /// bytes each of the four loads, one byte apart, allows.
    #[target_feature(enable = "avx512bw")]
    fn candidates(&self, text: &[u8], start: usize) -> __m512i {
        assert!(start + COMPARED - 1 + WIDE_STEP <= text.len());
        let allowed = |i: usize| {
            // SAFETY: the load's 64 bytes end within `text` (asserted: `i < COMPARED`).
            let chunk = unsafe { _mm512_loadu_si512(text.as_ptr().add(start + i).cast()) };
            let low = _mm512_and_si512(chunk, self.nibble);
            let high = _mm512_and_si512(_mm512_srli_epi16(chunk, 4), self.nibble);
            _mm512_and_si512(
                _mm512_shuffle_epi8(self.low[i], low),
                _mm512_shuffle_epi8(self.high[i], high),
            )
        };
        _mm512_and_si512(
            _mm512_and_si512(allowed(0), allowed(1)),
            _mm512_and_si512(allowed(2), allowed(3)),
        )
    }
}

impl Tables {
    /// The candidates of the 32 positions from `start` (the buckets that may have a literal
    /// starting at each), from the 32 bytes three further on and `before`, the lookups of the
    /// step before, which become this step's.
    #[target_feature(enable = "avx2")]
    fn step(&self, text: &[u8], start: usize, before: &mut [__m256i; COMPARED - 1]) -> __m256i {
        assert!(start + COMPARED - 1 + STEP <= text.len());
        // SAFETY: the load's 32 bytes end within `text` (asserted).
        let chunk = unsafe { _mm256_loadu_si256(text.as_ptr().add(start + 3).cast()) };
        let found = self.lookups(chunk);
        let candidates = _mm256_and_si256(
            _mm256_and_si256(
                in_place::<13>(found[0], before[0]),
                in_place::<14>(found[1], before[1]),
            ),
            _mm256_and_si256(in_place::<15>(found[2], before[2]), found[3]),
        );
        *before = [found[0], found[1], found[2]];
        candidates
    }

    /// For each of a literal's first bytes, the buckets each byte of `chunk` allows there.
    #[target_feature(enable = "avx2")]
    fn lookups(&self, chunk: __m256i) -> [__m256i; COMPARED] {
        let nibbles = self.nibbles(chunk);
        [0, 1, 2, 3].map(|i| self.allowed(i, nibbles))
    }

    /// The buckets each byte of `chunk` allows as a literal's byte `i`.
    #[target_feature(enable = "avx2")]
    fn lookup(&self, i: usize, chunk: __m256i) -> __m256i {
        self.allowed(i, self.nibbles(chunk))
    }

    /// The low and the high nibble of each byte of `chunk`.
    #[target_feature(enable = "avx2")]
    fn nibbles(&self, chunk: __m256i) -> (__m256i, __m256i) {
        let low = _mm256_and_si256(chunk, self.nibble);
        let high = _mm256_and_si256(_mm256_srli_epi16(chunk, 4), self.nibble);
        (low, high)
    }

    /// The buckets the bytes of the nibbles `(low, high)` allow as a literal's byte `i`.
    #[target_feature(enable = "avx2")]
    fn allowed(&self, i: usize, (low, high): (__m256i, __m256i)) -> __m256i {
        _mm256_and_si256(
            _mm256_shuffle_epi8(self.low[i], low),
            _mm256_shuffle_epi8(self.high[i], high),
        )
    }
}

/// `now` moved `16 - SHIFT` lanes up, its first lanes taken from the last of `before` (the
/// step before's): a lookup of a literal's byte `i` moved to the lane of the literal's start.
#[target_feature(enable = "avx2")]
fn in_place<const SHIFT: i32>(now: __m256i, before: __m256i) -> __m256i {
    // The 32 bytes before `now`'s second half: `before`'s second half, then `now`'s first.
    let behind = _mm256_permute2x128_si256::<0x21>(before, now);
    _mm256_alignr_epi8::<SHIFT>(now, behind)
}

/// The first [`COMPARED`] bytes of `bytes` as one number.
fn first_bytes(bytes: &[u8]) -> u32 {
    u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

/// The lanes of `candidates` that hold a bucket (a bit each), and each lane's buckets: apart
/// from [`Teddy::verify`], which holds no vector and so can be inlined into the search's loops
/// (a function with AVX2 of its own is not: with the two in one, the search took 82.4 M
/// instructions of a 64 MiB `truncate` against 74.9 M).
#[target_feature(enable = "avx2")]
fn lanes(candidates: __m256i) -> (u64, [u8; STEP]) {
    let mut buckets = [0u8; STEP];
    // SAFETY: the store's 32 bytes are `buckets`.
    unsafe { _mm256_storeu_si256(buckets.as_mut_ptr().cast(), candidates) };
    let empty = _mm256_cmpeq_epi8(candidates, _mm256_setzero_si256());
    (u64::from(!(_mm256_movemask_epi8(empty) as u32)), buckets)
}

/// [`lanes`] of the 64 positions of an AVX-512 step.
#[target_feature(enable = "avx512bw")]
fn wide_lanes(candidates: __m512i) -> (u64, [u8; WIDE_STEP]) {
    let mut buckets = [0u8; WIDE_STEP];
    // SAFETY: the store's 64 bytes are `buckets`.
    unsafe { _mm512_storeu_si512(buckets.as_mut_ptr().cast(), candidates) };
    (_mm512_test_epi8_mask(candidates, candidates), buckets)
}

/// [`Teddy::newline_from`] with AVX2, 32 bytes a step; the last bytes, fewer, by `memchr`.
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
unsafe fn newline_from_avx2(text: &[u8], mut from: usize) -> Option<usize> {
    let newline = _mm256_set1_epi8(b'\n' as i8);
    while from + STEP <= text.len() {
        // SAFETY: the load's 32 bytes end within `text` (the loop's condition).
        let chunk = unsafe { _mm256_loadu_si256(text.as_ptr().add(from).cast()) };
        let found = _mm256_movemask_epi8(_mm256_cmpeq_epi8(chunk, newline)) as u32;
        if found != 0 {
            return Some(from + found.trailing_zeros() as usize);
        }
        from += STEP;
    }
    memchr::memchr(b'\n', text.get(from..)?).map(|i| from + i)
}

/// [`Teddy::line_start`] with AVX2, 32 bytes a step back; the first bytes, fewer, by
/// `memrchr`.
///
/// # Safety
/// The CPU must have AVX2, and `at <= text.len()`.
#[target_feature(enable = "avx2")]
unsafe fn line_start_avx2(text: &[u8], mut at: usize) -> usize {
    let newline = _mm256_set1_epi8(b'\n' as i8);
    while at >= STEP {
        // SAFETY: the load's 32 bytes, those before `at`, are within `text` (this function's
        // contract: `at <= text.len()`).
        let chunk = unsafe { _mm256_loadu_si256(text.as_ptr().add(at - STEP).cast()) };
        let found = _mm256_movemask_epi8(_mm256_cmpeq_epi8(chunk, newline)) as u32;
        if found != 0 {
            return at - found.leading_zeros() as usize;
        }
        at -= STEP;
    }
    memchr::memrchr(b'\n', &text[..at]).map_or(0, |i| i + 1)
}
