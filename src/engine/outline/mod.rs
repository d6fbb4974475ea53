//! Outline: the whole output folded as it streams, in bounded memory, so a preview folds
//! first and cuts after.
//!
//! Every ended line joins the run being built or closes it. A run of byte-identical lines
//! ([`REPEAT_MIN`] or more) becomes one *repeat* segment, shown as its line and a marker that
//! says how many times it was printed; a run of lines that differ only in their numbers
//! ([`SIMILAR_MIN`] or more, each with at least [`MIN_LETTERS`] letters so a column of numbers
//! is never taken for noise) becomes one *similar* segment, shown as its first line, a marker
//! that says the lines differ, and its last line. Shorter runs stay single lines: a marker
//! only ever says what is so, and folding three lines into two saves nothing.
//!
//! Segments go to the *head* store until it holds what a preview could show from the start
//! (the line or the byte limit, counted as shown), then to the *tail* store, which drops its
//! oldest segments once the rest alone reaches a limit: what is dropped is the omitted middle,
//! and only counted. So memory is O(limits) however much is printed, and a preview of a
//! 100,000-line output whose middle is one folded run shows every line around it.
//!
//! The cost per line is a comparison with the run's last line (stopping at the first byte
//! that differs) and, on a mismatch, with its first line digit runs aside. Lines are compared
//! where they lie in the piece being written, and copied only if they must outlive it: those
//! that join the head store, the latest segments of the piece that the tail store keeps, and
//! the run still open. In a long output most lines are only counted in the gap, never copied;
//! kept texts reuse the buffers of dropped ones, so a steady stream allocates nothing. And once
//! the head store is full, a piece many times longer than a preview shows is outlined from a
//! line near its end (see [`latest`]): the lines before it are only counted, not even found.

mod latest;
mod newlines;
mod run;
mod similar;
mod store;
mod tail;
mod view;

use std::collections::VecDeque;

use latest::Latest;
use newlines::Newlines;
use similar::cut;
pub(crate) use similar::similar;
use store::{Closed, Gap, Pending, Piece, Run, Text};
use tail::{Tail, keep, may_join, split_latest};
pub use view::OutlineView;
use view::single;

/// Byte-identical lines fold from this many on.
pub const REPEAT_MIN: u64 = 3;

/// Lines that differ in their numbers fold from this many on.
pub const SIMILAR_MIN: u64 = 6;

/// Letters a line needs before its numbers may vary within a similar run: `Downloading 45%`
/// is progress noise, `12` or `line 12` carries its number as information.
pub const MIN_LETTERS: usize = 10;

/// Segments closed in one piece that wait for the tail store at most: beyond them the tail
/// takes them at once (a piece of many short lines costs a few more copies, not memory).
const CLOSED_MAX: usize = 4096;

/// Dropped texts kept for reuse at most.
const SPARE_TEXTS: usize = 64;

/// How a segment is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fold {
    /// One line, shown whole.
    Line,
    /// Byte-identical lines: the line and `[... repeated N times ...]`.
    Repeat,
    /// Lines equal but for their numbers: the first, a marker, the last.
    Similar,
}

/// One line's text as kept: at most the byte cap of it, and its real length.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineText {
    /// The line without its newline, cut at a character boundary to the cap.
    pub text: String,
    /// The line's real length in bytes, without its newline.
    pub len: u64,
}

impl LineText {
    /// Whether the text is the whole line.
    pub fn is_whole(&self) -> bool {
        self.text.len() as u64 == self.len
    }

    fn set(&mut self, line: &str, cap: usize) {
        self.text.clear();
        self.text.push_str(cut(line, cap));
        self.len = line.len() as u64;
    }
}

/// A line of the output, or a folded run of lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// 1-based number of its first line.
    pub first: u64,
    /// Lines it covers.
    pub lines: u64,
    /// Bytes it covers, newlines included.
    pub bytes: u64,
    /// Lines in it that the highlighter counted as candidates.
    pub candidates: u64,
    pub fold: Fold,
    /// Its first line.
    pub head: LineText,
    /// Its last line, for a similar run.
    pub last: LineText,
    /// False for a last line still without its newline.
    pub ended: bool,
}

impl Segment {
    /// Number of its last line.
    pub fn last_line(&self) -> u64 {
        self.first + self.lines - 1
    }

    /// Lines a preview shows of it.
    pub fn shown_lines(&self) -> u64 {
        Cost::of(self).lines
    }

