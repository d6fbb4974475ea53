//! What an agent pays to read a command's output, and whether what it reads is whole and true:
//! o200k tokens of the plain output, of spillway's preview and of the peers people install to
//! cut output (rtk, squeez), on real tools run at bench time over generated projects (issue
//! 27's benchmark). For each workload and tool: the tokens, how many of the workload's key
//! lines the text keeps, and how many statements it makes that the output disproves (counts of
//! passed/failed/errors/warnings, spillway's markers and totals). Not a timed test.
//!
//! Run: `scripts/install-peers.sh` once (rtk, squeez, pytest, tsc and eslint at pinned
//! versions, into `target/peers`), then `cargo bench --bench compaction`. Environment:
//! `SPILLWAY_PEERS_DIR` (default `target/peers` of this checkout), `SPILLWAY_BENCH_KEEP=1` to
//! keep each tool's text in the work directory and print its path.

mod claims;
mod preview;
mod tools;
mod workloads;

use std::path::PathBuf;

use spillway::engine::normalise::{NormaliseOptions, normalise};
use spillway::engine::preview::COMPACT_FROM_TOKENS;
use spillway::engine::tokens;

use tools::{Output, Tools};
use workloads::Workload;

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Outputs above this many tokens are those the median saving is taken over: below it, an
/// output is cheap whatever a tool does with it.
const SMALL_TOKENS: usize = COMPACT_FROM_TOKENS;
/// The columns, in order: spillway as a daemon run previews (template folds on, its default),
/// the same with `--compact off`, and `spillway truncate` (which folds only what it spills).
const TOOLS: [&str; 6] = [
    "plain",
    "spillway run",
    "spillway run --compact off",
    "spillway truncate",
    "rtk",
    "squeez",
];

/// One tool's figures on one workload.
struct Cell {
    tokens: usize,
    keys: usize,
    false_statements: usize,
    passthrough: bool,
}

fn main() -> BenchResult<()> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let peers = std::env::var_os("SPILLWAY_PEERS_DIR")
        .map_or_else(|| root.join("target/peers"), PathBuf::from);
    let keep = std::env::var_os("SPILLWAY_BENCH_KEEP").is_some();
    let work = tempfile::TempDir::new()?;
    let tools = Tools::new(env!("CARGO_BIN_EXE_spillway"), &peers, work.path())?;
    for (name, tool) in [("rtk", &tools.rtk), ("squeez", &tools.squeez)] {
        if tool.is_none() {
            println!(
                "{name} is not in {}/bin: its column is left empty (run scripts/install-peers.sh)",
                peers.display()
            );
        }
    }
    let (workloads, skipped) = workloads::all(&work.path().join("workloads"), &peers);
    for (name, why) in &skipped {
        println!("left out: {name}: {why}");
    }
    println!(
        "\n| workload | key lines | {} |\n|---|--:|{}",
        TOOLS.join(" | "),
        "--:|".repeat(TOOLS.len())
    );
    let mut rows = Vec::new();
    for workload in &workloads {
        let row = measure(&tools, workload, keep.then(|| work.path()))?;
        println!("{}", row_text(workload, &row));
        rows.push(row);
    }
    summary(&workloads, &rows);
    if keep {
        let kept = work.keep();
        println!("texts kept in {}", kept.display());
    }
    Ok(())
}

