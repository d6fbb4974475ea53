//! Highlights: lines that look like the cause of a failure, found while the output streams,
//! so a preview can carry the needle from the middle it omits (a compiler's one error among
//! hundreds of warnings) instead of making the reader grep for it.
//!
//! One multi-line regex made of every pattern runs over each chunk of normalised text; its
//! literal prefilter does the scanning, so output without a match costs little. Each line is
//! tried once. Memory is bounded: the first and the last [`KEEP`] candidates are kept with their
//! text, and the rest are only counted. A candidate is *strong* (a root cause: a compiler error,
//! an exception, a failed test) or *weak* (a line that restates a failure: make's `***`, cargo's
//! `could not compile`), and a preview picks strong ones first.

mod context;
mod kind;
mod patterns;
mod prefilter;
mod surprise;
#[cfg(target_arch = "x86_64")]
mod teddy;

use std::collections::VecDeque;

use rustc_hash::FxHashSet;

use crate::engine::normalise::count_newlines;

use context::lines_before;
pub use kind::{KindMemo, kind_of};
use patterns::CandidateLine;
pub use patterns::{BadPattern, CandidateLines, Patterns};
pub use surprise::LineShapes;
use surprise::Surprise;

/// Candidates kept at each end of the output.
pub const KEEP: usize = 16;

/// A line longer than this is not kept as a highlight (it could not be shown whole).
pub const MAX_HIGHLIGHT_BYTES: usize = 2048;

/// Bytes of a line in progress kept across chunks for matching.
const CARRY_BYTES: usize = 4096;

/// A line after a candidate that continues its block: indented (a location, a frame, a
/// source line, a note), rustc's numbered source lines, valgrind's and the sanitizers' detail
/// lines, and a Go panic's signal, goroutine and frames (`main.(*Server).handle(0x0)`, each
/// followed by its indented file and line).
const CONTINUATION: &str = r"^(\s+\S|\d+ *\||==\d+== {2,}\S|(READ|WRITE) of size \d+|\[signal |goroutine \d+ \[|[A-Za-z_][A-Za-z0-9_./*()-]*\([^()]*\)$)";

/// A Python frame, which comes before the exception it leads to.
const FRAME: &str = r#"^\s*File "[^"]+", line \d+"#;

/// A line that looks like the cause of a failure, with the lines around it that make it
/// actionable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// 1-based line number in the spill.
    pub line: u64,
    /// The line, whole.
    pub text: String,
    /// Lines just before it that belong with it, whole: a Python exception's innermost frame
    /// (`File "...", line N` and its source line), where the bug is.
    pub before: Vec<String>,
    /// Lines after it that belong with it, whole: the indented block that says where and why
    /// (rustc's `-->` and its `expected ..., found ...` note, a sanitizer's `#0` frame,
    /// valgrind's `at` lines, a Java stack's first frames).
    pub after: Vec<String>,
    /// A root cause, not a restatement.
    pub strong: bool,
    /// Rare among frequent lines (see [`surprise`]): a needle whether a pattern names it or
    /// not.
    pub surprising: bool,
    /// A pattern names it (else only its rarity marks it).
    pub named: bool,
}

impl Candidate {
    /// Number of its first line, context included.
    pub fn first_line(&self) -> u64 {
        self.line - self.before.len() as u64
    }
}

/// Why a kept candidate is kept, which decides which one goes when room runs out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kept {
    /// One of the first [`KEEP`].
    First,
    /// The first of its kind.
    NewKind,
    /// One of the latest: replaced by later ones.
    Recent,
}

/// Finds candidates in a stream of normalised text.
#[derive(Debug)]
pub struct Highlighter {
    patterns: Patterns,
    /// The line in progress (its first [`CARRY_BYTES`]) and whether it was cut.
    carry: String,
    carry_cut: bool,
    /// Lines of context the last kept candidate still takes, if they continue its block.
    wants_after: usize,
    /// The last few complete lines (each capped), for a candidate's context before it.
    recent: VecDeque<String>,
    /// The first [`KEEP`] candidates and the first of each kind, in output order.
    kept: Vec<Candidate>,
    /// The latest [`KEEP`] candidates that are neither, oldest first (a ring: a flood of
    /// candidates costs no shifting). Whether each is a root cause (`strong`, and so whether it
    /// keeps its context before) is judged as they are read ([`Highlighter::candidates`]): in a
    /// flood of error lines each piece's latest replace the last piece's unread.
    latest: VecDeque<Candidate>,
    /// Where the last candidate went, which takes the context lines that follow it.
    last_in_recent: bool,
    /// Kinds seen so far (at most [`KINDS_TRACKED`]).
    kinds: FxHashSet<u64>,
    /// How many of `kept` are there as one of the first, and as the first of their kind.
    first_kept: usize,
    kinds_kept: usize,
    found: u64,
    /// Where the candidate lines found since [`Highlighter::take_found`] start in the pieces
    /// written (see there).
    found_starts: Vec<usize>,
    /// Lines ended so far.
    ended: u64,
    /// The latest candidates of the text being scanned that can only be kept as one of the
    /// latest, by where they start and end (at most [`KEEP`]): in a flood of error lines each
    /// would replace the one before, so only those left at the end of the text are kept, with
    /// their context (see [`Highlighter::keep_deferred`]).
    deferred: VecDeque<(usize, usize)>,
    /// Lines rare among frequent ones, found in the same pass.
    surprise: Surprise,
}

