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

use crate::capture::{CaptureView, SpillCap, SpillProblem};

mod pick;
use pick::{Highlight, choose_highlights};

/// Which part of a long output the preview keeps.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
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
    /// The model-token budget (`max_tokens`), when one was given and it was the one that cut.
    Tokens,
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
    /// Set when the spill file stopped at its cap (`--max-spill`) before the output ended;
    /// left out of the JSON otherwise, so the documented shape stays exact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill_capped: Option<SpillCap>,
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

impl CliSteps {
    /// The notice of `content` (a preview whose notice [`CliSteps`] worded for `spill`) with
    /// its next steps worded by `to` instead.
    ///
    /// The daemon words every notice for the command line, and keeps finished runs' previews
    /// as sent; a front end with other means (the MCP server's tools) rewords them on the way
    /// out, so the daemon needs no per-client wording. This inverts [`CliSteps`] exactly:
    /// each step is recognised by its full form with this spill's own path, and only inside
    /// the notice (after the last empty line that starts `[spillway: `), so command output
    /// that merely looks like a step is never changed.
    pub fn reword(content: &str, spill: &Path, to: &dyn NextStep) -> String {
        let Some(start) = content.rfind(NOTICE_START) else {
            return content.to_string();
        };
        let (output, notice) = content.split_at(start);
        format!("{output}{}", reword_steps(notice, spill, to))
    }
}

/// What separates a preview's lines from its notice.
const NOTICE_START: &str = "\n\n[spillway: ";

/// How [`CliSteps::search`] starts.
const SEARCH_START: &str = "grep -n -E '";

