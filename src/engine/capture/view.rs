//! What a capture lends a preview: its head and tail, its counts, where its spill stands, its
//! highlights and its outline, borrowed for as long as the preview is being built.

use std::path::Path;

use super::Limits;
use crate::engine::highlight::{Findings, KindMemo, Patterns};
use crate::engine::outline::OutlineView;
use crate::protocol::SpillCap;

/// Why the spill file does not hold the whole output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpillProblem<'a> {
    /// The file could not be created at all.
    NotCreated { error: &'a str },
    /// Writing stopped after `written` bytes.
    Incomplete { written: u64, error: &'a str },
}

/// How the command that wrote the output ended, as far as the preview's builder knows (a
/// preview of a run still going, or of `spillway truncate`'s input, does not): under a tight
/// budget it weighs the needles (see `preview::pick`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Outcome {
    #[default]
    Unknown,
    /// Exited with status 0.
    Succeeded,
    /// Exited with another status, was killed by a signal, or was stopped.
    Failed,
}

impl Outcome {
    /// The end of a command that exited with `code` (`None`: a signal ended it).
    pub fn of_exit(code: Option<i32>) -> Outcome {
        if code == Some(0) {
            Outcome::Succeeded
        } else {
            Outcome::Failed
        }
    }
}

/// A borrowed snapshot of a capture, for building a preview.
#[derive(Debug, Clone)]
pub struct CaptureView<'a> {
    /// The limits the capture was sized for.
    pub limits: Limits,
    /// The first bytes of the output, at most `max_bytes`.
    pub head: &'a [u8],
    /// The last bytes of the output, at most `max_bytes`.
    pub tail: &'a [u8],
    /// Whether `tail` begins at the start of a line.
    pub tail_at_line_start: bool,
    pub total_bytes: u64,
    pub total_lines: u64,
    /// Length of line 1 without its newline (so far, if it has not ended).
    pub first_line_bytes: u64,
    /// The last bytes of line 1 (at most half of `max_bytes`), once it has ended; empty
    /// before. With the head, which holds its start, a preview shows both ends of a line 1
    /// too long for its share of the budget.
    pub first_line_end: &'a [u8],
    /// Length of the last line without its newline.
    pub last_line_bytes: u64,
    pub spill_path: Option<&'a Path>,
    /// Where in the spill file this output starts: 0 but for a capture of part of a spill
    /// ([`crate::engine::snapshot::RangeCapture`]).
    pub spill_from: u64,
    /// Bytes already in the spill file (counted from the file's start), which a preview may
    /// read back.
    pub spill_in_file: u64,
    pub spill_problem: Option<SpillProblem<'a>>,
    /// Set when the spill file reached its cap and stopped growing.
    pub spill_capped: Option<SpillCap>,
    /// The patterns of lines that look like errors, when highlights are on.
    pub highlights: Option<&'a Patterns>,
    /// The lines found to match them so far.
    pub findings: Findings,
    /// The output folded, its middle dropped once it no longer fits (see [`crate::engine::outline`]).
    pub outline: OutlineView,
    /// How the command that wrote it ended.
    pub outcome: Outcome,
    /// The kinds of its lines that look like errors, as a preview asks for them.
    pub kinds: KindMemo,
}

impl CaptureView<'_> {
    /// Whether the head holds the whole output.
    pub fn is_whole(&self) -> bool {
        self.head.len() as u64 == self.total_bytes
    }

    /// Whether the output ends with a newline.
    pub fn ends_with_newline(&self) -> bool {
        self.tail.last() == Some(&b'\n')
    }
}