    /// Bytes a preview shows of it, each shown line with a newline.
    pub fn shown_bytes(&self) -> u64 {
        Cost::of(self).bytes
    }
}

/// Lines and bytes as a preview shows them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Cost {
    lines: u64,
    bytes: u64,
}

impl Cost {
    fn of(s: &Segment) -> Cost {
        shown(s.fold, s.head.len, s.last.len)
    }

    fn add(&mut self, c: Cost) {
        self.lines += c.lines;
        self.bytes += c.bytes;
    }

    /// Whether a preview could show no more than this at one end.
    fn reaches(&self, limits: (u64, u64)) -> bool {
        self.lines >= limits.0 || self.bytes >= limits.1
    }
}

/// Lines and bytes a preview shows of a segment: one line, or a similar run's first and last.
fn shown(fold: Fold, head_len: u64, last_len: u64) -> Cost {
    match fold {
        Fold::Similar => Cost {
            lines: 2,
            bytes: head_len + last_len + 2,
        },
        _ => Cost {
            lines: 1,
            bytes: head_len + 1,
        },
    }
}

/// The streaming fold of one output.
#[derive(Debug)]
pub struct Outline {
    /// (max lines, max bytes) a preview may show.
    limits: (u64, u64),
    /// Longest line text kept (longer lines are kept cut, with their length).
    cap: usize,
    head: Vec<Segment>,
    head_cost: Cost,
    head_full: bool,
    tail: Tail,
    gap: Gap,
    run: Run,
    /// Segments closed in the piece being written once the head store is full, waiting for
    /// the tail store (at most [`CLOSED_MAX`]).
    closed: VecDeque<Closed>,
    /// The line in progress (its first `cap` bytes) and its real length.
    carry: String,
    carry_len: u64,
    /// Lines ended so far.
    ended: u64,
    /// Texts of dropped segments, for reuse.
    spare: Vec<LineText>,
    /// Whether a long piece may be outlined from its latest lines.
    latest: Latest,
}

impl Outline {
    /// An outline for previews of at most `max_lines` lines and `max_bytes` bytes.
    pub fn new(max_lines: usize, max_bytes: usize) -> Outline {
        Outline {
            limits: (max_lines as u64, max_bytes as u64),
            cap: max_bytes,
            head: Vec::new(),
            head_cost: Cost::default(),
            head_full: false,
            tail: Tail::default(),
            gap: Gap::default(),
            run: Run::default(),
            closed: VecDeque::new(),
            carry: String::new(),
            carry_len: 0,
            ended: 0,
            spare: Vec::new(),
            latest: Latest::default(),
        }
    }

    /// Takes the next piece of output, which holds `newlines` newlines; `candidates` are
    /// where the lines in it that the highlighter counted start (in increasing order; 0 also
    /// stands for a line that began in an earlier piece), so each segment knows how many it
    /// covers.
    pub fn write(&mut self, text: &str, newlines: u64, candidates: &[usize]) {
        if !self.write_latest(text, newlines, candidates) {
            self.write_whole(text, candidates);
        }
    }

    /// [`Outline::write`], every line of the piece in turn.
    fn write_whole(&mut self, text: &str, candidates: &[usize]) {
        let piece = Piece { text, candidates };
        let mut newlines = Newlines::new(text.as_bytes());
        let mut next = candidates.iter().copied().peekable();
        let mut start = 0;
        while let Some((line_start, end)) = self.next_line(start, piece, &mut newlines) {
            while next.next_if(|&c| c < line_start).is_some() {}
            let is_candidate = next.next_if_eq(&line_start).is_some();
            let line = self.line_text(&text[line_start..end], line_start);
            self.end_line(line, is_candidate, piece);
            start = end + 1;
        }
        let rest = memchr::memrchr(b'\n', text.as_bytes()).map_or(0, |i| i + 1);
        self.extend_carry(&text[rest..]);
        self.store_closed(piece);
        self.keep_run(text);
    }

    /// Where the next line that [`Outline::end_line`] takes, starting at byte `start` of the
    /// piece or later, starts and ends: the lines of a streak are dealt with on the way.
    fn next_line(
        &mut self,
        start: usize,
        piece: Piece<'_>,
        newlines: &mut Newlines<'_>,
    ) -> Option<(usize, usize)> {
        match self.streak_head() {
            Some(head) => self.streak(head, piece, newlines),
            None => newlines.next().map(|end| (start, end)),
        }
    }

