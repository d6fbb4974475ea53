//! Template folds in the preview (issue 27, rules 1-5): above [`COMPACT_FROM_TOKENS`], the
//! lines the outline kept are learnt into templates and the lines of a template that follow a
//! shown line of it are folded into one marker, *before* the budget is applied, so the budget
//! then chooses among what folding left.
//!
//! The folds act on the outline's segments: the lines of a fold are taken out of the segment
//! list and one segment stands in their place, whose line is the marker's text and whose lines
//! and bytes are those of the lines it hides. So the selection budgets a marker as the one line
//! it shows, byte offsets along the segments stay true (opening a similar run reads the spill
//! by them), and the outline's own folds are never inside a template fold: a repeat or similar
//! run breaks folding (see [`learnt`]), so no line is in two markers.
//!
//! Only lines of whole [`Fold::Line`] segments are learnt: a line the outline kept cut is not
//! known whole, so a fold could not claim it matches. What is never folded besides the
//! planner's own rules (the first and last lines, single-line templates): a line the highlight
//! patterns match (the defaults and `--highlight`'s), a highlighter candidate's whole block,
//! and any segment in which the highlighter counted a candidate.

use std::borrow::Cow;
use std::collections::HashSet;

use super::lines::Lines;
use crate::engine::capture::CaptureView;
use crate::engine::outline::{Fold, LineText, OutlineView, Segment, similar};
use crate::engine::redact::Redactor;
use crate::engine::template::{
    self, Learner, Limits, LineTemplate, TemplateId, fold_text, plan_folds,
};
use crate::engine::tokens::floor::at_least;
use crate::protocol::{FoldTemplate, TemplateFold};

/// Below this many o200k tokens an output is shown as it is (rule 1: small stays whole).
///
/// Chosen from the compaction bench (`cargo bench --bench compaction`): its outputs under
/// ~1,000 tokens (a `git status`, a short build, a test run of a few dozen tests) gain a few
/// dozen tokens at most from folds, and a reader of a page that short is better served by the
/// text itself; above it every workload with runs of alike lines saves more than half. Also
/// the prototype's threshold, so the bench's figures compare like with like.
pub const COMPACT_FROM_TOKENS: usize = 1000;

/// Most bytes of similar runs read back to be folded as templates, per preview: a bound on
/// the work (the learner's cost is per byte) whatever the output; past it runs stay the
/// outline's folds.
const OPEN_MAX_BYTES: u64 = 1 << 20;

/// The view with its outline folded by templates, and the folds, when there is anything to
/// fold.
#[derive(Debug)]
pub(super) struct Compacted<'a> {
    pub(super) view: CaptureView<'a>,
    pub(super) folds: Vec<template::Fold>,
}

/// Whether a segment stands for a template fold: a [`Fold::Line`] segment of the outline is
/// always one line, so one that covers more is a fold's marker.
pub(super) fn is_fold_marker(seg: &Segment) -> bool {
    seg.fold == Fold::Line && seg.lines > 1
}

/// `view` with its outline's alike lines folded into markers numbered from `base` on, or
/// `None` when nothing is folded: the output is small, it has no spill file (a marker names
/// lines to read back, which must be kept somewhere), or no template repeats enough.
pub(super) fn compact<'a>(view: &CaptureView<'a>, base: u64) -> Option<Compacted<'a>> {
    view.spill_path?;
    if !above_threshold(view) {
        return None;
    }
    let opened = open_similar_runs(view);
    let segments: Vec<&Segment> = opened.segments().collect();
    let (learner, lines) = learnt(&segments);
    let lines = without_quoted_secrets(lines, &learner);
    let keep = kept_lines(view, &segments);
    let folds = plan_folds(&lines, &learner, view.total_lines, &|n| keep.contains(n));
    if folds.is_empty() {
        return None;
    }
    // With nothing dropped the two stores are one list, which a fold may span.
    let outline = if opened.is_complete() {
        let all: Vec<Segment> = segments.into_iter().cloned().collect();
        OutlineView {
            head: fold_segments(&all, &folds, base),
            ..OutlineView::default()
        }
    } else {
        OutlineView {
            head: fold_segments(&opened.head, &folds, base),
            gap: opened.gap,
            tail: fold_segments(&opened.tail, &folds, base),
        }
    };
    Some(Compacted {
        view: CaptureView {
            outline,
            ..view.clone()
        },
        folds,
    })
}

