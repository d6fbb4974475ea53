//! What the daemon answers with: one event per line, tagged by `"type"`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::preview::Preview;
use super::record::{GrepResult, IndexStats, PurgeReport, RunRecord, RunStatus, TokenStats};
use super::run_id::RunId;
use super::time::rfc3339;

/// What the daemon sends back: one JSON object per line, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// The command has started.
    Started(StartedEvent),
    /// The command has ended; always the last event of a run.
    Exit(Box<ExitEvent>),
    /// The request could not be served.
    Error(ErrorEvent),
    /// Answer to `ping`.
    Pong(PongEvent),
    /// Answer to `history`.
    History(HistoryEvent),
    /// Answer to `show`.
    Show(Box<ShowEvent>),
    /// Answer to `grep`.
    Grep(Box<GrepEvent>),
    /// Answer to `stats`.
    Stats(StatsEvent),
    /// Answer to `purge`.
    Purge(PurgeReport),
    /// A preview of a command that is still running.
    Running(Box<RunningEvent>),
    /// Output of a followed run: whole lines of its normalised text.
    Output(OutputEvent),
    /// Output of a run streamed raw: the bytes as the command wrote them.
    Raw(RawEvent),
    /// A raw stream fell behind and lost bytes; `output` events follow instead.
    Lagged(LaggedEvent),
    /// Answer to `send`.
    Sent(SentEvent),
    /// Answer to `ps`.
    Ps(PsEvent),
    /// Answer to `resize`.
    Resized(ResizedEvent),
    /// Answer to `status`.
    Status(DaemonStatus),
    /// Answer to `shutdown`: the daemon has begun to stop.
    Stopping(StoppingEvent),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResizedEvent {
    pub id: RunId,
    pub cols: u16,
    pub rows: u16,
}

/// Which daemon answers, and what it is doing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonStatus {
    pub pid: u32,
    /// The daemon's version (`CARGO_PKG_VERSION`).
    pub version: String,
    pub protocol: u32,
    /// The socket it listens on.
    pub socket: String,
    pub data_dir: String,
    #[serde(with = "rfc3339")]
    pub started_at: DateTime<Utc>,
    pub uptime_ms: u64,
    /// Runs going on now.
    pub runs: u64,
    /// Connections open now, this one included.
    pub clients: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoppingEvent {
    pub pid: u32,
    /// Runs going on, which are being stopped.
    pub runs: u64,
}

/// A running command's preview: what it has printed so far (or, asked with `new`, since the
/// caller's last preview), and how long it has printed nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunningEvent {
    pub id: RunId,
    pub pid: u32,
    #[serde(with = "rfc3339")]
    pub started_at: DateTime<Utc>,
    pub elapsed_ms: u64,
    /// Since the command last printed anything (escape sequences count).
    pub idle_ms: u64,
    /// The first spill line the preview covers (1 unless asked for new output only).
    pub first_line: u64,
    /// Why the answer came before the yield: the `until` line or `until_port` was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<Ready>,
    /// The command is blocked reading its terminal: it waits for input (`send`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for_input: Option<InputWait>,
    /// The preview, numbered as the spill is; `total_lines` and `total_bytes` count everything
    /// so far, the line still being written included.
    #[serde(flatten)]
    pub preview: Preview,
}

/// What made a run ready (`until` or `until_port`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Ready {
    /// A line of output matched `until`.
    Line {
        /// Its spill line number.
        line: u64,
        /// The line (cut at 500 characters).
        text: String,
    },
    /// `until_port` accepted a connection on localhost.
    Port { port: u16 },
}

/// A process of the run's terminal's foreground group, blocked reading the terminal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputWait {
    pub pid: u32,
    pub command: String,
}

/// A process the command left running, which spillway stopped when the run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoppedProcess {
    pub pid: u32,
    /// Its command line (cut at 200 characters), or its name in brackets when that was gone.
    pub command: String,
    /// TCP ports it was listening on when it was stopped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<u16>,
}

/// A kind of resource a run can be held to, named as its cgroup controller is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Resource {
    Memory,
    Pids,
    Cpu,
}

impl Resource {
    /// Its name on the wire, which is also its cgroup controller's.
    pub fn name(self) -> &'static str {
        match self {
            Resource::Memory => "memory",
            Resource::Pids => "pids",
            Resource::Cpu => "cpu",
        }
    }
}