/// Candidates kept because they are the first of their kind: a crowd of one error cannot push
/// out the one unlike it.
pub const KEEP_KINDS: usize = 32;

/// Kinds remembered: past this many, a candidate's kind is no longer checked for newness.
const KINDS_TRACKED: usize = 4096;

/// Context lines kept after a candidate, and their bytes in all: enough for rustc's `-->`,
/// its source lines and the `expected ..., found ...` under them, or a Go panic down to its
/// first frame.
const AFTER_LINES: usize = 10;

const CONTEXT_BYTES: usize = 1024;

/// Lines looked back on for a candidate's context before it.
const BEFORE_LINES: usize = 3;

impl Highlighter {
    pub fn new(patterns: Patterns) -> Highlighter {
        Highlighter {
            patterns,
            carry: String::new(),
            carry_cut: false,
            wants_after: 0,
            recent: VecDeque::new(),
            kept: Vec::new(),
            latest: VecDeque::new(),
            last_in_recent: false,
            kinds: FxHashSet::default(),
            first_kept: 0,
            kinds_kept: 0,
            found: 0,
            found_starts: Vec::new(),
            ended: 0,
            deferred: VecDeque::with_capacity(KEEP),
            surprise: Surprise::new(),
        }
    }

    /// Takes the next piece of normalised output, which holds `newlines` newlines: its caller
    /// (a capture) has counted them already, so line numbers are only counted up to the
    /// candidates kept here.
    pub fn write(&mut self, text: &str, newlines: u64) {
        let lines = self.patterns.candidate_lines(text);
        self.write_lines(text, newlines, &lines, None);
    }

    /// [`Highlighter::write`] with the candidate lines of `text` found already, by
    /// [`Patterns::candidate_lines`] of these patterns, and its lines' shapes when given
    /// ([`LineShapes::of`]).
    pub fn write_lines(
        &mut self,
        text: &str,
        newlines: u64,
        lines: &CandidateLines,
        shapes: Option<&LineShapes>,
    ) {
        debug_assert_eq!(
            newlines,
            count_newlines(text),
            "the caller's count is wrong"
        );
        self.surprise
            .write(text, &self.carry, self.carry_cut, shapes);
        let mut rest = text;
        let mut ended = self.ended;
        self.ended += newlines;
        if !self.carry.is_empty() || self.carry_cut {
            match memchr::memchr(b'\n', text.as_bytes()) {
                Some(i) => {
                    self.extend_carry(&text[..i]);
                    if self.end_carried_line(ended + 1) {
                        self.found_starts.push(0);
                    }
                    ended += 1;
                    rest = &text[i + 1..];
                }
                None => {
                    self.extend_carry(text);
                    return;
                }
            }
        }
        let base = text.len() - rest.len();
        let complete = memchr::memrchr(b'\n', rest.as_bytes()).map_or(0, |i| i + 1);
        let lines = lines
            .0
            .iter()
            .skip_while(|l| l.start < base)
            .take_while(|l| l.end < base + complete);
        self.scan(&rest[..complete], base, ended, self.ended - ended, lines);
        self.extend_carry(&rest[complete..]);
    }

    /// The byte of output before which the [`LineShapes`] of the pieces to come may still be
    /// of use (0: none are): lines' shapes are counted over an output's first MiBs, past its
    /// first only among a crowd of alike lines, which is known only once the scan reaches it.
    /// A piece found ahead of the scan is shaped only this far ([`LineShapes::of`]); the scan
    /// shapes the rest itself if it still counts them.
    pub fn shapes_before(&self) -> u64 {
        self.surprise.shapes_before()
    }

    /// Ends the stream: a last line without a newline is a line. Returns whether it is a
    /// candidate.
    pub fn finish(&mut self) -> bool {
        self.surprise.finish(&self.carry, self.carry_cut);
        let found =
            (!self.carry.is_empty() || self.carry_cut) && self.end_carried_line(self.ended + 1);
        // No block goes on past the output's end.
        self.end_block();
        found
    }

    /// How many candidates were found in all (not all of them are kept).
    pub fn found(&self) -> u64 {
        self.found
    }

