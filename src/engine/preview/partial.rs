//! A line too long for the budget, shown in part: the start of a head's line, the end of a
//! tail's, or, where the budget has room for both and the capture kept both, its start and its
//! end around a marker that gives the size of the middle (a 200 KB JSON response keeps its
//! `total_count` and its last page). Each cut is at a character boundary and, where one is
//! near, at a token boundary.

use std::borrow::Cow;

use super::compact::is_fold_marker;
use crate::engine::capture::CaptureView;
use crate::engine::outline::{Fold, LineText, Segment};
use crate::protocol::{LineEnds, PartialLine};

/// A line budget under which a line is shown from one end only: a few bytes of each end say
/// less than twice as many of one, and the marker between them would cost more than they.
const SPLIT_MIN_BYTES: usize = 64;

/// Which of a partial line's ends a preview shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shows {
    /// Its first bytes: a head's line, which goes on.
    Start,
    /// Its last bytes: a tail's line.
    End,
    /// Its first and its last bytes, around a marker that gives the middle's size.
    Both,
}

/// What a preview shows of one over-long line: its first bytes, its last, or both.
#[derive(Debug)]
pub(super) struct Partial {
    pub(super) shows: Shows,
    /// The line's first bytes shown (empty unless it shows its start).
    pub(super) start: String,
    /// The line's last bytes shown (empty unless it shows its end).
    pub(super) end: String,
    pub(super) info: PartialLine,
}

impl Partial {
    /// The part of line `line` (of `line_bytes` bytes) made of its first `start` and last
    /// `end` bytes, both whole characters.
    fn new(shows: Shows, line: u64, line_bytes: u64, start: &[u8], end: &[u8]) -> Partial {
        let ends = (shows == Shows::Both).then_some(LineEnds {
            start_bytes: start.len() as u64,
            end_bytes: end.len() as u64,
        });
        Partial {
            shows,
            start: String::from_utf8_lossy(start).into_owned(),
            end: String::from_utf8_lossy(end).into_owned(),
            info: PartialLine {
                line,
                shown_bytes: (start.len() + end.len()) as u64,
                line_bytes,
                ends,
            },
        }
    }

    /// The bytes of the line it shows.
    pub(super) fn shown_len(&self) -> usize {
        self.start.len() + self.end.len()
    }
}

/// Line 1 in `budget`: its start (from the head buffer), and with `ends` its end too when the
/// line has ended and the capture kept it (a head shows where the output begins and reads on
/// from there; both ends give the line its half of the budget).
pub(super) fn first_line(view: &CaptureView<'_>, budget: usize, ends: bool) -> Partial {
    let line_end = memchr::memchr(b'\n', view.head).unwrap_or(view.head.len());
    let prefix = &view.head[..line_end];
    let line_bytes = view.first_line_bytes;
    if ends
        && view.total_lines > 1
        && let Some(part) = both_ends(1, line_bytes, prefix, view.first_line_end, budget)
    {
        return part;
    }
    let len = start_len(prefix, budget, line_bytes);
    Partial::new(Shows::Start, 1, line_bytes, &prefix[..len], &[])
}

/// The last line in `budget`: its start and its end when the line is too long for the budget
/// and both are kept (`last`: the outline's segment that ends the output), else its end.
pub(super) fn last_line(view: &CaptureView<'_>, last: Option<&Segment>, budget: usize) -> Partial {
    let end = view.tail.len() - usize::from(view.ends_with_newline());
    let line_from = memchr::memrchr(b'\n', &view.tail[..end]).map_or(0, |nl| nl + 1);
    let suffix = &view.tail[line_from..end];
    let line_bytes = view.last_line_bytes;
    let start = last
        .and_then(last_line_text)
        .filter(|text| text.len == line_bytes)
        .map(|text| text.text.as_bytes());
    if let Some(start) = start
        && let Some(part) = both_ends(view.total_lines, line_bytes, start, suffix, budget)
    {
        return part;
    }
    let end = end_part(suffix, budget, line_bytes);
    Partial::new(Shows::End, view.total_lines, line_bytes, &[], end)
}

