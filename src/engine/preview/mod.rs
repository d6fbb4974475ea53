//! Preview: what of a captured output the model sees, and the notice that says how to get the rest.
//!
//! The preview never shows more than `max_lines` lines or `max_bytes` bytes of output (the
//! elision marker and the notice are extra), and only whole lines, with one exception: when not
//! even one whole line fits the byte budget, `head` shows the first bytes of line 1 and `tail`
//! (and `both`) the last bytes of the last line, cut at a character boundary. Line numbers are
//! the spill file's own, 1-based, so a notice's read offset lands on the first line not seen.
//!
//! Above [`COMPACT_FROM_TOKENS`], [`compact`] first folds lines alike into template markers
//! (each standing in the outline as one line), so the budget chooses among what folding left.
//!
//! One job per file: [`select`] chooses what is shown as a [`selection`] (with [`partial`] for a line too long
//! to show whole, [`pick`] for highlights and [`unfold`] for opening folds), [`render`] lays the
//! choice out with its markers, and [`notice`] words the notice at the end, the one place the
//! wire's notice is worded; the commands its next steps name come from the caller as a
//! [`NextStep`]. Every method of [`Preview`] is here.

mod budget;
mod compact;
mod lines;
#[cfg(test)]
mod long_line_tests;
#[cfg(test)]
mod needle_tests;
mod notice;
mod partial;
mod pick;
mod render;
mod select;
mod selection;
mod unfold;

use std::path::Path;

use crate::engine::capture::CaptureView;
use crate::engine::redact::{Redactor, notice_line, unkept_notice_line};
use crate::protocol::{
    Counts, Direction, LimitKind, LineRange, NextStep, NextSteps, Preview, moved_span,
};

use budget::Budget;
pub use compact::COMPACT_FROM_TOKENS;
use render::{render, shown_ranges};
use select::select_within;
use selection::Selection;

/// Whether a line of a preview is one of its own markers (an omission, a fold, a highlight's
/// place, a partial line's size), not a line of output.
fn is_marker(line: &str) -> bool {
    line.starts_with("[... ") || line.starts_with("[at line ")
}

/// Where the output a view holds starts in the spill: a preview of the output from some line
/// on (`spillway wait --new`) numbers its lines, markers and notice as the spill does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offset {
    /// Lines of the spill before the view's first line.
    pub lines: u64,
    /// Bytes of the spill before it.
    pub bytes: u64,
}

impl Preview {
    /// The preview of an output of `total_lines` lines that is shown whole: `content` is all
    /// of it, and nothing was spilled, capped or redacted (callers set what differs).
    pub fn whole(content: String, total_lines: u64) -> Preview {
        Preview {
            truncated: false,
            total_bytes: content.len() as u64,
            content,
            spill_path: None,
            total_lines,
            truncated_by: None,
            shown: if total_lines == 0 {
                Vec::new()
            } else {
                vec![LineRange {
                    first: 1,
                    last: total_lines,
                }]
            },
            omitted_lines: 0,
            partial_line: None,
            spill_capped: None,
            redactions: Counts::new(),
            next: None,
            stopped_at: None,
            limits_at: None,
            notice_at: None,
            folds: Vec::new(),
        }
    }

    /// Words the next steps by `steps` instead of as sent, where [`NextSteps`] says they
    /// stand, so nothing is parsed back out of text; the places after them move with the
    /// text. A preview whose steps are not where they are said to be is left as it is.
    pub fn reword_steps(&mut self, steps: &dyn NextStep) {
        let (Some(next), Some(spill)) = (self.next.clone(), self.spill_path.clone()) else {
            return;
        };
        let [read_start, read_end] = next.read_at;
        let [search_start, search_end] = next.search_at;
        let fits = read_start <= read_end
            && read_end <= search_start
            && search_start <= search_end
            && search_end <= self.content.len()
            && [read_start, read_end, search_start, search_end]
                .iter()
                .all(|&at| self.content.is_char_boundary(at));
        if !fits {
            return;
        }
        let spill = Path::new(&spill);
        let read = steps.read_from(spill, next.read_from);
        let search = steps.search(spill, &next.search);
        // The later step first, so the earlier one's place still holds.
        let (Some(search_at), Some(read_at)) = (
            self.replace_span(next.search_at, &search),
            self.replace_span(next.read_at, &read),
        ) else {
            return;
        };
        let moved = read_at[1] as isize - read_end as isize;
        self.next = Some(NextSteps {
            read_at,
            search_at: moved_span(search_at, moved),
            ..next
        });
    }

    /// Words the line that names what the run's end stopped as `line` instead, where
    /// `stopped_at` says it stands; the places after it move with the text. A preview whose
    /// line is not where it is said to be is left as it is.
    pub fn reword_stopped(&mut self, line: &str) {
        if let Some(span) = self.stopped_at.and_then(|at| self.replace_span(at, line)) {
            self.stopped_at = Some(span);
        }
    }

