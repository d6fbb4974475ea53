//! The scan of captured text that runs beside the spill writer: the highlighter looks for
//! lines like errors and the outline folds the output, in one pass and in output order.
//!
//! One [`SharedScanner`] is fed by whoever holds the text next (the capture until a spill file
//! opens, then the file's writer thread), so each piece is scanned once; the outline learns
//! which of its lines the highlighter counted, so a preview's counts of what it omits are
//! exact. The search for the highlighter's candidate lines, about half the work, and the
//! shapes of the lines over an output's first MiBs, need nothing but the text: the capture's
//! thread finds them for each batch it hands the writer ([`SharedScanner::found_in`]), which
//! keeps the two threads about even.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::engine::highlight::{CandidateLines, Findings, Highlighter, LineShapes, Patterns};
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
    /// Bytes of the pieces [`SharedScanner::found_in`] was given: where the next one starts.
    found_to: AtomicU64,
    /// Pieces it was given.
    pieces: AtomicU64,
}

/// What the capture's thread found in a piece before the writer scans it: its candidate lines
/// and, over the output's first MiBs, its lines' shapes.
#[derive(Debug)]
pub struct Found {
    lines: CandidateLines,
    shapes: Option<LineShapes>,
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
            found_to: AtomicU64::new(0),
            pieces: AtomicU64::new(0),
        }))
    }

    /// What can be found in `text`, the next piece of output, without the lock, on the
    /// caller's thread, for [`SharedScanner::write_found`] (nothing when highlights are off):
    /// its candidate lines, and its lines' shapes for every other piece, which shares that
    /// work evenly between the capture's thread and the writer's (measured: all of it on either
    /// left that one the slower).
    pub fn found_in(&self, text: &str) -> Option<Found> {
        let at = self
            .0
            .found_to
            .fetch_add(text.len() as u64, Ordering::Relaxed);
        let even = self
            .0
            .pieces
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(2);
        self.0.patterns.as_ref().map(|p| Found {
            lines: p.candidate_lines(text),
            shapes: even.then(|| LineShapes::of(text, at)).flatten(),
        })
    }

    /// Takes the next piece of output, holding `newlines` newlines.
    pub fn write(&self, text: &str, newlines: u64) {
        let found = self.found_in(text);
        self.write_found(text, newlines, found.as_ref());
    }

    /// [`SharedScanner::write`] with what [`SharedScanner::found_in`] found in the piece.
    pub fn write_found(&self, text: &str, newlines: u64, found: Option<&Found>) {
        let mut guard = self.lock();
        let s = &mut *guard;
        if let Some(h) = &mut s.highlighter {
            match found {
                Some(f) => h.write_lines(text, newlines, &f.lines, f.shapes.as_ref()),
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
        self.found_in(text).map(|found| Box::new(found) as Prepared)
    }

    fn read(&self, text: &str, newlines: u64, prepared: Option<Prepared>) {
        let found = prepared.and_then(|p| p.downcast::<Found>().ok());
        self.write_found(text, newlines, found.as_deref());
    }
}