    /// Moves where the candidate lines found since the last call start into `into`, in
    /// increasing order: byte offsets in the piece written, 0 also standing for a line that
    /// began in an earlier piece and ended in this one (the outline counts the candidates
    /// each of its segments covers).
    pub fn take_found(&mut self, into: &mut Vec<usize>) {
        into.append(&mut self.found_starts);
    }

    /// The kept candidates, in output order: the first [`KEEP`], the first of each kind (up to
    /// [`KEEP_KINDS`]) and the last [`KEEP`].
    pub fn candidates(&self) -> Vec<Candidate> {
        let latest = self.latest.iter().map(|c| self.judged(c));
        let mut all: Vec<Candidate> = self.kept.iter().cloned().chain(latest).collect();
        all.sort_by_key(|c| c.line);
        all
    }

    /// One of the latest candidates, copied, judged now: a restatement (a weak line) is not a
    /// root cause and keeps no context before it.
    fn judged(&self, latest: &Candidate) -> Candidate {
        let mut c = latest.clone();
        if self.patterns.is_weak(&c.text) {
            c.strong = false;
            c.before.clear();
        }
        c
    }

    /// What was found so far: the kept candidates and the needles by surprise, in output
    /// order (a line that is both is one candidate, marked surprising), and how many lines
    /// the patterns matched.
    pub fn findings(&self) -> Findings {
        let mut candidates = self.candidates();
        for needle in self.surprise.needles() {
            match candidates.binary_search_by_key(&needle.line, |c| c.line) {
                Ok(i) => {
                    let c = &mut candidates[i];
                    c.surprising = true;
                    if c.before.is_empty() {
                        c.before = needle.before;
                    }
                }
                Err(i) => candidates.insert(i, needle),
            }
        }
        Findings {
            candidates,
            found: self.found,
        }
    }

    /// The patterns in use.
    pub fn patterns(&self) -> &Patterns {
        &self.patterns
    }

    fn extend_carry(&mut self, text: &str) {
        let room = CARRY_BYTES.saturating_sub(self.carry.len());
        if text.len() <= room {
            self.carry.push_str(text);
        } else {
            let mut cut = room;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            self.carry.push_str(&text[..cut]);
            self.carry_cut = true;
        }
    }

    /// Ends the line carried over from earlier pieces; returns whether it is a candidate.
    fn end_carried_line(&mut self, number: u64) -> bool {
        let line = std::mem::take(&mut self.carry);
        let cut = std::mem::replace(&mut self.carry_cut, false);
        self.take_after(&line, cut);
        let found = !cut && self.patterns.is_match(&line);
        if found {
            let before = self.before_context(&[]);
            self.found_at(number, &line, before);
        }
        self.remember(std::iter::once(line.as_str()));
        found
    }