    /// Words the lines that say which limits the run reached as `lines` instead, where
    /// `limits_at` says they stand, as [`Preview::reword_stopped`] does its line.
    pub fn reword_limits(&mut self, lines: &str) {
        if let Some(span) = self.limits_at.and_then(|at| self.replace_span(at, lines)) {
            self.limits_at = Some(span);
        }
    }

    /// Replaces the bytes `[start, end)` of `content` with `text` and moves every place that
    /// stands after them; returns where `text` now stands, or `None` (nothing changed) when
    /// the span is not in the content.
    fn replace_span(&mut self, [start, end]: [usize; 2], text: &str) -> Option<[usize; 2]> {
        let c = &self.content;
        if start > end || end > c.len() || !c.is_char_boundary(start) || !c.is_char_boundary(end) {
            return None;
        }
        self.content.replace_range(start..end, text);
        let delta = text.len() as isize - (end - start) as isize;
        let after = |at: [usize; 2]| {
            if at[0] >= end {
                moved_span(at, delta)
            } else {
                at
            }
        };
        if let Some(next) = &mut self.next
            && next.read_at[0] >= end
        {
            *next = next.moved(delta);
        }
        self.stopped_at = self.stopped_at.map(after);
        self.limits_at = self.limits_at.map(after);
        self.notice_at = self.notice_at.map(|at| {
            if at >= end {
                at.saturating_add_signed(delta)
            } else {
                at
            }
        });
        Some([start, start + text.len()])
    }

    /// Builds the preview of `view` with the notice worded by `steps`.
    pub fn build(view: &CaptureView<'_>, direction: Direction, steps: &dyn NextStep) -> Preview {
        Self::build_with(view, direction, steps, None)
    }

    /// Like [`Preview::build`], with the shown text also held to `max_tokens` model tokens
    /// (o200k): the byte budget shrinks until the text fits, so every other rule still holds.
    pub fn build_with(
        view: &CaptureView<'_>,
        direction: Direction,
        steps: &dyn NextStep,
        max_tokens: Option<usize>,
    ) -> Preview {
        Self::build_from(view, direction, steps, max_tokens, Offset::default())
    }

    /// Like [`Preview::build_with`], for a view of the output from spill line
    /// `offset.lines + 1` on: `shown`, `partial_line`, the markers and the notice use the
    /// spill's line numbers, and `total_lines`/`total_bytes` count the spill up to the view's
    /// end; `omitted_lines` counts within the view.
    pub fn build_from(
        view: &CaptureView<'_>,
        direction: Direction,
        steps: &dyn NextStep,
        max_tokens: Option<usize>,
        offset: Offset,
    ) -> Preview {
        Self::build_compacting(view, direction, steps, max_tokens, offset, true)
    }

    /// Like [`Preview::build_from`], with template folds (see [`compact`]) only when
    /// `compact` is true: false is the preview as it was before them, byte for byte.
    pub fn build_compacting(
        view: &CaptureView<'_>,
        direction: Direction,
        steps: &dyn NextStep,
        max_tokens: Option<usize>,
        offset: Offset,
        compact: bool,
    ) -> Preview {
        let compacted = compact
            .then(|| compact::compact(view, offset.lines))
            .flatten();
        let unfolded = || Self::build_relative(view, direction, steps, max_tokens, offset, false);
        let (mut preview, shown_folds) = match &compacted {
            Some(c) => {
                let folded =
                    Self::build_relative(&c.view, direction, steps, max_tokens, offset, true);
                // An output within every limit is better shown whole, as it is, than cut
                // because its folds and notice would not fit the limits, or folded into a
                // text no shorter than itself (a diff's few alike lines, each marker quoting
                // its template).
                let no_gain = folded.0.truncated_by.is_some()
                    || folded.0.content.len() as u64 >= view.total_bytes;
                if no_gain && within(view, max_tokens) {
                    unfolded()
                } else {
                    folded
                }
            }
            None => unfolded(),
        };
        if let Some(c) = &compacted {
            preview.folds = compact::described(&c.folds, &shown_folds, offset.lines);
        }
        preview.shift(offset);
        preview
    }

