//! Which lines from the omitted part of an output a preview carries as highlights: the
//! candidates the highlighter found, chosen within a share of the budget.
//!
//! When candidates are everywhere (500 errors of one kind and the root cause once among
//! them), picking the first and the last would show the crowd and hide the needle. So the
//! choice is for information: first one candidate of each kind that neither the shown ends
//! nor an earlier pick already shows (strong ones before weak ones, in output order), then the
//! rest spread over the omitted part. Each is shown as a block with the context that makes it
//! actionable (see [`Candidate`]), cut back to the line alone when the block does not fit.

use rustc_hash::FxHashSet;
use std::ops::RangeInclusive;

use crate::engine::capture::Outcome;
use crate::engine::highlight::{Candidate, Findings, KindMemo};

/// A highlighted block of lines, whole, with its spill line numbers.
#[derive(Debug, Clone)]
pub(super) struct Highlight {
    pub(super) first: u64,
    pub(super) last: u64,
    /// The lines, each ending with a newline.
    pub(super) text: String,
}

/// What the highlights may still take.
struct Budget {
    lines: usize,
    bytes: usize,
}

/// Picks highlights among the candidates in `omitted` within the budget, preferring kinds not
/// in `shown` (the kinds of the candidate lines the preview shows anyway), ranked knowing how
/// the command ended (`outcome`); `memo` keeps each line's kind from one pass to the next.
pub(super) fn choose_highlights(
    findings: &Findings,
    omitted: &RangeInclusive<u64>,
    max_lines: usize,
    max_bytes: usize,
    shown: &FxHashSet<u64>,
    outcome: Outcome,
    memo: &KindMemo,
) -> Vec<Highlight> {
    let inside: Vec<&Candidate> = findings
        .candidates
        .iter()
        .filter(|c| omitted.contains(&c.line))
        .collect();
    let mut budget = Budget {
        lines: max_lines,
        bytes: max_bytes,
    };
    let mut chosen: Vec<Highlight> = Vec::new();
    let mut kinds = shown.clone();
    for c in ranked(&inside, outcome) {
        let kind = memo.of_candidate(c);
        if !kinds.contains(&kind) && take(c, omitted, &mut budget, &mut chosen) {
            kinds.insert(kind);
        }
    }
    let (strong, weak): (Vec<&Candidate>, Vec<&Candidate>) =
        inside.into_iter().partition(|c| c.strong || c.surprising);
    for c in spread(&strong).into_iter().chain(spread(&weak)) {
        take(c, omitted, &mut budget, &mut chosen);
    }
    chosen.sort_by_key(|h| h.first);
    chosen
}

/// Lines each side of a pattern's candidate within which a surprising line is near a sign of
/// failure.
const NEAR: u64 = 5;

/// `inside` (in output order) best first: root causes that are also surprising, then root
/// causes, surprising lines near a pattern's candidate, other surprising lines, restatements
/// (a rare line is likelier the cause than a line that says a failure happened).
/// Root causes and restatements keep output order (the first of a kind is its cause);
/// surprising lines go latest first, as nearer the end is nearer the failure.
///
/// A command that exited with status 0 did not fail, so a line only its rarity marks is
/// likelier a routine oddity (a notice, a line of a summary) than a cause: then the lines a
/// pattern names, warnings and restatements, come before the surprising lines no pattern names.
fn ranked<'a>(inside: &[&'a Candidate], outcome: Outcome) -> Vec<&'a Candidate> {
    let near_a_sign = |c: &Candidate| {
        inside.iter().any(|o| {
            o.line != c.line && (o.strong || !o.surprising) && o.line.abs_diff(c.line) <= NEAR
        })
    };
    let succeeded = outcome == Outcome::Succeeded;
    let tier = |c: &Candidate| match (c.strong, c.surprising) {
        (true, true) => 0,
        (true, false) => 1,
        (false, _) if succeeded && c.named => 2,
        (false, true) if near_a_sign(c) => 3,
        (false, true) => 4,
        (false, false) => 5,
    };
    let mut ranked: Vec<(u8, u64, &Candidate)> = inside
        .iter()
        .map(|&c| {
            let order = if c.surprising && !c.strong {
                u64::MAX - c.line
            } else {
                c.line
            };
            (tier(c), order, c)
        })
        .collect();
    ranked.sort_by_key(|&(tier, order, _)| (tier, order));
    ranked.into_iter().map(|(_, _, c)| c).collect()
}