/// The line just before a tail's whole lines (`after_bytes` bytes of them, up to the output's
/// end), when the output's lines are within the line limit, the line is too long for the room
/// they left and the room is over a fifth of the budget: its start (kept by the outline) and its end (in the tail buffer) share the room, so
/// a JSON response followed by a few short lines is not left out whole. `seg` is its segment.
pub(super) fn before_tail(
    view: &CaptureView<'_>,
    seg: Option<&&Segment>,
    after_bytes: u64,
    room: usize,
) -> Option<Partial> {
    let seg = seg.filter(|seg| seg.fold == Fold::Line && !is_fold_marker(seg))?;
    // Only where the bytes alone cut the output (its lines are within the line limit): where
    // lines bind, the line's two parts and marker would cost lines the tail's own need, and
    // shrinking the budget for them would change which line stands there.
    let lines_within = view.total_lines <= view.limits.max_lines() as u64;
    if !lines_within || room * 5 <= view.limits.max_bytes() || (seg.head.len as usize) <= room {
        return None;
    }
    // The line's newline stands just before the tail's lines in the tail buffer.
    let newline = view
        .tail
        .len()
        .checked_sub(usize::try_from(after_bytes).ok()? + 1)?;
    if view.tail[newline] != b'\n' {
        return None;
    }
    let line_from = memchr::memrchr(b'\n', &view.tail[..newline]).map_or(0, |nl| nl + 1);
    let suffix = &view.tail[line_from..newline];
    both_ends(
        seg.first,
        seg.head.len,
        seg.head.text.as_bytes(),
        suffix,
        room,
    )
}

/// The start of the line after a head's whole lines, when that line is too long for the room
/// left and the room is over a fifth of the budget: a head preview of `start` and a 100 KB line
/// shows the line's start rather than leave the budget unused. `next` is the line's segment.
pub(super) fn next_in_part(
    view: &CaptureView<'_>,
    head: &[Cow<'_, Segment>],
    next: Option<&&Segment>,
    room: usize,
) -> Option<Partial> {
    // A fold's marker stands for many lines, not one line to show in part.
    let next = next.filter(|seg| !is_fold_marker(seg))?;
    if room * 5 <= view.limits.max_bytes() || (next.head.len as usize) < room {
        return None;
    }
    let start = usize::try_from(head.iter().map(|seg| seg.bytes).sum::<u64>()).ok()?;
    let rest = view.head.get(start..)?;
    let mut end = floor_char_boundary(rest, room.min(rest.len()));
    end = token_boundary_before(&rest[..end]);
    (end > 0).then(|| Partial::new(Shows::Start, next.first, next.head.len, &rest[..end], &[]))
}

/// The text of the output's last line as a segment that ends the output keeps it: a line, a
/// repeat (all its lines alike) or a similar run (its last line); a template fold's marker
/// never ends an output, and is not a line.
fn last_line_text(seg: &Segment) -> Option<&LineText> {
    match seg.fold {
        Fold::Line if seg.lines == 1 && !is_fold_marker(seg) => Some(&seg.head),
        Fold::Repeat => Some(&seg.head),
        Fold::Similar => Some(&seg.last),
        Fold::Line => None,
    }
}

/// Line `line` of `line_bytes` bytes shown by both ends within `budget`: half for the start
/// (from `prefix`, the line's first bytes as kept), the rest for the end (from `suffix`, its
/// last bytes as kept). `None` when the line fits whole, the budget is too small to share, or
/// either end would be empty.
fn both_ends(
    line: u64,
    line_bytes: u64,
    prefix: &[u8],
    suffix: &[u8],
    budget: usize,
) -> Option<Partial> {
    if line_bytes <= budget as u64 || budget < SPLIT_MIN_BYTES {
        return None;
    }
    let start = start_len(prefix, prefix.len().min(budget / 2), line_bytes);
    let end = end_part(suffix, budget - start, line_bytes);
    // The two never meet: together they are within the budget, which the line is over.
    (start > 0 && !end.is_empty())
        .then(|| Partial::new(Shows::Both, line, line_bytes, &prefix[..start], end))
}

/// How much of `prefix` (a line's first bytes) to show within `budget`: cut at a character
/// boundary and, unless the whole line of `line_bytes` is shown, before a token cut in two.
fn start_len(prefix: &[u8], budget: usize, line_bytes: u64) -> usize {
    let end = floor_char_boundary(prefix, budget.min(prefix.len()));
    if (end as u64) < line_bytes {
        token_boundary_before(&prefix[..end])
    } else {
        end
    }
}

/// The last bytes of `suffix` (a line's last bytes) to show within `budget`: cut at a
/// character boundary and, unless the whole line of `line_bytes` is shown, after a token cut
/// in two.
fn end_part(suffix: &[u8], budget: usize, line_bytes: u64) -> &[u8] {
    let mut from = ceil_char_boundary(suffix, suffix.len().saturating_sub(budget));
    if ((suffix.len() - from) as u64) < line_bytes {
        from += token_boundary_after(&suffix[from..]);
    }
    &suffix[from..]
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
