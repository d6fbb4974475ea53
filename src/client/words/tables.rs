//! The command line's tables for a person: `history`'s runs, `ps`' running ones and `stats`'
//! token accounting, aligned, commands kept to one row and cut to what the terminal has room
//! for.

use std::io::{self, IsTerminal};

use bytesize::ByteSize;
use chrono::Local;
use comfy_table::{Cell, CellAlignment, Table, presets};

use super::cli::{duration, status_text};
use crate::protocol::{LiveRun, RunRecord, TokenStats, TokenTotals};

/// Narrowest the COMMAND column of `history` gets before other columns make way for it.
const MIN_COMMAND: usize = 20;

/// An aligned table, the command cut to what is left of the terminal's width. Start times are
/// local, the zone in the header; on a narrow terminal (80 columns) LINES and SIZE make way
/// for the command (`--json` has everything).
pub(crate) fn history_table(runs: &[RunRecord]) -> String {
    let started = format!("STARTED {}", zone_label());
    let rows: Vec<[String; 6]> = runs
        .iter()
        .map(|r| {
            [
                r.id.to_string(),
                r.started_at
                    .with_timezone(&Local)
                    .format("%m-%d %H:%M")
                    .to_string(),
                r.ended_at
                    .map_or_else(|| "-".into(), |end| duration(end - r.started_at)),
                status_text(r),
                r.total_lines.map_or_else(|| "-".into(), |n| n.to_string()),
                r.total_bytes
                    .map_or_else(|| "-".into(), |n| ByteSize::b(n).to_string()),
            ]
        })
        .collect();
    let header = [
        "ID",
        started.as_str(),
        "DURATION",
        "STATUS",
        "LINES",
        "SIZE",
    ];
    let commands: Vec<&str> = runs.iter().map(|r| r.command.as_str()).collect();
    let room = terminal_width().unwrap_or(usize::MAX);
    if used_width(&header, &rows).saturating_add(MIN_COMMAND) <= room {
        return command_table(&header, &rows, &commands, &[2, 4, 5]);
    }
    let narrow: Vec<[String; 4]> = rows
        .into_iter()
        .map(|[id, started, took, status, _, _]| [id, started, took, status])
        .collect();
    let header = ["ID", started.as_str(), "DURATION", "STATUS"];
    command_table(&header, &narrow, &commands, &[2])
}

/// This machine's time zone: `UTC`, or its offset from UTC (`+01:00`).
fn zone_label() -> String {
    match Local::now().offset().to_string().as_str() {
        "+00:00" => "UTC".into(),
        offset => offset.to_string(),
    }
}

/// Columns the cells of `rows` under `header` take, two spaces after each.
fn used_width<const N: usize>(header: &[&str; N], rows: &[[String; N]]) -> usize {
    (0..N)
        .map(|c| {
            rows.iter()
                .map(|row| row[c].chars().count())
                .chain([header[c].chars().count()])
                .max()
                .unwrap_or(0)
                + 2
        })
        .sum()
}