/// The outline with its similar runs opened into their lines, where they can be read (from
/// the capture's buffers or the spill) within [`OPEN_MAX_BYTES`] in all: a similar run is a
/// template's lines, and folding it as a template lets it fold with the lines of other
/// templates it interleaves with, under one kind of marker. A run that cannot be read, or
/// that holds a highlighter candidate, stays the outline's fold (and breaks template folds),
/// so no line is ever in two markers.
fn open_similar_runs(view: &CaptureView<'_>) -> OutlineView {
    let mut lines = Lines::new(view);
    let mut budget = OPEN_MAX_BYTES;
    let mut open = |segments: &[Segment], mut at: u64| {
        let mut out = Vec::with_capacity(segments.len());
        for seg in segments {
            let start = at;
            at += seg.bytes;
            if seg.fold != Fold::Similar || seg.candidates > 0 || seg.bytes > budget {
                out.push(seg.clone());
                continue;
            }
            match run_lines(&mut lines, seg, start) {
                Some(opened) => {
                    budget -= seg.bytes;
                    out.extend(opened);
                }
                None => out.push(seg.clone()),
            }
        }
        out
    };
    let outline = &view.outline;
    let head = open(&outline.head, 0);
    let tail_bytes: u64 = outline.tail.iter().map(|seg| seg.bytes).sum();
    let tail_start = if outline.is_complete() {
        outline.head.iter().map(|seg| seg.bytes).sum()
    } else {
        view.total_bytes.saturating_sub(tail_bytes)
    };
    let tail = open(&outline.tail, tail_start);
    OutlineView {
        head,
        gap: outline.gap,
        tail,
    }
}

/// The lines of the similar run `run`, which starts at output byte `at`, as one-line
/// segments; `None` when one cannot be read or is not like the run's first line.
fn run_lines(lines: &mut Lines<'_, '_>, run: &Segment, mut at: u64) -> Option<Vec<Segment>> {
    let mut out = Vec::with_capacity(run.lines as usize);
    for n in run.first..=run.last_line() {
        let line = lines.at(at, run.bytes as usize)?;
        if !run.head.is_whole() || !similar(&run.head.text, &line.text) {
            return None;
        }
        at += line.len + 1;
        out.push(Segment {
            first: n,
            lines: 1,
            bytes: line.len + 1,
            candidates: 0,
            fold: Fold::Line,
            head: line,
            last: LineText::default(),
            ended: true,
        });
    }
    Some(out)
}

/// The folds whose markers start at the view's lines `shown`, as the JSON describes them, in
/// the spill's numbering (`base` lines before the view).
pub(super) fn described(folds: &[template::Fold], shown: &[u64], base: u64) -> Vec<TemplateFold> {
    folds
        .iter()
        .filter(|fold| shown.contains(&fold.first))
        .map(|fold| TemplateFold {
            first: base + fold.first,
            last: base + fold.last,
            templates: fold
                .groups
                .iter()
                .map(|g| FoldTemplate {
                    text: g.text.clone(),
                    count: g.count,
                })
                .collect(),
        })
        .collect()
}

/// Whether the output costs at least [`COMPACT_FROM_TOKENS`] tokens: a floor under its head's
/// or tail's count reaching the threshold says so without the tokenizer (most outputs worth
/// folding, in their first few KiB); otherwise counted when the capture holds it whole, or its
/// head or tail alone reaching the threshold says so, and short of that the head's tokens per
/// byte over the whole output's bytes are the estimate.
fn above_threshold(view: &CaptureView<'_>) -> bool {
    let floor = |bytes: &[u8]| at_least(bytes, COMPACT_FROM_TOKENS) >= COMPACT_FROM_TOKENS;
    if floor(view.head) || floor(view.tail) {
        return true;
    }
    let count = |bytes: &[u8]| count_up_to(bytes, COMPACT_FROM_TOKENS);
    let head = count(view.head);
    if view.is_whole() || head >= COMPACT_FROM_TOKENS {
        return head >= COMPACT_FROM_TOKENS;
    }
    if count(view.tail) >= COMPACT_FROM_TOKENS {
        return true;
    }
    let estimate = head as u128 * view.total_bytes as u128 / view.head.len().max(1) as u128;
    estimate >= COMPACT_FROM_TOKENS as u128
}

