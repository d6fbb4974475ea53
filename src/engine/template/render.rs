//! The text of what [`super::plan_folds`] decides, as issue 27 words it, kept apart from the
//! planning so the preview can budget the markers' bytes and tokens; and a line too long for a
//! budget, shown by its two ends.

use std::fmt::Write as _;

use super::Fold;

/// Longest template text a marker quotes, in bytes; a longer one is cut at a character
/// boundary and ends in `…`, so a marker stays small whatever the lines.
pub const MAX_QUOTED_BYTES: usize = 160;

/// The marker of a fold: `[... 298 more lines like "test <*> ... ok", lines 7-304 ...]` for one
/// template, `[... 180 lines: 150 like "…", 30 like "…", lines 7-186 ...]` for several.
pub fn fold_text(fold: &Fold) -> String {
    let mut text = String::from("[... ");
    match fold.groups.as_slice() {
        [group] => {
            let _ = write!(
                text,
                "{} more {} like \"{}\"",
                group.count,
                plural(group.count),
                quoted(&group.text)
            );
        }
        groups => {
            let _ = write!(text, "{} lines:", fold.lines());
            for (i, group) in groups.iter().enumerate() {
                let sep = if i == 0 { " " } else { ", " };
                let _ = write!(
                    text,
                    "{sep}{} like \"{}\"",
                    group.count,
                    quoted(&group.text)
                );
            }
        }
    }
    if fold.first == fold.last {
        let _ = write!(text, ", line {} ...]", fold.first);
    } else {
        let _ = write!(text, ", lines {}-{} ...]", fold.first, fold.last);
    }
    text
}

fn plural(count: u64) -> &'static str {
    if count == 1 { "line" } else { "lines" }
}

/// A template's text cut to [`MAX_QUOTED_BYTES`].
fn quoted(text: &str) -> String {
    if text.len() <= MAX_QUOTED_BYTES {
        return text.to_owned();
    }
    let mut end = MAX_QUOTED_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// A line too long for its budget, by its two ends (contract rule 6): a 200 KB JSON response
/// keeps its head (where `total_count` is) and its tail (where it closes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongLine<'a> {
    pub head: &'a str,
    /// Bytes of the line between the two ends.
    pub omitted: usize,
    pub tail: &'a str,
}

impl LongLine<'_> {
    /// The two ends around `[... N bytes of this line not shown ...]`.
    pub fn text(&self) -> String {
        format!(
            "{}[... {} bytes of this line not shown ...]{}",
            self.head, self.omitted, self.tail
        )
    }
}

/// `line` cut to at most `max_bytes` shown bytes, half from each end, each end cut at a
/// character boundary; `None` when the whole line fits.
pub fn long_line(line: &str, max_bytes: usize) -> Option<LongLine<'_>> {
    if line.len() <= max_bytes {
        return None;
    }
    let mut head_end = max_bytes.div_ceil(2);
    while !line.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = line.len() - (max_bytes - max_bytes.div_ceil(2));
    while !line.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    Some(LongLine {
        head: &line[..head_end],
        omitted: tail_start - head_end,
        tail: &line[tail_start..],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::template::{FoldGroup, Learner, Limits};

    fn group(count: u64, text: &str) -> FoldGroup {
        let mut learner = Learner::new(Limits::default());
        FoldGroup {
            template: learner.learn("some words here").expect("a template"),
            text: text.into(),
            count,
            shown_line: 1,
        }
    }

    #[test]
    fn one_template_reads_as_more_lines_like_it() {
        let fold = Fold {
            first: 7,
            last: 304,
            groups: vec![group(298, "test <*> ... ok")],
        };
        assert_eq!(
            fold_text(&fold),
            "[... 298 more lines like \"test <*> ... ok\", lines 7-304 ...]"
        );
    }

    #[test]
    fn interleaved_templates_are_counted_each() {
        let fold = Fold {
            first: 7,
            last: 186,
            groups: vec![group(150, "GET <*> 200"), group(30, "cache miss <*>")],
        };
        assert_eq!(
            fold_text(&fold),
            "[... 180 lines: 150 like \"GET <*> 200\", 30 like \"cache miss <*>\", lines 7-186 ...]"
        );
    }

    #[test]
    fn a_long_template_is_quoted_cut() {
        let text = "é".repeat(MAX_QUOTED_BYTES);
        let fold = Fold {
            first: 3,
            last: 3,
            groups: vec![group(1, &text)],
        };
        let marker = fold_text(&fold);
        assert!(marker.len() < MAX_QUOTED_BYTES + 60, "{marker}");
        assert!(marker.contains("…\", line 3 ...]"), "{marker}");
    }

    #[test]
    fn a_long_line_keeps_both_ends_and_says_how_much_is_between() {
        let json = format!("{{\"total_count\":7,\"items\":[{}]}}", "1,".repeat(100_000));
        let cut = long_line(&json, 40).expect("too long");
        assert!(cut.head.starts_with("{\"total_count\":7"));
        assert!(cut.tail.ends_with("]}"));
        assert_eq!(cut.head.len() + cut.tail.len(), 40);
        assert_eq!(cut.head.len() + cut.omitted + cut.tail.len(), json.len());
        assert!(cut.text().contains(&format!("[... {} bytes", cut.omitted)));
        assert_eq!(long_line("short", 40), None);
    }

    #[test]
    fn a_long_line_is_cut_at_character_boundaries() {
        let line = "ü".repeat(50);
        for budget in 0..20 {
            let cut = long_line(&line, budget).expect("too long");
            assert!(cut.head.len() + cut.tail.len() <= budget);
            assert_eq!(cut.head.len() + cut.omitted + cut.tail.len(), line.len());
        }
    }
}