/// Adds `c` as a block (or, when that does not fit, as its line alone) unless it overlaps a
/// chosen one or nothing of it fits.
fn take(
    c: &Candidate,
    omitted: &RangeInclusive<u64>,
    budget: &mut Budget,
    chosen: &mut Vec<Highlight>,
) -> bool {
    for block in [block(c, omitted, true), block(c, omitted, false)] {
        let lines = (block.last - block.first + 1) as usize;
        let overlaps = chosen
            .iter()
            .any(|h| h.first <= block.last && block.first <= h.last);
        if overlaps {
            continue;
        }
        if lines <= budget.lines && block.text.len() <= budget.bytes {
            budget.lines -= lines;
            budget.bytes -= block.text.len();
            chosen.push(block);
            return true;
        }
    }
    false
}

/// `c` with its context (as far as it lies in `omitted`) or without.
fn block(c: &Candidate, omitted: &RangeInclusive<u64>, with_context: bool) -> Highlight {
    // Room for every line it may hold: the budget's search makes each block at every cut,
    // and growing the text line by line was most of a block's cost.
    let context = || {
        c.before
            .iter()
            .chain(&c.after)
            .map(|l| l.len() + 1)
            .sum::<usize>()
    };
    let room = c.text.len() + 1 + if with_context { context() } else { 0 };
    let (mut first, mut text) = (c.line, String::with_capacity(room));
    if with_context {
        for (k, line) in c.before.iter().enumerate() {
            let number = c.first_line() + k as u64;
            if omitted.contains(&number) {
                first = first.min(number);
                text.push_str(line);
                text.push('\n');
            }
        }
    }
    text.push_str(&c.text);
    text.push('\n');
    let mut last = c.line;
    if with_context {
        for line in &c.after {
            if !omitted.contains(&(last + 1)) {
                break;
            }
            last += 1;
            text.push_str(line);
            text.push('\n');
        }
    }
    Highlight { first, last, text }
}

/// `items` in the order a short list should take them: the first, the last, then the middles
/// of ever smaller gaps, so a few picks cover the whole span.
fn spread<T: Copy>(items: &[T]) -> Vec<T> {
    let n = items.len();
    let mut order = Vec::with_capacity(n);
    let mut taken = vec![false; n];
    let mut take = |i: usize, order: &mut Vec<T>| {
        if !taken[i] {
            taken[i] = true;
            order.push(items[i]);
        }
    };
    if n == 0 {
        return order;
    }
    take(0, &mut order);
    take(n - 1, &mut order);
    let mut gaps = std::collections::VecDeque::from([(0, n - 1)]);
    while let Some((lo, hi)) = gaps.pop_front() {
        if hi - lo < 2 {
            continue;
        }
        let mid = lo + (hi - lo) / 2;
        take(mid, &mut order);
        gaps.push_back((lo, mid));
        gaps.push_back((mid, hi));
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(line: u64, text: &str, surprising: bool, named: bool) -> Candidate {
        Candidate {
            line,
            text: text.to_string(),
            before: Vec::new(),
            after: Vec::new(),
            strong: false,
            surprising,
            named,
        }
    }

    #[test]
    fn a_run_that_succeeded_ranks_what_a_pattern_names_before_what_only_rarity_marks() {
        let restatement = candidate(10, "make: *** [all] Error 2", false, true);
        let rare_restatement = candidate(20, "BUILD FAILED in 3s", true, true);
        let rare = candidate(50, "the cache index was rebuilt from scratch", true, false);
        let inside = [&restatement, &rare_restatement, &rare];
        let lines =
            |outcome| -> Vec<u64> { ranked(&inside, outcome).iter().map(|c| c.line).collect() };
        assert_eq!(lines(Outcome::Succeeded), [10, 20, 50]);
        // Failed or not known: a rare line first, latest first, then the restatement.
        assert_eq!(lines(Outcome::Failed), [50, 20, 10]);
        assert_eq!(lines(Outcome::Unknown), [50, 20, 10]);
    }
}
