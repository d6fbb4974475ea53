//! Preview: what of a captured output the model sees, and the notice that says how to get the rest.
//!
//! The preview never shows more than `max_lines` lines or `max_bytes` bytes of output (the
//! elision marker and the notice are extra), and only whole lines, with one exception: when not
//! even one whole line fits the byte budget, `head` shows the first bytes of line 1 and `tail`
//! (and `both`) the last bytes of the last line, cut at a character boundary. Line numbers are
//! the spill file's own, 1-based, so a notice's read offset lands on the first line not seen.

use std::fmt::Write as _;
use std::path::Path;

use std::collections::HashSet;

use crate::engine::capture::{CaptureView, SpillProblem};
use crate::engine::highlight::kind_of;
use crate::engine::outline::{Fold, Segment};
use crate::engine::redact::{Redactor, notice_line, unkept_notice_line};

mod lines;
#[cfg(test)]
mod needle_tests;
mod pick;
mod unfold;
use crate::protocol::{
    Counts, Direction, LimitKind, LineRange, NextStep, NextSteps, PartialLine, Preview,
};
use pick::{Highlight, choose_highlights};
use unfold::{Room, open_folds};

/// The command-line wording: `spillway read` and `grep`.
#[derive(Debug, Clone, Copy, Default)]
pub struct CliSteps;

impl NextStep for CliSteps {
    fn read_from(&self, spill: &Path, line: u64) -> String {
        format!(
            "{} read {} --offset {line}",
            crate::program::program(),
            quote(spill)
        )
    }

    fn search(&self, spill: &Path, pattern: &str) -> String {
        // Always quoted: a pattern is read as one, even the placeholder.
        let pattern = pattern.replace('\'', r"'\''");
        format!("grep -n -E '{pattern}' {}", quote(spill))
    }
}

/// What separates a preview's lines from its notice.
const NOTICE_START: &str = "\n\n[spillway: ";

/// Whether a line of a preview is one of its own markers (an omission, a fold, a highlight's
/// place, a partial line's size), not a line of output.
fn is_marker(line: &str) -> bool {
    line.starts_with("[... ") || line.starts_with("[at line ")
}

/// Quotes a path for a shell command line, only when it needs it.
fn quote(path: &Path) -> String {
    let text = path.to_string_lossy();
    shlex::try_quote(&text).map_or_else(|_| text.to_string(), |q| q.into_owned())
}

/// What a preview shows: segments of the outline from the start and from the end, a partial
/// line when not one whole line fits at an end, and highlights from the part between.
#[derive(Debug, Default)]
struct Selection {
    /// Segments shown from the start, in output order.
    head: Vec<Segment>,
    /// Segments shown at the end, in output order.
    tail: Vec<Segment>,
    /// The start of line 1 when not even it fits the head's budget, and the end of the last
    /// line when not even it fits the tail's.
    head_partial: Option<Partial>,
    tail_partial: Option<Partial>,
    /// Lines from the omitted part that look like errors, in output order.
    highlights: Vec<Highlight>,
    /// The token budget, when one held the text (for the notice).
    max_tokens: Option<usize>,
}

impl Selection {
    /// The last line the head covers (0: none).
    fn head_end(&self) -> u64 {
        match (&self.head.last(), &self.head_partial) {
            (_, Some(p)) => p.info.line,
            (Some(seg), None) => seg.last_line(),
            (None, None) => 0,
        }
    }

    /// The first line the tail covers (`total + 1`: none).
    fn tail_start(&self, total: u64) -> u64 {
        let start = self.tail.first().map_or(total + 1, |s| s.first);
        match &self.tail_partial {
            Some(p) => start.min(p.info.line),
            None => start,
        }
    }

    /// The partial line the JSON describes: the tail's, else the head's.
    fn partial(&self) -> Option<&Partial> {
        self.tail_partial.as_ref().or(self.head_partial.as_ref())
    }

    /// Whether lines between the head and the tail are left out (not merely folded).
    fn is_cut(&self, total: u64) -> bool {
        self.head_end() + 1 < self.tail_start(total)
    }

    fn segments(&self) -> impl Iterator<Item = &Segment> {
        self.head.iter().chain(self.tail.iter())
    }

