//! The scan of captured text that runs beside the spill writer: the highlighter looks for
//! lines like errors and the outline folds the output, in one pass and in output order.
//!
//! One [`SharedScanner`] is fed by whoever holds the text next (the capture until a spill file
//! opens, then the file's writer thread), so each piece is scanned once; the outline learns
//! which of its lines the highlighter counted, so a preview's counts of what it omits are
//! exact. The search for the highlighter's candidate lines, about half the work, needs nothing
//! but the text: the capture's thread does it for each batch it hands the writer
//! ([`SharedScanner::candidate_lines`]), which keeps the two threads about even.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::engine::highlight::{CandidateLines, Findings, Highlighter, Patterns};
use crate::engine::outline::{Outline, OutlineView};
use crate::storage::spill::{Prepared, TextReader};

/// The highlighter (when highlights are on) and the outline of one output.
#[derive(Debug)]
struct Scanner {
    highlighter: Option<Highlighter>,
    outline: Outline,
    /// Where the candidate lines of the piece being scanned start.
    lines: Vec<usize>,
    /// Whether the last line, ended by the end of the output rather than a newline, is one.
    last_is_candidate: bool,
}

/// A [`Scanner`] shared by a capture and its spill file's writer thread.
#[derive(Debug, Clone)]
pub struct SharedScanner(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    scanner: Mutex<Scanner>,
    /// The scanner's patterns, with which either thread can find a piece's candidate lines
    /// without the lock.
    patterns: Option<Patterns>,
}

impl SharedScanner {
    /// A scanner for previews of at most `max_lines` lines and `max_bytes` bytes, looking for
    /// highlights with `patterns` (`None`: none).
    pub fn new(patterns: Option<Patterns>, max_lines: usize, max_bytes: usize) -> SharedScanner {
        let scanner = Scanner {
            highlighter: patterns.clone().map(Highlighter::new),
            outline: Outline::new(max_lines, max_bytes),
            lines: Vec::new(),
            last_is_candidate: false,
        };
        SharedScanner(Arc::new(Shared {
            scanner: Mutex::new(scanner),
            patterns,
        }))
    }

    /// The lines of `text` worth trying against the patterns (none when highlights are off),
    /// for [`SharedScanner::write_lines`]: found without the lock, on the caller's thread.
    pub fn candidate_lines(&self, text: &str) -> Option<CandidateLines> {
        self.0.patterns.as_ref().map(|p| p.candidate_lines(text))
    }

    /// Takes the next piece of output, holding `newlines` newlines.
    pub fn write(&self, text: &str, newlines: u64) {
        self.write_lines(text, newlines, self.candidate_lines(text).as_ref());
    }

    /// [`SharedScanner::write`] with the piece's candidate lines found already, by
    /// [`SharedScanner::candidate_lines`].
    pub fn write_lines(&self, text: &str, newlines: u64, lines: Option<&CandidateLines>) {
        let mut guard = self.lock();
        let s = &mut *guard;
        if let Some(h) = &mut s.highlighter {
            match lines {
                Some(lines) => h.write_lines(text, newlines, lines),
                None => h.write(text, newlines),
            }
            h.take_found(&mut s.lines);
        }
        s.outline.write(text, &s.lines);
        s.lines.clear();
    }

    /// Ends the stream: a last line without a newline is a line.
    pub fn finish(&self) {
        let mut guard = self.lock();
        let s = &mut *guard;
        if let Some(h) = &mut s.highlighter {
            s.last_is_candidate = h.finish();
        }
    }

    /// What was found and folded so far, copied.
    pub fn snapshot(&self) -> (Findings, OutlineView) {
        let s = self.lock();
        let findings = s
            .highlighter
            .as_ref()
            .map_or_else(Findings::default, Highlighter::findings);
        (findings, s.outline.view(s.last_is_candidate))
    }

    fn lock(&self) -> MutexGuard<'_, Scanner> {
        // A panic while scanning leaves nothing half-done that matters: carry on.
        self.0.scanner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The spill's writer thread hands the scanner each piece of output as it writes it, with its
/// candidate lines found on the capture's thread.
impl TextReader for SharedScanner {
    fn prepare(&self, text: &str) -> Option<Prepared> {
        self.candidate_lines(text)
            .map(|lines| Box::new(lines) as Prepared)
    }

    fn read(&self, text: &str, newlines: u64, prepared: Option<Prepared>) {
        let lines = prepared.and_then(|p| p.downcast::<CandidateLines>().ok());
        self.write_lines(text, newlines, lines.as_deref());
    }
}
