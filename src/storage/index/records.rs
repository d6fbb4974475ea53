//! The rows of the index as Rust values: a run as stored ([`RunRow`]) and as the protocol
//! carries it, what is written when a run starts and ends, and the reading of columns back.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use rusqlite::Row;
use rusqlite::types::Type;
use serde::Serialize;

use crate::protocol::{Preview, RunId, RunRecord, RunStatus, StatusFilter};

/// One run as stored: a row of `runs` with its tags ([`RunRecord`] is what answers carry).
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    pub id: RunId,
    /// Program and arguments, for a run given as argv.
    pub argv: Option<Vec<String>>,
    /// The command line, for a run given as a shell string.
    pub shell: Option<String>,
    /// For display: argv shell-quoted and joined, or the shell string as is.
    pub command: String,
    pub cwd: String,
    pub tags: BTreeMap<String, String>,
    pub started_at: DateTime<Utc>,
    /// `None` while the run is going.
    pub ended_at: Option<DateTime<Utc>>,
    pub status: RunStatus,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// Output counters; `None` until the run ends (and for interrupted runs).
    pub total_lines: Option<u64>,
    pub total_bytes: Option<u64>,
    pub truncated: Option<bool>,
    pub spill_path: Option<String>,
    /// The spill's size as last recorded.
    pub spill_bytes: u64,
    /// Every byte of output reached the spill.
    pub spill_complete: bool,
    /// The spill file was found gone (deleted by hand, or a purge crashed half-way); the row
    /// stays until the retention purge removes it.
    pub spill_missing: bool,
    /// The command's process id.
    pub pid: Option<u32>,
    /// The first line the spill lacks when it stopped at its cap (`--max-spill`).
    pub spill_capped_at_line: Option<u64>,
    /// Model tokens (o200k) of the whole output and of the preview; `None` for runs that did
    /// not end and runs recorded before spillway counted tokens.
    pub output_tokens: Option<u64>,
    pub preview_tokens: Option<u64>,
    /// `output_tokens` was estimated from a sample of the output (outputs over
    /// the engine's bound for an exact count) rather than counted.
    pub output_tokens_estimated: Option<bool>,
    /// Of the tokens the preview saved, those its template folds saved (the rest the cut
    /// saved); `None` with the counts, and for runs recorded before spillway split them.
    pub folded_tokens: Option<u64>,
}

/// The protocol's record of a run is mapped here, field by field, so that a column added to
/// the schema reaches clients only when this says so.
impl From<RunRow> for RunRecord {
    fn from(row: RunRow) -> RunRecord {
        RunRecord {
            id: row.id,
            argv: row.argv,
            shell: row.shell,
            command: row.command,
            cwd: row.cwd,
            tags: row.tags,
            started_at: row.started_at,
            ended_at: row.ended_at,
            status: row.status,
            exit_code: row.exit_code,
            signal: row.signal,
            total_lines: row.total_lines,
            total_bytes: row.total_bytes,
            truncated: row.truncated,
            spill_path: row.spill_path,
            spill_bytes: row.spill_bytes,
            spill_complete: row.spill_complete,
            spill_missing: row.spill_missing,
            pid: row.pid,
            spill_capped_at_line: row.spill_capped_at_line,
            output_tokens: row.output_tokens,
            preview_tokens: row.preview_tokens,
            output_tokens_estimated: row.output_tokens_estimated,
        }
    }
}

