//! What the outline stores between pieces: the open run, the segments closed since, their
//! lines' texts (copied out of a piece only when they must outlive it), and the gaps between
//! them.

use super::similar::cut;
use super::tail::recycle;
use super::{Cost, Fold, LineText, REPEAT_MIN, SIMILAR_MIN, shown};

/// What was dropped between the head and the tail store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gap {
    pub lines: u64,
    pub bytes: u64,
    pub candidates: u64,
}

impl Gap {
    pub(super) fn add(&mut self, lines: u64, bytes: u64, candidates: u64) {
        self.lines += lines;
        self.bytes += bytes;
        self.candidates += candidates;
    }
}

/// A line's text while the outline works on a piece: where the line lies in the piece, or
/// kept (copied, cut to the cap). Most lines of a long output end up only counted in the gap,
/// so a line is copied only once it must outlive the piece: when it joins the head store,
/// when it is among the latest segments a preview could show from the end, or when it belongs
/// to the run still open as the piece ends.
#[derive(Debug, Clone)]
pub(super) enum Text {
    /// Bytes `start..end` of the piece: a whole line, without its newline.
    At(usize, usize),
    Kept(LineText),
}

impl Default for Text {
    fn default() -> Text {
        Text::Kept(LineText::default())
    }
}

impl Text {
    /// The line's real length, without its newline.
    pub(super) fn len(&self) -> u64 {
        match self {
            Text::At(start, end) => (end - start) as u64,
            Text::Kept(line) => line.len,
        }
    }

    /// The line as it would be kept: cut to `cap`, with its real length.
    pub(super) fn get<'a>(&'a self, piece: &'a str, cap: usize) -> LineRef<'a> {
        match self {
            Text::At(start, end) => LineRef {
                text: cut(&piece[*start..*end], cap),
                len: (end - start) as u64,
            },
            Text::Kept(line) => LineRef {
                text: &line.text,
                len: line.len,
            },
        }
    }

    /// The kept text. Between writes every text is kept: [`Outline::write`] copies the open
    /// run's lines out of each piece before it returns.
    pub(super) fn kept(&self) -> &LineText {
        match self {
            Text::Kept(line) => line,
            Text::At(..) => unreachable!("a line of a piece outlived its write"),
        }
    }
}

/// A line's text as it would be kept, borrowed: compared without copying it.
#[derive(Debug, Clone, Copy)]
pub(super) struct LineRef<'a> {
    pub(super) text: &'a str,
    pub(super) len: u64,
}

impl LineRef<'_> {
    pub(super) fn is_whole(&self) -> bool {
        self.text.len() as u64 == self.len
    }
}

/// The run being built: its first and last line, and its other lines while it is too short
/// to fold (they become single lines if it ends that way).
#[derive(Debug, Default)]
pub(super) struct Run {
    pub(super) fold: Option<Fold>,
    pub(super) first: u64,
    pub(super) lines: u64,
    pub(super) bytes: u64,
    pub(super) candidates: u64,
    pub(super) head: Text,
    pub(super) head_candidate: bool,
    /// Lines 2 and on, while the run is shorter than its fold needs.
    pub(super) members: Vec<(Text, bool)>,
    pub(super) last: Text,
}

impl Run {
    /// Whether the run is long enough to show as one fold.
    pub(super) fn is_folded(&self) -> bool {
        match self.fold {
            Some(Fold::Repeat) => self.lines >= REPEAT_MIN,
            Some(Fold::Similar) => self.lines >= SIMILAR_MIN,
            _ => false,
        }
    }

    /// The folded run as a closed segment, taking its texts.
    pub(super) fn close_folded(&mut self) -> Pending {
        let fold = self.fold.unwrap_or(Fold::Line);
        Pending {
            first: self.first,
            lines: self.lines,
            bytes: self.bytes,
            candidates: self.candidates,
            fold,
            head: std::mem::take(&mut self.head),
            last: if fold == Fold::Similar {
                std::mem::take(&mut self.last)
            } else {
                Text::default()
            },
        }
    }
}

/// A closed segment whose texts may still lie in the piece being written.
#[derive(Debug)]
pub(super) struct Pending {
    pub(super) first: u64,
    pub(super) lines: u64,
    pub(super) bytes: u64,
    pub(super) candidates: u64,
    pub(super) fold: Fold,
    pub(super) head: Text,
    pub(super) last: Text,
}

impl Pending {
    pub(super) fn line(first: u64, text: Text, candidate: bool) -> Pending {
        Pending {
            first,
            lines: 1,
            bytes: text.len() + 1,
            candidates: u64::from(candidate),
            fold: Fold::Line,
            head: text,
            last: Text::default(),
        }
    }

    pub(super) fn cost(&self) -> Cost {
        shown(self.fold, self.head.len(), self.last.len())
    }
}

/// A segment closed while the head store is full, or a run of them: in the piece being written
/// while it waits for the tail store, then in the tail store.
#[derive(Debug)]
pub(super) enum Closed {
    /// Lines `first..first + lines`, in bytes `start..=end` of the piece or of the tail
    /// store's text (`end` is the last one's newline), each a segment of one line. Most of a
    /// long output closes so, and costs nothing more unless the tail store keeps it.
    Lines {
        first: u64,
        lines: u64,
        start: usize,
        end: usize,
    },
    /// A folded run, or a line kept from an earlier piece (or too long to keep whole); its
    /// texts are kept once it is in the tail store.
    Segment(Pending),
}

impl Closed {
    /// Lines and bytes a preview shows of it.
    pub(super) fn cost(&self) -> Cost {
        match self {
            Closed::Segment(p) => p.cost(),
            &Closed::Lines {
                lines, start, end, ..
            } => Cost {
                lines,
                bytes: (end + 1 - start) as u64,
            },
        }
    }

    /// Counts it in the gap: no preview could show it. `piece` holds its lines.
    pub(super) fn omit(self, piece: Piece<'_>, gap: &mut Gap, spare: &mut Vec<LineText>) {
        match self {
            Closed::Lines {
                lines, start, end, ..
            } => {
                let candidates = piece.candidates_in(start, end);
                gap.add(lines, (end + 1 - start) as u64, candidates);
            }
            Closed::Segment(p) => {
                gap.add(p.lines, p.bytes, p.candidates);
                recycle(spare, p.head);
                recycle(spare, p.last);
            }
        }
    }
}

/// The piece being written, and where the highlighter's candidate lines in it start.
#[derive(Debug, Clone, Copy)]
pub(super) struct Piece<'a> {
    pub(super) text: &'a str,
    pub(super) candidates: &'a [usize],
}

impl<'a> Piece<'a> {
    /// The lines in bytes `start..=end` (which end with a newline): where each starts and
    /// ends, and whether it is a candidate.
    pub(super) fn lines(
        self,
        start: usize,
        end: usize,
    ) -> impl Iterator<Item = (usize, usize, bool)> + 'a {
        let from = self.candidates.partition_point(|&c| c < start);
        let mut next = self.candidates[from..].iter().copied().peekable();
        let mut at = start;
        memchr::memchr_iter(b'\n', &self.text.as_bytes()[start..=end]).map(move |newline| {
            let line = (at, start + newline, next.next_if_eq(&at).is_some());
            at = start + newline + 1;
            line
        })
    }

    /// How many candidate lines start in bytes `start..=end`.
    fn candidates_in(&self, start: usize, end: usize) -> u64 {
        let before = self.candidates.partition_point(|&c| c < start);
        let through = self.candidates.partition_point(|&c| c <= end);
        (through - before) as u64
    }
}
