//! What a preview reads of an outline: a copy of its segments (head, gap, tail), with the
//! line still being written added as it stands.

use super::similar::cut;
use super::store::Gap;
use super::{Fold, LineText, Segment};

/// A copy of an outline's segments, for a preview: the head store's, then (after the gap, if
/// anything was dropped) the tail store's and the run in progress.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutlineView {
    pub head: Vec<Segment>,
    pub gap: Gap,
    pub tail: Vec<Segment>,
}

impl OutlineView {
    /// All segments when nothing was dropped, in order.
    pub fn is_complete(&self) -> bool {
        self.gap.lines == 0
    }

    /// The view with `line` (a line still being written, without its newline) at its end,
    /// unless the view's own last line is still open, in which case it continues it.
    pub fn with_pending(mut self, line: &str, cap: usize, candidate: bool) -> OutlineView {
        if line.is_empty() {
            return self;
        }
        let last = self.tail.last().or(self.head.last());
        let (first, bytes) = match last {
            Some(s) if !s.ended => {
                // Rare: a capture that ended mid-line; the pending text continues it.
                let s = s.clone();
                let mut text = s.head.text.clone();
                text.push_str(line);
                let seg = single(s.first, &text, s.head.len + line.len() as u64, false, cap);
                *self.last_mut() = Segment {
                    candidates: u64::from(candidate),
                    ..seg
                };
                return self;
            }
            Some(s) => (s.last_line() + 1, line.len() as u64),
            None => (1, line.len() as u64),
        };
        let seg = Segment {
            candidates: u64::from(candidate),
            ..single(first, line, bytes, false, cap)
        };
        if self.is_complete() && self.tail.is_empty() {
            self.head.push(seg);
        } else {
            self.tail.push(seg);
        }
        self
    }

    fn last_mut(&mut self) -> &mut Segment {
        match self.tail.last_mut() {
            Some(s) => s,
            None => self.head.last_mut().expect("a last segment"),
        }
    }

    /// Every segment in order (the gap, if any, lies between `head` and `tail`).
    pub fn segments(&self) -> impl Iterator<Item = &Segment> {
        self.head.iter().chain(self.tail.iter())
    }
}

pub(super) fn single(first: u64, line: &str, len: u64, ended: bool, cap: usize) -> Segment {
    Segment {
        first,
        lines: 1,
        bytes: len + u64::from(ended),
        candidates: 0,
        fold: Fold::Line,
        head: LineText {
            text: cut(line, cap).to_string(),
            len,
        },
        last: LineText::default(),
        ended,
    }
}
