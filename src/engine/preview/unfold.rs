//! Opening similar runs where the budget has room.
//!
//! The outline folds a run of lines that differ only in their numbers to its first line, a
//! marker and its last line, and keeps no more of it: memory stays bounded however long the run
//! is. But a server log whose every line differs in its numbers is one such run, and a preview
//! of it that shows two lines of a 51,200-byte budget hides what it had room to show (the
//! recent lines above all). So after the selection, whatever budget is left opens the similar
//! runs the preview shows from their outer ends, and the rest of each run stays one honest
//! fold between them. The lines come from the capture's head and tail buffers and, for a run
//! far from both ends, from the spill file ([`super::lines`]).

use std::borrow::Cow;

use super::lines::Lines;
use super::selection::Selection;
use crate::engine::capture::CaptureView;
use crate::engine::outline::{Fold, LineText, Segment, similar};
use crate::protocol::Direction;

/// What is left of a budget.
#[derive(Debug, Clone, Copy)]
pub(super) struct Room {
    pub(super) lines: usize,
    pub(super) bytes: usize,
}

impl Room {
    fn take(&mut self, lines: usize, bytes: usize) -> bool {
        if lines > self.lines || bytes > self.bytes {
            return false;
        }
        self.lines -= lines;
        self.bytes -= bytes;
        true
    }
}

/// Which end of a run a step opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Front,
    Back,
}

/// A similar run being opened: the lines opened at each end and the fold left between them.
#[derive(Debug)]
struct Opening {
    /// Index of the run in the shown segments.
    index: usize,
    /// Lines opened at its front (in order) and at its back (last line first), each with the
    /// byte offset of its start.
    front: Vec<(u64, LineText)>,
    back: Vec<(u64, LineText)>,
    /// What is left folded: its first and last line's offsets and texts.
    rest_first: (u64, LineText),
    rest_last: (u64, LineText),
    /// Set once neither end can open further.
    blocked: [bool; 2],
}

impl Opening {
    fn of(index: usize, start: u64, run: &Segment) -> Opening {
        let end = start + run.bytes;
        Opening {
            index,
            front: Vec::new(),
            back: Vec::new(),
            rest_first: (start, run.head.clone()),
            rest_last: (end - run.last.len - 1, run.last.clone()),
            blocked: [false; 2],
        }
    }

    /// Lines still folded, counting the shown first and last.
    fn rest_lines(&self, run: &Segment) -> u64 {
        run.lines - self.front.len() as u64 - self.back.len() as u64
    }
}

/// Opens the similar runs among the selection's shown segments while `room` lasts: a head
/// preview opens runs from their front, a tail one from their back, `both` alternates.
pub(super) fn open_folds(
    view: &CaptureView<'_>,
    s: &mut Selection,
    direction: Direction,
    room: Room,
) {
    let Some(starts) = segment_starts(view, s) else {
        return;
    };
    let segments: Vec<&Segment> = s.segments().collect();
    let runs: Vec<usize> = (0..segments.len())
        .filter(|&i| segments[i].fold == Fold::Similar && segments[i].ended)
        .collect();
    if runs.is_empty() {
        return;
    }
    let sides: &[Side] = match direction {
        Direction::Head => &[Side::Front],
        Direction::Tail => &[Side::Back],
        Direction::Both => &[Side::Back, Side::Front],
    };
    let mut room = room;
    let mut lines = Lines::new(view);
    let mut openings: Vec<Opening> = Vec::new();
    // Front steps work on the earliest run whose front is not done, back steps on the latest
    // whose back is not done; each step either spends room or moves on, so this ends.
    let (mut front_at, mut back_at) = (0usize, runs.len());
    loop {
        let mut moved = false;
        for &side in sides {
            loop {
                let current = match side {
                    Side::Front => runs.get(front_at).copied(),
                    Side::Back => back_at.checked_sub(1).map(|i| runs[i]),
                };
                let Some(index) = current else { break };
                let seg = segments[index];
                let at = match openings.iter().position(|o| o.index == index) {
                    Some(at) => at,
                    None => {
                        openings.push(Opening::of(index, starts[index], seg));
                        openings.len() - 1
                    }
                };
                if step(&mut lines, seg, &mut openings[at], side, &mut room) {
                    moved = true;
                    break;
                }
                openings[at].blocked[side as usize] = true;
                match side {
                    Side::Front => front_at += 1,
                    Side::Back => back_at -= 1,
                }
            }
        }
        if !moved {
            break;
        }
    }
    apply(view, s, openings);
}

/// The byte offset in the output of each shown segment's first line, or `None` when the
/// outline and the buffers do not add up (nothing is opened then).
fn segment_starts(view: &CaptureView<'_>, s: &Selection) -> Option<Vec<u64>> {
    let mut starts = Vec::with_capacity(s.head.len() + s.tail.len());
    let mut at = 0u64;
    for seg in &s.head {
        starts.push(at);
        at += seg.bytes;
    }
    let tail_bytes: u64 = s.tail.iter().map(|seg| seg.bytes).sum();
    let mut at_tail = view.total_bytes.checked_sub(tail_bytes)?;
    if at_tail < at {
        return None;
    }
    for seg in &s.tail {
        starts.push(at_tail);
        at_tail += seg.bytes;
    }
    Some(starts)
}