    /// The lines and bytes of output it shows (markers and notice aside).
    fn shown_size(&self) -> (usize, usize) {
        let mut lines: u64 = self.segments().map(Segment::shown_lines).sum();
        let mut bytes: u64 = self.segments().map(Segment::shown_bytes).sum();
        for h in &self.highlights {
            lines += h.last - h.first + 1;
            bytes += h.text.len() as u64;
        }
        for p in [&self.head_partial, &self.tail_partial]
            .into_iter()
            .flatten()
        {
            lines += 1;
            bytes += (p.end - p.start) as u64;
        }
        (lines as usize, bytes as usize)
    }
}

/// Share of each limit the highlights may take, out of the head and tail's budget.
const HIGHLIGHT_SHARE: usize = 5; // one fifth: 20 %

/// A short pattern for `grep -E` that lists lines like the highlights.
pub const HIGHLIGHT_GREP: &str = r"error|FAIL|panic|Exception|Traceback|FATAL|CRITICAL|\*\*\*";

/// Byte range of a partial line's shown part, within the raw head or tail buffer.
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
            && max_tokens.is_none_or(|n| {
                crate::engine::tokens::count(&String::from_utf8_lossy(view.head)) <= n
            })
        {
            let content = String::from_utf8_lossy(view.head).into_owned();
            return Preview {
                spill_path,
                total_bytes: view.total_bytes,
                spill_capped: view.spill_capped,
                ..Preview::whole(content, view.total_lines)
            };
        }
        let (max_lines, max_bytes) = (limits.max_lines(), limits.max_bytes());
        let (selection, by_tokens) = match max_tokens {
            None => (
                select_with_highlights(view, direction, max_lines, max_bytes),
                false,
            ),
            Some(n) => fit_tokens(view, direction, n),
        };
        let shown = shown_ranges(&selection, view.total_lines);
        let shown_lines: u64 = shown.iter().map(|r| r.last - r.first + 1).sum();
        let over_lines = view.total_lines > max_lines as u64;
        let truncated_by = if by_tokens
            || (!over_lines && view.total_bytes <= max_bytes as u64 && max_tokens.is_some())
        {
            LimitKind::Tokens
        } else if !over_lines {
            LimitKind::Bytes
        } else if view.total_bytes <= max_bytes as u64 {
            LimitKind::Lines
        } else {
            // Both are over: the one the shown text used more of bound it.
            let (lines, bytes) = selection.shown_size();
            if lines as u64 * max_bytes as u64 >= bytes as u64 * max_lines as u64 {
                LimitKind::Lines
            } else {
                LimitKind::Bytes
            }
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
            partial_line: selection.partial().map(|p| p.info),
            spill_capped: view.spill_capped,
            redactions: Counts::new(),
            next: None,
        };
        (preview.content, preview.next) = render(view, &selection, &preview, steps, offset);
        preview
    }

    /// Replaces the credentials in the shown text with `[redacted: KIND]` markers and says so
    /// in one line at the end; the spill keeps the original. Each part between the preview's
    /// own markers is redacted on its own (a key block cut by an omission is redacted up to
    /// the marker, not through it), and the notice is left as it is.
    ///
    /// Runs on the bounded preview only, never on the whole output, so it costs the same
    /// however much the command printed.
    pub fn redact(&mut self, redactor: &Redactor) {
        let (body, notice) = match self.content.rfind(NOTICE_START) {
            Some(at) if self.truncated => self.content.split_at(at),
            _ => (self.content.as_str(), ""),
        };
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

/// What one end takes: how many segments, and the lines and bytes they show.
#[derive(Debug, Default, Clone, Copy)]
struct Taken {
    count: usize,
    lines: usize,
    bytes: usize,
}

/// Takes segments in the order `segments` gives them while their shown lines and bytes fit.
fn take<'a>(
    segments: impl Iterator<Item = &'a Segment>,
    max_lines: usize,
    max_bytes: usize,
) -> Taken {
    let mut t = Taken::default();
    for seg in segments {
        let (lines, bytes) = (seg.shown_lines() as usize, seg.shown_bytes());
        if t.lines + lines > max_lines || (t.bytes as u64).saturating_add(bytes) > max_bytes as u64
        {
            break;
        }
        t.count += 1;
        t.lines += lines;
        t.bytes += bytes as usize;
    }
    t
}

