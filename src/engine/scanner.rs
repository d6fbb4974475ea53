//! The scan of captured text that runs beside the spill writer: the highlighter looks for
//! lines like errors and the outline folds the output, in one pass and in output order.
//!
//! One [`SharedScanner`] is fed by whoever holds the text next (the capture until a spill file
//! opens, then the file's writer thread), so each piece is scanned once; the outline learns
//! which of its lines the highlighter counted, so a preview's counts of what it omits are
//! exact. The search for the highlighter's candidate lines, much of the work, and the shapes
//! of the lines over an output's first MiBs, need nothing but the text: the capture's thread
//! finds them for a batch it hands the writer while the writer is still at an earlier one
//! (it would only wait for the queue), and else leaves them to the writer, so whichever
//! thread has the time does that work.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::engine::highlight::{CandidateLines, Findings, Highlighter, LineShapes, Patterns};
use crate::engine::outline::{Outline, OutlineView};
use crate::storage::spill::{Prepared, Share, TextReader};

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
    /// The byte of output before which lines' shapes are still wanted
    /// ([`Highlighter::shapes_before`] as the scan last left it): a piece prepared ahead of
    /// the scan is not shaped for nothing past it (in a log with no crowd of alike lines, the
    /// pieces in flight when the scan found none took 4 M instructions of shapes, 20 M more
    /// with pieces twice as large).
    shapes_before: AtomicU64,
}

/// What was found in a piece before it is scanned (on the capture's thread, or on the writer's
/// just before): its candidate lines and, over the output's first MiBs, its lines' shapes.
#[derive(Debug)]
pub struct Found {
    lines: CandidateLines,
    shapes: Option<LineShapes>,
}

impl SharedScanner {
    /// A scanner for previews of at most `max_lines` lines and `max_bytes` bytes, looking for
    /// highlights with `patterns` (`None`: none).
    pub fn new(patterns: Option<Patterns>, max_lines: usize, max_bytes: usize) -> SharedScanner {
        let highlighter = patterns.clone().map(Highlighter::new);
        let shapes_before = highlighter.as_ref().map_or(0, Highlighter::shapes_before);
        let scanner = Scanner {
            highlighter,
            outline: Outline::new(max_lines, max_bytes),
            lines: Vec::new(),
            last_is_candidate: false,
        };
        SharedScanner(Arc::new(Shared {
            scanner: Mutex::new(scanner),
            patterns,
            found_to: AtomicU64::new(0),
            shapes_before: AtomicU64::new(shapes_before),
        }))
    }

    /// What can be found in `text`, the next piece of output, without the lock, on the
    /// caller's thread, for [`SharedScanner::write_found`] (nothing when highlights are off).
    pub fn found_in(&self, text: &str) -> Option<Found> {
        let piece = self.piece(text)?;
        self.find(piece, text)
    }

    /// Where `text`, the next piece of output, sits in the output: the one part of what
    /// [`SharedScanner::found_in`] finds that depends on the pieces before it, so taken in
    /// output order, while the finding itself may wait for another thread (`None` when
    /// highlights are off).
    fn piece(&self, text: &str) -> Option<Piece> {
        let at = self
            .0
            .found_to
            .fetch_add(text.len() as u64, Ordering::Relaxed);
        self.0.patterns.as_ref().map(|_| Piece { at })
    }