/// A resource limit the run reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitHit {
    /// `memory` or `pids`.
    pub resource: Resource,
    /// The limit: bytes, or processes.
    pub limit: u64,
    /// Processes the OOM killer ended (`memory`), or forks refused (`pids`).
    pub events: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputEvent {
    /// The spill line `text` starts in.
    pub line: u64,
    /// Whole lines, each ending in `\n`; only a line longer than an event holds, or the last
    /// line of an output without a final newline, comes in pieces without one.
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawEvent {
    /// The bytes as written, as UTF-8 (a character cut between two reads is put back
    /// together; invalid bytes become U+FFFD).
    pub data: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaggedEvent {
    /// The `output` events that follow start at this spill line.
    pub line: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentEvent {
    pub id: RunId,
    /// Bytes written to the terminal: the text, the Enter and any EOF characters.
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PsEvent {
    pub runs: Vec<LiveRun>,
}

/// A command that is running now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveRun {
    pub id: RunId,
    pub pid: u32,
    /// For display: argv shell-quoted and joined, or the shell string as is.
    pub command: String,
    pub argv: Option<Vec<String>>,
    pub shell: Option<String>,
    pub cwd: String,
    pub tags: BTreeMap<String, String>,
    #[serde(with = "rfc3339")]
    pub started_at: DateTime<Utc>,
    pub elapsed_ms: u64,
    pub idle_ms: u64,
    pub total_lines: u64,
    pub total_bytes: u64,
    /// Under a terminal (it takes input through `send`).
    pub tty: bool,
    pub spill_path: Option<String>,
    /// A stop (`kill`, timeout, shutdown, disconnect) has begun.
    pub stopping: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEvent {
    pub runs: Vec<RunRecord>,
}

/// A page of a spill, with the run it belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShowEvent {
    pub run: RunRecord,
    /// The lines, each ending in `\n`, long ones cut at 2000 characters with a marker.
    pub text: String,
    pub first: u64,
    pub last: u64,
    pub total_lines: u64,
    /// The line to ask for next, when lines remain.
    pub next_offset: Option<u64>,
    pub stopped_by_bytes: bool,
    /// Secrets redacted from `text`, by kind; absent when none were.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub redactions: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrepEvent {
    pub run: RunRecord,
    #[serde(flatten)]
    pub result: GrepResult,
    pub max_count: usize,
    /// Secrets redacted from the lines, by kind; absent when none were.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub redactions: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatsEvent {
    #[serde(flatten)]
    pub index: IndexStats,
    pub max_disk: u64,
    pub retention_ms: u64,
    pub data_dir: String,
    /// What runs' outputs and previews cost in model tokens; absent from an older daemon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenStats>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartedEvent {
    pub id: RunId,
    pub pid: u32,
    pub spill_path: Option<String>,
    #[serde(with = "rfc3339")]
    pub started_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExitEvent {
    pub id: RunId,
    pub status: RunStatus,
    pub exit_code: Option<i32>,
    /// Number of the signal that ended the command, if one did.
    pub signal: Option<i32>,
    pub duration_ms: u64,
    #[serde(with = "rfc3339")]
    pub started_at: DateTime<Utc>,
    #[serde(with = "rfc3339")]
    pub ended_at: DateTime<Utc>,
    /// The first spill line the preview covers, when asked for new output only (`wait` with
    /// `new`); absent otherwise, when it covers the whole output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_line: Option<u64>,
    /// What the command left running when it ended, which spillway then stopped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stopped: Vec<StoppedProcess>,
    /// The resource limits the run reached.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits_hit: Vec<LimitHit>,
    /// The engine's result object (the same fields as `truncate --json`).
    #[serde(flatten)]
    pub preview: Preview,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorEvent {
    pub code: ErrorCode,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PongEvent {
    pub protocol: u32,
    pub version: String,
    pub pid: u32,
}

/// Machine-readable error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The line is not JSON, or not a JSON object.
    MalformedJson,
    /// `v` is missing or not a version this daemon speaks.
    UnsupportedVersion,
    /// `op` is missing or unknown.
    UnknownOp,
    /// A field is missing, unknown, of the wrong type or out of range.
    BadRequest,
    /// The working directory does not exist or is not a directory.
    BadCwd,
    /// The program could not be started (not found, not executable, ...).
    SpawnFailed,
    /// The request line is over the size limit; the connection is closed after this.
    RequestTooLarge,
    /// The peer is another user.
    Forbidden,
    /// The daemon serves as many connections as it takes; this one is closed after this.
    TooManyClients,
    /// A request line was begun but not finished within the client timeout; the connection is
    /// closed after this.
    RequestTimeout,
    /// The daemon is shutting down and takes no new runs.
    ShuttingDown,
    /// No run has this id.
    UnknownRun,
    /// The run's spill file is gone (deleted or lost); its record remains.
    SpillMissing,
    /// The grep pattern is not a valid regular expression.
    BadPattern,
    /// The run has ended: it takes no input or signal.
    NotRunning,
    /// The run has no terminal (`tty` false): it takes no input.
    NoInput,
    /// The command did not read what was sent in time.
    InputBlocked,
    /// Something failed inside the daemon.
    Internal,
}

impl Event {
    pub fn error(code: ErrorCode, message: impl Into<String>) -> Event {
        Event::Error(ErrorEvent {
            code,
            message: message.into(),
        })
    }

    /// The event as one JSON line, newline included.
    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(self).unwrap_or_else(|e| {
            format!(r#"{{"type":"error","code":"internal","message":"cannot encode event: {e}"}}"#)
        });
        line.push('\n');
        line
    }
}
