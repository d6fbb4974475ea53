//! What a preview saved, split by what made the saving: template folds (`--compact`: lines
//! alike folded into one marker) or the cut (the lines the limits left out, and the outline's
//! repeats), for the token accounting of `spillway stats`.
//!
//! A run saves `output - preview` tokens. Folding's part is the tokens of the lines its folds
//! hide less those of their markers; a run from which nothing but folded lines was left out
//! gives all its saving to folding (its notice exists because it folded). The cut's part is
//! the rest. Folding's part is never more than the saving, so neither part is negative while
//! the saving is not.
//!
//! Counted where the run's tokens are, at the same bounded cost: the folded lines are counted
//! exactly when the whole output is at hand (outputs the accounting counts exactly, at most
//! [`tokens::EXACT_MAX_BYTES`]); past that they are estimated at the output's tokens per
//! line, which is itself estimated from the accounting's samples. No output is read twice.

use std::path::Path;

use crate::engine::tokens::{self, Count, OutputText};
use crate::protocol::{Preview, TemplateFold};
use crate::storage::index::RunTokens;
use crate::storage::spill::read_whole;

/// The tokens of a run whose whole output is `output` and whose preview, as its clients were
/// given it, is `preview`: both counted, and folding's part of the saving.
pub fn run_tokens(preview: &Preview, output: OutputText) -> RunTokens {
    let counted = output.count();
    let shown = tokens::measure(&preview.content);
    let whole = || match output {
        OutputText::Whole(text) => Some(text),
        OutputText::Sampled { .. } => None,
    };
    RunTokens {
        output: counted.tokens,
        preview: shown.tokens,
        output_estimated: counted.estimated || shown.estimated,
        folded: folded_tokens(preview, counted, shown.tokens, whole),
    }
}

/// The tokens of `output - preview_tokens` that `preview`'s template folds saved (see the
/// module's doc). `whole` gives the whole output when it can be had cheaply (asked only when
/// the preview both folds and cuts).
fn folded_tokens(
    preview: &Preview,
    output: Count,
    preview_tokens: u64,
    whole: impl FnOnce() -> Option<String>,
) -> u64 {
    if preview.folds.is_empty() {
        return 0;
    }
    let saved = output.tokens.saturating_sub(preview_tokens);
    let folded_lines: u64 = preview.folds.iter().map(fold_lines).sum();
    if preview.partial_line.is_none() && preview.omitted_lines <= folded_lines {
        return saved;
    }
    let text = (!output.estimated).then(whole).flatten();
    let hidden = match &text {
        Some(text) => hidden_tokens(text, &preview.folds),
        None => per_line(output.tokens, preview.total_lines, folded_lines),
    };
    hidden
        .saturating_sub(marker_tokens(&preview.content, &preview.folds))
        .min(saved)
}

/// The whole output, read back from the run's spill file, when the token accounting counts it
/// exactly (at most [`tokens::EXACT_MAX_BYTES`]) and the file holds every byte of it: a file
/// just written, read once more while it is still in the page cache.
pub fn spilled_output(preview: &Preview) -> Option<String> {
    if preview.total_bytes > tokens::EXACT_MAX_BYTES as u64 || preview.spill_capped.is_some() {
        return None;
    }
    read_whole(Path::new(preview.spill_path.as_ref()?), preview.total_bytes)
}

fn fold_lines(fold: &TemplateFold) -> u64 {
    fold.last.saturating_sub(fold.first) + 1
}

/// `lines` of an output of `total_lines` lines that cost `tokens`, at its average.
fn per_line(tokens: u64, total_lines: u64, lines: u64) -> u64 {
    if total_lines == 0 {
        return 0;
    }
    (u128::from(tokens) * u128::from(lines) / u128::from(total_lines))
        .try_into()
        .unwrap_or(u64::MAX)
}

/// The tokens of the lines the folds hide, each fold's lines counted as the text they are in
/// `text` (newlines included). Folds are in line order, so one walk over the text finds them.
fn hidden_tokens(text: &str, folds: &[TemplateFold]) -> u64 {
    let mut starts = std::iter::once(0)
        .chain(memchr::memchr_iter(b'\n', text.as_bytes()).map(|at| at + 1))
        .filter(|&at| at < text.len());
    let mut line = 0u64;
    let mut at = 0usize;
    let mut tokens = 0u64;
    // Moves to the start of line `n` (1-based), or past the text.
    let mut seek = |n: u64, line: &mut u64, at: &mut usize| {
        while *line < n {
            match starts.next() {
                Some(start) => *at = start,
                None => *at = text.len(),
            }
            *line += 1;
        }
    };
    for fold in folds {
        if fold.first < line {
            continue; // not in order: never made so, and not counted twice
        }
        seek(fold.first, &mut line, &mut at);
        let start = at;
        seek(fold.last + 1, &mut line, &mut at);
        tokens += tokens::count(&text[start..at]) as u64;
    }
    tokens
}