/// A run as it starts.
#[derive(Debug, Clone)]
pub struct NewRun {
    pub id: RunId,
    pub argv: Option<Vec<String>>,
    pub shell: Option<String>,
    pub cwd: String,
    pub tags: BTreeMap<String, String>,
    pub started_at: DateTime<Utc>,
    pub spill_path: Option<String>,
    pub pid: Option<u32>,
    /// The process writing the row (the daemon, or a `spillway truncate`): while it lives, the
    /// run is never taken for interrupted.
    pub owner_pid: u32,
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct RunEnd {
    pub ended_at: DateTime<Utc>,
    pub status: RunStatus,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub total_lines: u64,
    pub total_bytes: u64,
    pub truncated: bool,
    pub spill_bytes: u64,
    pub spill_complete: bool,
    pub spill_capped_at_line: Option<u64>,
    /// The tokens of its output and preview; `None` when they could not be counted.
    pub tokens: Option<RunTokens>,
}

/// What a run's output and its preview cost in model tokens (o200k).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunTokens {
    /// The whole (normalised) output: what a model would have read without spillway.
    pub output: u64,
    /// The preview, notice included, as the run's end gave it.
    pub preview: u64,
    /// `output` was estimated from a sample of the output rather than counted.
    pub output_estimated: bool,
    /// Of `output - preview`, what the preview's template folds saved (see
    /// [`crate::engine::savings`]); the rest is what the cut saved.
    pub folded: u64,
}

/// How a run ended, as its status says.
#[derive(Debug, Clone, Copy)]
pub struct Ending {
    pub ended_at: DateTime<Utc>,
    pub status: RunStatus,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
}

impl RunEnd {
    /// The record of a run that ended so, with `preview` its final preview: the one place a
    /// run's end is made, for the daemon's runs and `spillway truncate`'s alike. The spill's
    /// size is read from the file, since that says what really reached the disk; the spill is
    /// complete when it holds every byte of the output. `tokens` are the output's and the
    /// preview's, when they were counted.
    pub fn new(ending: Ending, preview: &Preview, tokens: Option<RunTokens>) -> RunEnd {
        let spill_bytes = preview
            .spill_path
            .as_ref()
            .and_then(|path| std::fs::metadata(path).ok())
            .map_or(0, |meta| meta.len());
        RunEnd {
            ended_at: ending.ended_at,
            status: ending.status,
            exit_code: ending.exit_code,
            signal: ending.signal,
            total_lines: preview.total_lines,
            total_bytes: preview.total_bytes,
            truncated: preview.truncated,
            spill_bytes,
            spill_complete: preview.spill_path.is_some() && spill_bytes == preview.total_bytes,
            spill_capped_at_line: preview.spill_capped.map(|cap| cap.line),
            tokens,
        }
    }
}

/// What a run known only by its spill file is recorded as ([`Index::insert_recovered`]).
#[derive(Debug, Clone)]
pub struct RecoveredRun {
    pub id: RunId,
    pub started_at: DateTime<Utc>,
    /// When it was last known alive.
    pub ended_at: DateTime<Utc>,
    pub spill_path: String,
    pub spill_bytes: u64,
}

/// The command a recovered run is listed with: nobody recorded the real one.
pub const RECOVERED_COMMAND: &str = "(not recorded: the daemon stopped as this run started)";

/// What `history` returns; every condition given must hold.
#[derive(Debug, Clone, Default)]
pub struct HistoryFilter {
    /// Started at or after.
    pub since: Option<DateTime<Utc>>,
    /// Started at or before.
    pub until: Option<DateTime<Utc>>,
    pub status: Option<StatusFilter>,
    /// The display command contains this text (case-sensitive, no wildcards).
    pub command_contains: Option<String>,
    /// The run has every one of these tags with exactly this value.
    pub tags: Vec<(String, String)>,
    /// At most this many runs; 0 means 50.
    pub limit: usize,
}

/// argv shell-quoted and joined, or the shell string as is.
pub(crate) fn display_command(argv: Option<&[String]>, shell: Option<&str>) -> String {
    match (argv, shell) {
        (Some(argv), _) => shlex::try_join(argv.iter().map(String::as_str))
            // Only a NUL byte defeats quoting, and the protocol refuses those.
            .unwrap_or_else(|_| argv.join(" ")),
        (None, Some(shell)) => shell.to_string(),
        (None, None) => String::new(),
    }
}

