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
//! that differs) and, on a mismatch, with its first line digit runs aside; segment texts reuse
//! the buffers of dropped ones, so a steady stream allocates nothing.

use std::collections::VecDeque;

/// Byte-identical lines fold from this many on.
pub const REPEAT_MIN: u64 = 3;
/// Lines that differ in their numbers fold from this many on.
pub const SIMILAR_MIN: u64 = 6;
/// Letters a line needs before its numbers may vary within a similar run: `Downloading 45%`
/// is progress noise, `12` or `line 12` carries its number as information.
pub const MIN_LETTERS: usize = 10;

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
        if self.fold == Fold::Similar { 2 } else { 1 }
    }

    /// Bytes a preview shows of it, each shown line with a newline.
    pub fn shown_bytes(&self) -> u64 {
        match self.fold {
            Fold::Similar => self.head.len + self.last.len + 2,
            _ => self.head.len + 1,
        }
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
        Cost {
            lines: s.shown_lines(),
            bytes: s.shown_bytes(),
        }
    }

    fn add(&mut self, c: Cost) {
        self.lines += c.lines;
        self.bytes += c.bytes;
    }

    fn sub(&mut self, c: Cost) {
        self.lines -= c.lines;
        self.bytes -= c.bytes;
    }

    /// Whether a preview could show no more than this at one end.
    fn reaches(&self, limits: (u64, u64)) -> bool {
        self.lines >= limits.0 || self.bytes >= limits.1
    }
}

/// What was dropped between the head and the tail store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gap {
    pub lines: u64,
    pub bytes: u64,
    pub candidates: u64,
}

/// The run being built: its first and last line, and its other lines while it is too short
/// to fold (they become single lines if it ends that way).
#[derive(Debug, Default)]
struct Run {
    fold: Option<Fold>,
    first: u64,
    lines: u64,
    bytes: u64,
    candidates: u64,
    head: LineText,
    head_candidate: bool,
    /// Lines 2 and on, while the run is shorter than its fold needs.
    members: Vec<(LineText, bool)>,
    last: LineText,
}

impl Run {
    /// Whether the run is long enough to show as one fold.
    fn is_folded(&self) -> bool {
        match self.fold {
            Some(Fold::Repeat) => self.lines >= REPEAT_MIN,
            Some(Fold::Similar) => self.lines >= SIMILAR_MIN,
            _ => false,
        }
    }

    fn folded(&self, head: LineText, last: LineText) -> Segment {
        let fold = self.fold.unwrap_or(Fold::Line);
        Segment {
            first: self.first,
            lines: self.lines,
            bytes: self.bytes,
            candidates: self.candidates,
            fold,
            head,
            last: if fold == Fold::Similar {
                last
            } else {
                LineText::default()
            },
            ended: true,
        }
    }
}

fn line_segment(first: u64, text: LineText, candidate: bool) -> Segment {
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
    tail: VecDeque<Segment>,
    tail_cost: Cost,
    gap: Gap,
    run: Run,
    /// The line in progress (its first `cap` bytes) and its real length.
    carry: String,
    carry_len: u64,
    /// Lines ended so far.
    ended: u64,
    /// Texts of dropped segments, for reuse.
    spare: Vec<LineText>,
}

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

