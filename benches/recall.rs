//! Key-line recall of previews on real command outputs. Not a timed test: it prints a table.
//!
//! For each case of a corpus directory (the layout of `cases.json` + `NN-name/output.raw`, with
//! each case's key lines: the lines a reader must see to act), it runs the engine on the raw
//! PTY bytes and checks whether every key line appears *whole* (as a line of its own) in the
//! preview, for four modes: `head`, `tail` and `both` without highlights (what other harnesses
//! do), and spillway's default (`both` with highlights), at the default budget (2000 lines /
//! 50 KiB), a tight one (100 lines / 4 KiB) and the tightest (50 lines / 2 KiB).
//!
//! Each cell also says how much of the binding limit the shown lines use, how many of the
//! preview's markers say what is not so (checked against the text: a repeat over lines that
//! differ, a similar run over lines that differ in more than numbers, an omission whose count
//! is wrong, an error count above the omitted lines that match; must be 0) and the notice's
//! size.
//!
//! Cases marked `held_out` (kept apart while tuning) are also counted on their own.
//!
//! Run: `cargo bench --bench recall -- PATH/TO/CORPUS`.

use std::error::Error;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use spillway::engine::capture::{Capture, Limits, SpillPolicy};
use spillway::engine::highlight::Patterns;
use spillway::engine::normalise::{NormaliseOptions, normalise};
use spillway::program::CliSteps;
use spillway::protocol::{Direction, Preview};

#[derive(Debug, Deserialize)]
struct Case {
    name: String,
    dir: String,
    key_lines: Vec<String>,
    /// Kept apart while tuning (`scripts/needles_corpus.py` marks a third of its cases), so
    /// its recall is also reported on its own.
    #[serde(default)]
    held_out: bool,
}

#[derive(Debug, Clone, Copy)]
struct Mode {
    name: &'static str,
    direction: Direction,
    highlights: bool,
}

const MODES: [Mode; 4] = [
    Mode {
        name: "head",
        direction: Direction::Head,
        highlights: false,
    },
    Mode {
        name: "tail",
        direction: Direction::Tail,
        highlights: false,
    },
    Mode {
        name: "both",
        direction: Direction::Both,
        highlights: false,
    },
    Mode {
        name: "spillway",
        direction: Direction::Both,
        highlights: true,
    },
];

const BUDGETS: [(&str, u64, u64); 3] = [
    ("default", 2000, 51200),
    ("tight", 100, 4096),
    ("tightest", 50, 2048),
];

fn main() -> Result<(), Box<dyn Error>> {
    // `cargo bench` passes `--bench`; the corpus is the first other argument.
    let Some(corpus) = std::env::args().skip(1).find(|a| !a.starts_with("--")) else {
        eprintln!("usage: cargo bench --bench recall -- PATH/TO/CORPUS");
        std::process::exit(2);
    };
    let corpus = PathBuf::from(corpus);
    let cases: Vec<Case> = serde_json::from_slice(&std::fs::read(corpus.join("cases.json"))?)?;
    let texts: Vec<String> = cases
        .iter()
        .map(|c| read_case(&corpus, c))
        .collect::<Result<_, _>>()?;
    for (budget, lines, bytes) in BUDGETS {
        println!("\n## {budget} budget ({lines} lines / {bytes} bytes)\n");
        let names: Vec<&str> = MODES.iter().map(|m| m.name).collect();
        println!("| case | key lines | {} |", names.join(" | "));
        println!("|---|---:|---|---|---|---|");
        let mut hits = [0usize; 4];
        let mut held_out_hits = [0usize; 4];
        for (case, text) in cases.iter().zip(&texts) {
            let mut row = format!("| {} | {} |", case.name, case.key_lines.len());
            for (m, mode) in MODES.iter().enumerate() {
                let preview = preview(text, *mode, lines, bytes)?;
                let found = case
                    .key_lines
                    .iter()
                    .filter(|key| preview.content.lines().any(|l| l == key.as_str()))
                    .count();
                if found == case.key_lines.len() {
                    hits[m] += 1;
                    held_out_hits[m] += usize::from(case.held_out);
                }
                let mark = if found == case.key_lines.len() {
                    "yes"
                } else {
                    "NO"
                };
                let used = budget_used(&preview, lines, bytes);
                let false_markers = false_markers(&preview, text);
                let notice = notice_bytes(&preview);
                row.push_str(&format!(
                    " {mark} ({found}/{}, {} B, used {used} %, false markers {false_markers}, notice {notice} B) |",
                    case.key_lines.len(),
                    preview.content.len()
                ));
            }
            println!("{row}");
        }
        let recall: Vec<String> = hits
            .iter()
            .map(|h| format!("{:.0} %", *h as f64 * 100.0 / cases.len() as f64))
            .collect();
        println!(
            "| **recall** (cases with every key line) | | {} |",
            recall.join(" | ")
        );
        let held_out = cases.iter().filter(|c| c.held_out).count();
        if held_out > 0 {
            let counts = |hits: [usize; 4], of: usize| -> Vec<String> {
                hits.iter().map(|h| format!("{h}/{of}")).collect()
            };
            let tuned: [usize; 4] = std::array::from_fn(|m| hits[m] - held_out_hits[m]);
            println!(
                "| cases tuned on | | {} |",
                counts(tuned, cases.len() - held_out).join(" | ")
            );
            println!(
                "| cases held out | | {} |",
                counts(held_out_hits, held_out).join(" | ")
            );
        }
    }
    println!(
        "\nreproduce: cargo bench --bench recall -- {}",
        corpus.display()
    );
    Ok(())
}

