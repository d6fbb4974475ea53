//! The run being built: whether a line joins it (repeat or similar), starting and extending
//! it, and closing it into the segments it becomes.

use super::similar::similar;
use super::store::{LineRef, Piece, Text};
use super::tail::{line_segment, recycle};
use super::{Fold, LineText, Outline, Segment};

impl Outline {
    /// How the run goes on if `line` joins it, or `None` if it ends the run.
    pub(super) fn joins(&self, line: LineRef<'_>, piece: &str) -> Option<Fold> {
        let run = &self.run;
        let head = run.head.get(piece, self.cap);
        // A run of one line keeps it as its head only (its `last` is set once it grows).
        let last = if run.lines == 1 {
            head
        } else {
            run.last.get(piece, self.cap)
        };
        let identical = last.is_whole() && line.len == last.len && line.text == last.text;
        match run.fold {
            None | Some(Fold::Repeat) if identical => Some(Fold::Repeat),
            None | Some(Fold::Similar)
                if head.is_whole() && line.is_whole() && similar(head.text, line.text) =>
            {
                Some(Fold::Similar)
            }
            _ => None,
        }
    }

    /// Starts the next run with `line` (the last one is closed).
    pub(super) fn start_run(&mut self, line: Text, candidate: bool) {
        let run = &mut self.run;
        run.fold = None;
        run.first = self.ended;
        run.lines = 1;
        run.bytes = line.len() + 1;
        run.candidates = u64::from(candidate);
        run.head = line;
        run.head_candidate = candidate;
    }

    pub(super) fn extend_run(&mut self, fold: Fold, line: Text, candidate: bool) {
        let run = &mut self.run;
        run.fold = Some(fold);
        run.lines += 1;
        run.bytes += line.len() + 1;
        run.candidates += u64::from(candidate);
        if run.is_folded() {
            for (text, _) in run.members.drain(..) {
                recycle(&mut self.spare, text);
            }
        } else {
            run.members.push((line.clone(), candidate));
        }
        let old = std::mem::replace(&mut run.last, line);
        recycle(&mut self.spare, old);
    }

    /// The run as segments (copies): one fold, or its lines one by one while it is too short.
    pub(super) fn run_segments(&self, mut emit: impl FnMut(Segment)) {
        let run = &self.run;
        if run.lines == 0 {
            return;
        }
        if run.is_folded() {
            let fold = run.fold.unwrap_or(Fold::Line);
            emit(Segment {
                first: run.first,
                lines: run.lines,
                bytes: run.bytes,
                candidates: run.candidates,
                fold,
                head: run.head.kept().clone(),
                last: if fold == Fold::Similar {
                    run.last.kept().clone()
                } else {
                    LineText::default()
                },
                ended: true,
            });
            return;
        }
        emit(line_segment(
            run.first,
            run.head.kept().clone(),
            run.head_candidate,
        ));
        for (i, (text, candidate)) in run.members.iter().enumerate() {
            emit(line_segment(
                run.first + 1 + i as u64,
                text.kept().clone(),
                *candidate,
            ));
        }
    }

    /// Stores the run as segments, moving its texts.
    pub(super) fn close_run(&mut self, piece: Piece<'_>) {
        if self.run.is_folded() {
            let folded = self.run.close_folded();
            self.store(folded, piece);
        } else {
            let (first, head) = (self.run.first, std::mem::take(&mut self.run.head));
            self.store_line(first, head, self.run.head_candidate, piece);
            let mut members = std::mem::take(&mut self.run.members);
            for (i, (text, candidate)) in members.drain(..).enumerate() {
                self.store_line(first + 1 + i as u64, text, candidate, piece);
            }
            // Keep the buffer for the next run.
            self.run.members = members;
        }
        let last = std::mem::take(&mut self.run.last);
        recycle(&mut self.spare, last);
    }
}