/// Rewrites every step of `notice` that [`CliSteps`] would have written for `spill`.
fn reword_steps(notice: &str, spill: &Path, to: &dyn NextStep) -> String {
    let read_start = format!("spillway read {} --offset ", quote(spill));
    let search_end = format!(" {}", quote(spill));
    let mut out = String::with_capacity(notice.len());
    let mut rest = notice;
    loop {
        let read_at = rest.find(&read_start);
        let search_at = rest.find(SEARCH_START);
        let (at, is_read) = match (read_at, search_at) {
            (Some(r), Some(s)) if s < r => (s, false),
            (Some(r), _) => (r, true),
            (None, Some(s)) => (s, false),
            (None, None) => break,
        };
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let parsed = if is_read {
            parse_read(rest, &read_start).map(|(line, len)| (to.read_from(spill, line), len))
        } else {
            parse_search(rest, &search_end).map(|(pattern, len)| (to.search(spill, &pattern), len))
        };
        match parsed {
            Some((step, len)) => {
                out.push_str(&step);
                rest = &rest[len..];
            }
            // Not a step after all: keep its first character and look further on.
            None => {
                let skip = rest.chars().next().map_or(1, char::len_utf8);
                out.push_str(&rest[..skip]);
                rest = &rest[skip..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// `spillway read PATH --offset N` at the start of `text`: N and the step's length.
fn parse_read(text: &str, read_start: &str) -> Option<(u64, usize)> {
    let digits = text[read_start.len()..]
        .bytes()
        .take_while(u8::is_ascii_digit)
        .count();
    let end = read_start.len() + digits;
    text[read_start.len()..end]
        .parse()
        .ok()
        .map(|line| (line, end))
}

/// `grep -n -E 'PATTERN' PATH` at the start of `text`: the pattern, unquoted, and the
/// step's length.
fn parse_search(text: &str, search_end: &str) -> Option<(String, usize)> {
    let mut pattern = String::new();
    let mut pos = SEARCH_START.len();
    loop {
        let quote_at = pos + text[pos..].find('\'')?;
        pattern.push_str(&text[pos..quote_at]);
        // `'\''` is how CliSteps writes a quote inside the pattern.
        if text[quote_at..].starts_with(r"'\''") {
            pattern.push('\'');
            pos = quote_at + 4;
        } else {
            pos = quote_at + 1;
            break;
        }
    }
    text[pos..]
        .starts_with(search_end)
        .then(|| (pattern, pos + search_end.len()))
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
    /// Lines the head covers (shown, or folded into a shown line), and their bytes.
    head: usize,
    head_bytes: usize,
    /// The same for the tail.
    tail: usize,
    tail_bytes: usize,
    /// What the head and tail are made of, in output order.
    head_segments: Vec<Segment>,
    tail_segments: Vec<Segment>,
    partial: Option<Partial>,
    /// Lines from the omitted part that look like errors, in output order.
    highlights: Vec<Highlight>,
    /// The token budget, when one held the text (for the notice).
    max_tokens: Option<usize>,
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
        let mut preview = Self::build_relative(view, direction, steps, max_tokens, offset);
        preview.shift(offset);
        preview
    }

    /// The preview with the view's own line numbers in its fields (the content already
    /// speaks in the spill's).
    fn build_relative(
        view: &CaptureView<'_>,
        direction: Direction,
        steps: &dyn NextStep,
        max_tokens: Option<usize>,
        offset: Offset,
    ) -> Preview {
        let spill_path = view.spill_path.map(|p| p.to_string_lossy().into_owned());
        let limits = view.limits;
        if view.total_bytes <= limits.max_bytes() as u64
            && view.total_lines <= limits.max_lines() as u64
            && max_tokens
                .is_none_or(|n| crate::tokens::count(&String::from_utf8_lossy(view.head)) <= n)
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
                spill_capped: view.spill_capped,
            };
        }
        let (max_lines, max_bytes) = (limits.max_lines(), limits.max_bytes());
        let over_limits =
            view.total_bytes > max_bytes as u64 || view.total_lines > max_lines as u64;
        let (selection, by_tokens) = match max_tokens {
            None => (
                select_with_highlights(view, direction, max_lines, max_bytes),
                false,
            ),
            // Within lines and bytes, only the tokens can have cut it.
            Some(n) => {
                let (selection, shrunk) = fit_tokens(view, direction, n);
                (selection, shrunk || !over_limits)
            }
        };
        let shown = shown_ranges(&selection, view.total_lines);
        let shown_lines: u64 = shown.iter().map(|r| r.last - r.first + 1).sum();
        let truncated_by = if by_tokens {
            LimitKind::Tokens
        } else if shown_lines == limits.max_lines() as u64
            // Folded runs show fewer lines than the limit: then only the lines were over.
            || view.total_bytes <= limits.max_bytes() as u64
        {
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
            spill_capped: view.spill_capped,
        };
        preview.content = render(view, &selection, &preview, steps, offset);
        preview
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

/// Runs of at least this many alike lines are folded into their first line and a marker.
const FOLD_MIN: usize = 3;

/// A line of the preview, or a run of alike lines folded into its first one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Segment {
    /// Lines covered.
    lines: usize,
    /// Bytes covered, newlines included.
    bytes: usize,
    /// Bytes of the line shown (the run's first), newline included.
    shown_bytes: usize,
}

/// Letters a line needs before its numbers may differ within a folded run: a counter in a line
/// of text (`Downloading 45%`) is progress noise, but a line that is mostly its number
/// (`seq`, `line 12`) carries the number as information.
const FOLD_MIN_LETTERS: usize = 10;

/// Whether two lines fold together: identical, or the same line of text but for its numbers
/// (each run of digits counts as one digit).
fn alike(a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    if a.iter().filter(|c| c.is_ascii_alphabetic()).count() < FOLD_MIN_LETTERS {
        return false;
    }
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].is_ascii_digit() && b[j].is_ascii_digit() {
            while i < a.len() && a[i].is_ascii_digit() {
                i += 1;
            }
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
        } else if a[i] == b[j] {
            i += 1;
            j += 1;
        } else {
            return false;
        }
    }
    i == a.len() && j == b.len()
}

/// Groups lines (in output order, each with its newline) into segments, folding runs. Lines
/// `keep` says look like errors are never folded: two failed test cases may differ only in a
/// number, and both matter.
fn fold(lines: &[&[u8]], keep: &dyn Fn(&[u8]) -> bool) -> Vec<Segment> {
    let mut segments: Vec<Segment> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let mut end = i + 1;
        if !keep(lines[i]) {
            while end < lines.len() && alike(lines[i], lines[end]) {
                end += 1;
            }
        }
        if end - i >= FOLD_MIN {
            segments.push(Segment {
                lines: end - i,
                bytes: lines[i..end].iter().map(|l| l.len()).sum(),
                shown_bytes: lines[i].len(),
            });
        } else {
            segments.extend(lines[i..end].iter().map(|l| Segment {
                lines: 1,
                bytes: l.len(),
                shown_bytes: l.len(),
            }));
        }
        i = end;
    }
    segments
}