    /// The preview with the view's own line numbers in its fields (the content already
    /// speaks in the spill's), and the first lines of the template folds whose markers it
    /// shows. `folded`: the view's outline holds template folds, so the output is not shown
    /// whole even when it is within every limit.
    fn build_relative(
        view: &CaptureView<'_>,
        direction: Direction,
        steps: &dyn NextStep,
        max_tokens: Option<usize>,
        offset: Offset,
        folded: bool,
    ) -> (Preview, Vec<u64>) {
        let limits = view.limits;
        let within = within(view, max_tokens);
        if within && !folded {
            let content = String::from_utf8_lossy(view.head).into_owned();
            let preview = Preview {
                spill_path: view.spill_path.map(|p| p.to_string_lossy().into_owned()),
                total_bytes: view.total_bytes,
                spill_capped: view.spill_capped,
                ..Preview::whole(content, view.total_lines)
            };
            return (preview, Vec::new());
        }
        let limits = Budget::of(limits, max_tokens);
        let mut named = if within {
            Named::FoldedOnly
        } else {
            Named::BySelection
        };
        let first = Self::cut(view, direction, steps, offset, limits, max_tokens, named);
        let Some(over) = limits.over(&first.0.content) else {
            return Self::with_folds(first);
        };
        if named == Named::FoldedOnly {
            // Within every limit, but not once folded and told: now a limit cuts it.
            named = Named::Over(over.most(&limits));
        }
        // The whole text, markers and notice included, is held to the limits: what it went
        // over comes off what the output's own lines may take, until it fits, unless the
        // preview's own lines take more than half a limit (see [`Budget::floor`]). A notice
        // that grows as lines go is met by giving up twice as much from the third try on.
        let mut next = limits.less(over, &limits.floor());
        let mut too_big = limits;
        for attempt in 0.. {
            let Some(budget) = next else {
                break;
            };
            let tried = Self::cut(view, direction, steps, offset, budget, max_tokens, named);
            let Some(over) = limits.over(&tried.0.content) else {
                // A shrink past what was needed (the notice shortened as lines went) is won
                // back by bisection towards the smallest budget known to be too big. A bigger
                // budget can give a shorter text (a highlight and its notice line come or go
                // with what the ends show): the text kept is the one that shows the most of
                // the output's lines, then the fullest.
                let (mut fits, mut fit) = (tried, budget);
                for _ in 0..3 {
                    let Some(mid) = fit.towards(&too_big) else {
                        break;
                    };
                    let tried = Self::cut(view, direction, steps, offset, mid, max_tokens, named);
                    if let Some(over) = limits.over(&tried.0.content) {
                        too_big = mid.where_over(over, &too_big);
                        continue;
                    }
                    fit = mid;
                    if fullness(&tried.0, &limits) >= fullness(&fits.0, &limits) {
                        fits = tried;
                    }
                }
                return Self::with_folds(fits);
            };
            too_big = budget.where_over(over, &too_big);
            next = budget.less(over.times(if attempt < 1 { 1 } else { 2 }), &limits.least());
        }
        // The limits are too small for the preview's own lines to come out of them: the
        // output's lines take the limits themselves, and the notice comes on top.
        Self::with_folds(Self::cut(
            view, direction, steps, offset, limits, max_tokens, named,
        ))
    }

    /// A preview, and the first lines of the template folds whose markers it shows.
    fn with_folds((preview, selection): (Preview, Selection)) -> (Preview, Vec<u64>) {
        let shown_folds = selection
            .segments()
            .filter(|seg| compact::is_fold_marker(seg))
            .map(|seg| seg.first)
            .collect();
        (preview, shown_folds)
    }

