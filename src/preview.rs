//! Preview: what of a captured output the model sees, and the notice that says how to get the rest.
//!
//! The preview never shows more than `max_lines` lines or `max_bytes` bytes of output (the
//! elision marker and the notice are extra), and only whole lines, with one exception: when not
//! even one whole line fits the byte budget, `head` shows the first bytes of line 1 and `tail`
//! (and `both`) the last bytes of the last line, cut at a character boundary. Line numbers are
//! the spill file's own, 1-based, so a notice's read offset lands on the first line not seen.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::capture::{CaptureView, SpillProblem};

/// Which part of a long output the preview keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// The first lines: where a compiler's root-cause error usually is.
    Head,
    /// The last lines: where a run's result and final error usually are.
    Tail,
    /// The first and last lines around an elision marker, each end given half the budget.
    #[default]
    Both,
}

/// The limit that cut the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LimitKind {
    Lines,
    Bytes,
}

/// A 1-based inclusive range of spill lines that appears whole in the preview.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineRange {
    pub first: u64,
    pub last: u64,
}

/// A single line too long for the byte budget, of which only part is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartialLine {
    pub line: u64,
    pub shown_bytes: u64,
    pub line_bytes: u64,
}

/// The preview of one output: serialised by `--json` with exactly these fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preview {
    pub truncated: bool,
    /// The text to show: the output itself when it fits, else the kept lines, the elision
    /// marker and the notice.
    pub content: String,
    pub spill_path: Option<String>,
    pub total_lines: u64,
    pub total_bytes: u64,
    pub truncated_by: Option<LimitKind>,
    pub shown: Vec<LineRange>,
    pub omitted_lines: u64,
    pub partial_line: Option<PartialLine>,
}

/// How a notice words the next step, so each front end can name the commands or tools its
/// reader can actually call.
pub trait NextStep {
    /// How to read the spill from line `line` on.
    fn read_from(&self, spill: &Path, line: u64) -> String;
    /// How to search the whole spill for `pattern` (an extended regular expression).
    fn search(&self, spill: &Path, pattern: &str) -> String;
}

/// The command-line wording: `spillway read` and `grep`.
#[derive(Debug, Clone, Copy, Default)]
pub struct CliSteps;

impl NextStep for CliSteps {
    fn read_from(&self, spill: &Path, line: u64) -> String {
        format!("spillway read {} --offset {line}", quote(spill))
    }

    fn search(&self, spill: &Path, pattern: &str) -> String {
        // Always quoted: a pattern is read as one, even the placeholder.
        let pattern = pattern.replace('\'', r"'\''");
        format!("grep -n -E '{pattern}' {}", quote(spill))
    }
}

/// Quotes a path for a shell command line, only when it needs it.
fn quote(path: &Path) -> String {
    let text = path.to_string_lossy();
    shlex::try_quote(&text).map_or_else(|_| text.to_string(), |q| q.into_owned())
}

/// Which lines a preview keeps: `head` lines from the start, `tail` lines from the end, their
/// byte sizes, or a partial line when not one whole line fits.
#[derive(Debug, Default)]
struct Selection {
    head: usize,
    head_bytes: usize,
    tail: usize,
    tail_bytes: usize,
    partial: Option<Partial>,
    /// Lines from the omitted part that look like errors, in output order.
    highlights: Vec<Highlight>,
}

/// A highlighted line (and the location line after it), whole, with its spill line numbers.
#[derive(Debug, Clone)]
struct Highlight {
    first: u64,
    last: u64,
    /// The lines, each ending with a newline.
    text: String,
}

/// Share of each limit the highlights may take, out of the head and tail's budget.
const HIGHLIGHT_SHARE: usize = 5; // one fifth: 20 %

/// A short pattern for `grep -E` that lists lines like the highlights.
pub const HIGHLIGHT_GREP: &str = r"error|FAIL|panic|Exception|Traceback|FATAL|CRITICAL|\*\*\*";

/// Byte range of the partial line's shown part, within the head or tail buffer.
#[derive(Debug)]
struct Partial {
    from_head: bool,
    start: usize,
    end: usize,
    info: PartialLine,
}