    /// Scans complete lines: `text` ends with a newline (or is empty), holds `newlines` of
    /// them, comes after `ended` ended lines and starts at byte `base` of the piece written,
    /// whose `candidates` lie in it.
    fn scan<'a>(
        &mut self,
        text: &str,
        base: usize,
        ended: u64,
        newlines: u64,
        candidates: impl Iterator<Item = &'a CandidateLine>,
    ) {
        let mut from = 0;
        while self.wants_after > 0 && from < text.len() {
            let len = memchr::memchr(b'\n', &text.as_bytes()[from..]).unwrap_or(text.len() - from);
            self.take_after(&text[from..from + len], false);
            from += len + 1;
        }
        let mut numbers = Numbering {
            at: 0,
            number: ended + 1,
        };
        let mut last_found = None;
        for candidate in candidates {
            let (start, end) = (candidate.start - base, candidate.end - base);
            let line = &text[start..end];
            // A line too long to be carried whole between chunks is never a candidate, here as
            // in `end_carried_line`: whether a line is one depends on the line, not on where
            // the output's chunks happen to split it.
            if line.len() > CARRY_BYTES {
                continue;
            }
            if !self.patterns.matches(line, candidate.hit - candidate.start) {
                continue;
            }
            self.found_starts.push(base + start);
            last_found = Some(start);
            if line.len() <= MAX_HIGHLIGHT_BYTES && self.only_latest(line) {
                self.defer(start, end);
            } else {
                // Kept in the order found: the deferred ones first.
                self.keep_each_deferred(text, &mut numbers);
                let before = self.before_at(text, start);
                self.found_at(numbers.of(text, start), line, before);
                self.take_following(text, end + 1);
            }
        }
        self.keep_deferred(text, ended + newlines, last_found);
        self.remember(lines_before(text, text.len()).into_iter());
    }

    /// Whether the candidate `line`, found now, can only be kept as one of the latest: the
    /// first [`KEEP`] are in, and so are the first of [`KEEP_KINDS`] kinds, or no more kinds
    /// are tracked, or its kind was seen before ([`Highlighter::keep_found`]'s choice). The
    /// last is what a flood of a few kinds of error is made of (a million lines of one, or
    /// tracebacks alike): kept one by one as they came, each took its context before and
    /// after only for the next to replace it.
    fn only_latest(&self, line: &str) -> bool {
        self.first_kept >= KEEP
            && (self.kinds_kept >= KEEP_KINDS
                || self.kinds.len() >= KINDS_TRACKED
                || self.kinds.contains(&kind_of(line)))
    }

    /// Counts the candidate in bytes `start..end` of the text being scanned, which can only
    /// be kept as one of the latest, and defers the rest (see [`Highlighter::keep_deferred`]).
    fn defer(&mut self, start: usize, end: usize) {
        self.found += 1;
        if self.deferred.len() == KEEP {
            self.deferred.pop_front();
        }
        self.deferred.push_back((start, end));
    }

    /// Keeps the deferred candidates of `text`, which ends after line `last_line`, as
    /// [`Highlighter::found_at`] would have kept them one by one: those the latest replaced
    /// within the text cost nothing but their count. `last_found` is where the last candidate
    /// found in `text` starts: one after the deferred (too long to keep) stops their context.
    fn keep_deferred(&mut self, text: &str, last_line: u64, last_found: Option<usize>) {
        let Some(&(first, _)) = self.deferred.front() else {
            return;
        };
        // Counted back from the end of the text, which is nearer.
        let to_end = memchr::memchr_iter(b'\n', &text.as_bytes()[first..]).count() as u64;
        let mut numbers = Numbering {
            at: first,
            number: last_line + 1 - to_end,
        };
        let last_deferred = self.deferred.back().map(|&(start, _)| start);
        self.keep_each_deferred(text, &mut numbers);
        if last_found != last_deferred {
            self.end_block();
        }
    }

    /// Keeps the candidates deferred in `text` so far, in order, as [`Highlighter::found_at`]
    /// would have kept them one by one; `numbers` numbers their lines.
    fn keep_each_deferred(&mut self, text: &str, numbers: &mut Numbering) {
        if self.deferred.is_empty() {
            return;
        }
        let deferred = std::mem::take(&mut self.deferred);
        for &(start, end) in &deferred {
            let before = self.before_at(text, start);
            self.keep_found(numbers.of(text, start), &text[start..end], before);
            self.take_following(text, end + 1);
        }
        self.deferred = deferred;
        self.deferred.clear();
    }

    /// Counts a candidate and keeps it if it has room.
    fn found_at(&mut self, line: u64, text: &str, before: Vec<String>) {
        self.found += 1;
        self.keep_found(line, text, before);
    }

    /// Keeps a candidate that was counted, if it has room, and has the lines after it offered
    /// as its context.
    fn keep_found(&mut self, line: u64, text: &str, before: Vec<String>) {
        self.end_block();
        if text.len() > MAX_HIGHLIGHT_BYTES {
            return;
        }
        // A line's kind is worked out only while a new kind could still be kept: in a flood
        // of error-level log lines the slots fill within a few dozen lines, and the rest pay
        // nothing for it (the picker works out the kinds of the few it is offered).
        let kinds_open = self.kinds_kept < KEEP_KINDS || self.first_kept < KEEP;
        let kind = if kinds_open { kind_of(text) } else { 0 };
        let new_kind = kinds_open && self.kinds.len() < KINDS_TRACKED && self.kinds.insert(kind);
        let why = if self.first_kept < KEEP {
            Kept::First
        } else if new_kind && self.kinds_kept < KEEP_KINDS {
            Kept::NewKind
        } else {
            Kept::Recent
        };
        // The oldest recent one makes room, and lends its buffers.
        let reuse = if why == Kept::Recent && self.latest.len() == KEEP {
            self.latest.pop_front()
        } else {
            None
        };
        let strong = why == Kept::Recent || !self.patterns.is_weak(text);
        let mut candidate = reuse.unwrap_or_else(|| Candidate {
            line,
            text: String::new(),
            before: Vec::new(),
            after: Vec::new(),
            strong,
            surprising: false,
            named: true,
        });
        candidate.line = line;
        candidate.text.clear();
        candidate.text.push_str(text);
        candidate.before = if strong { before } else { Vec::new() };
        candidate.after.clear();
        candidate.strong = strong;
        self.last_in_recent = why == Kept::Recent;
        if self.last_in_recent {
            self.latest.push_back(candidate);
        } else {
            match why {
                Kept::First => self.first_kept += 1,
                _ => self.kinds_kept += 1,
            }
            self.kept.push(candidate);
        }
        self.wants_after = AFTER_LINES;
    }
}