/// The whole lines at the start of the head buffer, with their newlines, as segments.
fn head_segments(view: &CaptureView<'_>) -> Vec<Segment> {
    let mut lines = Vec::new();
    let mut pos = 0;
    while pos < view.head.len() {
        match memchr::memchr(b'\n', &view.head[pos..]) {
            Some(i) => {
                lines.push(&view.head[pos..pos + i + 1]);
                pos += i + 1;
            }
            None => {
                if view.is_whole() {
                    lines.push(&view.head[pos..]);
                }
                break;
            }
        }
    }
    fold(&lines, &|line| looks_like_error(view, line))
}

/// Whether highlights would pick `line` up (never, with highlights off).
fn looks_like_error(view: &CaptureView<'_>, line: &[u8]) -> bool {
    view.highlights
        .is_some_and(|p| p.is_match(&String::from_utf8_lossy(line)))
}

/// The whole lines at the end of the tail buffer as segments, the last one first.
fn tail_segments(view: &CaptureView<'_>) -> Vec<Segment> {
    let tail = view.tail;
    let mut lines = Vec::new();
    let mut end = tail.len();
    while end > 0 {
        let body_end = if tail[end - 1] == b'\n' { end - 1 } else { end };
        match memchr::memrchr(b'\n', &tail[..body_end]) {
            Some(nl) => {
                lines.push(&tail[nl + 1..end]);
                end = nl + 1;
            }
            None => {
                if view.tail_at_line_start {
                    lines.push(&tail[..end]);
                }
                break;
            }
        }
    }
    lines.reverse();
    let mut segments = fold(&lines, &|line| looks_like_error(view, line));
    segments.reverse();
    segments
}

/// What one end takes: segments, and the lines and bytes they cover.
#[derive(Debug, Default)]
struct Taken {
    segments: Vec<Segment>,
    lines: usize,
    bytes: usize,
    shown_lines: usize,
    shown_bytes: usize,
}

/// Greedily takes segments from the front of `segments` while the shown lines and bytes fit
/// the budget and the lines covered stay within `max_cover`.
fn take(segments: &[Segment], max_lines: usize, max_bytes: usize, max_cover: usize) -> Taken {
    let mut t = Taken::default();
    for &seg in segments {
        if t.shown_lines + 1 > max_lines
            || t.shown_bytes + seg.shown_bytes > max_bytes
            || t.lines + seg.lines > max_cover
        {
            break;
        }
        t.segments.push(seg);
        t.lines += seg.lines;
        t.bytes += seg.bytes;
        t.shown_lines += 1;
        t.shown_bytes += seg.shown_bytes;
    }
    t
}

/// Selects within a byte budget small enough that the shown text fits `max_tokens`; true when
/// the tokens, not the lines or bytes, were the binding limit.
fn fit_tokens(
    view: &CaptureView<'_>,
    direction: Direction,
    max_tokens: usize,
) -> (Selection, bool) {
    let max_lines = view.limits.max_lines();
    let mut max_bytes = view.limits.max_bytes();
    let mut shrunk = false;
    loop {
        let selection = select_with_highlights(view, direction, max_lines, max_bytes);
        let tokens = crate::tokens::count(&shown_text(view, &selection));
        if tokens <= max_tokens || max_bytes == 1 {
            let selection = Selection {
                max_tokens: Some(max_tokens),
                ..selection
            };
            return (selection, shrunk);
        }
        // Aim a little under, in proportion: each pass cuts the budget by 10 % at least.
        let aim = (max_bytes as u128 * max_tokens as u128 * 9 / (tokens as u128 * 10)) as usize;
        max_bytes = aim.clamp(1, max_bytes * 9 / 10);
        shrunk = true;
    }
}