/// The tokens of the folds' markers as the preview shows them: the line of `content` that
/// opens with `[... ` and names the fold's range, newline included.
fn marker_tokens(content: &str, folds: &[TemplateFold]) -> u64 {
    folds
        .iter()
        .filter_map(|fold| {
            let range = if fold.first == fold.last {
                format!(", line {} ...]", fold.first)
            } else {
                format!(", lines {}-{} ...]", fold.first, fold.last)
            };
            content
                .split_inclusive('\n')
                .find(|line| line.starts_with("[... ") && line.trim_end().ends_with(&range))
        })
        .map(|line| tokens::count(line) as u64)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::capture::{Capture, Limits, SpillPolicy};
    use crate::engine::preview::Offset;
    use crate::program::CliSteps;
    use crate::protocol::Direction;
    use crate::storage::spill::DataDir;

    fn preview(text: &str, limits: Limits, compact: bool) -> Preview {
        let dir = tempfile::tempdir().unwrap().keep();
        let policy = SpillPolicy::Always(DataDir::open(&dir).unwrap());
        let mut c = Capture::new(limits, policy);
        c.write(text);
        c.finish();
        Preview::build_compacting(
            &c.view(),
            Direction::Both,
            &CliSteps,
            None,
            Offset::default(),
            compact,
        )
    }

    /// 300 passing tests as cargo prints them, one failing among them.
    fn test_run(tests: usize) -> String {
        let mut text = format!("running {tests} tests\n");
        for i in 0..tests {
            if i == tests / 2 {
                text.push_str(&format!("test ledger::tests::balance_{i} ... FAILED\n"));
            } else {
                text.push_str(&format!("test ledger::tests::case_{i} ... ok\n"));
            }
        }
        text.push_str("\ntest result: FAILED. 1 failed\n");
        text
    }

    fn split(text: &str, p: &Preview) -> (u64, u64) {
        let output = tokens::measure(text);
        let shown = tokens::count(&p.content) as u64;
        let folded = folded_tokens(p, output, shown, || Some(text.to_string()));
        (output.tokens - shown, folded)
    }

    #[test]
    fn a_preview_that_only_folds_saved_it_all_by_folding() {
        let text = test_run(300);
        let p = preview(&text, Limits::default(), true);
        assert!(!p.folds.is_empty() && p.truncated_by.is_none(), "{p:?}");
        let (saved, folded) = split(&text, &p);
        assert!(saved > 2000, "{saved}");
        assert_eq!(folded, saved);
    }

    #[test]
    fn a_preview_that_only_cuts_saved_nothing_by_folding() {
        let text = test_run(3000);
        let p = preview(&text, Limits::default(), false);
        assert!(p.folds.is_empty() && p.truncated_by.is_some(), "{p:?}");
        let (saved, folded) = split(&text, &p);
        assert!(saved > 10_000, "{saved}");
        assert_eq!(folded, 0);
    }

    /// `n` lines of made-up words, each unlike the others: no template to fold them by.
    fn unalike(n: usize) -> String {
        let mut state = 0x2545_F491u32;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state
        };
        (0..n)
            .map(|_| {
                let words: Vec<String> = (0..3 + next() % 6)
                    .map(|_| {
                        (0..2 + next() % 7)
                            .map(|_| char::from(b'a' + (next() % 26) as u8))
                            .collect()
                    })
                    .collect();
                words.join(" ") + "\n"
            })
            .collect()
    }

    #[test]
    fn a_preview_that_folds_and_cuts_counts_the_folded_lines_less_their_markers() {
        let text = test_run(600) + &unalike(400);
        let limits = Limits::new(40, 8192).unwrap();
        let p = preview(&text, limits, true);
        let folded_lines: u64 = p.folds.iter().map(fold_lines).sum();
        assert!(folded_lines > 0 && p.omitted_lines > folded_lines, "{p:?}");
        let (saved, folded) = split(&text, &p);
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let mut expected = 0i64;
        for fold in &p.folds {
            let hidden: String = lines[fold.first as usize - 1..fold.last as usize].concat();
            let marker = p
                .content
                .split_inclusive('\n')
                .find(|l| l.contains(&format!("lines {}-{} ...]", fold.first, fold.last)))
                .unwrap();
            expected += tokens::count(&hidden) as i64 - tokens::count(marker) as i64;
        }
        assert!(expected > 0, "{expected}");
        assert_eq!(folded as i64, expected);
        assert!(
            folded < saved,
            "the cut saved the rest: {folded} of {saved}"
        );
        // Without the text at hand, the folded lines are estimated at the output's average.
        let output = tokens::measure(&text);
        let shown = tokens::count(&p.content) as u64;
        let estimated = folded_tokens(&p, output, shown, || None);
        let error = (estimated as f64 - folded as f64).abs() / folded as f64;
        assert!(error < 0.25, "{estimated} vs {folded}");
    }
}