/// Line numbers of the line starts of a text of complete lines, counted forward from a known
/// one.
struct Numbering {
    at: usize,
    number: u64,
}

impl Numbering {
    /// The number of the line that starts at byte `start` (at or after the last one asked).
    fn of(&mut self, text: &str, start: usize) -> u64 {
        self.number += memchr::memchr_iter(b'\n', &text.as_bytes()[self.at..start]).count() as u64;
        self.at = start;
        self.number
    }
}

/// What a highlighter found: the kept candidates, in output order, and how many there were.
#[derive(Debug, Clone, Default)]
pub struct Findings {
    pub candidates: Vec<Candidate>,
    pub found: u64,
}

#[cfg(test)]
mod tests {
    use super::prefilter::LINE_STARTS;
    use super::*;
    use crate::engine::test_text::pieces;

    fn feed(h: &mut Highlighter, chunks: &[&str]) {
        for chunk in chunks {
            h.write(chunk, count_newlines(chunk));
        }
        h.finish();
    }

    fn found(chunks: &[&str]) -> Vec<Candidate> {
        let mut h = Highlighter::new(Patterns::new(&[]).unwrap());
        feed(&mut h, chunks);
        h.candidates()
    }

    fn lines(chunks: &[&str]) -> Vec<(u64, String, bool)> {
        found(chunks)
            .into_iter()
            .map(|c| (c.line, c.text, c.strong))
            .collect()
    }

    #[test]
    fn a_line_too_long_to_carry_counts_the_same_however_it_is_chunked() {
        let mut long = "w".repeat(CARRY_BYTES);
        long.push_str("make: *** [all] Error 2");
        long.push_str(&"w".repeat(100));
        let text = format!("ok\n{long}\nerror: short and found\n");
        let count = |chunks: &[&str]| {
            let mut h = Highlighter::new(Patterns::new(&[]).unwrap());
            feed(&mut h, chunks);
            (h.found(), h.candidates().len())
        };
        let whole = count(&[&text]);
        assert_eq!(whole, (1, 1), "only the short error line");
        for cut in [1, 3, 100, CARRY_BYTES, CARRY_BYTES + 10, text.len() - 5] {
            assert_eq!(count(&[&text[..cut], &text[cut..]]), whole, "cut at {cut}");
        }
    }