    /// The cut preview of `view` whose shown lines take at most `budget` (of the limits,
    /// `max_tokens` among them), naming the limit `named` says, and what it shows.
    fn cut<'v>(
        view: &'v CaptureView<'_>,
        direction: Direction,
        steps: &dyn NextStep,
        offset: Offset,
        budget: Budget,
        max_tokens: Option<usize>,
        named: Named,
    ) -> (Preview, Selection<'v>) {
        let (mut selection, found) = select_within(view, direction, budget);
        // The notice names the limit itself, not what was left of it for the output's lines.
        selection.max_tokens = max_tokens;
        let shown = shown_ranges(&selection, view.total_lines);
        let shown_lines: u64 = shown.iter().map(|r| r.last - r.first + 1).sum();
        let mut preview = Preview {
            truncated: true,
            content: String::new(),
            spill_path: view.spill_path.map(|p| p.to_string_lossy().into_owned()),
            total_lines: view.total_lines,
            total_bytes: view.total_bytes,
            truncated_by: match named {
                Named::BySelection => Some(found),
                Named::FoldedOnly => None,
                Named::Over(kind) => Some(kind),
            },
            shown,
            omitted_lines: view.total_lines - shown_lines,
            partial_line: selection.partial().map(|p| p.info),
            spill_capped: view.spill_capped,
            redactions: Counts::new(),
            next: None,
            stopped_at: None,
            limits_at: None,
            notice_at: None,
            folds: Vec::new(),
        };
        let rendered = render(view, &selection, &preview, steps, offset);
        preview.content = rendered.content;
        preview.next = rendered.next;
        preview.notice_at = Some(rendered.notice_at);
        (preview, selection)
    }

    /// Replaces the credentials in the shown text with `[redacted: KIND]` markers and says so
    /// in one line at the end; the spill keeps the original. Each part between the preview's
    /// own markers is redacted on its own (a key block cut by an omission is redacted up to
    /// the marker, not through it), and the notice is left as it is.
    ///
    /// Runs on the bounded preview only, never on the whole output, so it costs the same
    /// however much the command printed.
    pub fn redact(&mut self, redactor: &Redactor) {
        let (body, notice) = self.content.split_at(self.output_end());
        let mut counts = Counts::new();
        let body = redactor.redact_parts(body, is_marker, &mut counts);
        let line = match self.spill_path {
            Some(_) => notice_line(&counts),
            None => unkept_notice_line(&counts),
        };
        let Some(line) = line else {
            return;
        };
        let moved = body.len() as isize - (self.content.len() - notice.len()) as isize;
        self.next = self.next.as_ref().map(|next| next.moved(moved));
        self.stopped_at = self.stopped_at.map(|at| moved_span(at, moved));
        self.limits_at = self.limits_at.map(|at| moved_span(at, moved));
        self.notice_at = self.notice_at.map(|at| at.saturating_add_signed(moved));
        let mut content = body;
        content.push_str(notice);
        if !content.is_empty() && !content.ends_with('\n') {
            content.push('\n');
        }
        content.push_str(&line);
        content.push('\n');
        self.content = content;
        for (kind, n) in counts {
            *self.redactions.entry(kind).or_default() += n;
        }
    }

    /// Where the output's own text ends and spillway's lines begin: the notice of a cut
    /// preview, or the line that names what the run's end stopped.
    fn output_end(&self) -> usize {
        let c = &self.content;
        let notice = match self.notice_at {
            Some(at) if self.truncated && at <= c.len() && c.is_char_boundary(at) => at,
            _ => c.len(),
        };
        match self.stopped_at {
            Some([start, _]) if start <= notice && c.is_char_boundary(start) => start,
            _ => notice,
        }
    }

    /// Renumbers the fields from the view's lines to the spill's.
    fn shift(&mut self, offset: Offset) {
        for range in &mut self.shown {
            range.first += offset.lines;
            range.last += offset.lines;
        }
        if let Some(part) = &mut self.partial_line {
            part.line += offset.lines;
        }
        self.total_lines += offset.lines;
        self.total_bytes += offset.bytes;
    }
}

/// Whether the whole output is within every limit (`max_tokens` among them, when given).
fn within(view: &CaptureView<'_>, max_tokens: Option<usize>) -> bool {
    let limits = view.limits;
    view.total_bytes <= limits.max_bytes() as u64
        && view.total_lines <= limits.max_lines() as u64
        && max_tokens
            .is_none_or(|n| crate::engine::tokens::count(&String::from_utf8_lossy(view.head)) <= n)
}

/// The limit a cut preview's notice names as the one that cut it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Named {
    /// The output is over a limit: the one the selection found bound it.
    BySelection,
    /// The output is within every limit and only folded: none.
    FoldedOnly,
    /// The output is within every limit, but its folded text with the notice was not: that
    /// limit.
    Over(LimitKind),
}

