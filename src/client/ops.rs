//! The operator's commands (`history`, `show`, `grep`, `stats`, `purge`): each sends one request
//! through the socket and prints the answer, as text for people or, with `--json`, as the
//! daemon's event for machines. Nothing here reads the index or a spill file directly: the
//! daemon decides what may be read.

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::Result;
use bytesize::ByteSize;
use chrono::{DateTime, Utc};

use crate::client::Endpoint;
use crate::client::calls;
use crate::client::words::cli::{duration, local_time, period, status_text};
use crate::client::words::tables::{history_table, token_report};
use crate::engine::redact::notice_line;
use crate::protocol::{Event, GrepRequest, HistoryRequest, PurgeRequest, ShowRequest, TokenStats};
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
