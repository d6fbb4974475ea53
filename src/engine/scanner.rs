//! The scan of captured text that runs beside the spill writer: the highlighter looks for
//! lines like errors and the outline folds the output, in one pass and in output order.
//!
//! One [`SharedScanner`] is fed by whoever holds the text next (the capture until a spill file
//! opens, then the file's writer thread), so each piece is scanned once; the outline learns
//! which of its lines the highlighter counted, so a preview's counts of what it omits are
//! exact.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::engine::highlight::{Findings, Highlighter, Patterns};
use crate::engine::outline::{Outline, OutlineView};
use crate::storage::spill::TextReader;

/// The highlighter (when highlights are on) and the outline of one output.
#[derive(Debug)]
struct Scanner {
    highlighter: Option<Highlighter>,
    outline: Outline,
    /// Candidate lines of the piece being scanned.
    lines: Vec<u64>,
    /// Whether the last line, ended by the end of the output rather than a newline, is one.
    last_is_candidate: bool,
}

/// A [`Scanner`] shared by a capture and its spill file's writer thread.
#[derive(Debug, Clone)]
pub struct SharedScanner(Arc<Mutex<Scanner>>);

impl SharedScanner {
    /// A scanner for previews of at most `max_lines` lines and `max_bytes` bytes, looking for
    /// highlights with `patterns` (`None`: none).
    pub fn new(patterns: Option<Patterns>, max_lines: usize, max_bytes: usize) -> SharedScanner {
        SharedScanner(Arc::new(Mutex::new(Scanner {
            highlighter: patterns.map(Highlighter::new),
            outline: Outline::new(max_lines, max_bytes),
            lines: Vec::new(),
            last_is_candidate: false,
        })))
    }

    /// Takes the next piece of output, holding `newlines` newlines.
    pub fn write(&self, text: &str, newlines: u64) {
        let mut guard = self.lock();
        let s = &mut *guard;
        if let Some(h) = &mut s.highlighter {
            h.write(text, newlines);
            h.take_found_lines(&mut s.lines);
        }
        s.outline.write(text, &s.lines);
        s.lines.clear();
    }

    /// Ends the stream: a last line without a newline is a line.
    pub fn finish(&self) {
        let mut guard = self.lock();
        let s = &mut *guard;
        if let Some(h) = &mut s.highlighter {
            h.finish();
            h.take_found_lines(&mut s.lines);
            s.last_is_candidate = !s.lines.is_empty();
            s.lines.clear();
        }
    }

    /// What was found and folded so far, copied.
    pub fn snapshot(&self) -> (Findings, OutlineView) {
        let s = self.lock();
        let findings = s
            .highlighter
            .as_ref()
            .map_or_else(Findings::default, |h| Findings {
                candidates: h.candidates().into_iter().cloned().collect(),
                found: h.found(),
            });
        (findings, s.outline.view(s.last_is_candidate))
    }

    fn lock(&self) -> MutexGuard<'_, Scanner> {
        // A panic while scanning leaves nothing half-done that matters: carry on.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The spill's writer thread hands the scanner each piece of output as it writes it.
impl TextReader for SharedScanner {
    fn read(&self, text: &str, newlines: u64) {
        self.write(text, newlines);
    }
}