impl Preview {
    /// Builds the preview of `view` with the notice worded by `steps`.
    pub fn build(view: &CaptureView<'_>, direction: Direction, steps: &dyn NextStep) -> Preview {
        let spill_path = view.spill_path.map(|p| p.to_string_lossy().into_owned());
        let limits = view.limits;
        if view.total_bytes <= limits.max_bytes() as u64
            && view.total_lines <= limits.max_lines() as u64
        {
            return Preview {
                truncated: false,
                content: String::from_utf8_lossy(view.head).into_owned(),
                spill_path,
                total_lines: view.total_lines,
                total_bytes: view.total_bytes,
                truncated_by: None,
                shown: whole_range(view.total_lines),
                omitted_lines: 0,
                partial_line: None,
            };
        }
        let selection = select_with_highlights(view, direction);
        let shown = shown_ranges(&selection, view.total_lines);
        let shown_lines: u64 = shown.iter().map(|r| r.last - r.first + 1).sum();
        let truncated_by = if shown_lines == limits.max_lines() as u64 {
            LimitKind::Lines
        } else {
            LimitKind::Bytes
        };
        let mut preview = Preview {
            truncated: true,
            content: String::new(),
            spill_path,
            total_lines: view.total_lines,
            total_bytes: view.total_bytes,
            truncated_by: Some(truncated_by),
            shown,
            omitted_lines: view.total_lines - shown_lines,
            partial_line: selection.partial.as_ref().map(|p| p.info),
        };
        preview.content = render(view, &selection, &preview, steps);
        preview
    }
}

fn whole_range(total_lines: u64) -> Vec<LineRange> {
    if total_lines == 0 {
        Vec::new()
    } else {
        vec![LineRange {
            first: 1,
            last: total_lines,
        }]
    }
}

/// Sizes (with their newline) of the whole lines at the start of the head buffer.
fn head_line_sizes(view: &CaptureView<'_>) -> Vec<usize> {
    let mut sizes = Vec::new();
    let mut pos = 0;
    while pos < view.head.len() {
        match memchr::memchr(b'\n', &view.head[pos..]) {
            Some(i) => {
                sizes.push(i + 1);
                pos += i + 1;
            }
            None => {
                if view.is_whole() {
                    sizes.push(view.head.len() - pos);
                }
                break;
            }
        }
    }
    sizes
}

/// Sizes (with their newline) of the whole lines at the end of the tail buffer, last first.
fn tail_line_sizes(view: &CaptureView<'_>) -> Vec<usize> {
    let tail = view.tail;
    let mut sizes = Vec::new();
    let mut end = tail.len();
    while end > 0 {
        let body_end = if tail[end - 1] == b'\n' { end - 1 } else { end };
        match memchr::memrchr(b'\n', &tail[..body_end]) {
            Some(nl) => {
                sizes.push(end - nl - 1);
                end = nl + 1;
            }
            None => {
                if view.tail_at_line_start {
                    sizes.push(end);
                }
                break;
            }
        }
    }
    sizes
}

/// Greedily takes lines from the front of `sizes` within the budget: (lines, bytes).
fn take(sizes: &[usize], max_lines: usize, max_bytes: usize) -> (usize, usize) {
    let mut bytes = 0;
    let mut lines = 0;
    for &size in sizes.iter().take(max_lines) {
        if bytes + size > max_bytes {
            break;
        }
        bytes += size;
        lines += 1;
    }
    (lines, bytes)
}

/// Selects head and tail lines; when lines are omitted and some of them look like errors,
/// gives those up to [`HIGHLIGHT_SHARE`] of the budget and the ends the rest.
fn select_with_highlights(view: &CaptureView<'_>, direction: Direction) -> Selection {
    let (max_lines, max_bytes) = (view.limits.max_lines(), view.limits.max_bytes());
    let first = select(view, direction, max_lines, max_bytes);
    if first.partial.is_some() {
        return first;
    }
    let omitted = (first.head as u64 + 1)..=(view.total_lines - first.tail as u64);
    let chosen = choose_highlights(
        view,
        &omitted,
        max_lines / HIGHLIGHT_SHARE,
        max_bytes / HIGHLIGHT_SHARE,
    );
    if chosen.is_empty() {
        return first;
    }
    let lines: u64 = chosen.iter().map(|h| h.last - h.first + 1).sum();
    let bytes: usize = chosen.iter().map(|h| h.text.len()).sum();
    // The ends shrink, so every chosen line stays in the omitted part.
    let mut selection = select(
        view,
        direction,
        max_lines - lines as usize,
        max_bytes - bytes,
    );
    if selection.partial.is_some() {
        return first;
    }
    selection.highlights = chosen;
    selection
}

