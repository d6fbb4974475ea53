//! Choosing what a preview shows: whole segments of the outline from each end within the
//! line and byte budgets (the token budget narrows the bytes), highlights from the part
//! between, and folds opened where room is left. Nothing here words anything: the choice is
//! data ([`Selection`]) that rendering and the notice read.

use std::borrow::Cow;

use rustc_hash::FxHashSet;

use crate::engine::capture::CaptureView;
use crate::engine::outline::{Fold, Segment};
use crate::protocol::{Direction, LimitKind};

use super::budget::Budget;
use super::compact::is_fold_marker;
use super::partial::{before_tail, first_line, last_line, next_in_part};
use super::pick::choose_highlights;
use super::selection::Selection;
use super::unfold::{Room, open_folds};

/// Share of each limit the highlights may take, out of the head and tail's budget.
const HIGHLIGHT_SHARE: usize = 5; // one fifth: 20 %

/// Selects what a cut preview of `view` shows within `budget` (what the limits leave the
/// output's own lines), and which limit cut it.
pub(super) fn select_within<'v>(
    view: &'v CaptureView<'_>,
    direction: Direction,
    budget: Budget,
) -> (Selection<'v>, LimitKind) {
    let (selection, by_tokens) = match budget.tokens {
        None => (
            select_with_highlights(view, direction, budget.lines, budget.bytes),
            false,
        ),
        Some(n) => fit_tokens(view, direction, budget, n),
    };
    let (max_lines, max_bytes) = (view.limits.max_lines(), view.limits.max_bytes());
    let over_lines = view.total_lines > max_lines as u64;
    let cut_by = if by_tokens
        || (!over_lines && view.total_bytes <= max_bytes as u64 && budget.tokens.is_some())
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
    (selection, cut_by)
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
fn fit_tokens<'v>(
    view: &'v CaptureView<'_>,
    direction: Direction,
    budget: Budget,
    max_tokens: usize,
) -> (Selection<'v>, bool) {
    let select = |max_bytes: usize| {
        let selection = select_with_highlights(view, direction, budget.lines, max_bytes);
        let tokens = crate::engine::tokens::count(&shown_text(&selection));
        (selection, tokens)
    };
    let mut max_bytes = budget.bytes;
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
fn shown_text(s: &Selection) -> String {
    let mut text = String::new();
    let push_segments = |text: &mut String, segments: &[Cow<'_, Segment>]| {
        for seg in segments {
            for line in shown_lines_of(seg) {
                text.push_str(line);
                text.push('\n');
            }
        }
    };
    push_segments(&mut text, &s.head);
    if let Some(p) = &s.head_partial {
        text.push_str(&p.start);
        text.push_str(&p.end);
    }
    for h in &s.highlights {
        text.push_str(&h.text);
    }
    if let Some(p) = &s.tail_partial {
        text.push_str(&p.start);
        text.push_str(&p.end);
    }
    push_segments(&mut text, &s.tail);
    text
}

/// The lines a segment shows: its first, and a similar run's last.
fn shown_lines_of(seg: &Segment) -> impl Iterator<Item = &str> {
    numbered_lines_of(seg).map(|(_, line)| line)
}

/// Selects head and tail lines; when lines are omitted and some of them look like errors,
/// gives those up to [`HIGHLIGHT_SHARE`] of the budget and the ends the rest.
fn select_with_highlights<'v>(
    view: &'v CaptureView<'_>,
    direction: Direction,
    max_lines: usize,
    max_bytes: usize,
) -> Selection<'v> {
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
fn select_ends_and_highlights<'v>(
    view: &'v CaptureView<'_>,
    direction: Direction,
    max_lines: usize,
    max_bytes: usize,
) -> Selection<'v> {
    let first = select(view, direction, max_lines, max_bytes);
    let total = view.total_lines;
    if !first.is_cut(total) {
        return first;
    }
    let omitted = (first.head_end() + 1)..=(first.tail_start(total) - 1);
    let chosen = choose_highlights(
        &view.findings,
        &omitted,
        highlight_lines(max_lines),
        max_bytes / HIGHLIGHT_SHARE,
        &shown_kinds(view, &first),
        view.outcome,
        &view.kinds,
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
    // The ends' smaller share must not cost them a partial line or an end they showed: the
    // first and last lines say where the output starts and how it ended.
    let lost_an_end = (first.head_end() > 0 && selection.head_end() == 0)
        || (first.tail_start(total) <= total && selection.tail_start(total) > total);
    if lost_an_end || (selection.partial().is_some() && first.partial().is_none()) {
        return first;
    }
    let still_omitted = (selection.head_end() + 1)..=(selection.tail_start(total) - 1);
    selection.highlights = chosen
        .into_iter()
        .filter(|h| still_omitted.contains(&h.first) && still_omitted.contains(&h.last))
        .collect();
    selection
}