/// The tools' cells for one workload, in [`TOOLS`]' order.
fn measure(
    tools: &Tools,
    workload: &Workload,
    keep: Option<&std::path::Path>,
) -> BenchResult<[Option<Cell>; 6]> {
    let plain = tools.plain(workload)?;
    let normalised = normalise(plain.as_bytes(), NormaliseOptions::default());
    let lines: Vec<&str> = normalised.lines().collect();
    let spill_dir = tools.data_dir.join("runs");
    let shown = |text: String| {
        Some(Output {
            text,
            passthrough: None,
        })
    };
    let texts = [
        shown(plain.clone()),
        shown(preview::run_preview(&plain, &spill_dir, true)?),
        shown(preview::run_preview(&plain, &spill_dir, false)?),
        shown(tools.spillway(&plain)?),
        tools.rtk(workload, &plain)?,
        tools.squeez(workload, &plain)?,
    ];
    if let Some(dir) = keep {
        for (tool, output) in TOOLS.iter().zip(&texts) {
            if let Some(output) = output {
                let name = format!(
                    "{}.{tool}.txt",
                    workload.name.replace([' ', ',', '(', ')'], "_")
                );
                std::fs::write(dir.join(name), &output.text)?;
            }
        }
    }
    Ok(texts.map(|output| {
        output.map(|output| Cell {
            tokens: tokens::count(&output.text),
            keys: claims::keys_kept(workload, &output.text),
            false_statements: claims::false_statements(workload, &lines, &output.text),
            passthrough: output.passthrough.is_some(),
        })
    }))
}

fn row_text(workload: &Workload, row: &[Option<Cell>; 6]) -> String {
    let mut text = format!("| {} | {} |", workload.name, workload.keys.len());
    for cell in row {
        text.push_str(&match cell {
            None => " - |".to_owned(),
            Some(cell) => format!(
                " {}{} ({}/{} keys{}) |",
                thousands(cell.tokens),
                if cell.passthrough { "=" } else { "" },
                cell.keys,
                workload.keys.len(),
                if cell.false_statements > 0 {
                    format!(", **{} false**", cell.false_statements)
                } else {
                    String::new()
                },
            ),
        });
    }
    text
}

/// Totals, key lines and false statements per tool, and the median saving on large outputs,
/// over the workloads every tool ran (all of them when a peer is missing: its column is then
/// left empty).
fn summary(workloads: &[Workload], rows: &[[Option<Cell>; 6]]) {
    let all_ran = |row: &[Option<Cell>; 6]| row.iter().all(Option::is_some);
    let any_complete = rows.iter().any(all_ran);
    let counted: Vec<(&Workload, &[Option<Cell>; 6])> = workloads
        .iter()
        .zip(rows)
        .filter(|(_, row)| !any_complete || all_ran(row))
        .collect();
    let keys: usize = counted.iter().map(|(w, _)| w.keys.len()).sum();
    let mut totals = format!("| **all {} workloads** | {keys} |", counted.len());
    let mut medians = format!(
        "| median saving, outputs over {} tokens | |",
        thousands(SMALL_TOKENS)
    );
    for tool in 0..TOOLS.len() {
        let cells: Vec<(&Cell, &Cell)> = counted
            .iter()
            .filter_map(|(_, row)| Some((row[0].as_ref()?, row[tool].as_ref()?)))
            .collect();
        if cells.is_empty() {
            totals.push_str(" - |");
            medians.push_str(" - |");
            continue;
        }
        let tokens: usize = cells.iter().map(|(_, c)| c.tokens).sum();
        let kept: usize = cells.iter().map(|(_, c)| c.keys).sum();
        let wrong: usize = cells.iter().map(|(_, c)| c.false_statements).sum();
        totals.push_str(&format!(
            " **{}** ({kept}/{keys} keys, {wrong} false) |",
            thousands(tokens)
        ));
        let savings: Vec<f64> = cells
            .iter()
            .filter(|(plain, _)| plain.tokens > SMALL_TOKENS)
            .map(|(plain, cell)| 100.0 * (1.0 - cell.tokens as f64 / plain.tokens as f64))
            .collect();
        medians.push_str(&format!(" {:.0} % |", median(savings)));
    }
    println!("{totals}\n{medians}");
    println!(
        "\n`=`: the tool's hook leaves the command alone, or the tool refused it; the plain output is counted."
    );
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut text = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            text.push(',');
        }
        text.push(c);
    }
    text
}
