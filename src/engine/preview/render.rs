//! Rendering a selection: its lines in output order, the markers that say what a fold, an
//! omission or a partial line stands for, and the notice at the end; and the ranges of lines
//! it shows whole, for the JSON.

use std::borrow::Cow;
use std::fmt::Write as _;

use crate::engine::capture::CaptureView;
use crate::engine::outline::{Fold, Segment};
use crate::protocol::{LineRange, NextStep, NextSteps, Preview};

use super::Offset;
use super::compact::is_fold_marker;
use super::notice::notice;
use super::partial::{Partial, Shows};
use super::selection::Selection;

/// The lines that appear whole: each segment's shown lines and the highlights, as ranges.
/// Ranges merge only within one piece (the head, a highlight, the tail; the head and tail are
/// one piece when nothing lies between them): between pieces the content has a marker, so
/// lines adjacent in the spill are not adjacent there.
pub(super) fn shown_ranges(s: &Selection, total: u64) -> Vec<LineRange> {
    let piece = |segments: &[Cow<'_, Segment>]| {
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
    if is_fold_marker(seg) {
        return; // its lines are folded, not shown
    }
    lines.push((seg.first, seg.first));
    if seg.fold == Fold::Similar {
        lines.push((seg.last_line(), seg.last_line()));
    }
}

/// Appends segments: each shown line, and the marker that says what a fold stands for.
fn render_segments(out: &mut String, segments: &[Cow<'_, Segment>], base: u64) {
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

/// Appends a partial line: its start and a marker that says how much more the line holds; a
/// marker that gives the line's size and then its end; or its start, a marker that gives the
/// size of the middle left out, and its end. The marker between two ends keeps the wording of
/// the head's (`goes on`) and the tail's (`its last N follow`), so one reading serves all three.
fn render_partial(out: &mut String, p: &Partial, base: u64) {
    let line = base + p.info.line;
    let left_out = p.info.line_bytes - p.info.shown_bytes;
    match p.shows {
        Shows::Start => {
            out.push_str(&p.start);
            let _ = writeln!(
                out,
                "\n[... line {line} goes on: {left_out} more bytes ...]"
            );
        }
        Shows::End => {
            if left_out > 0 {
                let _ = writeln!(
                    out,
                    "[... line {line} is {} bytes; its last {} follow ...]",
                    p.info.line_bytes, p.info.shown_bytes
                );
            }
            out.push_str(&p.end);
            out.push('\n');
        }
        Shows::Both => {
            out.push_str(&p.start);
            let _ = writeln!(
                out,
                "\n[... line {line} goes on: {left_out} bytes omitted; its last {} follow ...]",
                p.end.len()
            );
            out.push_str(&p.end);
            out.push('\n');
        }
    }
}

pub(super) fn render(
    view: &CaptureView<'_>,
    s: &Selection,
    preview: &Preview,
    steps: &dyn NextStep,
    offset: Offset,
) -> Rendered {
    let base = offset.lines;
    let mut out = String::with_capacity(view.limits.max_bytes() + 1024);
    render_segments(&mut out, &s.head, base);
    if let Some(p) = &s.head_partial {
        render_partial(&mut out, p, base);
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
        render_partial(&mut out, p, base);
    }
    render_segments(&mut out, &s.tail, base);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    let notice_at = out.len() - 1;
    out.push('\n');
    let (notice, next) = notice(view, s, preview, steps, base);
    let next = next.map(|next| next.moved(out.len() as isize));
    out.push_str(&notice);
    Rendered {
        content: out,
        next,
        notice_at,
    }
}

/// A cut preview's text, and where in it the notice and its next steps stand.
pub(super) struct Rendered {
    pub content: String,
    pub next: Option<NextSteps>,
    /// The line break that ends the shown lines, before the notice's blank line.
    pub notice_at: usize,
}