/// Picks highlights among the candidates in `omitted` within the budget: strong ones before
/// weak ones, and in each group the first, the last, then evenly spread ones.
fn choose_highlights(
    view: &CaptureView<'_>,
    omitted: &std::ops::RangeInclusive<u64>,
    max_lines: usize,
    max_bytes: usize,
) -> Vec<Highlight> {
    let inside: Vec<_> = view
        .candidates()
        .into_iter()
        .filter(|c| omitted.contains(&c.line))
        .collect();
    let (strong, weak): (Vec<_>, Vec<_>) = inside.into_iter().partition(|c| c.strong);
    let mut chosen: Vec<Highlight> = Vec::new();
    let (mut lines, mut bytes) = (0, 0);
    for candidate in spread(&strong).into_iter().chain(spread(&weak)) {
        let mut text = format!("{}\n", candidate.text);
        let mut last = candidate.line;
        if let Some(context) = &candidate.context
            && omitted.contains(&(candidate.line + 1))
        {
            text.push_str(context);
            text.push('\n');
            last += 1;
        }
        let overlaps = chosen
            .iter()
            .any(|h| h.first <= last && candidate.line <= h.last);
        let size = (last - candidate.line + 1) as usize;
        if overlaps || lines + size > max_lines || bytes + text.len() > max_bytes {
            continue;
        }
        lines += size;
        bytes += text.len();
        chosen.push(Highlight {
            first: candidate.line,
            last,
            text,
        });
    }
    chosen.sort_by_key(|h| h.first);
    chosen
}

/// `items` in the order a short list should take them: the first, the last, then the middles
/// of ever smaller gaps, so a few picks cover the whole span.
fn spread<T: Copy>(items: &[T]) -> Vec<T> {
    let n = items.len();
    let mut order = Vec::with_capacity(n);
    let mut taken = vec![false; n];
    let mut take = |i: usize, order: &mut Vec<T>| {
        if !taken[i] {
            taken[i] = true;
            order.push(items[i]);
        }
    };
    if n == 0 {
        return order;
    }
    take(0, &mut order);
    take(n - 1, &mut order);
    let mut gaps = std::collections::VecDeque::from([(0, n - 1)]);
    while let Some((lo, hi)) = gaps.pop_front() {
        if hi - lo < 2 {
            continue;
        }
        let mid = lo + (hi - lo) / 2;
        take(mid, &mut order);
        gaps.push_back((lo, mid));
        gaps.push_back((mid, hi));
    }
    order
}

fn select(
    view: &CaptureView<'_>,
    direction: Direction,
    max_lines: usize,
    max_bytes: usize,
) -> Selection {
    let total = usize::try_from(view.total_lines).unwrap_or(usize::MAX);
    let heads = head_line_sizes(view);
    let tails = tail_line_sizes(view);
    let mut s = Selection::default();
    match direction {
        Direction::Head => (s.head, s.head_bytes) = take(&heads, max_lines, max_bytes),
        Direction::Tail => (s.tail, s.tail_bytes) = take(&tails, max_lines, max_bytes),
        Direction::Both => {
            // Each end gets half; then the tail, and after it the head, take what the other
            // left unused, so a few huge lines at one end cannot starve the other.
            let (half_lines, half_bytes) = (max_lines.div_ceil(2), max_bytes / 2);
            (s.head, s.head_bytes) = take(&heads, half_lines, half_bytes);
            let tails = &tails[..tails.len().min(total - s.head)];
            (s.tail, s.tail_bytes) = take(tails, max_lines - s.head, max_bytes - s.head_bytes);
            let heads = &heads[..heads.len().min(total - s.tail)];
            (s.head, s.head_bytes) = take(heads, max_lines - s.tail, max_bytes - s.tail_bytes);
        }
    }
    if s.head == 0 && s.tail == 0 {
        s.partial = Some(partial(view, direction == Direction::Head));
    }
    s
}

