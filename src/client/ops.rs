//! The operator's commands (`history`, `show`, `grep`, `stats`, `purge`): each sends one request
//! through the socket and prints the answer, as text for people or, with `--json`, as the
//! daemon's event for machines. Nothing here reads the index or a spill file directly: the
//! daemon decides what may be read.

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Result;
use bytesize::ByteSize;
use chrono::{DateTime, Local, Utc};
use comfy_table::{Cell, CellAlignment, Table, presets};

use crate::client::Endpoint;
use crate::client::calls;
use crate::engine::redact::notice_line;
use crate::protocol::RunRecord;
use crate::protocol::{
    Event, GrepRequest, HistoryRequest, PurgeRequest, RunStatus, ShowRequest, TokenStats,
    TokenTotals,
};
use crate::storage::grep::MAX_LINE_CHARS;

pub(crate) fn print_json(event: &Event) -> Result<ExitCode> {
    let mut out = io::stdout().lock();
    serde_json::to_writer(&mut out, event)?;
    out.write_all(b"\n")?;
    Ok(ExitCode::SUCCESS)
}

pub fn history(endpoint: &Endpoint, request: &HistoryRequest, json: bool) -> Result<ExitCode> {
    let history = calls::history(endpoint, request.clone())?;
    if json {
        return print_json(&Event::History(history));
    }
    let mut out = io::stdout().lock();
    if history.runs.is_empty() {
        writeln!(out, "no runs")?;
    } else {
        writeln!(out, "{}", history_table(&history.runs))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Narrowest the COMMAND column of `history` gets before other columns make way for it.
const MIN_COMMAND: usize = 20;

/// An aligned table, the command cut to what is left of the terminal's width. Start times are
/// local, the zone in the header; on a narrow terminal (80 columns) LINES and SIZE make way
/// for the command (`--json` has everything).
fn history_table(runs: &[RunRecord]) -> String {
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

/// A moment in local time, its zone's offset after it.
fn local_time(t: DateTime<Utc>) -> String {
    t.with_timezone(&Local)
        .format("%Y-%m-%d %H:%M:%S %:z")
        .to_string()
}

/// A setting's period in words: `7 days`, `1 day 12 hours`, `90 seconds` is `1 minute 30
/// seconds`.
fn period(d: std::time::Duration) -> String {
    let s = d.as_secs();
    let parts: Vec<String> = [
        (s / 86_400, "day"),
        (s / 3600 % 24, "hour"),
        (s / 60 % 60, "minute"),
        (s % 60, "second"),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, unit)| format!("{n} {unit}{}", if n == 1 { "" } else { "s" }))
    .collect();
    if parts.is_empty() {
        "0 seconds".into()
    } else {
        parts.join(" ")
    }
}

/// `0.4s`, `8.4s`, `2m03s`, `1h02m`.
pub(crate) fn duration(d: chrono::Duration) -> String {
    let ms = d.num_milliseconds().max(0);
    if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, ms / 1000 % 60)
    } else {
        format!("{}h{:02}m", ms / 3_600_000, ms / 60_000 % 60)
    }
}

fn status_text(r: &RunRecord) -> String {
    match (r.status, r.exit_code, r.signal) {
        (RunStatus::Exited, Some(code), _) => format!("exit {code}"),
        (RunStatus::Signaled, _, Some(signal)) => format!("signal {signal}"),
        (status, _, _) => status.as_str().replace('_', " "),
    }
}

/// How `show` prints a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShowStyle {
    /// A header with the run's record, the lines, and the continuation notice.
    Page,
    /// Only the lines.
    Raw,
    /// The daemon's `show` event.
    Json,
}