    /// The text of the line `line`, which starts at byte `start` of the piece: where it lies,
    /// or, if it began in an earlier piece, what was kept of it.
    fn line_text(&mut self, line: &str, start: usize) -> Text {
        if self.carry_len == 0 {
            return Text::At(start, start + line.len());
        }
        self.extend_carry(line);
        Text::Kept(LineText {
            text: std::mem::take(&mut self.carry),
            len: std::mem::take(&mut self.carry_len),
        })
    }

    /// Where the run's line lies in the piece when the next line starts a streak (see
    /// [`Outline::streak`]): the head store is full and the run is that one line.
    fn streak_head(&self) -> Option<(usize, usize)> {
        match self.run.head {
            Text::At(start, end) if self.head_full && self.run.lines == 1 => Some((start, end)),
            _ => None,
        }
    }

    /// The common case in a long output: lines that each differ from the line before, so
    /// that each closes the run of the one before as a segment of one line. Each line is only
    /// compared with the one before; the run of closed lines, the count of lines and the run
    /// are updated once, where the streak ends. Returns where the line that ends it (one that
    /// may join the run) starts and ends, or `None` at the end of the piece.
    fn streak(
        &mut self,
        (head_start, head_end): (usize, usize),
        piece: Piece<'_>,
        newlines: &mut Newlines<'_>,
    ) -> Option<(usize, usize)> {
        let bytes = piece.text.as_bytes();
        let cap = self.cap;
        let (mut start, mut end) = (head_start, head_end);
        let mut passed = 0;
        let breaker = loop {
            let Some(next_end) = newlines.next() else {
                break None;
            };
            let next_start = end + 1;
            if may_join(&bytes[start..end], &bytes[next_start..next_end], cap) {
                break Some((next_start, next_end));
            }
            (start, end) = (next_start, next_end);
            passed += 1;
        };
        if passed > 0 {
            // The run's line and every line of the streak but the last are closed lines.
            self.close_lines(self.run.first, passed, head_start, start - 1, piece);
            self.ended += passed;
            let candidate = piece.candidates.binary_search(&start).is_ok();
            self.start_run(Text::At(start, end), candidate);
        }
        breaker
    }

    /// The outline so far, with the line still being written (if any) at its end;
    /// `last_is_candidate` says whether the highlighter would count that line.
    pub fn view(&self, last_is_candidate: bool) -> OutlineView {
        let mut view = OutlineView {
            head: self.head.clone(),
            gap: self.gap,
            tail: Vec::new(),
        };
        self.tail.segments(self.cap, |s| view.tail.push(s));
        let dest = if self.head_full {
            &mut view.tail
        } else {
            &mut view.head
        };
        self.run_segments(|s| dest.push(s));
        if self.carry_len > 0 {
            let seg = Segment {
                candidates: u64::from(last_is_candidate),
                ..single(self.ended + 1, &self.carry, self.carry_len, false, self.cap)
            };
            dest.push(seg);
        }
        view
    }

    fn extend_carry(&mut self, text: &str) {
        // Once the kept text is cut short, nothing more of the line is kept.
        if self.carry.len() as u64 == self.carry_len {
            let room = self.cap.saturating_sub(self.carry.len());
            self.carry.push_str(cut(text, room));
        }
        self.carry_len += text.len() as u64;
    }

    /// One line ended: it extends the run, or closes it and starts the next.
    fn end_line(&mut self, line: Text, candidate: bool, piece: Piece<'_>) {
        self.ended += 1;
        if self.run.lines > 0 {
            if let Some(fold) = self.joins(line.get(piece.text, self.cap), piece.text) {
                self.extend_run(fold, line, candidate);
                return;
            }
            self.close_run(piece);
        }
        self.start_run(line, candidate);
    }

    /// Stores a segment of one line: once the head store is full, a line of the piece joins
    /// the lines closed just before it.
    fn store_line(&mut self, first: u64, text: Text, candidate: bool, piece: Piece<'_>) {
        match text {
            Text::At(start, end) if self.head_full => self.close_lines(first, 1, start, end, piece),
            _ => self.store(Pending::line(first, text, candidate), piece),
        }
    }

