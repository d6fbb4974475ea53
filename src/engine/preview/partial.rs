//! A line too long for the budget, shown in part: the start of a head's line or the end of a
//! tail's, cut at a character boundary and, where one is near, at a token boundary.

use super::compact::is_fold_marker;
use crate::engine::capture::CaptureView;
use crate::engine::outline::Segment;
use crate::protocol::PartialLine;

/// Byte range of a partial line's shown part, within the raw head or tail buffer.
#[derive(Debug)]
pub(super) struct Partial {
    pub(super) from_head: bool,
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) info: PartialLine,
}

/// The part of one over-long line that fits: the start of line 1 for `head`, else the end of
/// the last line.
pub(super) fn partial(view: &CaptureView<'_>, from_head: bool, budget: usize) -> Partial {
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
pub(super) fn next_in_part(
    view: &CaptureView<'_>,
    head: &[Segment],
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