/// The output text a selection shows (markers and notice excluded): what a budget counts.
fn shown_text(view: &CaptureView<'_>, s: &Selection) -> String {
    let mut text = String::new();
    if let Some(p) = &s.partial {
        let buf = if p.from_head { view.head } else { view.tail };
        text.push_str(&String::from_utf8_lossy(&buf[p.start..p.end]));
    }
    let shown_lines = |text: &mut String, buf: &[u8], segments: &[Segment]| {
        let mut pos = 0;
        for seg in segments {
            text.push_str(&String::from_utf8_lossy(&buf[pos..pos + seg.shown_bytes]));
            pos += seg.bytes;
        }
    };
    shown_lines(&mut text, view.head, &s.head_segments);
    for h in &s.highlights {
        text.push_str(&h.text);
    }
    shown_lines(
        &mut text,
        &view.tail[view.tail.len() - s.tail_bytes..],
        &s.tail_segments,
    );
    text
}

/// Selects head and tail lines; when lines are omitted and some of them look like errors,
/// gives those up to [`HIGHLIGHT_SHARE`] of the budget and the ends the rest.
fn select_with_highlights(
    view: &CaptureView<'_>,
    direction: Direction,
    max_lines: usize,
    max_bytes: usize,
) -> Selection {
    let first = select(view, direction, max_lines, max_bytes);
    if first.partial.is_some() {
        return first;
    }
    let omitted = (first.head as u64 + 1)..=(view.total_lines - first.tail as u64);
    let chosen = choose_highlights(
        &view.findings,
        &omitted,
        max_lines / HIGHLIGHT_SHARE,
        max_bytes / HIGHLIGHT_SHARE,
    );
    if chosen.is_empty() {
        return first;
    }
    let lines: u64 = chosen.iter().map(|h| h.last - h.first + 1).sum();
    let bytes: usize = chosen.iter().map(|h| h.text.len()).sum();
    // The ends share a smaller budget; one may still grow with the other's slack, and a
    // highlight it now covers is shown there anyway.
    let mut selection = select(
        view,
        direction,
        max_lines - lines as usize,
        max_bytes - bytes,
    );
    if selection.partial.is_some() {
        return first;
    }
    let still_omitted = (selection.head as u64 + 1)..=(view.total_lines - selection.tail as u64);
    selection.highlights = chosen
        .into_iter()
        .filter(|h| still_omitted.contains(&h.first) && still_omitted.contains(&h.last))
        .collect();
    selection
}

fn select(
    view: &CaptureView<'_>,
    direction: Direction,
    max_lines: usize,
    max_bytes: usize,
) -> Selection {
    let total = usize::try_from(view.total_lines).unwrap_or(usize::MAX);
    let heads = head_segments(view);
    let tails = tail_segments(view);
    let (head, tail) = match direction {
        Direction::Head => (take(&heads, max_lines, max_bytes, total), Taken::default()),
        Direction::Tail => (Taken::default(), take(&tails, max_lines, max_bytes, total)),
        Direction::Both => {
            // Each end gets half; then the tail, and after it the head, take what the other
            // left unused, so a few huge lines at one end cannot starve the other.
            let (half_lines, half_bytes) = (max_lines.div_ceil(2), max_bytes / 2);
            let head = take(&heads, half_lines, half_bytes, total);
            let tail = take(
                &tails,
                max_lines - head.shown_lines,
                max_bytes - head.shown_bytes,
                total - head.lines,
            );
            let head = take(
                &heads,
                max_lines - tail.shown_lines,
                max_bytes - tail.shown_bytes,
                total - tail.lines,
            );
            (head, tail)
        }
    };
    let mut s = Selection {
        head: head.lines,
        head_bytes: head.bytes,
        tail: tail.lines,
        tail_bytes: tail.bytes,
        head_segments: head.segments,
        tail_segments: tail.segments.into_iter().rev().collect(),
        ..Selection::default()
    };
    if s.head == 0 && s.tail == 0 {
        s.partial = Some(partial(view, direction == Direction::Head, max_bytes));
    }
    s
}