    /// Closes `lines` lines of the piece, from line `first`, in its bytes `start..=end`, as
    /// segments of one line each, once the head store is full.
    fn close_lines(&mut self, first: u64, lines: u64, start: usize, end: usize, piece: Piece<'_>) {
        match self.closed.back_mut() {
            Some(Closed::Lines {
                lines: before,
                end: last,
                ..
            }) if *last + 1 == start => {
                *before += lines;
                *last = end;
            }
            _ => self.wait(
                Closed::Lines {
                    first,
                    lines,
                    start,
                    end,
                },
                piece,
            ),
        }
    }

    /// Puts a closed segment in the head store while it can still be shown from the start,
    /// else among those waiting for the tail store.
    fn store(&mut self, pending: Pending, piece: Piece<'_>) {
        if self.head_full {
            return self.wait(Closed::Segment(pending), piece);
        }
        let s = self.segment(pending, piece.text);
        self.head_cost.add(Cost::of(&s));
        self.head.push(s);
        self.head_full = self.head_cost.reaches(self.limits);
    }

    /// Adds to the segments waiting for the tail store, which takes them at the end of the
    /// piece, or once they are [`CLOSED_MAX`].
    fn wait(&mut self, closed: Closed, piece: Piece<'_>) {
        self.closed.push_back(closed);
        if self.closed.len() == CLOSED_MAX {
            self.store_closed(piece);
        }
    }

    /// Moves the waiting closed segments to the tail store, which keeps the shortest run of
    /// its latest segments that reaches the limits (or all of them, while none does), as
    /// storing them one at a time and dropping the oldest while the rest still reaches would.
    /// Only those it keeps are copied out of the piece; the others are only counted.
    fn store_closed(&mut self, piece: Piece<'_>) {
        let mut closed = std::mem::take(&mut self.closed);
        let latest = split_latest(&mut closed, piece.text, self.limits);
        if let Some(from) = latest {
            // The latest alone reach the limits: every older segment goes.
            self.tail.clear(&mut self.gap, &mut self.spare);
            for c in closed.drain(..from) {
                c.omit(piece, &mut self.gap, &mut self.spare);
            }
        }
        for c in closed.drain(..) {
            self.tail.push(c, piece, self.cap, &mut self.spare);
        }
        self.closed = closed;
        if latest.is_none() {
            self.tail.trim(self.limits, &mut self.gap, &mut self.spare);
        }
    }

    /// The closed segment with its texts copied out of the piece.
    fn segment(&mut self, p: Pending, piece: &str) -> Segment {
        Segment {
            first: p.first,
            lines: p.lines,
            bytes: p.bytes,
            candidates: p.candidates,
            fold: p.fold,
            head: keep(p.head, piece, self.cap, &mut self.spare),
            last: keep(p.last, piece, self.cap, &mut self.spare),
            ended: true,
        }
    }