/// The tokens of `bytes`, or, once a prefix of them (cut after a line) reaches `n`, that
/// prefix's: a head of 50 KiB is not counted whole to learn that it holds a thousand tokens.
fn count_up_to(bytes: &[u8], n: usize) -> usize {
    let count = |bytes: &[u8]| crate::engine::tokens::count(&String::from_utf8_lossy(bytes));
    for step in [8 << 10, 32 << 10] {
        if bytes.len() <= step {
            break;
        }
        let end = memchr::memrchr(b'\n', &bytes[..step]).map_or(step, |at| at + 1);
        let tokens = count(&bytes[..end]);
        if tokens >= n {
            return tokens;
        }
    }
    count(bytes)
}

/// The templates of the segments' lines, and each line's template. Only a whole, ended
/// [`Fold::Line`] segment is a line the planner may fold; any other segment, and the gap
/// where the outline dropped the middle, is a line without a template, so no fold spans it.
fn learnt(segments: &[&Segment]) -> (Learner, Vec<LineTemplate>) {
    let mut learner = Learner::new(Limits::default());
    let lines = segments
        .iter()
        .map(|seg| {
            let foldable = seg.fold == Fold::Line && seg.ended && seg.head.is_whole();
            LineTemplate {
                line: seg.first,
                template: if foldable {
                    learner.learn(&seg.head.text)
                } else {
                    None
                },
            }
        })
        .collect();
    (learner, lines)
}

/// The lines given without a template where the template holds what redaction hides (a
/// password the same on every line): a marker quotes its template and is not redacted, so those
/// lines stay lines, which are.
fn without_quoted_secrets(mut lines: Vec<LineTemplate>, learner: &Learner) -> Vec<LineTemplate> {
    let secret = secret_templates(learner, Redactor::builtin());
    for line in &mut lines {
        if line.template.is_some_and(|id| secret.contains(&id)) {
            line.template = None;
        }
    }
    lines
}

/// The templates of `learner` that `redactor` would change.
fn secret_templates(learner: &Learner, redactor: &Redactor) -> HashSet<TemplateId> {
    let texts = learner.templates().map(|(id, t)| (id, t.text())).collect();
    changed_by(texts, redactor)
}

/// The keys of those `texts` (lines) that `redactor` would change. Asked of all of them at
/// once first, one a line: a rule that matches a line alone matches it among other lines too
/// (a rule runs on the lines its trigger words are on, and a newline ends every match but a
/// key block's, which only grows), so text all of them leave unchanged means none holds a
/// secret. Each template on its own cost the rules' set-up each time: 3.5 M instructions of
/// the preview of 256 MiB of the truncate bench's log, a seventh of it, for its 359 templates.
fn changed_by<K: Eq + std::hash::Hash>(texts: Vec<(K, String)>, redactor: &Redactor) -> HashSet<K> {
    let all = texts
        .iter()
        .map(|(_, text)| text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    if matches!(redactor.redact(&all).text, Cow::Borrowed(_)) {
        return HashSet::new();
    }
    texts
        .into_iter()
        .filter(|(_, text)| redactor.redact(text).text != *text)
        .map(|(key, _)| key)
        .collect()
}

/// Lines that must stay shown: those the highlight patterns match, each candidate's block
/// (its lines before and after), and any segment holding a candidate.
fn kept_lines(view: &CaptureView<'_>, segments: &[&Segment]) -> KeptLines {
    let blocks = view
        .findings
        .candidates
        .iter()
        .map(|c| (c.first_line(), c.line + c.after.len() as u64));
    let held = segments.iter().filter_map(|seg| {
        let matched = view
            .highlights
            .is_some_and(|patterns| patterns.is_match(&seg.head.text));
        (seg.candidates > 0 || matched).then(|| (seg.first, seg.last_line()))
    });
    KeptLines::new(blocks.chain(held).collect())
}

/// Line numbers as ranges, sorted and apart, asked by binary search: one segment can stand
/// for a million lines (a fold of a flood of one error, whose candidates it holds), which a
/// set of line numbers took 380 M instructions to hold.
struct KeptLines(Vec<(u64, u64)>);

impl KeptLines {
    /// The lines of `ranges` (each inclusive, in any order, overlapping or not).
    fn new(mut ranges: Vec<(u64, u64)>) -> KeptLines {
        ranges.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
        for (first, last) in ranges {
            match merged.last_mut() {
                Some(range) if first <= range.1.saturating_add(1) => range.1 = range.1.max(last),
                _ => merged.push((first, last)),
            }
        }
        KeptLines(merged)
    }

    fn contains(&self, line: u64) -> bool {
        let after = self.0.partition_point(|&(first, _)| first <= line);
        after > 0 && line <= self.0[after - 1].1
    }
}

/// `segments` with each fold's lines replaced by its marker segment (see the module's doc).
fn fold_segments(segments: &[Segment], folds: &[template::Fold], base: u64) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::with_capacity(segments.len());
    let mut folds = folds.iter().peekable();
    let mut open: Option<Segment> = None;
    for seg in segments {
        while folds.next_if(|f| f.last < seg.first).is_some() {}
        let inside = folds
            .peek()
            .is_some_and(|f| f.first <= seg.first && seg.first <= f.last);
        if !inside {
            out.extend(open.take());
            out.push(seg.clone());
            continue;
        }
        let fold = folds.peek().expect("a fold holds the segment");
        match &mut open {
            Some(marker) if marker.first == fold.first => {
                marker.lines += 1;
                marker.bytes += seg.bytes;
            }
            _ => {
                out.extend(open.take());
                open = Some(marker_segment(fold, seg, base));
            }
        }
    }
    out.extend(open);
    out
}

