//! The notice that ends a truncated preview, in the wire's words: what is shown of how much,
//! which limit cut it, where the whole output is, and the next steps, whose commands a
//! [`NextStep`] given by the caller names.

use std::fmt::Write as _;

use crate::engine::capture::{CaptureView, SpillProblem};
use crate::protocol::{LimitKind, LineRange, NextStep, NextSteps, Preview};

use super::compact::is_fold_marker;
use super::partial::Shows;
use super::selection::Selection;

/// A short pattern for `grep -E` that lists lines like the highlights.
const HIGHLIGHT_GREP: &str = r"error|FAIL|panic|Exception|Traceback|FATAL|CRITICAL|\*\*\*";

/// The most ranges a notice lists one by one; past them it names the first and last two and
/// counts the rest (the JSON's `shown` has them all).
const LISTED_RANGES: usize = 6;

/// The instruction that ends a truncated preview: what is shown of how much, which limit cut
/// it (or that runs were only folded), where the whole output is, and the exact next step.
/// `base` is the number of spill lines before the view: past 0, the preview is of new output
/// only, and says so. It stays short (a few hundred bytes) whatever the output. The next
/// steps come back as facts too, placed within the notice's text.
pub(super) fn notice(
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
    let how = if p.truncated_by.is_none() {
        // Within every limit, but over the size from which alike lines fold.
        "compacted (lines alike folded, each marker says how many, like what and where; \
         nothing else left out)"
            .to_string()
    } else if s.is_cut(view.total_lines) || s.partial().is_some() {
        format!("truncated by {limit}")
    } else {
        let runs = if s.segments().any(is_fold_marker) {
            "runs of repeated, similar or alike lines"
        } else {
            "runs of repeated or similar lines"
        };
        format!("folded to fit {limit} ({runs}; nothing else left out)")
    };
    let what = match s.partial() {
        Some(part) => {
            let lines = if p.shown.is_empty() {
                String::new()
            } else {
                // The clause on the line shown in part follows: the pointer to the JSON's
                // list is left out, so the notice stays short with both.
                format!(
                    "{} {} and ",
                    lines_word(&p.shown),
                    ranges_text(&p.shown, base, false)
                )
            };
            let shown = match (part.shows, part.info.ends) {
                (Shows::Start, _) => format!("the first {}", part.info.shown_bytes),
                (Shows::Both, Some(ends)) => format!(
                    "the first {} and the last {}",
                    ends.start_bytes, ends.end_bytes
                ),
                _ => format!("the last {}", part.info.shown_bytes),
            };
            format!(
                "showing {lines}{shown} of line {}'s {} bytes",
                base + part.info.line,
                part.info.line_bytes
            )
        }
        None => format!(
            "showing {} {}",
            lines_word(&p.shown),
            ranges_text(&p.shown, base, true)
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
/// how many lie between, and (with `pointer`) where the JSON lists them all.
fn ranges_text(shown: &[LineRange], base: u64, pointer: bool) -> String {
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
        "{} and {}, with {} more ranges in between{}",
        word(&shown[0]),
        word(&shown[shown.len() - 1]),
        shown.len() - 2,
        if pointer {
            " (JSON `shown` lists all)"
        } else {
            ""
        }
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
