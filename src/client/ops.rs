//! The operator's commands (`history`, `show`, `grep`, `stats`, `purge`): each sends one request
//! through the socket and prints the answer, as text for people or, with `--json`, as the
//! daemon's event for machines. Nothing here reads the index or a spill file directly: the
//! daemon decides what may be read.

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::Result;
use chrono::Utc;

use crate::client::Endpoint;
use crate::client::calls;
use crate::client::words::cli::{
    NO_TOKENS, grep_cut_line, grep_limit_line, purge_text, show_continuation, show_header,
    stats_summary,
};
use crate::client::words::tables::{history_table, token_report};
use crate::engine::redact::notice_line;
use crate::protocol::{Event, GrepRequest, HistoryRequest, PurgeRequest, ShowRequest, TokenStats};

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
        write!(out, "{}", show_header(&page.run))?;
    }
    out.write_all(page.text.as_bytes())?;
    if style == ShowStyle::Page
        && let Some(line) = show_continuation(&page)
    {
        writeln!(out, "{line}")?;
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
        writeln!(out, "{}", grep_limit_line(found.max_count))?;
    }
    if found.result.lines_cut {
        writeln!(out, "{}", grep_cut_line(&found.run.id))?;
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
    let mut out = io::stdout().lock();
    write!(out, "{}", stats_summary(&stats))?;
    match &mut stats.tokens {
        Some(tokens) => {
            let top = tables.top.unwrap_or(DEFAULT_TOP);
            let days = tables.days.unwrap_or(DEFAULT_DAYS);
            keep_rows(tokens, Some(top), Some(days));
            write!(out, "{}", token_report(tokens, top, days))?;
        }
        None => writeln!(out, "{NO_TOKENS}")?,
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
    write!(io::stdout().lock(), "{}", purge_text(&report))?;
    Ok(ExitCode::SUCCESS)
}