/// The part of one over-long line that fits: the start of line 1 for `head`, else the end of
/// the last line.
fn partial(view: &CaptureView<'_>, from_head: bool) -> Partial {
    let budget = view.limits.max_bytes();
    if from_head {
        let line_end = memchr::memchr(b'\n', view.head).unwrap_or(view.head.len());
        let end = floor_char_boundary(view.head, line_end.min(budget));
        return Partial {
            from_head,
            start: 0,
            end,
            info: PartialLine {
                line: 1,
                shown_bytes: end as u64,
                line_bytes: view.first_line_bytes,
            },
        };
    }
    let end = view.tail.len() - usize::from(view.ends_with_newline());
    let line_start = memchr::memrchr(b'\n', &view.tail[..end]).map_or(0, |nl| nl + 1);
    let start = ceil_char_boundary(view.tail, line_start.max(end.saturating_sub(budget)));
    Partial {
        from_head,
        start,
        end,
        info: PartialLine {
            line: view.total_lines,
            shown_bytes: (end - start) as u64,
            line_bytes: view.last_line_bytes,
        },
    }
}

/// UTF-8 continuation bytes look like `10xxxxxx`.
fn is_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

/// The longest prefix of `bytes[..i]` that ends on a character boundary (the head buffer itself
/// may end inside a character).
fn floor_char_boundary(bytes: &[u8], i: usize) -> usize {
    match std::str::from_utf8(&bytes[..i]) {
        Ok(_) => i,
        Err(e) => e.valid_up_to(),
    }
}

fn ceil_char_boundary(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && is_continuation(bytes[i]) {
        i += 1;
    }
    i
}

fn shown_ranges(s: &Selection, total: u64) -> Vec<LineRange> {
    let mut ranges = Vec::new();
    if s.head > 0 {
        ranges.push(LineRange {
            first: 1,
            last: s.head as u64,
        });
    }
    for h in &s.highlights {
        ranges.push(LineRange {
            first: h.first,
            last: h.last,
        });
    }
    if s.tail > 0 {
        ranges.push(LineRange {
            first: total - s.tail as u64 + 1,
            last: total,
        });
    }
    ranges
}

fn render(
    view: &CaptureView<'_>,
    s: &Selection,
    preview: &Preview,
    steps: &dyn NextStep,
) -> String {
    let mut out = String::with_capacity(s.head_bytes + s.tail_bytes + 1024);
    if let Some(p) = &s.partial {
        let buf = if p.from_head { view.head } else { view.tail };
        out.push_str(&String::from_utf8_lossy(&buf[p.start..p.end]));
    }
    out.push_str(&String::from_utf8_lossy(&view.head[..s.head_bytes]));
    let (first, last) = (s.head as u64 + 1, view.total_lines - s.tail as u64);
    if !s.highlights.is_empty() {
        let _ = writeln!(
            out,
            "[... {} lines omitted (lines {first}-{last}); {} of them look like errors: here they are, each after its line number ...]",
            last - first + 1,
            s.highlights
                .iter()
                .map(|h| h.last - h.first + 1)
                .sum::<u64>()
        );
        for h in &s.highlights {
            let _ = writeln!(out, "[at line {}]", h.first);
            out.push_str(&h.text);
        }
        if s.tail > 0 {
            let _ = writeln!(out, "[... the last lines ...]");
        }
    } else if s.head > 0 && s.tail > 0 {
        let _ = writeln!(
            out,
            "[... {} lines omitted (lines {first}-{last}) ...]",
            last - first + 1
        );
    }
    out.push_str(&String::from_utf8_lossy(
        &view.tail[view.tail.len() - s.tail_bytes..],
    ));
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push('\n');
    out.push_str(&notice(view, s, preview, steps));
    out
}

/// The instruction that ends a truncated preview: what is shown of how much, which limit cut
/// it, where the whole output is, and the exact next step.
fn notice(view: &CaptureView<'_>, s: &Selection, p: &Preview, steps: &dyn NextStep) -> String {
    let limit = match p.truncated_by {
        Some(LimitKind::Lines) => format!("the {}-line limit", view.limits.max_lines()),
        _ => format!("the {}-byte limit", view.limits.max_bytes()),
    };
    let what = match &s.partial {
        Some(part) => format!(
            "showing the {} {} bytes of line {}, which is {} bytes",
            if part.from_head { "first" } else { "last" },
            part.info.shown_bytes,
            part.info.line,
            part.info.line_bytes
        ),
        None => {
            let listed: Vec<String> = p
                .shown
                .iter()
                .map(|r| format!("{}-{}", r.first, r.last))
                .collect();
            format!("showing lines {}", list(&listed))
        }
    };
    let mut text = format!(
        "[spillway: output truncated by {limit}: {what} of {} lines ({} bytes in all).\n",
        p.total_lines, p.total_bytes
    );
    let first_unseen = first_unseen_line(p);
    match (view.spill_path, view.spill_problem) {
        (_, Some(SpillProblem::NotCreated { error })) => {
            let _ = writeln!(
                text,
                "The full output was NOT saved ({error}); the omitted lines are lost.]"
            );
            return text;
        }
        (Some(path), problem) => {
            let _ = write!(text, "Full output: {}", path.display());
            if let Some(SpillProblem::Incomplete { written, error }) = problem {
                let _ = write!(
                    text,
                    " (INCOMPLETE: only its first {written} bytes were saved: {error})"
                );
            }
            let _ = writeln!(text);
            if let Some(more) = more_highlights(view, s) {
                let _ = writeln!(
                    text,
                    "{more} more lines in the omitted part look like errors; list them: {}",
                    steps.search(path, HIGHLIGHT_GREP)
                );
            }
            let _ = write!(
                text,
                "Next: read the lines you have not seen, from line {first_unseen}: {}\n\
                 or search all of it: {}]\n",
                steps.read_from(path, first_unseen),
                steps.search(path, "PATTERN")
            );
        }
        (None, _) => {
            let _ = writeln!(text, "The full output was not saved.]");
        }
    }
    text
}