/// The segment that stands for `fold`, starting with its first line `seg`.
fn marker_segment(fold: &template::Fold, seg: &Segment, base: u64) -> Segment {
    let numbered = template::Fold {
        first: base + fold.first,
        last: base + fold.last,
        groups: fold.groups.clone(),
    };
    let text = fold_text(&numbered);
    Segment {
        first: seg.first,
        lines: 1,
        bytes: seg.bytes,
        candidates: 0,
        fold: Fold::Line,
        head: LineText {
            len: text.len() as u64,
            text,
        },
        last: LineText::default(),
        ended: true,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::KeptLines;
    use crate::engine::capture::{Capture, Limits, SpillPolicy};
    use crate::program::CliSteps;
    use crate::protocol::{Direction, Preview};
    use crate::storage::spill::DataDir;

    proptest! {
        /// The lines found to hold secrets all at once are those found one by one.
        #[test]
        fn lines_with_secrets_are_found_as_one_by_one(
            lines in prop::collection::vec(prop::collection::vec(secretish_word(), 0..6), 0..12),
        ) {
            let redactor = crate::engine::redact::Redactor::builtin();
            let texts: Vec<(usize, String)> =
                lines.iter().map(|words| words.join(" ")).enumerate().collect();
            let alone: std::collections::HashSet<usize> = texts
                .iter()
                .filter(|(_, text)| redactor.redact(text).text != *text)
                .map(|&(k, _)| k)
                .collect();
            prop_assert_eq!(super::changed_by(texts, redactor), alone);
        }
    }

    /// Words of ordinary lines, and pieces of the secrets redaction hides.
    fn secretish_word() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec![
                "error",
                "ok",
                "password=",
                "password:",
                "hunter2hunter2",
                "token=",
                "-u",
                "admin:s3cr3tpass",
                "--user",
                "https://bob:pa55w0rd@db.example",
                "data:",
                "kind: Secret",
                "-----BEGIN RSA PRIVATE KEY-----",
                "-----END RSA PRIVATE KEY-----",
                "Authorization:",
                "Basic",
                "dXNlcjpwYXNzd29yZA==",
                "AKIAIOSFODNN7EXAMPLQ",
                "ghp_aB3dE5fG7hJ9kLmN2pQ4rS6tU8vWxYz12345",
                "=",
                "'",
                "\"",
                "&key=",
                "?sig=",
                "ACa1b2c3d4e5f60718293a4b5c6d7e8f9",
                "mysql",
                "-pS3cretpw",
                "login",
                "x",
            ])
            .prop_map(str::to_string),
            "[A-Za-z0-9=:_/+.-]{1,24}",
        ]
    }

    proptest! {
        #[test]
        fn kept_lines_hold_exactly_the_lines_of_their_ranges(
            ranges in prop::collection::vec((0u64..200, 0u64..20), 0..12),
        ) {
            let ranges: Vec<(u64, u64)> = ranges.into_iter().map(|(f, n)| (f, f + n)).collect();
            let kept = KeptLines::new(ranges.clone());
            for line in 0..240 {
                let inside = ranges.iter().any(|&(f, l)| f <= line && line <= l);
                prop_assert_eq!(kept.contains(line), inside, "line {}", line);
            }
        }
    }

    fn preview(text: &str, spill: bool, compact: bool) -> Preview {
        let policy = if spill {
            let dir = tempfile::tempdir().unwrap().keep();
            SpillPolicy::Always(DataDir::open(&dir).unwrap())
        } else {
            SpillPolicy::Never
        };
        let mut c = Capture::new(Limits::default(), policy);
        c.write(text);
        c.finish();
        let view = c.view();
        Preview::build_compacting(
            &view,
            Direction::Both,
            &CliSteps,
            None,
            super::super::Offset::default(),
            compact,
        )
    }

    #[test]
    fn a_big_text_is_counted_only_as_far_as_the_threshold_needs() {
        let count = |t: &str| crate::engine::tokens::count(t);
        let small = "test a::b ... ok\n".repeat(100);
        assert_eq!(super::count_up_to(small.as_bytes(), 1000), count(&small));
        let big = "test alpha::beta::case_17 ... ok\n".repeat(3000);
        let prefix = super::count_up_to(big.as_bytes(), 1000);
        assert!((1000..count(&big)).contains(&prefix), "{prefix}");
        let few = super::count_up_to(big.as_bytes(), usize::MAX);
        assert_eq!(
            few,
            count(&big),
            "short of the threshold, the whole is counted"
        );
    }

    #[test]
    fn lines_whose_template_holds_a_secret_are_not_folded() {
        let token = "ghp_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ";
        let text: String = (0..400)
            .map(|i| format!("step {i}: sending {token} now\n"))
            .collect();
        let mut p = preview(&text, true, true);
        assert!(p.folds.is_empty(), "{:?}", p.folds);
        p.redact(crate::engine::redact::Redactor::builtin());
        assert!(!p.content.contains(token), "{}", p.content);
        // The same lines with a number where the token was fold as before.
        let text: String = (0..400)
            .map(|i| format!("step {i}: sending {i} now\n"))
            .collect();
        assert!(!preview(&text, true, true).folds.is_empty());
    }

    /// 300 passing tests with one failure among them, as cargo prints them.
    fn test_run() -> String {
        let mut text = String::from("running 301 tests\n");
        for i in 0..301 {
            if i == 150 {
                text.push_str("test ledger::tests::balance_150 ... FAILED\n");
            } else {
                text.push_str(&format!("test ledger::tests::case_{i} ... ok\n"));
            }
        }
        text.push_str("\ntest result: FAILED. 300 passed; 1 failed; 0 ignored\n");
        text
    }

    #[test]
    fn alike_lines_fold_around_the_failure_and_the_summary() {
        let text = test_run();
        let p = preview(&text, true, true);
        assert!(p.truncated);
        assert_eq!(p.truncated_by, None);
        assert!(
            p.content.starts_with(
                "running 301 tests\ntest ledger::tests::case_0 ... ok\n\
                 [... 149 more lines like \"test <*> ... ok\", lines 3-151 ...]\n\
                 test ledger::tests::balance_150 ... FAILED\n\
                 test ledger::tests::case_151 ... ok\n\
                 [... 149 more lines like \"test <*> ... ok\", lines 154-302 ...]\n\n\
                 test result: FAILED. 300 passed; 1 failed; 0 ignored\n\n[spillway: output compacted"
            ),
            "{}",
            p.content
        );
        assert!(p.content.len() * 5 < text.len(), "{}", p.content.len());
        // The JSON says the same, for a client that reads facts, not text.
        let folds: Vec<(u64, u64, &str, u64)> = p
            .folds
            .iter()
            .map(|f| {
                (
                    f.first,
                    f.last,
                    f.templates[0].text.as_str(),
                    f.templates[0].count,
                )
            })
            .collect();
        assert_eq!(
            folds,
            [
                (3, 151, "test <*> ... ok", 149),
                (154, 302, "test <*> ... ok", 149)
            ]
        );
    }

    #[test]
    fn off_small_or_unsaved_outputs_are_shown_as_they_are() {
        let text = test_run();
        for p in [preview(&text, true, false), preview(&text, false, true)] {
            assert!(!p.truncated);
            assert_eq!(p.content, text);
        }
        let small: String = (0..40).map(|i| format!("test t{i} ... ok\n")).collect();
        assert_eq!(preview(&small, true, true).content, small);
    }
}
