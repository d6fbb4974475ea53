//! The outline's tail: the latest segments, kept within the preview's limits as the output
//! streams, copied only when they must outlive the piece they came in.

use std::collections::VecDeque;

use super::similar::{cut, may_be_similar, similar_bytes};
use super::{Closed, Cost, Fold, Gap, LineText, Pending, Piece, SPARE_TEXTS, Segment, Text};

/// The tail store: the latest closed segments, in order, as many as a preview could show
/// from the end. Their lines are copied out of each piece at once, into one text.
#[derive(Debug, Default)]
pub(super) struct Tail {
    /// Runs of lines in `text`, and segments with texts of their own.
    pub(super) closed: VecDeque<Closed>,
    pub(super) text: String,
    /// Where the candidate lines in `text` start, in increasing order.
    pub(super) candidates: Vec<usize>,
}

impl Tail {
    pub(super) fn piece(&self) -> Piece<'_> {
        Piece {
            text: &self.text,
            candidates: &self.candidates,
        }
    }

    /// Takes a closed segment of `piece`, copying what it keeps of it: the bytes of its lines,
    /// or its texts. A line longer than `cap` is kept cut, as a segment of its own.
    pub(super) fn push(
        &mut self,
        closed: Closed,
        piece: Piece<'_>,
        cap: usize,
        spare: &mut Vec<LineText>,
    ) {
        let (first, lines, start, end) = match closed {
            Closed::Segment(mut p) => {
                p.head = Text::Kept(keep(p.head, piece.text, cap, spare));
                p.last = Text::Kept(keep(p.last, piece.text, cap, spare));
                self.closed.push_back(Closed::Segment(p));
                return;
            }
            Closed::Lines {
                first,
                lines,
                start,
                end,
            } => (first, lines, start, end),
        };
        if longest_line_within(&piece.text.as_bytes()[start..=end], cap) {
            return self.push_lines(first, lines, start, end, piece);
        }
        for (i, (line_start, line_end, candidate)) in piece.lines(start, end).enumerate() {
            let number = first + i as u64;
            if line_end - line_start <= cap {
                self.push_lines(number, 1, line_start, line_end, piece);
            } else {
                let text = keep(Text::At(line_start, line_end), piece.text, cap, spare);
                let line = Pending::line(number, Text::Kept(text), candidate);
                self.closed.push_back(Closed::Segment(line));
            }
        }
    }

    /// Copies `lines` lines from line `first` of `piece`, in its bytes `start..=end`, joining
    /// the run of lines before them if they follow it.
    fn push_lines(&mut self, first: u64, lines: u64, start: usize, end: usize, piece: Piece<'_>) {
        let at = self.text.len();
        self.text.push_str(&piece.text[start..=end]);
        let from = piece.candidates.partition_point(|&c| c < start);
        let through = piece.candidates.partition_point(|&c| c <= end);
        let moved = piece.candidates[from..through]
            .iter()
            .map(|&c| c - start + at);
        self.candidates.extend(moved);
        match self.closed.back_mut() {
            Some(Closed::Lines {
                first: before,
                lines: count,
                end: last,
                ..
            }) if *last + 1 == at && *before + *count == first => {
                *count += lines;
                *last = at + end - start;
            }
            _ => self.closed.push_back(Closed::Lines {
                first,
                lines,
                start: at,
                end: at + end - start,
            }),
        }
    }

    /// Drops every segment, counting it in the gap.
    pub(super) fn clear(&mut self, gap: &mut Gap, spare: &mut Vec<LineText>) {
        let piece = Piece {
            text: &self.text,
            candidates: &self.candidates,
        };
        for c in self.closed.drain(..) {
            c.omit(piece, gap, spare);
        }
        self.text.clear();
        self.candidates.clear();
    }

    /// Drops the oldest segments no preview could show: all but the shortest run of the
    /// latest that reaches `limits`. The text they leave unused goes once it is half the
    /// text, so each byte is moved at most once on average.
    pub(super) fn trim(&mut self, limits: (u64, u64), gap: &mut Gap, spare: &mut Vec<LineText>) {
        let Some(from) = split_latest(&mut self.closed, &self.text, limits) else {
            return;
        };
        let piece = Piece {
            text: &self.text,
            candidates: &self.candidates,
        };
        for c in self.closed.drain(..from) {
            c.omit(piece, gap, spare);
        }
        let unused = self
            .closed
            .iter()
            .find_map(|c| match c {
                Closed::Lines { start, .. } => Some(*start),
                Closed::Segment(_) => None,
            })
            .unwrap_or(self.text.len());
        if unused > 0 && unused >= self.text.len() / 2 {
            self.text.drain(..unused);
            self.candidates.retain(|&c| c >= unused);
            for c in &mut self.candidates {
                *c -= unused;
            }
            for c in &mut self.closed {
                if let Closed::Lines { start, end, .. } = c {
                    *start -= unused;
                    *end -= unused;
                }
            }
        }
    }

    /// Whether its segments, as a preview shows them, reach `limits`: a tail store that does
    /// holds the shortest run of the latest that reaches them, and no older segment could be
    /// shown from the end.
    pub(super) fn reaches(&self, limits: (u64, u64)) -> bool {
        let mut cost = Cost::default();
        self.closed.iter().rev().any(|c| {
            cost.add(c.cost());
            cost.reaches(limits)
        })
    }

    /// Its segments, copied.
    pub(super) fn segments(&self, cap: usize, mut emit: impl FnMut(Segment)) {
        for c in &self.closed {
            match c {
                &Closed::Lines {
                    first, start, end, ..
                } => {
                    for (i, (line_start, line_end, candidate)) in
                        self.piece().lines(start, end).enumerate()
                    {
                        let line = &self.text[line_start..line_end];
                        let text = LineText {
                            text: cut(line, cap).to_string(),
                            len: line.len() as u64,
                        };
                        emit(line_segment(first + i as u64, text, candidate));
                    }
                }
                Closed::Segment(p) => emit(Segment {
                    first: p.first,
                    lines: p.lines,
                    bytes: p.bytes,
                    candidates: p.candidates,
                    fold: p.fold,
                    head: p.head.kept().clone(),
                    last: p.last.kept().clone(),
                    ended: true,
                }),
            }
        }
    }
}