/// Selects within a byte budget small enough that the shown text fits `max_tokens`; true when
/// the tokens, not the lines or bytes, were the binding limit.
///
/// The budget shrinks in proportion to the tokens over (aiming a little under) until the text
/// fits, then grows back by bisection towards the smallest budget known not to fit: a budget
/// that shrank too far would leave a fifth of the tokens unused, and a line of few tokens per
/// byte (a rule of `=`, a hash) makes the proportion a poor guess.
fn fit_tokens(
    view: &CaptureView<'_>,
    direction: Direction,
    max_tokens: usize,
) -> (Selection, bool) {
    let max_lines = view.limits.max_lines();
    let select = |max_bytes: usize| {
        let selection = select_with_highlights(view, direction, max_lines, max_bytes);
        let tokens = crate::engine::tokens::count(&shown_text(view, &selection));
        (selection, tokens)
    };
    let mut max_bytes = view.limits.max_bytes();
    let mut too_big = None;
    let (mut fits, mut fit_bytes) = loop {
        let (selection, tokens) = select(max_bytes);
        if tokens <= max_tokens || max_bytes == 1 {
            break (selection, max_bytes);
        }
        too_big = Some(max_bytes);
        // Aim a little under, in proportion: each pass cuts the budget by 10 % at least.
        let aim = (max_bytes as u128 * max_tokens as u128 * 9 / (tokens as u128 * 10)) as usize;
        max_bytes = aim.clamp(1, max_bytes * 9 / 10);
    };
    if let Some(mut over) = too_big {
        // Within 2 % of the best budget, in at most 8 more selections.
        for _ in 0..8 {
            if over - fit_bytes <= (fit_bytes / 50).max(1) {
                break;
            }
            let middle = fit_bytes + (over - fit_bytes) / 2;
            let (selection, tokens) = select(middle);
            if tokens <= max_tokens {
                (fits, fit_bytes) = (selection, middle);
            } else {
                over = middle;
            }
        }
    }
    let selection = Selection {
        max_tokens: Some(max_tokens),
        ..fits
    };
    (selection, too_big.is_some())
}

/// The output text a selection shows (markers and notice excluded): what a budget counts.
fn shown_text(view: &CaptureView<'_>, s: &Selection) -> String {
    let mut text = String::new();
    let push_segments = |text: &mut String, segments: &[Segment]| {
        for seg in segments {
            for line in shown_lines_of(seg) {
                text.push_str(line);
                text.push('\n');
            }
        }
    };
    push_segments(&mut text, &s.head);
    if let Some(p) = &s.head_partial {
        text.push_str(&String::from_utf8_lossy(&view.head[p.start..p.end]));
    }
    for h in &s.highlights {
        text.push_str(&h.text);
    }
    if let Some(p) = &s.tail_partial {
        text.push_str(&String::from_utf8_lossy(&view.tail[p.start..p.end]));
    }
    push_segments(&mut text, &s.tail);
    text
}

/// The lines a segment shows: its first, and a similar run's last.
fn shown_lines_of(seg: &Segment) -> impl Iterator<Item = &str> {
    let last = (seg.fold == Fold::Similar).then_some(seg.last.text.as_str());
    std::iter::once(seg.head.text.as_str()).chain(last)
}

/// Selects head and tail lines; when lines are omitted and some of them look like errors,
/// gives those up to [`HIGHLIGHT_SHARE`] of the budget and the ends the rest.
fn select_with_highlights(
    view: &CaptureView<'_>,
    direction: Direction,
    max_lines: usize,
    max_bytes: usize,
) -> Selection {
    let mut s = select_ends_and_highlights(view, direction, max_lines, max_bytes);
    let (lines, bytes) = s.shown_size();
    let room = Room {
        lines: max_lines.saturating_sub(lines),
        bytes: max_bytes.saturating_sub(bytes),
    };
    open_folds(view, &mut s, direction, room);
    s
}

