//! Outlining a long piece from its latest lines. Once the head store is full, what a preview
//! can show of a piece is its latest segments; the gap only counts the rest (lines, bytes,
//! candidates), which is the same however those lines would have folded. So a piece much
//! longer than a preview shows is outlined from a line near its end that starts a run
//! whatever came before it, and all before that line (the tail store, the open run, the
//! piece's first lines) is counted in the gap at once, without finding its lines or comparing
//! them: most of a long output's lines, in most of its pieces. Where the latest segments fall
//! short of the limits after all (the piece ends in a fold of many lines), the attempt is
//! undone and the piece outlined whole, and the next pieces are outlined whole for a while.
//!
//! A line starts a run whatever came before it when it neither repeats nor is similar to the
//! line before it (see [`may_join`]): a line joins a repeat by equalling its last line and a
//! similar run by being similar to its first, and being similar (equal but for numbers) is
//! transitive, so a line unlike its predecessor joins no run that holds it.

use super::Outline;
use super::store::{Gap, Run};
use super::tail::{Tail, count, may_join};

/// Lines tried, from where a piece's latest lines could start, for one that starts a run.
const TRIES: usize = 64;

/// Pieces outlined whole after an attempt falls short, at most (doubling from 1 with each
/// attempt in a row that does): a flood of folds costs its pieces a few percent, not half.
const MAX_WAIT: u32 = 64;

/// When the next piece may be outlined from its latest lines, and a buffer for their
/// candidates.
#[derive(Debug, Default)]
pub(super) struct Latest {
    /// Pieces still to outline whole before the next attempt.
    wait: u32,
    /// The pieces the last attempt that fell short made the outline wait (0 once an attempt
    /// holds): the next to fall short makes it wait twice as many.
    backoff: u32,
    /// The candidates of the piece's latest lines, where they start in them.
    candidates: Vec<usize>,
}

/// What an attempt set aside: the outline as it was before the piece, to count in the gap if
/// the attempt holds, or to put back if it falls short.
struct Before {
    tail: Tail,
    run: Run,
    carry: String,
    carry_len: u64,
    ended: u64,
    gap: Gap,
}

impl Outline {
    /// Outlines `text`, the next piece (its candidates where [`Outline::write`] says), from
    /// its latest lines, counting the rest in the gap. False, with nothing changed, where the
    /// piece must be outlined whole: the head store is not full yet, the piece is not much
    /// longer than a preview shows, no line near its end starts a run, its latest segments
    /// fall short of the limits, or an attempt fell short a few pieces before.
    pub(super) fn write_latest(&mut self, text: &str, newlines: u64, candidates: &[usize]) -> bool {
        if !self.head_full || self.latest.wait > 0 {
            self.latest.wait = self.latest.wait.saturating_sub(1);
            return false;
        }
        let Some(from) = self.latest_start(text) else {
            return false;
        };
        let before = self.set_aside();
        // The lines skipped, from the piece's count: the latest lines are the shorter side.
        let lines = newlines - count(&text.as_bytes()[from..]);
        self.ended += lines;
        let skipped = candidates.partition_point(|&c| c < from);
        let mut shifted = std::mem::take(&mut self.latest.candidates);
        shifted.clear();
        shifted.extend(candidates[skipped..].iter().map(|&c| c - from));
        self.write_whole(&text[from..], &shifted);
        self.latest.candidates = shifted;
        if self.tail.reaches(self.limits) {
            self.count_before(before, lines, from as u64, skipped as u64);
            self.latest.backoff = 0;
            true
        } else {
            self.put_back(before);
            self.latest.backoff = (self.latest.backoff * 2).clamp(1, MAX_WAIT);
            self.latest.wait = self.latest.backoff;
            false
        }
    }

    /// Where the latest lines of `text` to outline start: the first line that starts a run,
    /// from where the piece's last bytes, half as many again as a preview shows, begin; `None`
    /// when the piece is not twice as long as a preview shows, or no such line is found.
    fn latest_start(&self, text: &str) -> Option<usize> {
        let shown = usize::try_from(self.limits.1).ok()?;
        let reach = shown.checked_add(shown / 2)?;
        if text.len() < reach.checked_add(shown / 2)?.max(1) {
            return None;
        }
        let bytes = text.as_bytes();
        // The line before the one tried must lie whole in the piece: it starts after a newline.
        let after = memchr::memchr(b'\n', &bytes[text.len() - reach..])? + text.len() - reach;
        let mut prev = after + 1;
        let mut start = prev + memchr::memchr(b'\n', &bytes[prev..])? + 1;
        for _ in 0..TRIES {
            let end = start + memchr::memchr(b'\n', &bytes[start..])?;
            if !may_join(&bytes[prev..start - 1], &bytes[start..end], self.cap) {
                return Some(start);
            }
            (prev, start) = (start, end + 1);
        }
        None
    }

    /// Takes the tail store, the open run and the line in progress out of the outline, which
    /// goes on as if nothing had come before.
    fn set_aside(&mut self) -> Before {
        debug_assert!(
            self.closed.is_empty(),
            "closed segments wait only within a write"
        );
        Before {
            tail: std::mem::take(&mut self.tail),
            run: std::mem::take(&mut self.run),
            carry: std::mem::take(&mut self.carry),
            carry_len: std::mem::take(&mut self.carry_len),
            ended: self.ended,
            gap: self.gap,
        }
    }

    /// Counts in the gap all that came before the latest lines: `before`, and the piece's first
    /// `lines` lines, in its first `bytes` bytes, which hold `candidates` candidates (the
    /// first of them ends the line in progress before, if there was one).
    fn count_before(&mut self, before: Before, lines: u64, bytes: u64, candidates: u64) {
        let Before {
            mut tail,
            run,
            carry_len,
            ..
        } = before;
        self.gap.add(lines, carry_len + bytes, candidates);
        self.gap.add(run.lines, run.bytes, run.candidates);
        tail.clear(&mut self.gap, &mut self.spare);
    }

    /// Undoes an attempt: the outline as `before` was.
    fn put_back(&mut self, before: Before) {
        self.tail = before.tail;
        self.run = before.run;
        self.carry = before.carry;
        self.carry_len = before.carry_len;
        self.ended = before.ended;
        self.gap = before.gap;
    }
}