    /// Copies the open run's texts out of the piece, which the caller reuses after `write`.
    fn keep_run(&mut self, piece: &str) {
        let (cap, spare, run) = (self.cap, &mut self.spare, &mut self.run);
        for text in [&mut run.head, &mut run.last]
            .into_iter()
            .chain(run.members.iter_mut().map(|(text, _)| text))
        {
            let t = std::mem::take(text);
            *text = Text::Kept(keep(t, piece, cap, spare));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tail::{latest_lines, line_segment};
    use super::*;
    use crate::engine::test_text::{letters, pieces};
    use proptest::prelude::*;

    fn outline(text: &str, max_lines: usize, max_bytes: usize) -> OutlineView {
        let mut o = Outline::new(max_lines, max_bytes);
        o.write(text, tail::count(text.as_bytes()), &[]);
        o.view(false)
    }

    /// The lines every segment stands for, rebuilt from the text: checks that each fold says
    /// only what is so and that segments and gap tile the output exactly.
    fn check(text: &str, view: &OutlineView, cap: usize) {
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let mut next = 1u64;
        let check_seg = |s: &Segment, next: &mut u64| {
            assert_eq!(s.first, *next, "segments tile the output");
            let covered = &lines[(s.first - 1) as usize..s.last_line() as usize];
            let bytes: u64 = covered.iter().map(|l| l.len() as u64).sum();
            assert_eq!(s.bytes, bytes);
            let body = |l: &str| l.strip_suffix('\n').unwrap_or(l).to_string();
            assert_eq!(s.head.text, cut(&body(covered[0]), cap));
            assert_eq!(s.head.len, body(covered[0]).len() as u64);
            match s.fold {
                Fold::Line => assert_eq!(s.lines, 1),
                Fold::Repeat => {
                    assert!(s.lines >= REPEAT_MIN);
                    assert!(covered.iter().all(|l| body(l) == body(covered[0])));
                }
                Fold::Similar => {
                    assert!(s.lines >= SIMILAR_MIN);
                    assert_eq!(s.last.text, cut(&body(covered[covered.len() - 1]), cap));
                    assert!(covered.iter().all(|l| similar(&body(covered[0]), &body(l))));
                }
            }
            *next = s.last_line() + 1;
        };
        for s in &view.head {
            check_seg(s, &mut next);
        }
        next += view.gap.lines;
        for s in &view.tail {
            check_seg(s, &mut next);
        }
        assert_eq!(next - 1, lines.len() as u64, "every line is accounted for");
    }

    #[test]
    fn identical_lines_repeat_and_differing_ones_are_similar() {
        let mut text = String::from("start\n");
        text.push_str(&"same line again\n".repeat(5));
        for i in 0..20 {
            text.push_str(&format!("progress: file {i} of 20 done\n"));
        }
        text.push_str("end\n");
        let v = outline(&text, 100, 10_000);
        check(&text, &v, 10_000);
        let folds: Vec<_> = v.segments().map(|s| (s.fold, s.lines)).collect();
        assert_eq!(
            folds,
            [
                (Fold::Line, 1),
                (Fold::Repeat, 5),
                (Fold::Similar, 20),
                (Fold::Line, 1)
            ]
        );
    }

    #[test]
    fn short_runs_and_numbers_alone_never_fold() {
        let mut text = String::new();
        for i in 0..5 {
            text.push_str(&format!("progress: file {i} of 20 done\n"));
        }
        text.push_str("a\na\n");
        for i in 0..50 {
            text.push_str(&format!("line {i}\n"));
        }
        let v = outline(&text, 1000, 100_000);
        check(&text, &v, 100_000);
        assert!(v.segments().all(|s| s.fold == Fold::Line));
    }

    #[test]
    fn the_middle_is_dropped_but_counted_and_the_ends_kept() {
        let text: String = (0..10_000)
            .map(|i| format!("{i:x} distinct {}\n", i * 7))
            .collect();
        let v = outline(&text, 100, 100_000);
        check(&text, &v, 100_000);
        assert!(v.gap.lines > 9_000);
        assert_eq!(v.head.len(), 100);
        assert_eq!(v.tail.last().unwrap().last_line(), 10_000);
    }

    #[test]
    fn similar_means_equal_but_for_numbers_in_a_line_of_text() {
        assert!(similar("Downloading 9%", "Downloading 10%"));
        assert!(similar("Downloading file", "Downloading file"));
        assert!(!similar("Compiling foo v0.1.0", "Compiling bar v0.1.0"));
        assert!(!similar("Downloading a1", "Downloading a"));
        // Lines that are mostly their number are not a counter.
        assert!(!similar("12", "13"));
        assert!(!similar("line 12", "line 13"));
    }

    fn line_strategy() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("same line of text".to_string()),
            (0u32..1000).prop_map(|n| format!("progress: item {n} of many")),
            "[a-z ]{0,30}",
            (0u32..5).prop_map(|n| format!("{n}")),
            "[a-zé]{100,300}",
        ]
    }