/// Opens one more line of `run` at `side`, if it is in a buffer and fits the room.
fn step(
    lines: &mut Lines<'_, '_>,
    run: &Segment,
    o: &mut Opening,
    side: Side,
    room: &mut Room,
) -> bool {
    if o.blocked[side as usize] {
        return false;
    }
    let rest = o.rest_lines(run);
    if rest <= 2 {
        return false; // nothing is folded any more
    }
    if rest == 3 {
        return open_all(lines, run, o, room);
    }
    match side {
        Side::Front => {
            let next_at = o.rest_first.0 + o.rest_first.1.len + 1;
            let Some(next) = lines.at(next_at, room.bytes).filter(|l| of_the_run(run, l)) else {
                return false;
            };
            if !room.take(1, next.len as usize + 1) {
                return false;
            }
            let first = std::mem::replace(&mut o.rest_first, (next_at, next));
            o.front.push(first);
        }
        Side::Back => {
            let Some((prev_at, prev)) = lines
                .before(o.rest_last.0, room.bytes)
                .filter(|(_, l)| of_the_run(run, l))
            else {
                return false;
            };
            if !room.take(1, prev.len as usize + 1) {
                return false;
            }
            let last = std::mem::replace(&mut o.rest_last, (prev_at, prev));
            o.back.push(last);
        }
    }
    true
}

/// Whether `line`, read for `run`, is like its first line, as every line of a similar run is.
/// The spill holds the output by construction; this keeps the marker honest even if the file
/// was changed under the daemon. (A first line kept only in part cannot be compared.)
fn of_the_run(run: &Segment, line: &LineText) -> bool {
    !run.head.is_whole() || similar(&run.head.text, &line.text)
}

/// Shows every line still folded, when each is in a buffer and all fit. What is left of a
/// long run may be folded down to one hidden line (the marker still says only what is so:
/// the lines are the run's), which is where this takes over.
fn open_all(lines: &mut Lines<'_, '_>, run: &Segment, o: &mut Opening, room: &mut Room) -> bool {
    let mut hidden = Vec::new();
    let mut at = o.rest_first.0 + o.rest_first.1.len + 1;
    while at < o.rest_last.0 {
        let Some(line) = lines.at(at, room.bytes).filter(|l| of_the_run(run, l)) else {
            return false;
        };
        at += line.len + 1;
        hidden.push((at - line.len - 1, line));
    }
    let bytes: u64 = hidden.iter().map(|(_, l)| l.len + 1).sum();
    if at != o.rest_last.0 || !room.take(hidden.len(), bytes as usize) {
        return false;
    }
    let first = o.rest_first.clone();
    o.front.push(first);
    o.front.extend(hidden);
    // The fold is gone: its last line is the first of the back's.
    let last = o.rest_last.clone();
    o.back.push(last);
    o.blocked = [true; 2];
    true
}

/// Replaces each opened run by its opened lines around what stays folded.
fn apply(view: &CaptureView<'_>, s: &mut Selection, mut openings: Vec<Opening>) {
    openings.retain(|o| !o.front.is_empty() || !o.back.is_empty());
    let head_count = s.head.len();
    let mut all: Vec<Cow<'_, Segment>> = s.head.drain(..).chain(s.tail.drain(..)).collect();
    // From the last run back, so the indices of the ones before stay valid.
    openings.sort_by_key(|o| std::cmp::Reverse(o.index));
    let mut head_growth = 0;
    for o in openings {
        let index = o.index;
        let pieces = split(view, &all[index], o);
        if index < head_count {
            head_growth += pieces.len() - 1;
        }
        all.splice(index..=index, pieces.into_iter().map(Cow::Owned));
    }
    s.tail = all.split_off(head_count + head_growth);
    s.head = all;
}

/// A run as its opened lines, the fold left between them (if any), and its back lines.
fn split(view: &CaptureView<'_>, run: &Segment, o: Opening) -> Vec<Segment> {
    let is_candidate = |text: &str| view.highlights.is_some_and(|p| p.is_match(text));
    let line = |number: u64, text: LineText| Segment {
        first: number,
        lines: 1,
        bytes: text.len + 1,
        candidates: u64::from(is_candidate(&text.text)),
        fold: Fold::Line,
        head: text,
        last: LineText::default(),
        ended: true,
    };
    let front_count = o.front.len() as u64;
    let back_count = o.back.len() as u64;
    let mut pieces: Vec<Segment> = Vec::new();
    for (k, (_, text)) in o.front.into_iter().enumerate() {
        pieces.push(line(run.first + k as u64, text));
    }
    let rest_lines = run.lines - front_count - back_count;
    let mut back: Vec<Segment> = o
        .back
        .into_iter()
        .enumerate()
        .map(|(k, (_, text))| line(run.last_line() - k as u64, text))
        .collect();
    back.reverse();
    if rest_lines > 0 {
        let opened: u64 = pieces.iter().chain(&back).map(|p| p.candidates).sum();
        let rest_bytes = o.rest_last.0 + o.rest_last.1.len + 1 - o.rest_first.0;
        pieces.push(Segment {
            first: run.first + front_count,
            lines: rest_lines,
            bytes: rest_bytes,
            candidates: run.candidates.saturating_sub(opened),
            fold: Fold::Similar,
            head: o.rest_first.1,
            last: o.rest_last.1,
            ended: true,
        });
    }
    pieces.extend(back);
    pieces
}