    /// What [`SharedScanner::found_in`] finds in `text`, the piece `piece` says where it sits.
    fn find(&self, piece: Piece, text: &str) -> Option<Found> {
        let patterns = self.0.patterns.as_ref()?;
        let before = self.0.shapes_before.load(Ordering::Relaxed);
        Some(Found {
            lines: patterns.candidate_lines(text),
            shapes: LineShapes::of(text, piece.at, before),
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
            self.0
                .shapes_before
                .store(h.shapes_before(), Ordering::Relaxed);
        }
        s.outline.write(text, newlines, &s.lines);
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

/// A piece of output whose candidate lines and shapes are still to be found, by whichever
/// thread has the time.
#[derive(Debug)]
struct Piece {
    /// Where the piece starts in the output.
    at: u64,
}

/// What [`TextReader::prepare`] made of a piece: what was found in it, or only where it sits,
/// for the writer's thread to find the rest.
#[derive(Debug)]
enum Prepare {
    Found(Found),
    Later(Piece),
}

/// The spill's writer thread hands the scanner each piece of output as it writes it, with
/// what the capture's thread found in it, if it had the time; else the writer finds it.
impl TextReader for SharedScanner {
    fn prepare(&self, text: &str, share: Share) -> Option<Prepared> {
        let piece = self.piece(text)?;
        let prepare = match share {
            Share::Nothing => Prepare::Later(piece),
            Share::All => Prepare::Found(self.find(piece, text)?),
        };
        Some(Box::new(prepare))
    }

    fn read(&self, text: &str, newlines: u64, prepared: Option<Prepared>) {
        let prepared = prepared.and_then(|p| p.downcast::<Prepare>().ok());
        let found = prepared.and_then(|p| match *p {
            Prepare::Found(found) => Some(found),
            Prepare::Later(piece) => self.find(piece, text),
        });
        self.write_found(text, newlines, found.as_ref());
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::engine::normalise::count_newlines;

    /// What a scanner made of `pieces`, each prepared on the sender's thread as far as `shares`
    /// says (in turn), every piece prepared before the one ahead of it is read, as a sender
    /// does while the writer is busy.
    fn scanned(pieces: &[String], shares: &[Share]) -> String {
        let scanner = SharedScanner::new(Some(Patterns::defaults()), 12, 600);
        let mut ahead = None;
        for (piece, &share) in pieces.iter().zip(shares.iter().cycle()) {
            let prepared = scanner.prepare(piece, share);
            if let Some((text, prepared)) = ahead.replace((piece, prepared)) {
                scanner.read(text, count_newlines(text), prepared);
            }
        }
        if let Some((text, prepared)) = ahead {
            scanner.read(text, count_newlines(text), prepared);
        }
        scanner.finish();
        format!("{:?}", scanner.snapshot())
    }

    #[test]
    fn pieces_are_not_shaped_once_the_shapes_are_no_longer_counted() {
        let scanner = SharedScanner::new(Some(Patterns::defaults()), 12, 600);
        let shaped = |scanner: &SharedScanner| {
            let found = scanner
                .found_in("one more line\n")
                .expect("highlights are on");
            found.shapes.is_some()
        };
        assert!(shaped(&scanner));
        // Distinct lines (no crowd of alike ones, no digits) past the first MiB, long enough
        // not to fill the shapes' table.
        let mut written = 0;
        for i in 0u64.. {
            let word: String = format!("{i:x}")
                .chars()
                .map(|c| char::from(b'g' + c.to_digit(16).unwrap() as u8))
                .collect();
            let piece = format!("message {word} arrived{}\n", " and was read".repeat(12));
            scanner.write(&piece, 1);
            written += piece.len();
            if written > 2 << 20 {
                break;
            }
        }
        assert!(!shaped(&scanner));
    }

    #[test]
    fn pieces_past_the_check_for_a_crowd_are_shaped_ahead_once_it_found_one() {
        let scanner = SharedScanner::new(Some(Patterns::defaults()), 12, 600);
        let line = "the same line of a crowd, again and again\n";
        let first = line.repeat((3 << 20) / line.len() / 2);
        let ahead = scanner.found_in(&first).expect("highlights are on");
        assert!(
            ahead.shapes.is_some(),
            "the first piece starts before the check"
        );
        // Found before the scan reached the check for a crowd: left to the scan.
        let next = scanner.found_in(line).expect("highlights are on");
        assert!(next.shapes.is_none());
        scanner.write_found(&first, count_newlines(&first), Some(&ahead));
        scanner.write_found(line, 1, Some(&next));
        // The scan found a crowd: shapes are counted on, and found ahead again.
        assert!(
            scanner
                .found_in(line)
                .expect("highlights are on")
                .shapes
                .is_some()
        );
    }

    fn line() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => "[a-z]{1,8} [0-9]{1,4} (ok|done)",
            1 => "error: [a-z ]{1,12}",
            1 => "  [a-z]{1,6}\\.py:[0-9]{1,3}: [A-Z][a-z]{2,8}Error",
            1 => "WARNING: [A-Z ]{3,12}",
            // Literals found only at a line's start, which may start a piece.
            1 => "(Traceback|npm ERR!|E   |fatal: |make: \\*\\*\\*)[a-z ]{0,8}",
        ]
    }

    proptest! {
        /// Whether a piece's candidate lines and shapes were found on the sender's thread or
        /// on the writer's changes nothing the scanner makes of the output: it is what the
        /// scanner makes of the pieces written to it one by one.
        #[test]
        fn where_a_piece_is_prepared_changes_nothing(
            lines in prop::collection::vec(line(), 0..60),
            size in 1usize..200,
            shares in prop::collection::vec(
                prop_oneof![Just(Share::Nothing), Just(Share::All)],
                1..6,
            ),
        ) {
            let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
            let pieces: Vec<String> = text
                .as_bytes()
                .chunks(size)
                .map(|c| String::from_utf8(c.to_vec()).expect("ASCII"))
                .collect();
            let written = SharedScanner::new(Some(Patterns::defaults()), 12, 600);
            for piece in &pieces {
                written.write(piece, count_newlines(piece));
            }
            written.finish();
            prop_assert_eq!(scanned(&pieces, &shares), format!("{:?}", written.snapshot()));
        }
    }
}
