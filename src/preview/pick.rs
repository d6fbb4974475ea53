//! Which lines from the omitted part of an output a preview carries as highlights: the
//! candidates the highlighter found, chosen within a share of the budget.

use crate::highlight::Findings;

/// A highlighted line (and the location line after it), whole, with its spill line numbers.
#[derive(Debug, Clone)]
pub(super) struct Highlight {
    pub(super) first: u64,
    pub(super) last: u64,
    /// The lines, each ending with a newline.
    pub(super) text: String,
}

/// Picks highlights among the candidates in `omitted` within the budget: strong ones before
/// weak ones, and in each group the first, the last, then evenly spread ones.
pub(super) fn choose_highlights(
    findings: &Findings,
    omitted: &std::ops::RangeInclusive<u64>,
    max_lines: usize,
    max_bytes: usize,
) -> Vec<Highlight> {
    let inside: Vec<_> = findings
        .candidates
        .iter()
        .filter(|c| omitted.contains(&c.line))
        .collect();
    let (strong, weak): (Vec<_>, Vec<_>) = inside.into_iter().partition(|c| c.strong);
    let mut chosen: Vec<Highlight> = Vec::new();
    let (mut lines, mut bytes) = (0, 0);
    for candidate in spread(&strong).into_iter().chain(spread(&weak)) {
        let mut text = format!("{}\n", candidate.text);
        let mut last = candidate.line;
        if let Some(context) = &candidate.context
            && omitted.contains(&(candidate.line + 1))
        {
            text.push_str(context);
            text.push('\n');
            last += 1;
        }
        let overlaps = chosen
            .iter()
            .any(|h| h.first <= last && candidate.line <= h.last);
        let size = (last - candidate.line + 1) as usize;
        if overlaps || lines + size > max_lines || bytes + text.len() > max_bytes {
            continue;
        }
        lines += size;
        bytes += text.len();
        chosen.push(Highlight {
            first: candidate.line,
            last,
            text,
        });
    }
    chosen.sort_by_key(|h| h.first);
    chosen
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