pub fn show(endpoint: &Endpoint, request: &ShowRequest, style: ShowStyle) -> Result<ExitCode> {
    let page = calls::show(endpoint, request.clone())?;
    if style == ShowStyle::Json {
        return print_json(&Event::Show(page));
    }
    let mut out = io::stdout().lock();
    if style == ShowStyle::Page {
        let run = &page.run;
        writeln!(
            out,
            "run {}  {}  started {}{}",
            run.id,
            status_text(run),
            local_time(run.started_at),
            run.ended_at.map_or_else(String::new, |end| format!(
                "  took {}",
                duration(end - run.started_at)
            ))
        )?;
        writeln!(out, "command: {}", run.command)?;
        writeln!(out, "cwd: {}", run.cwd)?;
        if let Some(spill) = &run.spill_path {
            writeln!(
                out,
                "spill: {spill}{}",
                match (run.spill_complete, run.spill_capped_at_line) {
                    (true, _) => String::new(),
                    (false, Some(line)) => format!(" (capped: stops in line {line})"),
                    (false, None) => " (incomplete)".into(),
                }
            )?;
        }
        writeln!(out, "---")?;
    }
    out.write_all(page.text.as_bytes())?;
    if style == ShowStyle::Page
        && let Some(next) = page.next_offset
    {
        let by_bytes = if page.stopped_by_bytes {
            " (byte limit)"
        } else {
            ""
        };
        writeln!(
            out,
            "[lines {}-{} of {}{by_bytes}; continue with --offset {next}]",
            page.first, page.last, page.total_lines
        )?;
    }
    if let Some(line) = notice_line(&page.redactions) {
        writeln!(out, "{line}")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints matches as `grep -n` does (`N:` a match, `N-` context, and `--` between groups when
/// there is context); exits 1 when nothing matched, like grep.
pub fn grep(endpoint: &Endpoint, request: &GrepRequest, json: bool) -> Result<ExitCode> {
    let found = calls::grep(endpoint, request.clone())?;
    let code = if found.result.matches > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    if json {
        print_json(&Event::Grep(found))?;
        return Ok(code);
    }
    let mut out = io::stdout().lock();
    let mut previous = None;
    for line in &found.result.lines {
        if request.context > 0 && previous.is_some_and(|p: u64| line.line > p + 1) {
            writeln!(out, "--")?;
        }
        let mark = if line.matched { ':' } else { '-' };
        writeln!(out, "{}{mark}{}", line.line, line.text)?;
        previous = Some(line.line);
    }
    if found.result.limit_hit {
        writeln!(
            out,
            "[match limit of {} reached; more lines match: refine the pattern or raise --max-count]",
            found.max_count
        )?;
    }
    if found.result.lines_cut {
        writeln!(
            out,
            "[lines longer than {MAX_LINE_CHARS} characters were cut; see one whole with: {} show {} --offset N --limit 1]",
            crate::program::program(),
            found.run.id
        )?;
    }
    if let Some(line) = notice_line(&found.redactions) {
        writeln!(out, "{line}")?;
    }
    Ok(code)
}

/// How much of the token accounting `stats` shows.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokenTables {
    /// Commands listed, most tokens saved first; `None`: 10 in the table, all in the JSON.
    pub top: Option<usize>,
    /// Days listed, today (UTC) included; `None`: 14 in the table, all in the JSON.
    pub days: Option<u32>,
}

/// Commands and days the token tables show unless told.
const DEFAULT_TOP: usize = 10;
const DEFAULT_DAYS: u32 = 14;

pub fn stats(endpoint: &Endpoint, json: bool, tables: TokenTables) -> Result<ExitCode> {
    let mut stats = calls::stats(endpoint)?;
    if json {
        if let Some(tokens) = &mut stats.tokens {
            keep_rows(tokens, tables.top, tables.days);
        }
        return print_json(&Event::Stats(stats));
    }
    let index = &stats.index;
    let total: u64 = index.runs_by_status.values().sum();
    let by_status: Vec<String> = index
        .runs_by_status
        .iter()
        .map(|(status, n)| format!("{status} {n}"))
        .collect();
    let mut out = io::stdout().lock();
    writeln!(out, "runs: {total} ({})", by_status.join(", "))?;
    let share = if stats.max_disk == 0 {
        0.0
    } else {
        index.spill_bytes as f64 * 100.0 / stats.max_disk as f64
    };
    writeln!(
        out,
        "spills: {} of a {} quota ({share:.1}%)",
        ByteSize::b(index.spill_bytes),
        ByteSize::b(stats.max_disk)
    )?;
    let when = |t: Option<DateTime<Utc>>| t.map_or_else(|| "-".into(), local_time);
    writeln!(out, "oldest run: {}", when(index.oldest))?;
    writeln!(out, "newest run: {}", when(index.newest))?;
    writeln!(out, "database: {}", ByteSize::b(index.database_bytes))?;
    writeln!(
        out,
        "retention: {}",
        period(std::time::Duration::from_millis(stats.retention_ms))
    )?;
    writeln!(out, "data directory: {}", stats.data_dir)?;
    match &mut stats.tokens {
        Some(tokens) => {
            let top = tables.top.unwrap_or(DEFAULT_TOP);
            let days = tables.days.unwrap_or(DEFAULT_DAYS);
            keep_rows(tokens, Some(top), Some(days));
            write!(out, "{}", token_report(tokens, top, days))?;
        }
        None => writeln!(
            out,
            "tokens: not counted by this daemon (an older spillway)"
        )?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Keeps the `top` first commands and the days of the last `days` (UTC, today included).
fn keep_rows(tokens: &mut TokenStats, top: Option<usize>, days: Option<u32>) {
    if let Some(top) = top {
        tokens.by_command.truncate(top);
    }
    if let Some(days) = days {
        let first = Utc::now().date_naive() - chrono::Days::new(u64::from(days.saturating_sub(1)));
        let first = first.format("%Y-%m-%d").to_string();
        // `YYYY-MM-DD` sorts as the dates do.
        tokens.by_day.retain(|day| day.day >= first);
    }
}

/// The token accounting as text: the totals, then a table by command and one by day.
fn token_report(tokens: &TokenStats, top: usize, days: u32) -> String {
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
    let header = ["RUNS", "OUTPUT", "PREVIEW", "SAVED", "SAVED %"];
    let row = |t: &TokenTotals| {
        [
            t.runs.to_string(),
            token_figure(t.output_tokens, t.estimated_runs),
            token_figure(t.preview_tokens, 0),
            signed_figure(t.saved_tokens),
            percent(t),
        ]
    };
    let commands: Vec<[String; 5]> = tokens.by_command.iter().map(|c| row(&c.totals)).collect();
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
        command_table(&header, &commands, &names, &[0, 1, 2, 3, 4])
    ));
    let by_day: Vec<[String; 6]> = tokens
        .by_day
        .iter()
        .map(|d| {
            let [runs, output, preview, saved, share] = row(&d.totals);
            [d.day.clone(), runs, output, preview, saved, share]
        })
        .collect();
    let header = ["DAY (UTC)", "RUNS", "OUTPUT", "PREVIEW", "SAVED", "SAVED %"];
    text.push_str(&format!(
        "\nby day (last {days} days):\n{}\n",
        aligned_table(&header, &by_day, &[1, 2, 3, 4, 5])
    ));
    if t.estimated_runs > 0 {
        text.push_str(&format!(
            "\n~ includes outputs over {} whose tokens were estimated from a sample\n",
            ByteSize::b(crate::engine::tokens::EXACT_MAX_BYTES as u64)
        ));
    }
    text
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

pub fn purge(endpoint: &Endpoint, request: &PurgeRequest, json: bool) -> Result<ExitCode> {
    let report = calls::purge(endpoint, request.clone())?;
    if json {
        return print_json(&Event::Purge(report));
    }
    let verb = if report.dry_run {
        "would delete"
    } else {
        "deleted"
    };
    let mut out = io::stdout().lock();
    for (why, runs) in [
        ("expired", &report.expired),
        ("over quota", &report.evicted),
        ("asked for", &report.deleted),
    ] {
        for run in runs {
            writeln!(
                out,
                "{verb} run {} ({why}, started {}, {})",
                run.id,
                local_time(run.started_at),
                ByteSize::b(run.bytes)
            )?;
        }
    }
    for orphan in &report.orphans {
        writeln!(
            out,
            "{verb} orphan file {} ({})",
            orphan.path,
            ByteSize::b(orphan.bytes)
        )?;
    }
    for id in &report.marked_missing {
        writeln!(
            out,
            "run {id}: its spill file is gone (record kept, marked missing)"
        )?;
    }
    writeln!(
        out,
        "{}: {} runs, {} orphan files, {} freed; spills now {} of {}",
        if report.dry_run { "dry run" } else { "purged" },
        report.expired.len() + report.evicted.len() + report.deleted.len(),
        report.orphans.len(),
        ByteSize::b(report.freed_bytes),
        ByteSize::b(report.spill_bytes_after),
        ByteSize::b(report.max_disk)
    )?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_read_as_words() {
        let d = std::time::Duration::from_secs;
        assert_eq!(period(d(7 * 86_400)), "7 days");
        assert_eq!(period(d(86_400 + 12 * 3600)), "1 day 12 hours");
        assert_eq!(period(d(90)), "1 minute 30 seconds");
        assert_eq!(period(d(0)), "0 seconds");
    }

    #[test]
    fn durations_read_naturally() {
        let d = chrono::Duration::milliseconds;
        assert_eq!(duration(d(420)), "0.4s");
        assert_eq!(duration(d(8_421)), "8.4s");
        assert_eq!(duration(d(123_000)), "2m03s");
        assert_eq!(duration(d(3_720_000)), "1h02m");
    }

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
}