    #[test]
    fn finds_common_toolchain_errors_with_line_numbers() {
        let text = "   Compiling app v0.1.0\n\
                    warning: unused import\n\
                    error[E0308]: mismatched types\n  --> src/lib.rs:3:5\n\
                    main.c:34:14: error: no member named 'x'\n\
                    src/a.ts:1:2 - error TS2552: Cannot find name 'Entiy'.\n\
                    ValueError: bad value\n\
                    FAILED tests/test_a.py::test_b - AssertionError: assert 1 == 2\n\
                    npm error code E404\n\
                    thread 'main' panicked at src/main.rs:2:5:\n\
                    2026-01-01 FATAL disk on fire\n\
                    make[1]: *** [Makefile:3: all] Error 1\n\
                    error: could not compile `app` (lib) due to 1 previous error\n";
        let got = lines(&[text]);
        let numbers: Vec<u64> = got.iter().map(|(n, _, _)| *n).collect();
        assert_eq!(numbers, [3, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
        let weak: Vec<u64> = got.iter().filter(|c| !c.2).map(|c| c.0).collect();
        assert_eq!(weak, [12, 13]);
        assert_eq!(found(&[text])[0].after, ["  --> src/lib.rs:3:5"]);
    }

    /// Every line the patterns match must hold a prefilter hit, or it would never be tried.
    fn prefilter_covers(line: &str) -> bool {
        let p = Patterns::defaults();
        !p.compiled().any().is_match(line)
            || p.prefilter.as_ref().unwrap().find(line, 0).is_some()
            || LINE_STARTS.iter().any(|l| line.starts_with(l))
    }

    #[test]
    fn the_prefilter_never_hides_a_match() {
        for line in [
            "error[E0308]: mismatched types",
            "error: linking with `cc` failed",
            "fatal error: stdio.h: No such file or directory",
            "main.c:34:14: error: no member",
            "main.c:1:2: fatal error: x.h: No such file",
            "thread 'main' panicked at src/main.rs:2:5:",
            "pkg/a.go:12:3: undefined: foo",
            "src/a.ts:1:2 - error TS2552: Cannot find name",
            "ValueError: bad value",
            "java.lang.NullPointerException",
            "Exception in thread \"main\" java.lang.RuntimeException: boom",
            "Caused by: java.io.IOException: disk",
            "FAILED tests/a.py::t - AssertionError",
            "ERROR tests/b.py - ImportError",
            "--- FAIL: TestThing (0.00s)",
            "panic: runtime error: index out of range",
            "test parser::tests::it_works ... FAILED",
            "npm ERR! code E404",
            "npm error code E404",
            "[ERROR] Failed to execute goal",
            "2026-01-01 FATAL disk on fire",
            "CRITICAL: out of memory",
            "make[1]: *** [Makefile:3: all] Error 1",
            "Traceback (most recent call last):",
            "FAIL\tgithub.com/x/y\t0.01s",
            "BUILD FAILED in 3s",
        ] {
            assert!(Patterns::defaults().is_match(line), "{line}");
            assert!(prefilter_covers(line), "{line}");
        }
        for line in [
            "2026-11-21T09:51:14Z ERROR worker-3 retrying",
            "Error: ENOENT: no such file or directory, open 'x.json'",
            "ERROR: Could not find a version that satisfies the requirement nope",
            "fatal: not a git repository (or any of the parent directories): .git",
            "tests/test_a.py::test_b FAILED                               [ 50%]",
            "E   AssertionError: assert 1 == 2",
            "Segmentation fault (core dumped)",
            "bash: line 1: 4242 Killed                  ./hog",
            "==4242== Invalid read of size 8",
            "==4242==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x602000000014",
            "ts=2026-11-21 level=error msg=\"db down\"",
            "collect2: error: ld returned 1 exit status",
            "/usr/bin/ld: cannot find -lfoo: No such file or directory",
            "a.c:(.text+0x1b): undefined reference to `foo'",
            "CMake Error at CMakeLists.txt:3 (find_package):",
            "Error response from daemon: pull access denied for nope",
            "E: Unable to locate package nope",
            "terminate called after throwing an instance of 'std::runtime_error'",
            "thread 'main' has overflowed its stack",
            "bash: nope: command not found",
            "rm: cannot remove 'x': Permission denied",
            "Build failed with 2 errors",
            "FAILURE: Build failed with an exception.",
            "* What went wrong:",
            "test result: FAILED. 1 passed; 1 failed; 0 ignored",
            "WARNING: ThreadSanitizer: data race (pid=42)",
            "(node:42) UnhandledPromiseRejectionWarning: boom",
            "a.rb:3:in `b': undefined method `c' for nil (NoMethodError)",
            "PHP Fatal error:  Uncaught Exception: boom",
            "** (RuntimeError) boom",
            "a.out: a.c:5: main: Assertion `x > 0' failed.",
            "Program.cs(3,5): error CS0246: The type or namespace name 'Foo' could not be found",
            "pod/web-1   0/1   CrashLoopBackOff   5   3m",
        ] {
            assert!(Patterns::defaults().is_match(line), "{line}");
            assert!(prefilter_covers(line), "{line}");
        }
        for line in [
            "test result: ok. 12 passed; 0 failed",
            "tests/test_a.py::test_b PASSED                               [ 50%]",
            "0 errors, 0 warnings",
            "==4242== HEAP SUMMARY:",
            "Killed 3 stale workers",
            "Errors: 0",
            "Build succeeded.",
            "test result: ok. 3 passed; 0 failed",
            "    Finished `release` profile [optimized] target(s) in 1.2s",
        ] {
            assert!(!Patterns::defaults().is_match(line), "{line}");
        }
    }

    #[test]
    fn a_block_runs_to_its_note_and_through_one_blank_line() {
        let rustc = "error[E0308]: mismatched types\n  --> src/p.rs:42:17\n   |\n40 |     fn parse(&self) -> u32 {\n   |                        --- expected `u32` because of return type\n41 |         let s = self.name();\n42 |         s\n   |         ^ expected `u32`, found `String`\n\nwarning: unused\n";
        let go = "panic: runtime error: invalid memory address or nil pointer dereference\n[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4a1b2c]\n\ngoroutine 1 [running]:\nmain.(*Server).handle(0x0, 0xc000010000)\n\t/src/app/server.go:57 +0x2c\nexit status 2\n";
        for text in [rustc, go] {
            let whole = found(&[text]);
            let block: Vec<&str> = text.lines().skip(1).take(whole[0].after.len()).collect();
            assert_eq!(whole[0].after, block);
            // However the text is cut, the same block.
            for cut in (1..text.len()).filter(|&c| text.is_char_boundary(c)) {
                assert_eq!(found(&[&text[..cut], &text[cut..]]), whole, "cut at {cut}");
            }
        }
        assert_eq!(
            found(&[rustc])[0].after.last().unwrap(),
            "   |         ^ expected `u32`, found `String`"
        );
        assert_eq!(
            found(&[go])[0].after.last().unwrap(),
            "\t/src/app/server.go:57 +0x2c"
        );
        // A blank line the block does not go on after is not kept, nor are two.
        for text in [
            "E   boom\n  at x\n\nok\n",
            "E   boom\n  at x\n\n\n  at y\n",
            "E   boom\n  at x\n\n",
        ] {
            assert_eq!(found(&[text])[0].after, ["  at x"], "{text:?}");
        }
    }

    #[test]
    fn the_default_patterns_use_ascii_classes() {
        for pattern in super::patterns::STRONG.iter().chain(super::patterns::WEAK) {
            let bare = pattern.replace(r"(?-u:\b)", "");
            for class in [r"\w", r"\d", r"\b", r"\W", r"\D", r"\B"] {
                assert!(!bare.contains(class), "{pattern} uses {class}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn any_match_is_a_prefilter_hit(
            words in proptest::collection::vec(proptest::sample::select(vec![
                "error", "Error", "ERROR", "error:", "error[E0001]:", ": error: ", "fatal", "FAIL",
                "FAILED", "panic:", "panicked at", "npm", "ERR!", "[ERROR]", "TS2552:", "x.go:1:2:",
                "Exception", "Caused", "by:", "FATAL", "CRITICAL", "***", "make:", "Traceback",
                "E:", "E", "**", "(", ")", "Build", "build", "failed", "BUILD", "Assertion",
                "command", "not", "found", "Permission", "denied", "Unhandled", "Rejection",
                "CS0246:", "terminate", "called", "CMake", "*", "What", "went", "wrong:",
                "(most", "recent", "call", "last):", "test", "...", "a", "b.c:1:2:", "---", " ", "\t",
            ]), 0..8),
        ) {
            let line = words.concat();
            proptest::prop_assert!(prefilter_covers(&line), "{line:?}");
        }
    }

    #[test]
    fn patterns_match_after_indentation_and_box_prefixes() {
        let text = "  running build_ext\n\
                    \x20 src/fastsum.c:5:32: error: 'scale' undeclared (first use in this function)\n\
                    \x20     5 |     return PyLong_FromLong(n * scale);\n\
                    done\n\
                    \x20 │ error: command '/usr/bin/gcc' failed with exit code 1\n\
                    ║ ValueError: bad value\n\
                    > \tFAILED tests/a.py::b - AssertionError\n\
                    \x20   make: *** [all] Error 2\n";
        let got = lines(&[text]);
        let numbers: Vec<u64> = got.iter().map(|(n, _, _)| *n).collect();
        assert_eq!(numbers, [2, 5, 6, 7, 8]);
        let weak: Vec<u64> = got.iter().filter(|c| !c.2).map(|c| c.0).collect();
        assert_eq!(weak, [8]);
        // Its block comes with it, as at column 0.
        assert_eq!(
            found(&[text])[0].after,
            ["      5 |     return PyLong_FromLong(n * scale);"]
        );
    }

    #[test]
    fn routine_indented_lines_are_not_candidates() {
        for line in [
            "    raise ValueError(msg)",
            "  --> src/lib.rs:3:5",
            "      5 |     let error = 1;",
            "    at Object.<anonymous> (/app/a.js:3:9)",
            "  File \"/a/b.py\", line 3, in f",
            "  │ exit code: 1",
            "    errors.rs:3 has no errors",
            "  = note: error handling is explained in the book",
            "    npm ERR! found only at a line's start",
            "  Traceback (most recent call last):",
            "|   E   found only at a line's start",
        ] {
            assert!(!Patterns::defaults().is_match(line), "{line}");
            assert!(found(&[&format!("{line}\n")]).is_empty(), "{line}");
        }
    }

    #[test]
    fn ordinary_lines_are_not_candidates() {
        let text = "Compiling foo\nwarning: unused variable `error`\n0 errors, 2 warnings\ntest ok ... ok\nerrors.rs:3 has no errors\n";
        assert!(found(&[text]).is_empty());
    }

    #[test]
    fn chunking_changes_nothing() {
        let text = "ok\nok\nerror[E0001]: bad\n  --> a.rs:1:1\nok\nfoo.c:1:2: error: x\nlast line ERROR here without newline\nFATAL: end";
        let whole = found(&[text]);
        for cut in 1..text.len() {
            if !text.is_char_boundary(cut) {
                continue;
            }
            assert_eq!(found(&[&text[..cut], &text[cut..]]), whole, "cut at {cut}");
        }
        let bytes: Vec<String> = text.chars().map(String::from).collect();
        let refs: Vec<&str> = bytes.iter().map(String::as_str).collect();
        assert_eq!(found(&refs), whole);
    }

    #[test]
    fn keeps_the_first_and_last_candidates_and_counts_all() {
        let text: String = (1..=1000).map(|i| format!("error: number {i}\n")).collect();
        let mut h = Highlighter::new(Patterns::new(&[]).unwrap());
        feed(&mut h, &[&text]);
        assert_eq!(h.found(), 1000);
        let kept: Vec<u64> = h.candidates().iter().map(|c| c.line).collect();
        let expected: Vec<u64> = (1..=16).chain(985..=1000).collect();
        assert_eq!(kept, expected);
    }

    #[test]
    fn a_pattern_too_big_to_compile_is_refused() {
        let huge = r"\w{200}x{200}\w{200}".to_string();
        assert!(Patterns::new(&[huge]).is_err());
        assert!(Patterns::new(&[r"\w{20}x".to_string()]).is_ok());
    }

    #[test]
    fn user_patterns_are_strong_and_bad_ones_rejected() {
        let mut h = Highlighter::new(Patterns::new(&["^BOOM".into()]).unwrap());
        feed(&mut h, &["ok\nBOOM goes the build\n"]);
        assert_eq!(h.candidates()[0].line, 2);
        assert!(h.candidates()[0].strong);
        assert!(Patterns::new(&["(unclosed".into()]).is_err());
    }

    #[test]
    fn overlong_lines_are_counted_but_not_kept() {
        let text = format!("error: {}\nerror: short\n", "x".repeat(5000));
        let mut h = Highlighter::new(Patterns::new(&[]).unwrap());
        feed(&mut h, &[&text]);
        let kept: Vec<u64> = h.candidates().iter().map(|c| c.line).collect();
        assert_eq!(kept, [2]);
    }

    /// Feeds `text` in pieces of the given sizes (cycled); returns the highlighter and the
    /// numbers of the lines it reported to the outline.
    fn fed_in(text: &str, sizes: &[usize]) -> (Highlighter, Vec<u64>) {
        let mut h = Highlighter::new(Patterns::defaults());
        let (mut lines, mut starts) = (Vec::new(), Vec::new());
        for (at, end) in pieces(text, sizes) {
            h.write(&text[at..end], count_newlines(&text[at..end]));
            h.take_found(&mut starts);
            let number = |o: usize| count_newlines(&text[..at + o]) + 1;
            lines.extend(starts.drain(..).map(number));
        }
        if h.finish() {
            lines.push(count_newlines(text) + 1);
        }
        (h, lines)
    }

    fn log_line() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            (
                "(INFO|WARN|ERROR|FATAL) [a-z]{1,8} [0-9]{1,3}",
                "[a-z ]{0,40}"
            )
                .prop_map(|(a, b)| format!("2026-11-21T09:51:14Z {a}{b}")),
            (0u32..4).prop_map(|n| format!("error: number {n}")),
            (0u32..400).prop_map(|n| format!("error[E0{n:03}]: mismatched types")),
            Just("  --> src/lib.rs:3:5".to_string()),
            Just("   |".to_string()),
            (0u32..99).prop_map(|n| format!("{n} |     let x: u32 = \"a\";")),
            (0u32..9).prop_map(|n| format!("  File \"/a/b{n}.py\", line {n}, in f")),
            Just("    g()".to_string()),
            (0u32..50).prop_map(|n| format!("KeyError: {n}")),
            Just("Traceback (most recent call last):".to_string()),
            prop::sample::select(vec![
                "npm ERR! code E404",
                "make: *** [all] Error 1",
                "fatal: not a repository",
                "E   assert 1 == 2",
                "Caused by: java.io.IOException",
                "    at a.b(C.java:3)",
                "==42== Invalid read of size 8",
                "==42==    at 0x4005: main (a.c:3)",
                "",
            ])
            .prop_map(str::to_string),
            "[a-z ]{0,60}",
            (2100usize..3000).prop_map(|n| format!("ERROR {}", "x".repeat(n))),
        ]
    }

    proptest::proptest! {
        /// Candidates deferred to the end of a piece are kept as if each had been found alone:
        /// a piece per line defers nothing past its line.
        #[test]
        fn pieces_of_any_size_find_and_keep_the_same_candidates(
            lines in proptest::collection::vec(log_line(), 0..400),
            sizes in proptest::collection::vec(1usize..3000, 1..8),
        ) {
            let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
            let (whole, found) = fed_in(&text, &[text.len().max(1)]);
            let per_line: Vec<usize> = lines.iter().map(|l| l.len() + 1).collect();
            for (h, reported) in [fed_in(&text, &per_line), fed_in(&text, &sizes)] {
                proptest::prop_assert_eq!(h.found(), whole.found());
                proptest::prop_assert_eq!(h.candidates(), whole.candidates());
                proptest::prop_assert_eq!(&reported, &found);
            }
            let matching: Vec<u64> = (1..)
                .zip(&lines)
                .filter(|(_, l)| Patterns::defaults().is_match(l))
                .map(|(n, _)| n)
                .collect();
            proptest::prop_assert_eq!(found, matching);
        }
    }
}