    proptest! {
        /// The latest lines found from the byte count at once are those a walk from the last
        /// line back finds: the fewest that reach either need.
        #[test]
        fn latest_lines_are_those_a_walk_back_finds(
            lengths in prop::collection::vec(0usize..40, 1..60),
            need_lines in 1u64..70,
            need_bytes in 1u64..2500,
        ) {
            let mut bytes = Vec::new();
            for len in &lengths {
                bytes.extend(std::iter::repeat_n(b'x', *len));
                bytes.push(b'\n');
            }
            let lines = lengths.len() as u64;
            let mut walked = None;
            let (mut taken, mut from) = (0u64, bytes.len());
            for len in lengths.iter().rev() {
                taken += 1;
                from -= len + 1;
                if taken >= need_lines || (bytes.len() - from) as u64 >= need_bytes {
                    walked = Some((from, taken));
                    break;
                }
            }
            prop_assert_eq!(latest_lines(&bytes, lines, (need_lines, need_bytes)), walked);
        }

        #[test]
        fn segments_tile_the_output_and_say_only_what_is_so(
            lines in prop::collection::vec(line_strategy(), 0..300),
            reps in prop::collection::vec(1usize..8, 300),
            max_lines in 1usize..60,
            max_bytes in 1usize..3000,
            chunk in 1usize..200,
        ) {
            let mut text = String::new();
            for (line, n) in lines.iter().zip(&reps) {
                for _ in 0..*n {
                    text.push_str(line);
                    text.push('\n');
                }
            }
            let mut o = Outline::new(max_lines, max_bytes);
            let mut at = 0;
            while at < text.len() {
                let end = cut(&text[at..], chunk).len().max(1);
                let end = (at + end..=text.len()).find(|&e| text.is_char_boundary(e)).unwrap();
                let piece = &text[at..end];
                o.write(piece, tail::count(piece.as_bytes()), &[]);
                at = end;
            }
            let v = o.view(false);
            check(&text, &v, max_bytes);
        }

        #[test]
        fn the_view_after_every_piece_is_the_straightforward_outline(
            case in streamed(150, 1usize..8, (1..60, 1..3000), 1..4000),
        ) {
            outlined_piece_by_piece(&case)?;
        }

        /// Pieces many times longer than a preview shows, most of them outlined from their
        /// latest lines only, some ending in folds too long for that.
        #[test]
        fn long_pieces_outlined_from_their_latest_lines_are_the_straightforward_outline(
            case in streamed(
                400,
                prop_oneof![8 => 1usize..3, 1 => 3usize..200],
                (1..40, 1..400),
                400..9000,
            ),
        ) {
            outlined_piece_by_piece(&case)?;
        }
    }

    /// An output streamed into an outline: its text, the sizes of its pieces (in turn), which
    /// of its lines are candidates (by number, in turn) and the outline's limits.
    #[derive(Debug, Clone)]
    struct Streamed {
        text: String,
        chunks: Vec<usize>,
        candidates: Vec<bool>,
        limits: (usize, usize),
    }

    /// Outputs of up to `lines` lines of [`line_strategy`], each repeated as often as `reps`
    /// says (perhaps with a last line without its newline), in pieces of `chunks` bytes, for an
    /// outline of limits drawn from `limits` (lines, bytes).
    fn streamed(
        lines: usize,
        reps: impl Strategy<Value = usize>,
        limits: (std::ops::Range<usize>, std::ops::Range<usize>),
        chunks: std::ops::Range<usize>,
    ) -> impl Strategy<Value = Streamed> {
        (
            prop::collection::vec(line_strategy(), 0..lines),
            prop::collection::vec(reps, lines),
            prop::collection::vec(any::<bool>(), 1..50),
            limits,
            prop::collection::vec(chunks, 1..10),
            any::<bool>(),
        )
            .prop_map(
                |(lines, reps, candidates, limits, chunks, open_end)| Streamed {
                    text: repeated(&lines, &reps, open_end),
                    chunks,
                    candidates,
                    limits,
                },
            )
    }

    /// Lines `from..to`, each unlike the others and the line before it (no two similar).
    fn unlike_lines(from: usize, to: usize) -> String {
        (from..to)
            .map(|i| format!("{} was {}\n", letters(i), letters(i * 7 + 3)))
            .collect()
    }

    /// The outline of `text`'s pieces `ends` (each piece from the end before), written whole
    /// or from their latest lines as `latest` says each must be: an attempt that falls short
    /// changes nothing, and the view is the outline's definition either way.
    fn outline_expecting(text: &str, ends: &[usize], latest: &[bool], limits: (usize, usize)) {
        let mut o = Outline::new(limits.0, limits.1);
        let mut at = 0;
        for (&end, &expected) in ends.iter().zip(latest) {
            let piece = &text[at..end];
            let taken = o.write_latest(piece, tail::count(piece.as_bytes()), &[]);
            assert_eq!(taken, expected, "the piece ending at {end}");
            if !taken {
                o.write_whole(piece, &[]);
            }
            assert_eq!(
                o.view(false),
                reference(&text[..end], limits.0, limits.1, |_| false)
            );
            at = end;
        }
    }