fn single(first: u64, line: &str, len: u64, ended: bool, cap: usize) -> Segment {
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

impl Outline {
    /// An outline for previews of at most `max_lines` lines and `max_bytes` bytes.
    pub fn new(max_lines: usize, max_bytes: usize) -> Outline {
        Outline {
            limits: (max_lines as u64, max_bytes as u64),
            cap: max_bytes,
            head: Vec::new(),
            head_cost: Cost::default(),
            head_full: false,
            tail: VecDeque::new(),
            tail_cost: Cost::default(),
            gap: Gap::default(),
            run: Run::default(),
            carry: String::new(),
            carry_len: 0,
            ended: 0,
            spare: Vec::new(),
        }
    }

    /// Takes the next piece of output; `candidates` are the numbers of the lines in it (in
    /// increasing order) that the highlighter counted, so each segment knows how many it
    /// covers.
    pub fn write(&mut self, text: &str, candidates: &[u64]) {
        let mut candidates = candidates.iter().copied().peekable();
        let mut rest = text;
        while let Some(i) = memchr::memchr(b'\n', rest.as_bytes()) {
            let piece = &rest[..i];
            rest = &rest[i + 1..];
            let number = self.ended + 1;
            while candidates.next_if(|&c| c < number).is_some() {}
            let is_candidate = candidates.next_if(|&c| c == number).is_some();
            if self.carry_len > 0 {
                self.extend_carry(piece);
                let carry = std::mem::take(&mut self.carry);
                let len = std::mem::take(&mut self.carry_len);
                self.end_line(&carry, len, is_candidate);
                self.carry = carry;
                self.carry.clear();
            } else {
                self.end_line(piece, piece.len() as u64, is_candidate);
            }
        }
        self.extend_carry(rest);
    }

    /// The outline so far, with the line still being written (if any) at its end;
    /// `last_is_candidate` says whether the highlighter would count that line.
    pub fn view(&self, last_is_candidate: bool) -> OutlineView {
        let mut view = OutlineView {
            head: self.head.clone(),
            gap: self.gap,
            tail: self.tail.iter().cloned().collect(),
        };
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
    fn end_line(&mut self, line: &str, len: u64, candidate: bool) {
        self.ended += 1;
        if self.run.lines > 0 {
            if let Some(fold) = self.joins(line, len) {
                self.extend_run(fold, line, len, candidate);
                return;
            }
            self.close_run();
        }
        self.start_run(line, len, candidate);
    }

    /// How the run goes on if `line` joins it, or `None` if it ends the run.
    fn joins(&self, line: &str, len: u64) -> Option<Fold> {
        let run = &self.run;
        // A run of one line keeps it as its head only (its `last` is set once it grows).
        let last = if run.lines == 1 { &run.head } else { &run.last };
        let identical = last.is_whole() && len == last.len && line == last.text;
        match run.fold {
            None | Some(Fold::Repeat) if identical => Some(Fold::Repeat),
            None | Some(Fold::Similar)
                if run.head.is_whole()
                    && len == line.len() as u64
                    && similar(&run.head.text, line) =>
            {
                Some(Fold::Similar)
            }
            _ => None,
        }
    }

    fn start_run(&mut self, line: &str, len: u64, candidate: bool) {
        let mut head = self.spare.pop().unwrap_or_default();
        head.set(line, self.cap);
        head.len = len;
        let last = std::mem::take(&mut self.run.last);
        let members = std::mem::take(&mut self.run.members);
        self.run = Run {
            fold: None,
            first: self.ended,
            lines: 1,
            bytes: len + 1,
            candidates: u64::from(candidate),
            head,
            head_candidate: candidate,
            members,
            last,
        };
    }

    fn extend_run(&mut self, fold: Fold, line: &str, len: u64, candidate: bool) {
        let run = &mut self.run;
        run.fold = Some(fold);
        run.lines += 1;
        run.bytes += len + 1;
        run.candidates += u64::from(candidate);
        run.last.set(line, self.cap);
        run.last.len = len;
        if run.is_folded() {
            self.spare
                .extend(run.members.drain(..).map(|(text, _)| text).take(64));
        } else {
            let mut text = self.spare.pop().unwrap_or_default();
            text.clone_from(&run.last);
            run.members.push((text, candidate));
        }
    }

    /// The run as segments (copies): one fold, or its lines one by one while it is too short.
    fn run_segments(&self, mut emit: impl FnMut(Segment)) {
        let run = &self.run;
        if run.lines == 0 {
            return;
        }
        if run.is_folded() {
            emit(run.folded(run.head.clone(), run.last.clone()));
            return;
        }
        emit(line_segment(
            run.first,
            run.head.clone(),
            run.head_candidate,
        ));
        for (i, (text, candidate)) in run.members.iter().enumerate() {
            emit(line_segment(
                run.first + 1 + i as u64,
                text.clone(),
                *candidate,
            ));
        }
    }

    /// Stores the run as segments, moving its texts.
    fn close_run(&mut self) {
        let mut run = std::mem::take(&mut self.run);
        if run.lines == 0 {
            return;
        }
        let head = std::mem::take(&mut run.head);
        if run.is_folded() {
            let last = std::mem::take(&mut run.last);
            let seg = run.folded(head, last);
            self.store(seg);
        } else {
            self.store(line_segment(run.first, head, run.head_candidate));
            for (i, (text, candidate)) in run.members.drain(..).enumerate() {
                self.store(line_segment(run.first + 1 + i as u64, text, candidate));
            }
        }
        // Keep the run's buffers for the next one.
        self.run.members = run.members;
        self.run.last = run.last;
    }

    /// Puts a closed segment in the head store while it can still be shown from the start,
    /// else at the tail's end, dropping the tail's oldest segments no preview could show.
    fn store(&mut self, s: Segment) {
        let cost = Cost::of(&s);
        if !self.head_full {
            self.head_cost.add(cost);
            self.head.push(s);
            self.head_full = self.head_cost.reaches(self.limits);
            return;
        }
        self.tail_cost.add(cost);
        self.tail.push_back(s);
        while let Some(front) = self.tail.front() {
            let mut rest = self.tail_cost;
            rest.sub(Cost::of(front));
            if !rest.reaches(self.limits) {
                break;
            }
            let front = self.tail.pop_front().expect("a front segment");
            self.tail_cost = rest;
            self.gap.lines += front.lines;
            self.gap.bytes += front.bytes;
            self.gap.candidates += front.candidates;
            if self.spare.len() < 64 {
                self.spare.push(front.head);
                self.spare.push(front.last);
            }
        }
    }
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
pub fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Whether two lines differ only in their numbers (each run of digits counts as one digit),
/// and carry enough text ([`MIN_LETTERS`]) for the numbers to be what varies.
pub fn similar(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    // Lines that end in different letters differ outside their numbers: most lines of a log,
    // told apart here without reading them.
    if let (Some(&x), Some(&y)) = (a.last(), b.last())
        && x != y
        && !x.is_ascii_digit()
        && !y.is_ascii_digit()
    {
        return false;
    }
    let (mut i, mut j) = (0, 0);
    loop {
        // Equal bytes are skipped many at a time; only a difference needs looking at.
        let same = common_prefix(&a[i..], &b[j..]);
        i += same;
        j += same;
        if i == a.len() || j == b.len() {
            break;
        }
        // A difference is allowed only inside numbers: back to where the number starts (the
        // same on both sides, which are equal up to here), then past it on each side.
        let digits_before = a[i - same..i]
            .iter()
            .rev()
            .take_while(|c| c.is_ascii_digit())
            .count();
        let (si, sj) = (i - digits_before, j - digits_before);
        if !(a[si..].first().is_some_and(u8::is_ascii_digit)
            && b[sj..].first().is_some_and(u8::is_ascii_digit))
        {
            return false;
        }
        i = si + a[si..].iter().take_while(|c| c.is_ascii_digit()).count();
        j = sj + b[sj..].iter().take_while(|c| c.is_ascii_digit()).count();
    }
    i == a.len()
        && j == b.len()
        && a.iter().filter(|c| c.is_ascii_alphabetic()).count() >= MIN_LETTERS
}

/// How many bytes `a` and `b` share at their start, compared 16 at a time.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 16 <= n && a[i..i + 16] == b[i..i + 16] {
        i += 16;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn outline(text: &str, max_lines: usize, max_bytes: usize) -> OutlineView {
        let mut o = Outline::new(max_lines, max_bytes);
        o.write(text, &[]);
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
                o.write(&text[at..end], &[]);
                at = end;
            }
            let v = o.view(false);
            check(&text, &v, max_bytes);
        }
    }
}