/// The ends within the budget, and highlights from the part between.
fn select_ends_and_highlights(
    view: &CaptureView<'_>,
    direction: Direction,
    max_lines: usize,
    max_bytes: usize,
) -> Selection {
    let first = select(view, direction, max_lines, max_bytes);
    let total = view.total_lines;
    if !first.is_cut(total) {
        return first;
    }
    let omitted = (first.head_end() + 1)..=(first.tail_start(total) - 1);
    let chosen = choose_highlights(
        &view.findings,
        &omitted,
        max_lines / HIGHLIGHT_SHARE,
        max_bytes / HIGHLIGHT_SHARE,
        &shown_kinds(view, &first),
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
    if selection.partial().is_some() && first.partial().is_none() {
        return first;
    }
    let still_omitted = (selection.head_end() + 1)..=(selection.tail_start(total) - 1);
    selection.highlights = chosen
        .into_iter()
        .filter(|h| still_omitted.contains(&h.first) && still_omitted.contains(&h.last))
        .collect();
    selection
}

/// The kinds of the candidate lines a selection shows.
fn shown_kinds(view: &CaptureView<'_>, s: &Selection) -> HashSet<u64> {
    let Some(patterns) = view.highlights else {
        return HashSet::new();
    };
    s.segments()
        .flat_map(shown_lines_of)
        .filter(|line| patterns.is_match(line))
        .map(kind_of)
        .collect()
}

/// Chooses the segments each end shows within the budget. The outline has folded the whole
/// output already, so what is cut here is only what still does not fit.
fn select(
    view: &CaptureView<'_>,
    direction: Direction,
    max_lines: usize,
    max_bytes: usize,
) -> Selection {
    let outline = &view.outline;
    // With nothing dropped, both ends draw on one list and must not overlap.
    let all: Vec<&Segment> = outline.segments().collect();
    let (front, back): (&[&Segment], &[&Segment]) = if outline.is_complete() {
        (&all, &all)
    } else {
        all.split_at(outline.head.len())
    };
    let back_from = |head: &Taken| {
        if outline.is_complete() {
            &back[head.count..]
        } else {
            back
        }
    };
    let (head, tail) = match direction {
        Direction::Head => (
            take(front.iter().copied(), max_lines, max_bytes),
            Taken::default(),
        ),
        Direction::Tail => (
            Taken::default(),
            take(back.iter().rev().copied(), max_lines, max_bytes),
        ),
        Direction::Both => {
            // Each end gets half; then the tail, and after it the head, take what the other
            // left unused, so a few huge lines at one end cannot starve the other.
            let (half_lines, half_bytes) = (max_lines.div_ceil(2), max_bytes / 2);
            let head = take(front.iter().copied(), half_lines, half_bytes);
            // A first line too big for its half is shown in part, in that half.
            let reserved = if head.count == 0 && view.total_lines > 1 {
                Taken {
                    count: 0,
                    lines: 1,
                    bytes: half_bytes,
                }
            } else {
                head
            };
            let tail = take(
                back_from(&head).iter().rev().copied(),
                max_lines.saturating_sub(reserved.lines),
                max_bytes - reserved.bytes,
            );
            let front_until = if outline.is_complete() {
                &front[..front.len() - tail.count]
            } else {
                front
            };
            let head = if tail.count == 0 || head.count == 0 {
                // An end whose first line alone is too big is shown in part, from its half.
                head
            } else {
                take(
                    front_until.iter().copied(),
                    max_lines - tail.lines,
                    max_bytes - tail.bytes,
                )
            };
            (head, tail)
        }
    };
    let back = back_from(&head);
    let mut s = Selection {
        head: front[..head.count].iter().map(|&s| s.clone()).collect(),
        tail: back[back.len() - tail.count..]
            .iter()
            .map(|&s| s.clone())
            .collect(),
        ..Selection::default()
    };
    let total = view.total_lines;
    let one_line = total == 1;
    // A head always starts with the output's first line, a tail ends with its last: whole,
    // or in part when not even that line fits.
    let wants_head = direction != Direction::Tail && !(one_line && direction == Direction::Both);
    let head_budget = match direction {
        Direction::Head => max_bytes,
        _ => max_bytes / 2,
    };
    if wants_head && head.count == 0 && total > 0 && head_budget > 0 {
        s.head_partial = Some(partial(view, true, head_budget));
    } else if direction == Direction::Head && head.lines < max_lines {
        s.head_partial = next_in_part(view, &s.head, front.get(head.count), max_bytes - head.bytes);
    }
    let (head_lines, head_bytes) = match &s.head_partial {
        Some(p) => (1, p.end - p.start),
        None => (head.lines, head.bytes),
    };
    let tail_budget = max_bytes - head_bytes;
    if direction != Direction::Head
        && tail.count == 0
        && s.head_end() < total
        && head_lines < max_lines
        && tail_budget > 0
    {
        s.tail_partial = Some(partial(view, false, tail_budget));
    }
    s
}

/// The part of one over-long line that fits: the start of line 1 for `head`, else the end of
/// the last line.
fn partial(view: &CaptureView<'_>, from_head: bool, budget: usize) -> Partial {
    if from_head {
        let line_end = memchr::memchr(b'\n', view.head).unwrap_or(view.head.len());
        let mut end = floor_char_boundary(view.head, line_end.min(budget));
        if (end as u64) < view.first_line_bytes {
            end = token_boundary_before(&view.head[..end]);
        }
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
    let mut start = ceil_char_boundary(view.tail, line_start.max(end.saturating_sub(budget)));
    if ((end - start) as u64) < view.last_line_bytes {
        start += token_boundary_after(&view.tail[start..end]);
    }
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

/// The start of the line after a head's whole lines, when that line is too long for the room
/// left and the room is over a fifth of the budget: a head preview of `start` and a 100 KB line
/// shows the line's start rather than leave the budget unused. `next` is the line's segment.
fn next_in_part(
    view: &CaptureView<'_>,
    head: &[Segment],
    next: Option<&&Segment>,
    room: usize,
) -> Option<Partial> {
    let next = next?;
    if room * 5 <= view.limits.max_bytes() || (next.head.len as usize) < room {
        return None;
    }
    let start = usize::try_from(head.iter().map(|seg| seg.bytes).sum::<u64>()).ok()?;
    let rest = view.head.get(start..)?;
    let mut end = floor_char_boundary(rest, room.min(rest.len()));
    end = token_boundary_before(&rest[..end]);
    (end > 0).then(|| Partial {
        from_head: true,
        start,
        end: start + end,
        info: PartialLine {
            line: next.first,
            shown_bytes: end as u64,
            line_bytes: next.head.len,
        },
    })
}

/// How far a cut may move to leave no piece of a word at the edge of a partial line: a piece of
/// a token cut in two (a credential, say) would reach the model without the prefix that lets
/// redaction recognise it. Past this the cut stays (a line that is all one token).
const TOKEN_CUT_SLACK: usize = 128;

/// Whether a byte can be part of a token (letters, digits and the symbols keys are made of).
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'+' | b'/' | b'=' | b'.' | b'~')
}

/// The length of `shown` (a line's start, cut at its end) with a token cut in two at the end
/// left out, if a token boundary is near.
fn token_boundary_before(shown: &[u8]) -> usize {
    let end = shown.len();
    if end == 0 || !is_token_byte(shown[end - 1]) {
        return end;
    }
    let floor = end.saturating_sub(TOKEN_CUT_SLACK);
    match shown[floor..].iter().rposition(|&b| !is_token_byte(b)) {
        Some(i) => floor + i + 1,
        None => end,
    }
}

/// How many bytes at the start of `shown` (a line's end, cut at its start) belong to a token
/// cut in two, if a token boundary is near (0 otherwise).
fn token_boundary_after(shown: &[u8]) -> usize {
    if shown.first().is_none_or(|&b| !is_token_byte(b)) {
        return 0;
    }
    let reach = shown.len().min(TOKEN_CUT_SLACK);
    shown[..reach]
        .iter()
        .position(|&b| !is_token_byte(b))
        .unwrap_or(0)
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

/// The lines that appear whole: each segment's shown lines and the highlights, as ranges.
/// Ranges merge only within one piece (the head, a highlight, the tail; the head and tail are
/// one piece when nothing lies between them): between pieces the content has a marker, so
/// lines adjacent in the spill are not adjacent there.
fn shown_ranges(s: &Selection, total: u64) -> Vec<LineRange> {
    let piece = |segments: &[Segment]| {
        let mut lines = Vec::new();
        for seg in segments {
            push_shown(&mut lines, seg);
        }
        lines
    };
    let mut pieces = vec![piece(&s.head)];
    pieces.extend(s.highlights.iter().map(|h| vec![(h.first, h.last)]));
    let tail = piece(&s.tail);
    if s.is_cut(total) || !s.highlights.is_empty() {
        pieces.push(tail);
    } else {
        pieces[0].extend(tail);
    }
    let mut ranges: Vec<LineRange> = Vec::new();
    for lines in pieces {
        let mut merged: Vec<LineRange> = Vec::new();
        for (first, last) in lines {
            match merged.last_mut() {
                Some(r) if r.last + 1 == first => r.last = last,
                _ => merged.push(LineRange { first, last }),
            }
        }
        ranges.extend(merged);
    }
    ranges
}

fn push_shown(lines: &mut Vec<(u64, u64)>, seg: &Segment) {
    lines.push((seg.first, seg.first));
    if seg.fold == Fold::Similar {
        lines.push((seg.last_line(), seg.last_line()));
    }
}

/// Appends segments: each shown line, and the marker that says what a fold stands for.
fn render_segments(out: &mut String, segments: &[Segment], base: u64) {
    for seg in segments {
        out.push_str(&seg.head.text);
        out.push('\n');
        let (first, last) = (base + seg.first, base + seg.last_line());
        match seg.fold {
            Fold::Line => {}
            Fold::Repeat => {
                let _ = writeln!(
                    out,
                    "[... repeated {} times, lines {first}-{last} ...]",
                    seg.lines
                );
            }
            Fold::Similar => {
                let _ = writeln!(
                    out,
                    "[... {} similar lines, lines {}-{}: same text, other numbers ...]",
                    seg.lines - 2,
                    first + 1,
                    last - 1
                );
                out.push_str(&seg.last.text);
                out.push('\n');
            }
        }
    }
}

fn render(
    view: &CaptureView<'_>,
    s: &Selection,
    preview: &Preview,
    steps: &dyn NextStep,
    offset: Offset,
) -> (String, Option<NextSteps>) {
    let base = offset.lines;
    let mut out = String::with_capacity(view.limits.max_bytes() + 1024);
    render_segments(&mut out, &s.head, base);
    if let Some(p) = &s.head_partial {
        out.push_str(&String::from_utf8_lossy(&view.head[p.start..p.end]));
        let _ = writeln!(
            out,
            "\n[... line {} goes on: {} more bytes ...]",
            base + p.info.line,
            p.info.line_bytes - p.info.shown_bytes
        );
    }
    let total = view.total_lines;
    let (first, last) = (s.head_end() + 1, s.tail_start(total) - 1);
    if first <= last {
        let (first_shown, last_shown) = (base + first, base + last);
        let count = last + 1 - first;
        let lines = if count == 1 { "line" } else { "lines" };
        let before = !s.head.is_empty() || s.head_partial.is_some();
        let after = !s.tail.is_empty() || s.tail_partial.is_some();
        if s.highlights.is_empty() {
            // A head or a tail alone ends where the notice begins, which says the rest.
            if before && after {
                let _ = writeln!(
                    out,
                    "[... {count} {lines} omitted (lines {first_shown}-{last_shown}) ...]"
                );
            }
        } else {
            let found = match s.highlights.len() {
                1 => "1 of them looks like an error: here it is, after its line number".to_string(),
                n => format!(
                    "{n} of them look like errors: here they are, each after its line number"
                ),
            };
            let _ = writeln!(
                out,
                "[... {count} {lines} omitted (lines {first_shown}-{last_shown}); {found} ...]"
            );
            for h in &s.highlights {
                let _ = writeln!(out, "[at line {}]", base + h.first);
                out.push_str(&h.text);
            }
            if after {
                let _ = writeln!(out, "[... the last lines ...]");
            }
        }
    }
    if let Some(p) = &s.tail_partial {
        if p.info.shown_bytes < p.info.line_bytes {
            let _ = writeln!(
                out,
                "[... line {} is {} bytes; its last {} follow ...]",
                base + p.info.line,
                p.info.line_bytes,
                p.info.shown_bytes
            );
        }
        out.push_str(&String::from_utf8_lossy(&view.tail[p.start..p.end]));
        out.push('\n');
    }
    render_segments(&mut out, &s.tail, base);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push('\n');
    let (notice, next) = notice(view, s, preview, steps, base);
    let next = next.map(|next| next.moved(out.len() as isize));
    out.push_str(&notice);
    (out, next)
}

/// The most ranges a notice lists one by one; past them it names the first and last two and
/// counts the rest (the JSON's `shown` has them all).
const LISTED_RANGES: usize = 6;

/// The instruction that ends a truncated preview: what is shown of how much, which limit cut
/// it (or that runs were only folded), where the whole output is, and the exact next step.
/// `base` is the number of spill lines before the view: past 0, the preview is of new output
/// only, and says so. It stays short (a few hundred bytes) whatever the output. The next
/// steps come back as facts too, placed within the notice's text.
fn notice(
    view: &CaptureView<'_>,
    s: &Selection,
    p: &Preview,
    steps: &dyn NextStep,
    base: u64,
) -> (String, Option<NextSteps>) {
    let limit = match p.truncated_by {
        Some(LimitKind::Lines) => format!("the {}-line limit", view.limits.max_lines()),
        Some(LimitKind::Tokens) => {
            format!("the {}-token budget", s.max_tokens.unwrap_or_default())
        }
        _ => format!("the {}-byte limit", view.limits.max_bytes()),
    };
    let how = if s.is_cut(view.total_lines) || s.partial().is_some() {
        format!("truncated by {limit}")
    } else {
        format!("folded to fit {limit} (runs of repeated or similar lines; nothing else left out)")
    };
    let what = match s.partial() {
        Some(part) => {
            let lines = if p.shown.is_empty() {
                String::new()
            } else {
                format!(
                    "{} {} and ",
                    lines_word(&p.shown),
                    ranges_text(&p.shown, base)
                )
            };
            format!(
                "showing {lines}the {} {} of line {}'s {} bytes",
                if part.from_head { "first" } else { "last" },
                part.info.shown_bytes,
                base + part.info.line,
                part.info.line_bytes
            )
        }
        None => format!(
            "showing {} {}",
            lines_word(&p.shown),
            ranges_text(&p.shown, base)
        ),
    };
    let mut text = if base == 0 {
        format!(
            "[spillway: output {how}: {what} of {} line{} ({} bytes in all).\n",
            p.total_lines,
            if p.total_lines == 1 { "" } else { "s" },
            p.total_bytes
        )
    } else {
        format!(
            "[spillway: new output {how}: {what} of the new lines {}-{} ({} bytes).\n",
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
            return (text, None);
        }
        (Some(path), problem) => {
            let _ = write!(text, "Full output: {}", path.display());
            if let Some(SpillProblem::Incomplete { written, error }) = problem {
                // Why first (the disk was full...), then exactly what is missing.
                let output_end = view.spill_from + view.total_bytes;
                let _ = write!(
                    text,
                    " (INCOMPLETE: {error}: only its first {written} bytes were saved, the \
                     other {} were not)",
                    output_end.saturating_sub(written)
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
            let _ = write!(text, "Next: read on from line {first_unseen}: ");
            let read_at = put(&mut text, &steps.read_from(path, first_unseen));
            text.push('\n');
            // Where omitted lines look like errors, the search step looks for them; otherwise
            // it is a template. Either way the path is named once more, not twice.
            let pattern = match more_highlights(view, s, p) {
                Some(more) => {
                    let what = if more == 1 {
                        "line looks like an error"
                    } else {
                        "lines look like errors"
                    };
                    let _ = write!(text, "{more} more omitted {what}: ");
                    HIGHLIGHT_GREP
                }
                None => {
                    text.push_str("or search it all: ");
                    "PATTERN"
                }
            };
            let search_at = put(&mut text, &steps.search(path, pattern));
            text.push_str("]\n");
            let next = NextSteps {
                read_from: first_unseen,
                search: pattern.to_string(),
                read_at,
                search_at,
            };
            return (text, Some(next));
        }
        (None, _) => {
            let _ = writeln!(text, "The full output was not saved.]");
        }
    }
    (text, None)
}

/// Appends `step` to `text` and says where it stands there.
fn put(text: &mut String, step: &str) -> [usize; 2] {
    let start = text.len();
    text.push_str(step);
    [start, text.len()]
}

/// "line" before one line number, "lines" before ranges.
fn lines_word(shown: &[LineRange]) -> &'static str {
    match shown {
        [one] if one.first == one.last => "line",
        _ => "lines",
    }
}

/// The shown ranges in words: all of them when they are few, else the first and last two and
/// how many lie between.
fn ranges_text(shown: &[LineRange], base: u64) -> String {
    let word = |r: &LineRange| {
        if r.first == r.last {
            (base + r.first).to_string()
        } else {
            format!("{}-{}", base + r.first, base + r.last)
        }
    };
    if shown.len() <= LISTED_RANGES {
        return list(&shown.iter().map(word).collect::<Vec<_>>());
    }
    format!(
        "{} and {}, with {} more ranges in between (JSON `shown` lists all)",
        word(&shown[0]),
        word(&shown[shown.len() - 1]),
        shown.len() - 2
    )
}

/// `a`, `a and b`, `a, b and c`.
fn list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// How many lines that look like errors the preview leaves out, exactly: every candidate the
/// highlighter counted, less those in the segments shown (a folded run's lines are said, not
/// left out) and those the highlights show; never more than the lines left out.
fn more_highlights(view: &CaptureView<'_>, s: &Selection, p: &Preview) -> Option<u64> {
    let in_segments: u64 = s.segments().map(|seg| seg.candidates).sum();
    let in_highlights = view.highlights.map_or(0, |patterns| {
        s.highlights
            .iter()
            .flat_map(|h| h.text.lines())
            .filter(|line| patterns.is_match(line))
            .count() as u64
    });
    let more = view
        .findings
        .found
        .saturating_sub(in_segments + in_highlights)
        .min(p.omitted_lines);
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
    use crate::engine::capture::{Capture, Limits, SpillPolicy};
    use crate::storage::spill::DataDir;

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
        // Little room left (under a fifth of the budget): the lines alone.
        let text = format!("{}\n{}\n", "a".repeat(250), "z".repeat(5000));
        let p = preview_of(&text, 10, 300, Direction::Head);
        assert_eq!((p.shown.len(), p.partial_line), (1, None));
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
        // Line 1 alone is more than half the byte budget: it is shown in part, in its half,
        // and the tail keeps the other half.
        let mut text = format!("{}\n", "x".repeat(700));
        text.push_str(&numbered(200));
        let p = preview_of(&text, 1000, 1000, Direction::Both);
        assert!(p.content.starts_with(&format!(
            "{}\n[... line 1 goes on: 200 more bytes ...]\n",
            "x".repeat(500)
        )));
        let shown: u64 = p.shown.iter().map(|r| r.last - r.first + 1).sum();
        let tail = p.shown.last().unwrap();
        assert_eq!(tail.last, 201);
        assert!(shown > 450 / 9, "{:?}", p.shown);
        let shown_bytes: usize = p.shown.iter().map(|&r| lines_of(&text, r).len()).sum();
        assert!(shown_bytes + 500 <= 1000);
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
                .contains("showing the first 100 of line 1's 2000 bytes")
        );
        let tail = preview_of(&format!("{text}\n"), 10, 101, Direction::Tail);
        assert_eq!(tail.partial_line.unwrap().shown_bytes, 100);
        assert!(
            tail.content
                .contains("showing the last 100 of line 1's 2000 bytes")
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
                .contains("showing the last 51200 of line 50000's 104857 bytes")
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
        // The run costs two lines, so the head reaches further.
        assert_eq!(
            p.shown,
            vec![
                LineRange { first: 1, last: 2 },
                LineRange {
                    first: 502,
                    last: 519
                }
            ]
        );
        assert!(p.content.contains("line 17\n\n"));
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
        let body = &p.content[..p.content.rfind("\n\n[spillway: ").unwrap() + 1];
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
            Limits::new(150, 51200).unwrap(),
            SpillPolicy::Always(DataDir::open(&tempfile::tempdir().unwrap().keep()).unwrap()),
        );
        c.write(&text);
        c.finish();
        let p = Preview::build(&c.view(), Direction::Both, &CliSteps);
        let notice = &p.content[p.content.rfind("\n\n[spillway: ").unwrap() + 2..];
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