/// The part of one over-long line that fits: the start of line 1 for `head`, else the end of
/// the last line.
fn partial(view: &CaptureView<'_>, from_head: bool, budget: usize) -> Partial {
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

/// The lines that appear whole: each segment's first line and the highlights, as ranges.
/// Ranges merge only within one piece (the head, a highlight, the tail): between pieces the
/// content has a marker, so lines adjacent in the spill are not adjacent there.
fn shown_ranges(s: &Selection, total: u64) -> Vec<LineRange> {
    let mut ranges = segment_ranges(&s.head_segments, 1);
    ranges.extend(s.highlights.iter().map(|h| LineRange {
        first: h.first,
        last: h.last,
    }));
    ranges.extend(segment_ranges(&s.tail_segments, total - s.tail as u64 + 1));
    ranges
}

/// The shown lines of consecutive segments starting at line `first`, merged into ranges.
fn segment_ranges(segments: &[Segment], first: u64) -> Vec<LineRange> {
    let mut ranges: Vec<LineRange> = Vec::new();
    let mut at = first;
    for seg in segments {
        match ranges.last_mut() {
            Some(r) if r.last + 1 == at => r.last = at,
            _ => ranges.push(LineRange {
                first: at,
                last: at,
            }),
        }
        at += seg.lines as u64;
    }
    ranges
}

/// Appends an end's segments from `buf` (starting at its first line `first_line`): each
/// segment's shown line, and a marker after a folded run.
fn render_segments(out: &mut String, buf: &[u8], segments: &[Segment], first_line: u64) {
    let (mut pos, mut line) = (0, first_line);
    for seg in segments {
        out.push_str(&String::from_utf8_lossy(&buf[pos..pos + seg.shown_bytes]));
        if seg.lines > 1 {
            if !out.ends_with('\n') {
                out.push('\n');
            }
            let last = line + seg.lines as u64 - 1;
            let _ = writeln!(
                out,
                "[... repeated {} times, lines {line}-{last} ...]",
                seg.lines
            );
        }
        pos += seg.bytes;
        line += seg.lines as u64;
    }
}

fn render(
    view: &CaptureView<'_>,
    s: &Selection,
    preview: &Preview,
    steps: &dyn NextStep,
    offset: Offset,
) -> String {
    let base = offset.lines;
    let mut out = String::with_capacity(s.head_bytes + s.tail_bytes + 1024);
    if let Some(p) = &s.partial {
        let buf = if p.from_head { view.head } else { view.tail };
        out.push_str(&String::from_utf8_lossy(&buf[p.start..p.end]));
    }
    render_segments(&mut out, view.head, &s.head_segments, base + 1);
    let (first, last) = (s.head as u64 + 1, view.total_lines - s.tail as u64);
    let (first_shown, last_shown) = (base + first, base + last);
    if !s.highlights.is_empty() {
        let found = match s.highlights.len() {
            1 => "1 of them looks like an error: here it is, after its line number".to_string(),
            n => format!("{n} of them look like errors: here they are, each after its line number"),
        };
        let _ = writeln!(
            out,
            "[... {} lines omitted (lines {first_shown}-{last_shown}); {found} ...]",
            last + 1 - first,
        );
        for h in &s.highlights {
            let _ = writeln!(out, "[at line {}]", base + h.first);
            out.push_str(&h.text);
        }
        if s.tail > 0 {
            let _ = writeln!(out, "[... the last lines ...]");
        }
    } else if s.head > 0 && s.tail > 0 && last >= first {
        // With runs folded, the two ends may cover every line between them.
        let _ = writeln!(
            out,
            "[... {} lines omitted (lines {first_shown}-{last_shown}) ...]",
            last + 1 - first
        );
    }
    render_segments(
        &mut out,
        &view.tail[view.tail.len() - s.tail_bytes..],
        &s.tail_segments,
        base + view.total_lines - s.tail as u64 + 1,
    );
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push('\n');
    out.push_str(&notice(view, s, preview, steps, base));
    out
}

/// The instruction that ends a truncated preview: what is shown of how much, which limit cut
/// it, where the whole output is, and the exact next step. `base` is the number of spill lines before the view: past 0, the preview is of new output
/// only, and says so.
fn notice(
    view: &CaptureView<'_>,
    s: &Selection,
    p: &Preview,
    steps: &dyn NextStep,
    base: u64,
) -> String {
    let limit = match p.truncated_by {
        Some(LimitKind::Lines) => format!("the {}-line limit", view.limits.max_lines()),
        Some(LimitKind::Tokens) => {
            format!("the {}-token budget", s.max_tokens.unwrap_or_default())
        }
        _ => format!("the {}-byte limit", view.limits.max_bytes()),
    };
    let what = match &s.partial {
        Some(part) => format!(
            "showing the {} {} bytes of line {}, which is {} bytes",
            if part.from_head { "first" } else { "last" },
            part.info.shown_bytes,
            base + part.info.line,
            part.info.line_bytes
        ),
        None => {
            let listed: Vec<String> = p
                .shown
                .iter()
                .map(|r| {
                    if r.first == r.last {
                        (base + r.first).to_string()
                    } else {
                        format!("{}-{}", base + r.first, base + r.last)
                    }
                })
                .collect();
            format!("showing lines {}", list(&listed))
        }
    };
    let mut text = if base == 0 {
        format!(
            "[spillway: output truncated by {limit}: {what} of {} line{} ({} bytes in all).\n",
            p.total_lines,
            if p.total_lines == 1 { "" } else { "s" },
            p.total_bytes
        )
    } else {
        format!(
            "[spillway: new output truncated by {limit}: {what} of the new lines {}-{} ({} \
             bytes).\n",
            base + 1,
            base + p.total_lines,
            p.total_bytes
        )
    };
    let first_unseen = base + first_unseen_line(p);
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
            if let Some(cap) = view.spill_capped {
                let _ = write!(
                    text,
                    " (CAPPED: it stops at its {}-byte cap, in line {}; what follows is only in \
                     this preview)",
                    cap.bytes, cap.line
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
    let found = view.findings.found;
    let shown_candidates = view
        .findings
        .candidates
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
            assert!(crate::tokens::count(&shown) <= budget, "{budget}");
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
        let mut c = Capture::new(Limits::new(100, 100_000).unwrap(), SpillPolicy::Never)
            .with_highlights(None);
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
        assert!(
            p.content
                .contains("more lines in the omitted part look like errors")
        );
        assert!(p.content.contains("grep -n -E 'error|FAIL"));
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
            "start\nDownloading crates ... 0/500 (0%)\n[... repeated 501 times, lines 2-502 ...]\nline 1\n"
        ));
        // The run costs one line, so the head reaches further.
        assert_eq!(
            p.shown,
            vec![
                LineRange { first: 1, last: 2 },
                LineRange {
                    first: 503,
                    last: 520
                }
            ]
        );
        assert!(p.content.contains("line 18\n\n"));
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
        assert!(p.content.contains("truncated by the 2-line limit"));
    }

    #[test]
    fn alike_means_equal_but_for_numbers() {
        assert!(alike(b"Downloading 9%\n", b"Downloading 10%\n"));
        assert!(alike(b"same\n", b"same\n"));
        assert!(!alike(b"Compiling foo v0.1.0\n", b"Compiling bar v0.1.0\n"));
        assert!(!alike(b"a1\n", b"a\n"));
        // Two alike lines are not worth a marker.
        let lines: Vec<&[u8]> = vec![b"same\n", b"same\n", b"y\n"];
        assert_eq!(fold(&lines, &|_| false).len(), 3);
        // Lines that are mostly their number are not a counter.
        assert!(!alike(b"12\n", b"13\n"));
        assert!(!alike(b"line 12\n", b"line 13\n"));
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