fn read_case(corpus: &Path, case: &Case) -> Result<String, Box<dyn Error>> {
    let raw = std::fs::read(corpus.join(&case.dir).join("output.raw"))?;
    Ok(normalise(&raw, NormaliseOptions::default()))
}

fn preview(text: &str, mode: Mode, lines: u64, bytes: u64) -> Result<Preview, Box<dyn Error>> {
    let limits = Limits::new(lines, bytes)?;
    let patterns = mode.highlights.then(Patterns::defaults);
    let mut capture = Capture::with_patterns(limits, SpillPolicy::Never, patterns);
    capture.write(text);
    capture.finish();
    Ok(Preview::build(&capture.view(), mode.direction, &CliSteps))
}

/// The preview's lines before its notice.
fn body(p: &Preview) -> &str {
    match p.content.rfind("\n\n[spillway: ") {
        Some(at) if p.truncated => &p.content[..at + 1],
        _ => &p.content,
    }
}

fn is_marker(line: &str) -> bool {
    line.starts_with("[... ") || line.starts_with("[at line ")
}

/// The larger share of the two limits that the shown output lines use, in percent.
fn budget_used(p: &Preview, max_lines: u64, max_bytes: u64) -> u64 {
    let shown: Vec<&str> = body(p)
        .split_inclusive('\n')
        .filter(|l| !is_marker(l))
        .collect();
    let bytes: usize = shown.iter().map(|l| l.len()).sum();
    (shown.len() as u64 * 100 / max_lines).max(bytes as u64 * 100 / max_bytes)
}

fn notice_bytes(p: &Preview) -> usize {
    p.content.len() - body(p).len()
}

/// Markers that say what is not so, checked against the whole text.
fn false_markers(p: &Preview, text: &str) -> usize {
    let spill: Vec<&str> = text.split('\n').collect();
    let line = |n: u64| spill.get(n as usize - 1).copied().unwrap_or_default();
    let numbers = |s: &str| -> Vec<u64> {
        s.split(|c: char| !c.is_ascii_digit())
            .filter_map(|t| t.parse().ok())
            .collect()
    };
    let mut wrong = 0;
    for marker in body(p).lines().filter(|l| l.starts_with("[... ")) {
        let ok = if let Some(rest) = marker.strip_prefix("[... repeated ") {
            match numbers(rest)[..] {
                [count, a, b] => count == b - a + 1 && (a..=b).all(|k| line(k) == line(a)),
                _ => false,
            }
        } else if marker.contains(" similar lines, lines ") {
            match numbers(marker)[..] {
                [count, a, b] if a > 1 => {
                    count == b - a + 1
                        && (a..=b + 1).all(|k| skeleton(line(k)) == skeleton(line(a - 1)))
                }
                _ => false,
            }
        } else if marker.contains(" omitted (lines ") {
            match numbers(marker.split(';').next().unwrap_or_default())[..] {
                [count, a, b, ..] => count == b - a + 1,
                _ => false,
            }
        } else {
            true
        };
        wrong += usize::from(!ok);
    }
    wrong + usize::from(!error_count_holds(p, text))
}

/// The notice's "N more omitted lines look like errors" is true of the text: N lines outside
/// the shown ranges match the highlight patterns (lines folded into a run are said, not
/// omitted, so the count may be lower, never higher, than all such lines).
fn error_count_holds(p: &Preview, text: &str) -> bool {
    let Some(said) = p.content.lines().find_map(|l| {
        l.split_once(" more omitted line")
            .and_then(|(n, _)| n.parse::<u64>().ok())
    }) else {
        return true;
    };
    let patterns = Patterns::defaults();
    let shown = |n: u64| p.shown.iter().any(|r| r.first <= n && n <= r.last);
    let outside = text
        .split('\n')
        .enumerate()
        .filter(|&(i, line)| !shown(i as u64 + 1) && patterns.is_match(line))
        .count() as u64;
    said <= outside && said <= p.omitted_lines
}

/// A line with each run of digits as `#`.
fn skeleton(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if !(c.is_ascii_digit() && out.ends_with('#')) {
            out.push(if c.is_ascii_digit() { '#' } else { c });
        }
    }
    out
}