/// An aligned table of `rows` under `header` with a last COMMAND column cut to what is left
/// of the terminal's width; `numeric` columns are right-aligned. Two spaces between columns,
/// none at the edges, as `ps` and `docker ps` print.
pub(crate) fn command_table<const N: usize>(
    header: &[&str; N],
    rows: &[[String; N]],
    commands: &[&str],
    numeric: &[usize],
) -> String {
    let used = used_width(header, rows);
    let room = terminal_width().map(|w| w.saturating_sub(used).max(20));
    let mut table = Table::new();
    table.load_preset(presets::NOTHING);
    table.set_header(header.iter().chain(["COMMAND"].iter()));
    for (row, command) in rows.iter().zip(commands) {
        let command = one_line(command);
        let command = room.map_or_else(|| command.clone(), |w| cut_to(&command, w));
        let mut cells: Vec<Cell> = row.iter().map(Cell::new).collect();
        for &column in numeric {
            cells[column] = cells[column].clone().set_alignment(CellAlignment::Right);
        }
        cells.push(Cell::new(command));
        table.add_row(cells);
    }
    for (i, column) in table.column_iter_mut().enumerate() {
        column.set_padding((0, if i == N { 0 } else { 2 }));
    }
    table
        .lines()
        .map(|line| line.trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// An aligned table of `rows` under `header`, `numeric` columns right-aligned, spaced as
/// [`command_table`]'s.
fn aligned_table<const N: usize>(
    header: &[&str; N],
    rows: &[[String; N]],
    numeric: &[usize],
) -> String {
    let mut table = Table::new();
    table.load_preset(presets::NOTHING);
    table.set_header(header.iter());
    for row in rows {
        let mut cells: Vec<Cell> = row.iter().map(Cell::new).collect();
        for &column in numeric {
            cells[column] = cells[column].clone().set_alignment(CellAlignment::Right);
        }
        table.add_row(cells);
    }
    for (i, column) in table.column_iter_mut().enumerate() {
        column.set_padding((0, if i + 1 == N { 0 } else { 2 }));
    }
    table
        .lines()
        .map(|line| line.trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The terminal's width when stdout is one (else the table is not cut).
fn terminal_width() -> Option<usize> {
    if !io::stdout().is_terminal() {
        return None;
    }
    terminal_size::terminal_size().map(|(w, _)| usize::from(w.0))
}

/// A command as one table row: a multi-line shell command (a heredoc, a script) would spill
/// over the rows below, and escape sequences in it would act on the terminal, so line breaks
/// show as `↵` and other control characters as escapes (`\u{1b}`).
fn one_line(command: &str) -> String {
    let mut line = String::with_capacity(command.len());
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' | '\r' => line.push_str(" ↵ "),
            '\t' => line.push(' '),
            c if c.is_control() => line.extend(c.escape_default()),
            c => line.push(c),
        }
    }
    line
}

fn cut_to(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let kept: String = text.chars().take(width.saturating_sub(1)).collect();
    format!("{kept}…")
}

/// The token accounting as text: the totals, then a table by command and one by day.
pub(crate) fn token_report(tokens: &TokenStats, top: usize, days: u32) -> String {
    let t = &tokens.totals;
    let mut text = format!(
        "tokens: {} of output, {} in previews: {} saved ({}) over {} runs",
        token_figure(t.output_tokens, t.estimated_runs),
        token_figure(t.preview_tokens, 0),
        signed_figure(t.saved_tokens),
        percent(t),
        t.runs
    );
    if tokens.runs_without_tokens > 0 {
        text.push_str(&format!(
            "; {} without token counts (running, interrupted or older)",
            tokens.runs_without_tokens
        ));
    }
    text.push('\n');
    if t.runs == 0 {
        return text;
    }
    text.push_str(&split_line(t));
    let header = [
        "RUNS", "OUTPUT", "PREVIEW", "SAVED", "SAVED %", "FOLDED", "CUT",
    ];
    let row = |t: &TokenTotals| {
        let (folded, cut) = split_figures(t);
        [
            t.runs.to_string(),
            token_figure(t.output_tokens, t.estimated_runs),
            token_figure(t.preview_tokens, 0),
            signed_figure(t.saved_tokens),
            percent(t),
            folded,
            cut,
        ]
    };
    let commands: Vec<[String; 7]> = tokens.by_command.iter().map(|c| row(&c.totals)).collect();
    let names: Vec<&str> = tokens
        .by_command
        .iter()
        .map(|c| {
            if c.command.is_empty() {
                "-"
            } else {
                c.command.as_str()
            }
        })
        .collect();
    text.push_str(&format!(
        "\nby command (top {top} by tokens saved):\n{}\n",
        command_table(&header, &commands, &names, &[0, 1, 2, 3, 4, 5, 6])
    ));
    let by_day: Vec<[String; 8]> = tokens
        .by_day
        .iter()
        .map(|d| {
            let [runs, output, preview, saved, share, folded, cut] = row(&d.totals);
            [
                d.day.clone(),
                runs,
                output,
                preview,
                saved,
                share,
                folded,
                cut,
            ]
        })
        .collect();
    let header = [
        "DAY (UTC)",
        "RUNS",
        "OUTPUT",
        "PREVIEW",
        "SAVED",
        "SAVED %",
        "FOLDED",
        "CUT",
    ];
    text.push_str(&format!(
        "\nby day (last {days} days):\n{}\n",
        aligned_table(&header, &by_day, &[1, 2, 3, 4, 5, 6, 7])
    ));
    // Some rows hold runs recorded before spillway split the saving: say what their marks mean.
    let unsplit = |t: &TokenTotals| t.saved_by.is_none_or(|by| by.runs < t.runs);
    let mut rows = (tokens.by_command.iter().map(|c| &c.totals))
        .chain(tokens.by_day.iter().map(|d| &d.totals));
    if rows.any(unsplit) {
        text.push_str(
            "\nFOLDED, CUT: * over those of the runs recorded since spillway splits the saving; \
             - none were\n",
        );
    }
    if t.estimated_runs > 0 {
        text.push_str(&format!(
            "\n~ includes outputs over {} whose tokens were estimated from a sample\n",
            ByteSize::b(crate::engine::tokens::EXACT_MAX_BYTES as u64)
        ));
    }
    text
}

/// What of the saving template folds made and what the cut made, in one line, with the runs
/// it is over when some runs were recorded before spillway split it.
fn split_line(t: &TokenTotals) -> String {
    let Some(by) = &t.saved_by else {
        return "saved by folding and by cutting: not known (runs recorded before spillway \
                split them)\n"
            .into();
    };
    let over = if by.runs < t.runs {
        format!(
            " (over {} of the {} runs: the rest were recorded before spillway split it)",
            by.runs, t.runs
        )
    } else {
        String::new()
    };
    format!(
        "saved by folding: {}, by cutting: {}{over}\n",
        token_figure(by.folding, 0),
        signed_figure(by.cutting)
    )
}

/// The FOLDED and CUT cells of a row: `-` when none of its runs recorded the split, and `*`
/// after them when only some did.
fn split_figures(t: &TokenTotals) -> (String, String) {
    match &t.saved_by {
        None => ("-".into(), "-".into()),
        Some(by) => {
            let mark = if by.runs < t.runs { "*" } else { "" };
            (
                format!("{}{mark}", token_figure(by.folding, 0)),
                format!("{}{mark}", signed_figure(by.cutting)),
            )
        }
    }
}

/// A count of tokens, short: `950`, `12.3k`, `4.56M`; `~` before it when some of it was
/// estimated.
fn token_figure(n: u64, estimated_runs: u64) -> String {
    let mark = if estimated_runs > 0 { "~" } else { "" };
    let figure = match n {
        0..10_000 => n.to_string(),
        10_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.2}M", n as f64 / 1e6),
        _ => format!("{:.2}G", n as f64 / 1e9),
    };
    format!("{mark}{figure}")
}

/// [`token_figure`] for a difference, which may be negative.
fn signed_figure(n: i64) -> String {
    let figure = token_figure(n.unsigned_abs(), 0);
    if n < 0 { format!("-{figure}") } else { figure }
}

/// The share of the output's tokens the previews saved.
fn percent(t: &TokenTotals) -> String {
    if t.output_tokens == 0 {
        return "-".into();
    }
    format!(
        "{:.1}%",
        t.saved_tokens as f64 * 100.0 / t.output_tokens as f64
    )
}

/// An aligned table of the running commands, the command cut to the terminal's width.
pub(crate) fn ps_table(runs: &[LiveRun]) -> String {
    let secs = |ms: u64| duration(chrono::Duration::milliseconds(ms as i64));
    let rows: Vec<[String; 7]> = runs
        .iter()
        .map(|r| {
            let tags: Vec<String> = r.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
            [
                r.id.to_string(),
                r.pid.to_string(),
                secs(r.elapsed_ms) + if r.stopping { " (stopping)" } else { "" },
                secs(r.idle_ms),
                r.total_lines.to_string(),
                ByteSize::b(r.total_bytes).to_string(),
                tags.join(","),
            ]
        })
        .collect();
    let header = ["ID", "PID", "ELAPSED", "IDLE", "LINES", "SIZE", "TAGS"];
    let commands: Vec<&str> = runs.iter().map(|r| r.command.as_str()).collect();
    command_table(&header, &rows, &commands, &[1, 2, 3, 4, 5])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_commands_are_cut_with_an_ellipsis() {
        assert_eq!(cut_to("cargo build", 20), "cargo build");
        assert_eq!(cut_to("cargo build --release", 10), "cargo bui…");
    }

    #[test]
    fn a_multi_line_command_takes_one_row() {
        assert_eq!(
            one_line("cat <<EOF\r\none\ntwo\tthree\u{1b}[2J\nEOF"),
            "cat <<EOF ↵ one ↵ two three\\u{1b}[2J ↵ EOF"
        );
        let rows = [["a".to_string()], ["b".to_string()]];
        let table = command_table(&["ID"], &rows, &["echo 1\necho 2", "true"], &[]);
        assert_eq!(table.lines().count(), 3, "{table}");
    }

    fn totals(runs: u64, output: u64, preview: u64, by: Option<(u64, u64)>) -> TokenTotals {
        let saved = output as i64 - preview as i64;
        TokenTotals {
            runs,
            output_tokens: output,
            preview_tokens: preview,
            saved_tokens: saved,
            estimated_runs: 0,
            saved_by: by.map(|(runs, folding)| crate::protocol::SavedBy {
                runs,
                folding,
                cutting: saved - folding as i64,
            }),
        }
    }

    #[test]
    fn the_report_splits_the_saving_into_folding_and_cutting() {
        let command = |name: &str, totals| crate::protocol::CommandTokens {
            command: name.into(),
            totals,
        };
        let tokens = TokenStats {
            totals: totals(3, 60_000, 2_000, Some((2, 4_100))),
            runs_without_tokens: 0,
            by_command: vec![
                command("cargo test", totals(2, 59_000, 1_000, Some((2, 4_100)))),
                command("git log", totals(1, 1_000, 1_000, None)),
            ],
            by_day: vec![crate::protocol::DayTokens {
                day: "2026-11-26".into(),
                totals: totals(3, 60_000, 2_000, Some((2, 4_100))),
            }],
        };
        let text = token_report(&tokens, 10, 14);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[..2],
            [
                "tokens: 60.0k of output, 2000 in previews: 58.0k saved (96.7%) over 3 runs",
                "saved by folding: 4100, by cutting: 53.9k (over 2 of the 3 runs: the rest \
                 were recorded before spillway split it)",
            ],
            "{text}"
        );
        let row = |name: &str| {
            let line = lines.iter().find(|l| l.trim_end().ends_with(name)).unwrap();
            line.split_whitespace().collect::<Vec<_>>()
        };
        assert_eq!(
            row("cargo test")[..7],
            ["2", "59.0k", "1000", "58.0k", "98.3%", "4100", "53.9k"]
        );
        assert_eq!(row("git log")[5..7], ["-", "-"]);
        let day = lines.iter().find(|l| l.starts_with("2026-11-26")).unwrap();
        assert!(day.ends_with("4100*  53.9k*"), "{text}");
        assert!(text.contains("* over those of the runs"), "{text}");
    }
}