/// How much of the output a cut preview within `limits` gives: the output's lines it shows
/// whole, then the larger share of a limit its text takes.
fn fullness(preview: &Preview, limits: &Budget) -> (u64, f64) {
    let lines = preview.shown.iter().map(|r| r.last + 1 - r.first).sum();
    (lines, limits.share(&preview.content))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::capture::{Capture, Limits, SpillPolicy};
    use crate::program::CliSteps;
    use crate::protocol::{LimitKind, LineRange, PartialLine};
    use crate::storage::spill::DataDir;
    use std::path::Path;

    fn preview_of(text: &str, lines: u64, bytes: u64, direction: Direction) -> Preview {
        let mut c = Capture::new(Limits::new(lines, bytes).unwrap(), SpillPolicy::Never);
        c.write(text);
        c.finish();
        Preview::build(&c.view(), direction, &CliSteps)
    }

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    /// The text of spill lines `first..=last`, each with its newline.
    fn lines_of(text: &str, range: LineRange) -> String {
        text.split_inclusive('\n')
            .skip(range.first as usize - 1)
            .take((range.last - range.first + 1) as usize)
            .collect()
    }

    #[test]
    fn output_within_limits_is_returned_exactly() {
        for text in ["", "one line", "a\nb\n", "a\nb", "\n"] {
            let p = preview_of(text, 2, 100, Direction::Both);
            assert!(!p.truncated);
            assert_eq!(p.content, text);
            assert_eq!(p.truncated_by, None);
            assert_eq!(p.omitted_lines, 0);
            let expected = Preview::whole(text.to_string(), p.total_lines).shown;
            assert_eq!(p.shown, expected);
        }
    }

    #[test]
    fn a_head_shows_the_start_of_a_line_too_long_for_the_room_left() {
        let text = format!("start\nsecond\n{}\nafter\n", "z".repeat(5000));
        let p = preview_of(&text, 10, 300, Direction::Head);
        assert_eq!(p.shown, vec![LineRange { first: 1, last: 2 }]);
        let part = p.partial_line.unwrap();
        assert_eq!((part.line, part.line_bytes), (3, 5000));
        assert!(part.shown_bytes >= 280, "{part:?}");
        let shown = "z".repeat(part.shown_bytes as usize);
        assert!(
            p.content
                .starts_with(&format!("start\nsecond\n{shown}\n[... line 3 goes on: "))
        );
        assert!(p.content.contains("showing lines 1-2 and the first "));
        // Little room left (under a fifth of the budget, once the notice has its part): the
        // lines alone.
        let text = format!("{}\n{}\n", "a".repeat(400), "z".repeat(5000));
        let p = preview_of(&text, 10, 600, Direction::Head);
        assert_eq!((p.shown.len(), p.partial_line), (1, None), "{}", p.content);
        assert!(p.content.len() <= 600);
    }

    #[test]
    fn one_line_shown_is_named_as_one() {
        let p = preview_of(&numbered(5), 1, 300, Direction::Head);
        assert!(
            p.content.contains("showing line 1 of 5 lines"),
            "{}",
            p.content
        );
    }

    #[test]
    fn head_keeps_the_first_lines_and_points_past_them() {
        let text = numbered(10);
        let p = preview_of(&text, 3, 1000, Direction::Head);
        assert!(p.truncated);
        assert_eq!(p.shown, vec![LineRange { first: 1, last: 3 }]);
        assert!(p.content.starts_with("line 1\nline 2\nline 3\n\n[spillway"));
        assert_eq!(p.truncated_by, Some(LimitKind::Lines));
        assert_eq!(p.omitted_lines, 7);
        assert!(p.content.contains("showing lines 1-3 of 10 lines"));
        assert!(p.content.contains("the 3-line limit"));
    }

    #[test]
    fn tail_keeps_the_last_lines_within_the_byte_budget() {
        let text = numbered(100);
        let p = preview_of(&text, 1000, 30, Direction::Tail);
        // "line 97\n" .. "line 100\n" are 8+8+8+9 = 33 bytes: only three fit.
        assert_eq!(
            p.shown,
            vec![LineRange {
                first: 98,
                last: 100
            }]
        );
        assert!(p.content.starts_with("line 98\nline 99\nline 100\n\n"));
        assert_eq!(p.truncated_by, Some(LimitKind::Bytes));
    }

    #[test]
    fn both_splits_the_budget_around_a_marker() {
        let text = numbered(100);
        let p = preview_of(&text, 10, 10_000, Direction::Both);
        // Ten lines in all: three from each end, the marker, the blank line and the notice's
        // two (no spill here).
        assert_eq!(p.content.lines().count(), 10, "{}", p.content);
        assert_eq!(
            p.shown,
            vec![
                LineRange { first: 1, last: 3 },
                LineRange {
                    first: 98,
                    last: 100
                }
            ]
        );
        assert!(
            p.content
                .contains("line 3\n[... 94 lines omitted (lines 4-97) ...]\nline 98\n")
        );
    }

    #[test]
    fn a_long_line_at_one_end_does_not_starve_the_other() {
        // Line 1 alone is more than half the byte budget: it is shown in part (its start and
        // its end), in its half, and the tail keeps the other half.
        let mut text = format!("{}\n", "x".repeat(700));
        text.push_str(&numbered(200));
        let p = preview_of(&text, 1000, 1000, Direction::Both);
        // What the notice and the markers leave of the 1,000 bytes, split in halves, and
        // the line's half split again between its start and its end.
        let part = p.partial_line.unwrap();
        assert_eq!((part.line, part.line_bytes), (1, 700));
        assert!((300..500).contains(&part.shown_bytes), "{part:?}");
        assert!(p.content.len() <= 1000, "{}", p.content);
        let ends = part.ends.unwrap();
        assert!(p.content.starts_with(&format!(
            "{}\n[... line 1 goes on: {} bytes omitted; its last {} follow ...]\n{}\n",
            "x".repeat(ends.start_bytes as usize),
            700 - part.shown_bytes,
            ends.end_bytes,
            "x".repeat(ends.end_bytes as usize)
        )));
        let shown: u64 = p.shown.iter().map(|r| r.last - r.first + 1).sum();
        let tail = p.shown.last().unwrap();
        assert_eq!(tail.last, 201);
        assert!(shown > 300 / 9, "{:?}", p.shown);
        let shown_bytes: usize = p.shown.iter().map(|&r| lines_of(&text, r).len()).sum();
        assert!(shown_bytes + part.shown_bytes as usize <= 1000);
    }

    #[test]
    fn shown_text_never_exceeds_either_limit() {
        let text: String = (0..300)
            .map(|i| format!("{}\n", "y".repeat(i % 37)))
            .collect();
        for direction in [Direction::Head, Direction::Tail, Direction::Both] {
            for (lines, bytes) in [(1, 1000), (7, 50), (50, 7), (299, 5000)] {
                let p = preview_of(&text, lines, bytes, direction);
                let shown: Vec<String> = p.shown.iter().map(|&r| lines_of(&text, r)).collect();
                let n: u64 = p.shown.iter().map(|r| r.last - r.first + 1).sum();
                assert!(n <= lines);
                assert!(shown.iter().map(String::len).sum::<usize>() as u64 <= bytes);
                for part in shown {
                    assert!(p.content.contains(&part));
                }
            }
        }
    }

    #[test]
    fn a_single_huge_line_is_cut_at_a_char_boundary() {
        let text = "é".repeat(1000); // 2000 bytes, one line
        let head = preview_of(&text, 10, 101, Direction::Head);
        let part = head.partial_line.unwrap();
        assert_eq!(
            part,
            PartialLine {
                line: 1,
                shown_bytes: 100,
                line_bytes: 2000,
                ends: None
            }
        );
        assert!(head.content.starts_with(&"é".repeat(50)));
        assert!(head.shown.is_empty());
        assert!(
            head.content
                .contains("showing the first 100 of line 1's 2000 bytes")
        );
        // A tail shows the line's start and end, half the budget each, whole characters.
        let tail = preview_of(&format!("{text}\n"), 10, 101, Direction::Tail);
        assert_eq!(tail.partial_line.unwrap().shown_bytes, 100);
        assert!(
            tail.content
                .contains("showing the first 50 and the last 50 of line 1's 2000 bytes")
        );
    }

    #[test]
    fn the_last_line_partial_names_its_number_and_size() {
        let mut text = numbered(49_999);
        text.push_str(&"z".repeat(104_857));
        let p = preview_of(&text, 2000, 51_200, Direction::Tail);
        // All the 51,200 bytes but what the markers and the notice take, half to each end.
        let part = p.partial_line.unwrap();
        assert_eq!((part.line, part.line_bytes), (50_000, 104_857));
        assert!(part.shown_bytes > 50_000, "{part:?}");
        assert!(p.content.len() <= 51_200);
        let ends = part.ends.unwrap();
        assert_eq!(ends.start_bytes + ends.end_bytes, part.shown_bytes);
        assert!(ends.start_bytes.abs_diff(ends.end_bytes) <= 1, "{ends:?}");
        assert!(p.content.contains(&format!(
            "showing the first {} and the last {} of line 50000's 104857 bytes",
            ends.start_bytes, ends.end_bytes
        )));
        // In `both` the huge last line leaves the head its budget.
        let both = preview_of(&text, 2000, 51_200, Direction::Both);
        assert_eq!(both.shown.first().map(|r| r.first), Some(1));
    }

    #[test]
    fn the_notice_gives_the_spill_path_and_the_next_offset() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = DataDir::open(tmp.path()).unwrap();
        let mut c = Capture::new(
            Limits::new(4, 1000).unwrap(),
            SpillPolicy::WhenTruncated(dir),
        );
        c.write(&numbered(10));
        c.finish();
        let p = Preview::build(&c.view(), Direction::Both, &CliSteps);
        let path = p.spill_path.clone().unwrap();
        assert!(Path::new(&path).is_absolute());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), numbered(10));
        assert!(p.content.contains(&format!("Full output: {path}")));
        assert!(
            p.content
                .contains(&format!("spillway read {path} --offset 3"))
        );
        assert!(p.content.contains(&format!("grep -n -E 'PATTERN' {path}")));
    }

    #[test]
    fn the_notice_says_when_nothing_was_saved() {
        let p = preview_of(&numbered(10), 2, 1000, Direction::Head);
        assert!(p.spill_path.is_none());
        assert!(p.content.contains("The full output was not saved."));
    }

    #[test]
    fn a_token_budget_holds_the_shown_text() {
        // Names that differ in letters, so no two lines fold together.
        let name = |i: u8| {
            format!(
                "{}{}",
                char::from(b'a' + i % 26),
                char::from(b'a' + i / 26 % 26)
            )
        };
        let text: String = (0..=2000u32)
            .map(|i| {
                format!(
                    "warning: unused variable `{}` in module parser::expr\n",
                    name(i as u8)
                )
            })
            .collect();
        let mut c = Capture::new(Limits::default(), SpillPolicy::Never);
        c.write(&text);
        c.finish();
        for budget in [40, 500, 3000] {
            let p = Preview::build_with(&c.view(), Direction::Both, &CliSteps, Some(budget));
            let shown: String = p.shown.iter().map(|&r| lines_of(&text, r)).collect();
            assert!(crate::engine::tokens::count(&shown) <= budget, "{budget}");
            assert!(!p.shown.is_empty());
            assert_eq!(p.truncated_by, Some(LimitKind::Tokens));
            assert!(p.content.contains(&format!("the {budget}-token budget")));
        }
    }

    #[test]
    fn short_output_over_the_token_budget_is_truncated() {
        let text = "alpha beta gamma delta\n".repeat(20);
        let mut c = Capture::new(Limits::default(), SpillPolicy::Never);
        c.write(&text);
        c.finish();
        let fits = Preview::build_with(&c.view(), Direction::Both, &CliSteps, Some(10_000));
        assert!(!fits.truncated);
        let cut = Preview::build_with(&c.view(), Direction::Both, &CliSteps, Some(30));
        assert!(cut.truncated);
        assert_eq!(cut.truncated_by, Some(LimitKind::Tokens));
    }

    #[test]
    fn highlights_carry_the_needle_from_the_middle() {
        let mut text = numbered(500);
        text.push_str("error[E0308]: mismatched types\n  --> src/ledger.rs:34:18\n");
        text.push_str(&numbered(500));
        let p = preview_of(&text, 100, 100_000, Direction::Both);
        assert!(p.content.contains(
            "[at line 501]\nerror[E0308]: mismatched types\n  --> src/ledger.rs:34:18\n"
        ));
        assert!(p.shown.contains(&LineRange {
            first: 501,
            last: 502
        }));
        let lines: u64 = p.shown.iter().map(|r| r.last - r.first + 1).sum();
        assert!(lines <= 100);
        // Without highlights the needle is lost.
        let mut c =
            Capture::with_patterns(Limits::new(100, 100_000).unwrap(), SpillPolicy::Never, None);
        c.write(&text);
        c.finish();
        let plain = Preview::build(&c.view(), Direction::Both, &CliSteps);
        assert!(!plain.content.contains("mismatched types"));
    }

    #[test]
    fn strong_highlights_come_before_weak_ones_and_the_rest_are_counted() {
        let mut text = numbered(300);
        for i in 0..30 {
            text.push_str(&format!("make[1]: *** [Makefile:{i}: all] Error 1\n"));
        }
        text.push_str("frame.c:34:14: error: no member named 'len'\n");
        text.push_str(&numbered(300));
        let tmp = tempfile::tempdir().unwrap();
        let dir = DataDir::open(tmp.path()).unwrap();
        let mut c = Capture::new(Limits::new(40, 100_000).unwrap(), SpillPolicy::Always(dir));
        c.write(&text);
        c.finish();
        let p = Preview::build(&c.view(), Direction::Both, &CliSteps);
        assert!(
            p.content
                .contains("\nframe.c:34:14: error: no member named 'len'\n")
        );
        assert!(p.content.contains("more omitted lines look like errors"));
        assert!(
            p.content
                .contains("look like errors: grep -n -E 'error|FAIL")
        );
    }

    #[test]
    fn runs_of_alike_lines_are_folded_in_the_preview_only() {
        let mut text = String::from("start\n");
        for i in 0..=500 {
            text.push_str(&format!("Downloading crates ... {i}/500 ({}%)\n", i / 5));
        }
        text.push_str(&numbered(3000));
        let p = preview_of(&text, 20, 100_000, Direction::Head);
        assert!(p.content.starts_with(
            "start\nDownloading crates ... 0/500 (0%)\n\
             [... 499 similar lines, lines 3-501: same text, other numbers ...]\n\
             Downloading crates ... 500/500 (100%)\nline 1\n"
        ));
        // The run costs two lines, so the head reaches further; the blank line and the notice
        // take three of the twenty.
        assert_eq!(p.content.lines().count(), 20, "{}", p.content);
        assert_eq!(
            p.shown,
            vec![
                LineRange { first: 1, last: 2 },
                LineRange {
                    first: 502,
                    last: 515
                }
            ]
        );
        assert!(p.content.contains("line 13\n\n"));
        for range in &p.shown {
            assert!(p.content.contains(&lines_of(&text, *range)));
        }
    }

    #[test]
    fn a_folded_run_over_the_line_limit_is_cut_by_lines_not_bytes() {
        // Found by the notice check of tests/invariants.rs: the run folds into one shown line,
        // fewer than the limit, and the notice named the byte limit, which the output was within.
        let text: String = (0..21)
            .map(|i| format!("Downloading step {i} of 21\n"))
            .collect();
        let p = preview_of(&text, 2, 536, Direction::Head);
        assert_eq!(p.truncated_by, Some(LimitKind::Lines));
        assert!(p.content.contains("folded to fit the 2-line limit"));
    }

    /// The bytes of the output lines a preview shows whole.
    fn shown_bytes(text: &str, p: &Preview) -> usize {
        p.shown.iter().map(|&r| lines_of(text, r).len()).sum()
    }

    #[test]
    fn a_log_whose_lines_all_differ_fills_the_budget_and_ends_with_its_last_line() {
        let text: String = (0..5000)
            .map(|i| {
                format!(
                    "2026-11-23 12:{:02}:{:02} INFO request {:x} GET /api/{} {}ms\n",
                    i / 60 % 60,
                    i % 60,
                    i * 2_654_435_761u64 % 0xffff_ffff,
                    ["users", "orders", "items"][(i % 3) as usize],
                    i % 97
                )
            })
            .collect();
        let p = preview_of(&text, 2000, 51200, Direction::Both);
        assert!(
            !p.content.contains("repeated"),
            "lines that differ are not repeats"
        );
        assert!(!p.content.contains("similar"));
        let last = text.lines().last().unwrap();
        assert!(p.content.contains(&format!("{last}\n\n[spillway: ")));
        assert!(
            shown_bytes(&text, &p) * 10 >= 51200 * 8,
            "{}",
            shown_bytes(&text, &p)
        );
        assert_eq!(p.truncated_by, Some(LimitKind::Bytes));
    }

    #[test]
    fn a_report_among_thousands_of_progress_lines_is_shown_whole() {
        let progress = |i: usize| format!("==4242== checked {i} of 3000 blocks so far\n");
        let mut text: String = (0..1500).map(progress).collect();
        let report = "==4242== Invalid read of size 8\n\
                      ==4242==    at 0x1091A6: main (demo.c:12)\n\
                      ==4242==  Address 0x4a8f048 is 8 bytes after a block of size 64 alloc'd\n";
        text.push_str(report);
        text.extend((1500..3000).map(progress));
        let p = preview_of(&text, 2000, 51200, Direction::Both);
        assert!(p.content.contains(report), "{}", p.content);
        // The runs on either side are opened from the output's ends while the budget lasts,
        // and what is left of them stays folded.
        assert!(
            p.content
                .starts_with(&(0..100).map(progress).collect::<String>())
        );
        let body = &p.content[..p.notice_at.unwrap() + 1];
        assert!(body.ends_with(&(2900..3000).map(progress).collect::<String>()));
        assert_eq!(body.matches(" similar lines, lines ").count(), 2, "{body}");
        assert!(p.content.contains("folded to fit the 51200-byte limit"));
        assert!(!p.content.contains("omitted"));
        let shown: usize = body
            .split_inclusive('\n')
            .filter(|l| !l.starts_with("[... "))
            .map(str::len)
            .sum();
        assert!(shown <= 51200 && shown > 51200 * 8 / 10, "{shown}");
    }

    #[test]
    fn identical_lines_are_repeats_and_short_runs_stay() {
        let mut text = "same\n".repeat(3000);
        text.push_str("a\nb\na\nb\nend\n");
        let p = preview_of(&text, 100, 51200, Direction::Both);
        assert!(
            p.content.starts_with(
                "same\n[... repeated 3000 times, lines 1-3000 ...]\na\nb\na\nb\nend\n\n"
            )
        );
    }

    #[test]
    fn the_notice_stays_short_whatever_the_output() {
        // Runs and single lines in turn: every fold starts a range of its own.
        let mut text = String::new();
        for block in 0..300 {
            text.push_str(&format!("block {block} starts here\n"));
            text.push_str(&"tick tock tick tock\n".repeat(4));
        }
        let mut c = Capture::new(
            Limits::new(300, 51200).unwrap(),
            SpillPolicy::Always(DataDir::open(&tempfile::tempdir().unwrap().keep()).unwrap()),
        );
        c.write(&text);
        c.finish();
        let p = Preview::build(&c.view(), Direction::Both, &CliSteps);
        let notice = &p.content[p.notice_at.unwrap() + 2..];
        assert!(p.shown.len() > 50, "{}", p.shown.len());
        assert!(notice.contains("more ranges in between (JSON `shown` lists all)"));
        assert!(notice.len() <= 600, "{} bytes: {notice}", notice.len());
    }

    #[test]
    fn json_has_exactly_the_documented_fields() {
        let p = preview_of(&numbered(10), 2, 1000, Direction::Head);
        let value = serde_json::to_value(&p).unwrap();
        let mut keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "content",
                "omitted_lines",
                "partial_line",
                "shown",
                "spill_path",
                "total_bytes",
                "total_lines",
                "truncated",
                "truncated_by"
            ]
        );
        assert_eq!(value["truncated_by"], "lines");
        assert_eq!(value["shown"][0]["first"], 1);
    }
}