    #[test]
    fn long_pieces_are_outlined_from_their_latest_lines_unless_they_end_in_a_long_fold() {
        let limits = (10, 300);
        let mut text = unlike_lines(0, 20);
        let mut ends = vec![text.len()];
        // Far longer than a preview shows: from its latest lines.
        text.push_str(&unlike_lines(20, 400));
        ends.push(text.len());
        // Ending in a fold of many lines and a few after it, which alone fall short of the
        // limits: whole, and so is the next piece.
        text.push_str(&unlike_lines(400, 500));
        text.push_str(&"the same line of text again\n".repeat(400));
        text.push_str(&unlike_lines(500, 503));
        ends.push(text.len());
        for to in [900, 1300] {
            text.push_str(&unlike_lines(to - 400, to));
            ends.push(text.len());
        }
        // A line in progress at the end, carried into the next piece, which starts with it.
        text.push_str(&unlike_lines(1300, 1700));
        text.push_str("a line without");
        ends.push(text.len());
        text.push_str(" its end yet\n");
        text.push_str(&unlike_lines(1700, 2100));
        ends.push(text.len());
        let latest = [false, true, false, false, true, true, true];
        outline_expecting(&text, &ends, &latest, limits);
    }

    /// `lines`, each repeated as many times as `reps` says, each with its newline; then a line
    /// without one if `open_end`.
    fn repeated(lines: &[String], reps: &[usize], open_end: bool) -> String {
        let mut text = String::new();
        for (line, n) in lines.iter().zip(reps) {
            for _ in 0..*n {
                text.push_str(line);
                text.push('\n');
            }
        }
        if open_end {
            text.push_str("a last line without its newline");
        }
        text
    }

    /// Writes the case's text to an outline of its limits, piece by piece, and checks the view
    /// after each piece against the outline's definition.
    fn outlined_piece_by_piece(case: &Streamed) -> Result<(), TestCaseError> {
        let Streamed {
            text,
            chunks,
            candidates,
            limits: (max_lines, max_bytes),
        } = case;
        let (text, (max_lines, max_bytes)) = (text.as_str(), (*max_lines, *max_bytes));
        let is_candidate = |n: u64| candidates[(n as usize - 1) % candidates.len()];
        let mut o = Outline::new(max_lines, max_bytes);
        for (at, end) in pieces(text, chunks) {
            o.write(
                &text[at..end],
                tail::count(&text.as_bytes()[at..end]),
                &candidate_starts(text, at, end, is_candidate),
            );
            let open_line = text[..end].matches('\n').count() as u64 + 1;
            let view = o.view(is_candidate(open_line));
            let expected = reference(&text[..end], max_lines, max_bytes, is_candidate);
            prop_assert_eq!(view, expected, "after {} bytes", end);
        }
        Ok(())
    }

    /// Where the candidate lines that end in `text[from..to]` start in it (0 for one that began
    /// before), as the highlighter reports them to the outline.
    fn candidate_starts(
        text: &str,
        from: usize,
        to: usize,
        is_candidate: impl Fn(u64) -> bool,
    ) -> Vec<usize> {
        let first = text[..from].matches('\n').count() as u64 + 1;
        let mut start = text[..from].rfind('\n').map_or(0, |i| i + 1);
        let mut starts = Vec::new();
        let ends = (from..to).filter(|&i| text.as_bytes()[i] == b'\n');
        for (number, end) in (first..).zip(ends) {
            if is_candidate(number) {
                starts.push(start.max(from) - from);
            }
            start = end + 1;
        }
        starts
    }

