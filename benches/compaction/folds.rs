//! A prototype of issue 27's template folds over a whole output, to see what they would save
//! before the preview uses them: small outputs stay whole; above that, the lines the
//! highlighter keeps (its matches and their blocks) stay, the rest go through the learner and
//! the planner, each fold becomes its marker, and a line over the byte budget shows its two
//! ends. No cap and no notice: the preview's own rules come with the integration.

use std::collections::HashSet;

use spillway::engine::highlight::{Highlighter, Patterns};
use spillway::engine::normalise::count_newlines;
use spillway::engine::template::{Learner, Limits, LineTemplate, fold_text, long_line, plan_folds};
use spillway::engine::tokens;

/// Below this many tokens an output is shown whole (the contract's rule 1).
pub const SMALL_TOKENS: usize = 1000;
/// A line longer than this shows its two ends (the preview's default byte budget).
const MAX_LINE_BYTES: usize = 51200;

/// The folded text of a normalised output.
pub fn folded(text: &str) -> String {
    if tokens::count(text) < SMALL_TOKENS {
        return text.to_owned();
    }
    let lines: Vec<&str> = text.lines().collect();
    let keep = kept_lines(text, &lines);
    let mut learner = Learner::new(Limits::default());
    let planned: Vec<LineTemplate> = lines
        .iter()
        .enumerate()
        .map(|(i, line)| LineTemplate {
            line: i as u64 + 1,
            template: learner.learn(line),
        })
        .collect();
    let folds = plan_folds(&planned, &learner, lines.len() as u64, &|n| {
        keep.contains(&n)
    });
    let mut out = String::new();
    let mut folds = folds.iter().peekable();
    let mut n = 1u64;
    while let Some(line) = lines.get(n as usize - 1) {
        if let Some(fold) = folds.next_if(|f| f.first == n) {
            out.push_str(&fold_text(fold));
            out.push('\n');
            n = fold.last + 1;
            continue;
        }
        match long_line(line, MAX_LINE_BYTES) {
            Some(cut) => out.push_str(&cut.text()),
            None => out.push_str(line),
        }
        out.push('\n');
        n += 1;
    }
    out
}

/// Lines the highlighter would keep: every line its patterns match, and the kept candidates'
/// blocks.
fn kept_lines(text: &str, lines: &[&str]) -> HashSet<u64> {
    let patterns = Patterns::defaults();
    let mut keep: HashSet<u64> = lines
        .iter()
        .enumerate()
        .filter(|(_, line)| patterns.is_match(line))
        .map(|(i, _)| i as u64 + 1)
        .collect();
    let mut highlighter = Highlighter::new(patterns);
    highlighter.write(text, count_newlines(text));
    highlighter.finish();
    for candidate in highlighter.candidates() {
        keep.extend(candidate.first_line()..=candidate.line + candidate.after.len() as u64);
    }
    keep
}