/// The columns [`read_run`] reads, in its order.
pub(super) const RUN_COLUMNS: &str = "r.id, r.argv, r.shell, r.command, r.cwd, r.tags, r.started_at, \
     r.ended_at, r.status, r.exit_code, r.signal, r.total_lines, r.total_bytes, r.truncated, \
     r.spill_path, r.spill_bytes, r.spill_complete, r.spill_missing, r.pid, \
     r.spill_capped_at_line, r.output_tokens, r.preview_tokens, r.output_tokens_estimated, \
     r.folded_tokens";

/// Reads a row selected with [`RUN_COLUMNS`].
pub(super) fn read_run(row: &Row<'_>) -> rusqlite::Result<RunRow> {
    Ok(RunRow {
        id: read_id(row, 0)?,
        argv: row
            .get::<_, Option<String>>(1)?
            .map(|json| from_json(1, &json))
            .transpose()?,
        shell: row.get(2)?,
        command: row.get(3)?,
        cwd: row.get(4)?,
        tags: from_json(5, &row.get::<_, String>(5)?)?,
        started_at: read_time(row, 6)?,
        ended_at: row
            .get::<_, Option<i64>>(7)?
            .map(|ms| to_time(7, ms))
            .transpose()?,
        status: read_status(row, 8)?,
        exit_code: row.get(9)?,
        signal: row.get(10)?,
        total_lines: row.get::<_, Option<i64>>(11)?.map(unsigned),
        total_bytes: row.get::<_, Option<i64>>(12)?.map(unsigned),
        truncated: row.get(13)?,
        spill_path: row.get(14)?,
        spill_bytes: unsigned(row.get(15)?),
        spill_complete: row.get(16)?,
        spill_missing: row.get(17)?,
        pid: row.get(18)?,
        spill_capped_at_line: row.get::<_, Option<i64>>(19)?.map(unsigned),
        output_tokens: row.get::<_, Option<i64>>(20)?.map(unsigned),
        preview_tokens: row.get::<_, Option<i64>>(21)?.map(unsigned),
        output_tokens_estimated: row.get(22)?,
        folded_tokens: row.get::<_, Option<i64>>(23)?.map(unsigned),
    })
}

pub(super) fn read_id(row: &Row<'_>, column: usize) -> rusqlite::Result<RunId> {
    RunId::try_from(row.get::<_, String>(column)?).map_err(|e| bad_column(column, e))
}

pub(super) fn read_time(row: &Row<'_>, column: usize) -> rusqlite::Result<DateTime<Utc>> {
    to_time(column, row.get(column)?)
}

pub(super) fn to_time(column: usize, ms: i64) -> rusqlite::Result<DateTime<Utc>> {
    DateTime::from_timestamp_millis(ms)
        .ok_or_else(|| bad_column(column, format!("time {ms} ms is out of range")))
}

fn read_status(row: &Row<'_>, column: usize) -> rusqlite::Result<RunStatus> {
    let text: String = row.get(column)?;
    RunStatus::ALL
        .into_iter()
        .find(|status| status.as_str() == text)
        .ok_or_else(|| bad_column(column, format!("unknown run status {text:?}")))
}

fn from_json<T: serde::de::DeserializeOwned>(column: usize, json: &str) -> rusqlite::Result<T> {
    serde_json::from_str(json).map_err(|e| bad_column(column, e))
}

pub(super) fn to_json<T: Serialize>(value: &T) -> rusqlite::Result<String> {
    serde_json::to_string(value).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

pub(super) fn bad_column(
    column: usize,
    error: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(column, Type::Text, error.into())
}

/// A time as stored: Unix milliseconds.
pub(super) fn millis(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

/// A count as stored (SQLite integers are signed; counts never come near the limit).
pub(super) fn int(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// A stored count back; a negative one (never written) reads as 0.
pub(super) fn unsigned(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}