/// The lines the highlights may take out of `max_lines`: [`HIGHLIGHT_SHARE`] of them, and at
/// least one where the ends keep one too. Under five lines the share alone was none, and the
/// ends showed routine lines while a line that looks like the cause waited.
fn highlight_lines(max_lines: usize) -> usize {
    (max_lines / HIGHLIGHT_SHARE).max(usize::from(max_lines > 1))
}

/// The kinds of the candidate lines a selection shows.
fn shown_kinds(view: &CaptureView<'_>, s: &Selection) -> FxHashSet<u64> {
    let Some(patterns) = view.highlights else {
        return FxHashSet::default();
    };
    s.segments()
        .filter(|seg| !is_fold_marker(seg))
        .flat_map(numbered_lines_of)
        .filter_map(|(number, line)| view.kinds.of_shown(number, line, patterns))
        .collect()
}

/// The lines a segment shows, with their numbers.
fn numbered_lines_of(seg: &Segment) -> impl Iterator<Item = (u64, &str)> {
    let last = (seg.fold == Fold::Similar).then(|| (seg.last_line(), seg.last.text.as_str()));
    std::iter::once((seg.first, seg.head.text.as_str())).chain(last)
}

/// Chooses the segments each end shows within the budget. The outline has folded the whole
/// output already, so what is cut here is only what still does not fit.
fn select<'v>(
    view: &'v CaptureView<'_>,
    direction: Direction,
    max_lines: usize,
    max_bytes: usize,
) -> Selection<'v> {
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
        head: front[..head.count]
            .iter()
            .map(|&s| Cow::Borrowed(s))
            .collect(),
        tail: back[back.len() - tail.count..]
            .iter()
            .map(|&s| Cow::Borrowed(s))
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
        let ends = direction == Direction::Both;
        s.head_partial = Some(first_line(view, head_budget, ends));
    } else if direction == Direction::Head && head.lines < max_lines {
        s.head_partial = next_in_part(view, &s.head, front.get(head.count), max_bytes - head.bytes);
    }
    let (head_lines, head_bytes) = match &s.head_partial {
        Some(p) => (1, p.shown_len()),
        None => (head.lines, head.bytes),
    };
    let tail_budget = max_bytes - head_bytes;
    if direction == Direction::Head || s.head_end() >= total || head_lines >= max_lines {
        return s;
    }
    if tail.count == 0 && tail_budget > 0 {
        s.tail_partial = Some(last_line(view, all.last().copied(), tail_budget));
    } else if tail.count > 0 && head_lines + tail.lines < max_lines {
        // The line before the tail's lines, when it alone kept the tail from the budget.
        let before = back.len().checked_sub(tail.count + 1).map(|i| &back[i]);
        let after_bytes = s.tail.iter().map(|seg| seg.bytes).sum();
        s.tail_partial = before_tail(
            view,
            before.filter(|seg| seg.first > s.head_end()),
            after_bytes,
            tail_budget - tail.bytes,
        );
    }
    s
}