/// Whether no line of `bytes` (complete lines) is longer than `cap`, found a window of `cap`
/// bytes at a time rather than line by line.
fn longest_line_within(bytes: &[u8], cap: usize) -> bool {
    let mut at = 0;
    while bytes.len() - at > cap {
        match memchr::memrchr(b'\n', &bytes[at..=at + cap]) {
            Some(newline) => at += newline + 1,
            None => return false,
        }
    }
    true
}

pub(super) fn line_segment(first: u64, text: LineText, candidate: bool) -> Segment {
    Segment {
        first,
        lines: 1,
        bytes: text.len + 1,
        candidates: u64::from(candidate),
        fold: Fold::Line,
        head: text,
        last: LineText::default(),
        ended: true,
    }
}

/// `text`, copied (cut to `cap`) out of `piece` if it is still there.
pub(super) fn keep(text: Text, piece: &str, cap: usize, spare: &mut Vec<LineText>) -> LineText {
    match text {
        Text::Kept(line) => line,
        Text::At(start, end) => {
            let mut line = spare.pop().unwrap_or_default();
            line.set(&piece[start..end], cap);
            line
        }
    }
}

/// Where the latest of `closed` that a preview could show from the end start: the shortest
/// run of them that reaches `limits`, a run of lines split where it must be. `None` when all
/// of them together fall short. `text` holds their lines.
pub(super) fn split_latest(
    closed: &mut VecDeque<Closed>,
    text: &str,
    limits: (u64, u64),
) -> Option<usize> {
    let mut cost = Cost::default();
    for i in (0..closed.len()).rev() {
        let (first, lines, start, end) = match &closed[i] {
            Closed::Segment(p) => {
                cost.add(p.cost());
                if cost.reaches(limits) {
                    return Some(i);
                }
                continue;
            }
            &Closed::Lines {
                first,
                lines,
                start,
                end,
            } => (first, lines, start, end),
        };
        let need = (limits.0 - cost.lines, limits.1 - cost.bytes);
        let Some((from, kept)) = latest_lines(&text.as_bytes()[start..=end], lines, need) else {
            cost.add(closed[i].cost());
            continue;
        };
        if kept == lines {
            return Some(i);
        }
        closed[i] = Closed::Lines {
            first,
            lines: lines - kept,
            start,
            end: start + from - 1,
        };
        let latest = Closed::Lines {
            first: first + lines - kept,
            lines: kept,
            start: start + from,
            end,
        };
        closed.insert(i + 1, latest);
        return Some(i + 1);
    }
    None
}

/// Where the shortest run of the last of `lines` complete lines in `bytes` that holds `need.0`
/// lines or `need.1` bytes (each line shown with its newline) starts, and how many lines it
/// holds; `None` if all of them fall short. Found from the byte count at once, not line by
/// line.
pub(super) fn latest_lines(bytes: &[u8], lines: u64, need: (u64, u64)) -> Option<(usize, u64)> {
    let (need_lines, need_bytes) = (need.0, usize::try_from(need.1).unwrap_or(usize::MAX));
    // The latest line start that leaves at least `need_bytes` after it, and its lines.
    debug_assert_eq!(count(bytes), lines, "the caller's count is wrong");
    let by_bytes = (need_bytes <= bytes.len()).then(|| {
        let at = memchr::memrchr(b'\n', &bytes[..bytes.len() - need_bytes]).map_or(0, |i| i + 1);
        // The shorter side is counted: a batch's tail is most of a small batch.
        let after = if at < bytes.len() / 2 {
            lines - count(&bytes[..at])
        } else {
            count(&bytes[at..])
        };
        (at, after)
    });
    let (from, held) = by_bytes.unwrap_or((0, lines));
    if held < need_lines {
        return by_bytes;
    }
    // The lines' limit comes first: skip the lines beyond what it needs.
    let skip = usize::try_from(held - need_lines).unwrap_or(usize::MAX);
    let from = match skip.checked_sub(1) {
        None => from,
        Some(nth) => {
            let newline = memchr::memchr_iter(b'\n', &bytes[from..]).nth(nth);
            from + newline.expect("a line to skip") + 1
        }
    };
    Some((from, need_lines))
}

/// The newlines in `bytes`.
pub(super) fn count(bytes: &[u8]) -> u64 {
    memchr::memchr_iter(b'\n', bytes).count() as u64
}

/// Whether line `b` may join a run whose only line is `a` (both whole lines of a piece, kept
/// cut to `cap`): what [`Outline::joins`] says of them, at the cost of a few compares for
/// most pairs of lines.
pub(super) fn may_join(a: &[u8], b: &[u8], cap: usize) -> bool {
    if a.len() > cap {
        return false; // neither identical nor similar to anything: only whole lines are
    }
    if a.len() == b.len() && a == b {
        return true;
    }
    b.len() <= cap && may_be_similar(a, b) && similar_bytes(a, b)
}

/// Keeps a dropped text's buffer for reuse, up to a few.
pub(super) fn recycle(spare: &mut Vec<LineText>, text: Text) {
    if let Text::Kept(line) = text
        && line.text.capacity() > 0
        && spare.len() < SPARE_TEXTS
    {
        spare.push(line);
    }
}