/// `a`, `a and b`, `a, b and c`.
fn list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// How many lines that look like errors the highlights leave out (candidates found anywhere,
/// less those shown), when there are any.
fn more_highlights(view: &CaptureView<'_>, s: &Selection) -> Option<u64> {
    let found = view.highlights.map_or(0, |h| h.found());
    let shown_candidates = view
        .candidates()
        .iter()
        .filter(|c| {
            c.line <= s.head as u64
                || c.line > view.total_lines - s.tail as u64
                || s.highlights.iter().any(|h| h.first == c.line)
        })
        .count() as u64;
    let more = found.saturating_sub(shown_candidates);
    (more > 0).then_some(more)
}

/// The first line that is not shown whole: the read offset a notice gives.
fn first_unseen_line(p: &Preview) -> u64 {
    match p.shown.first() {
        Some(r) if r.first == 1 => r.last + 1,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::{Capture, Limits, SpillPolicy};
    use crate::spill::DataDir;

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
            let expected = whole_range(p.total_lines);
            assert_eq!(p.shown, expected);
        }
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
        assert_eq!(
            p.shown,
            vec![
                LineRange { first: 1, last: 5 },
                LineRange {
                    first: 96,
                    last: 100
                }
            ]
        );
        assert!(
            p.content
                .contains("line 5\n[... 90 lines omitted (lines 6-95) ...]\nline 96\n")
        );
    }

    #[test]
    fn a_long_line_at_one_end_does_not_starve_the_other() {
        // Line 1 alone is more than half the byte budget.
        let mut text = format!("{}\n", "x".repeat(700));
        text.push_str(&numbered(200));
        let p = preview_of(&text, 1000, 1000, Direction::Both);
        let shown: u64 = p.shown.iter().map(|r| r.last - r.first + 1).sum();
        let tail = p.shown.last().unwrap();
        assert_eq!(tail.last, 201);
        // The tail got the head's unused half: far more than 500 bytes' worth of lines.
        assert!(shown > 500 / 9, "{:?}", p.shown);
        let shown_bytes: usize = p.shown.iter().map(|&r| lines_of(&text, r).len()).sum();
        assert!(shown_bytes <= 1000);
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
                line_bytes: 2000
            }
        );
        assert!(head.content.starts_with(&"é".repeat(50)));
        assert!(head.shown.is_empty());
        assert!(
            head.content
                .contains("showing the first 100 bytes of line 1, which is 2000 bytes")
        );
        let tail = preview_of(&format!("{text}\n"), 10, 101, Direction::Tail);
        assert_eq!(tail.partial_line.unwrap().shown_bytes, 100);
        assert!(
            tail.content
                .contains("showing the last 100 bytes of line 1")
        );
    }

    #[test]
    fn the_last_line_partial_names_its_number_and_size() {
        let mut text = numbered(49_999);
        text.push_str(&"z".repeat(104_857));
        let p = preview_of(&text, 2000, 51_200, Direction::Tail);
        assert_eq!(
            p.partial_line,
            Some(PartialLine {
                line: 50_000,
                shown_bytes: 51_200,
                line_bytes: 104_857
            })
        );
        assert!(
            p.content
                .contains("showing the last 51200 bytes of line 50000, which is 104857 bytes")
        );
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