    /// The outline of `text`, straight from its definition: its lines folded into runs one
    /// after the other, the closed runs' segments in the head store until it reaches the
    /// limits, the shortest run of the latest others that reaches them in the tail store, the
    /// rest in the gap; then the open run and the line without its newline. The last line
    /// counts as a candidate when `is_candidate` says so of its number.
    fn reference(
        text: &str,
        max_lines: usize,
        max_bytes: usize,
        is_candidate: impl Fn(u64) -> bool,
    ) -> OutlineView {
        let (limits, cap) = ((max_lines as u64, max_bytes as u64), max_bytes);
        let split = text.rfind('\n').map_or(0, |i| i + 1);
        let (complete, open) = text.split_at(split);
        let lines: Vec<&str> = complete.split_terminator('\n').collect();
        let whole = |l: &str| l.len() <= cap;
        let mut runs: Vec<(Option<Fold>, Vec<usize>)> = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            if let Some((fold, members)) = runs.last_mut() {
                let (head, last) = (lines[members[0]], lines[*members.last().unwrap()]);
                let identical = whole(last) && *line == last;
                let alike = whole(head) && whole(line) && similar(head, line);
                let next = match fold {
                    None | Some(Fold::Repeat) if identical => Some(Fold::Repeat),
                    None | Some(Fold::Similar) if alike => Some(Fold::Similar),
                    _ => None,
                };
                if next.is_some() {
                    *fold = next;
                    members.push(i);
                    continue;
                }
            }
            runs.push((None, vec![i]));
        }
        let kept = |i: usize| LineText {
            text: cut(lines[i], cap).to_string(),
            len: lines[i].len() as u64,
        };
        let segments = |(fold, members): (Option<Fold>, Vec<usize>)| -> Vec<Segment> {
            let folded = match fold {
                Some(Fold::Repeat) => members.len() as u64 >= REPEAT_MIN,
                Some(Fold::Similar) => members.len() as u64 >= SIMILAR_MIN,
                _ => false,
            };
            let candidate = |i: &usize| is_candidate(*i as u64 + 1);
            if !folded {
                return members
                    .iter()
                    .map(|&i| line_segment(i as u64 + 1, kept(i), candidate(&i)))
                    .collect();
            }
            let fold = fold.unwrap();
            vec![Segment {
                first: members[0] as u64 + 1,
                lines: members.len() as u64,
                bytes: members.iter().map(|&i| lines[i].len() as u64 + 1).sum(),
                candidates: members.iter().filter(|i| candidate(i)).count() as u64,
                fold,
                head: kept(members[0]),
                last: if fold == Fold::Similar {
                    kept(*members.last().unwrap())
                } else {
                    LineText::default()
                },
                ended: true,
            }]
        };
        let open_run = runs.pop();
        let mut closed = runs.into_iter().flat_map(segments);
        let mut view = OutlineView::default();
        let mut cost = Cost::default();
        while !cost.reaches(limits) {
            let Some(s) = closed.next() else { break };
            cost.add(Cost::of(&s));
            view.head.push(s);
        }
        let head_full = cost.reaches(limits);
        let rest: Vec<Segment> = closed.collect();
        let mut cost = Cost::default();
        let from = (0..rest.len())
            .rev()
            .find(|&i| {
                cost.add(Cost::of(&rest[i]));
                cost.reaches(limits)
            })
            .unwrap_or(0);
        for s in &rest[..from] {
            view.gap.add(s.lines, s.bytes, s.candidates);
        }
        view.tail = rest[from..].to_vec();
        let dest = if head_full {
            &mut view.tail
        } else {
            &mut view.head
        };
        dest.extend(open_run.into_iter().flat_map(segments));
        if !open.is_empty() {
            let number = lines.len() as u64 + 1;
            dest.push(Segment {
                candidates: u64::from(is_candidate(number)),
                ..single(number, open, open.len() as u64, false, cap)
            });
        }
        view
    }

    #[test]
    fn a_piece_that_closes_more_segments_than_wait_at_once_is_outlined_alike() {
        // Each `a a a` is a fold and each `b` a line: twice as many segments as lines of `b`.
        let text = "a\na\na\nb\n".repeat(3 * CLOSED_MAX);
        let no = |_: u64| false;
        for (max_lines, max_bytes) in [(50, 1000), (100_000, 1_000_000), (3, 100_000)] {
            let mut o = Outline::new(max_lines, max_bytes);
            o.write(&text, tail::count(text.as_bytes()), &[]);
            assert_eq!(o.view(false), reference(&text, max_lines, max_bytes, no));
        }
    }

    #[test]
    fn latest_lines_reach_the_limits_by_lines_or_bytes() {
        let bytes = b"aaaa\nbb\ncccccc\nd\n";
        // Each line with its newline: 5, 3, 7, 2 bytes.
        assert_eq!(latest_lines(bytes, 4, (1, 100)), Some((15, 1)));
        assert_eq!(latest_lines(bytes, 4, (10, 2)), Some((15, 1)));
        assert_eq!(latest_lines(bytes, 4, (10, 3)), Some((8, 2)));
        assert_eq!(latest_lines(bytes, 4, (2, 3)), Some((8, 2)));
        assert_eq!(latest_lines(bytes, 4, (4, 100)), Some((0, 4)));
        assert_eq!(latest_lines(bytes, 4, (5, 100)), None);
        assert_eq!(latest_lines(bytes, 4, (5, 17)), Some((0, 4)));
    }
}
