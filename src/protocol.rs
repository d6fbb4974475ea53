//! The socket protocol shared by client and daemon: JSON Lines over a Unix socket.
//!
//! Each request is one JSON object on one line, `{"v": 1, "op": "...", ...}`; the daemon
//! answers with a stream of events, one JSON object per line, each tagged by `"type"`. A `run`
//! is answered by `started` and then exactly one `exit`; anything wrong with a request is
//! answered by one `error` event and the connection stays usable (but for a line over
//! [`MAX_REQUEST_BYTES`], after which the connection is closed). `docs/protocol.md` shows an
//! example of every message.
//!
//! This module is a leaf: it knows nothing of sockets, processes or files.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::grep::GrepResult;
use crate::index::{IndexStats, RunRow, TokenStats};
use crate::preview::{Direction, Preview};
use crate::purge::PurgeReport;

/// The protocol version this build speaks; requests must carry it as `"v"`.
pub const PROTOCOL_VERSION: u32 = 1;

/// Longest request line accepted, newline excluded (1 MiB).
pub const MAX_REQUEST_BYTES: usize = 1 << 20;

/// A run's identifier: `YYYYMMDD-HHMMSS-xxxx` (UTC start time and four random base-32
/// characters), short enough for a person or a model to type, and validated before use.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunId(String);

/// An id that is not of the `YYYYMMDD-HHMMSS-xxxx` form.
#[derive(Debug, thiserror::Error)]
#[error("invalid run id {0:?}: expected the form YYYYMMDD-HHMMSS-xxxx, e.g. 20261121-101502-k3f7")]
pub struct BadRunId(String);

const ID_ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

impl RunId {
    /// A fresh id for a run starting now.
    pub fn generate() -> RunId {
        RunId::starting_at(chrono::Utc::now())
    }

    /// A fresh id for a run that started at `time` (a run recovered after a crash).
    pub fn starting_at(time: chrono::DateTime<chrono::Utc>) -> RunId {
        let mut random = [0u8; 4];
        // Without the OS's randomness, the clock's nanoseconds still make a collision unlikely,
        // and the daemon checks ids for uniqueness anyway.
        if getrandom::fill(&mut random).is_err() {
            let nanos = chrono::Utc::now().timestamp_subsec_nanos();
            random = nanos.to_le_bytes();
        }
        let suffix: String = random
            .iter()
            .map(|b| char::from(ID_ALPHABET[usize::from(b % 32)]))
            .collect();
        let start = time.format("%Y%m%d-%H%M%S");
        RunId(format!("{start}-{suffix}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for RunId {
    type Error = BadRunId;

    fn try_from(s: String) -> Result<RunId, BadRunId> {
        let b = s.as_bytes();
        let ok = b.len() == 20
            && b[..8].iter().all(u8::is_ascii_digit)
            && b[8] == b'-'
            && b[9..15].iter().all(u8::is_ascii_digit)
            && b[15] == b'-'
            && b[16..].iter().all(|c| ID_ALPHABET.contains(c));
        if ok { Ok(RunId(s)) } else { Err(BadRunId(s)) }
    }
}

impl std::str::FromStr for RunId {
    type Err = BadRunId;

    fn from_str(s: &str) -> Result<RunId, BadRunId> {
        RunId::try_from(s.to_string())
    }
}

impl From<RunId> for String {
    fn from(id: RunId) -> String {
        id.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A request, after the envelope (`v`, `op`) has been checked.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Run a command and stream its events.
    Run(Box<RunRequest>),
    /// Liveness and version check, answered by `pong`.
    Ping,
    /// Past and running runs, newest first, answered by `history`.
    History(HistoryRequest),
    /// A page of one run's spill with its record, answered by `show`.
    Show(ShowRequest),
    /// A regex search in one run's spill, answered by `grep`.
    Grep(GrepRequest),
    /// Counts and disk use, answered by `stats`.
    Stats,
    /// Run the retention, quota and orphan purge now, answered by `purge`.
    Purge(PurgeRequest),
    /// The next preview of a running command, or its `exit`; answered by `running` or `exit`.
    Wait(WaitRequest),
    /// Type into a running command's terminal, answered by `sent`.
    Send(SendRequest),
    /// A run's output from the start (or a line) and then live, as `output` events, then its
    /// `exit`.
    Follow(FollowRequest),
    /// The running commands, answered by `ps`.
    Ps(PsRequest),
    /// Signal a run's process group, answered by its `exit` once it has ended.
    Kill(KillRequest),
}

impl Request {
    /// Whether this request asks for its answer's text unredacted.
    pub fn no_redact(&self) -> bool {
        match self {
            Request::Run(r) => r.no_redact,
            Request::Wait(r) => r.no_redact,
            Request::Follow(r) => r.no_redact,
            Request::Kill(r) => r.no_redact,
            Request::History(r) => r.no_redact,
            Request::Show(r) => r.no_redact,
            Request::Grep(r) => r.no_redact,
            _ => false,
        }
    }
}

/// The ops a request may name, for error messages.
const OPS: &str = "run, ping, history, show, grep, stats, purge, wait, send, follow, ps, kill";

/// `{"op": "wait"}`: how long to wait and what to report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitRequest {
    pub id: RunId,
    /// Answer with a `running` preview if the command has not exited after this long;
    /// without it, wait for the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub yield_ms: Option<u64>,
    /// Preview only the output since the last preview given to this caller.
    #[serde(default)]
    pub new: bool,
    /// Whose previews `new` counts (default: the empty name, shared by callers that give none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    /// Leave credentials in the text this answer carries (`[redacted: KIND]` otherwise);
    /// the spill always keeps them. Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_redact: bool,
    /// Answer as soon as a line of output matches this regular expression (with `new`, a
    /// line this caller has not been shown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// Answer as soon as this TCP port accepts a connection on localhost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_port: Option<u16>,
}

/// `{"op": "send"}`: what to type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendRequest {
    pub id: RunId,
    /// Written as typed; control characters act as keys do (`\u0003` is Ctrl-C).
    #[serde(default)]
    pub text: String,
    /// Press Enter (`\r`) after the text (default true).
    #[serde(default = "yes")]
    pub newline: bool,
    /// Then end the input with the terminal's EOF character (Ctrl-D).
    #[serde(default)]
    pub eof: bool,
    /// How long the command may take to read it (default 10000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

fn yes() -> bool {
    true
}

/// `{"op": "follow"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FollowRequest {
    pub id: RunId,
    /// First line to send, 1-based (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_line: Option<u64>,
    /// Leave credentials in the text this answer carries (`[redacted: KIND]` otherwise);
    /// the spill always keeps them. Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_redact: bool,
}

/// `{"op": "ps"}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PsRequest {
    /// Only runs with all these tags.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

/// `{"op": "kill"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KillRequest {
    pub id: RunId,
    /// A signal name (`TERM`, `SIGINT`, `kill`) or number; default `TERM`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// Leave credentials in the text this answer carries (`[redacted: KIND]` otherwise);
    /// the spill always keeps them. Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_redact: bool,
}

/// How a `run` streams its output while it goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamMode {
    /// The normalised text, as `output` events of whole lines (read from the spill).
    Text,
    /// The bytes as the command wrote them, escapes and all, as `raw` events; a client that
    /// falls behind gets a `lagged` event and the normalised text from there on.
    Raw,
}

/// `{"op": "history"}`: which runs to list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryRequest {
    /// Only runs started at or after this time (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Only runs started before this time (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// A status (`exited`, `timed_out`, ...) or `failed` (anything but exit code 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Only runs whose command line contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Only runs with all these tags.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Most runs to list (default 50, at most 10000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Leave credentials in the text this answer carries (`[redacted: KIND]` otherwise);
    /// the spill always keeps them. Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_redact: bool,
}

/// `{"op": "show"}`: a page of a run's spill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShowRequest {
    pub id: RunId,
    /// First line, 1-based (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Most lines (default 2000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Most bytes (default 51200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<usize>,
    /// Leave credentials in the text this answer carries (`[redacted: KIND]` otherwise);
    /// the spill always keeps them. Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_redact: bool,
}

/// `{"op": "grep"}`: a regex search in a run's spill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrepRequest {
    pub id: RunId,
    /// A regular expression (Rust `regex` syntax).
    pub pattern: String,
    #[serde(default)]
    pub ignore_case: bool,
    /// Lines of context around each match (at most 50).
    #[serde(default)]
    pub context: usize,
    /// Most matches to report (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_count: Option<usize>,
    /// Leave credentials in the text this answer carries (`[redacted: KIND]` otherwise);
    /// the spill always keeps them. Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_redact: bool,
}

/// `{"op": "purge"}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PurgeRequest {
    /// Purge finished runs older than this instead of the daemon's retention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub older_than_ms: Option<u64>,
    /// Report what would go, and touch nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// `{"op": "run"}`: what to run and how to preview it. Only one of `argv` and `shell`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// Program and arguments, run directly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    /// A shell command line, run by `sh -c`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
    /// Working directory; must exist. Default: the daemon user's home directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Variables set for the command, over everything else.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The environment to start from (usually the client's own); default: the daemon's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_env: Option<BTreeMap<String, String>>,
    /// Set `PAGER=cat` and friends so pagers and prompts do not wait for a key (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pager_safe: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_lines: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
    /// Kill the command's process group after this many milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Labels for the run, e.g. an agent's session id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Run under a pseudo-terminal (default true); `false` uses one pipe for stdout and stderr.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tty: Option<bool>,
    /// Terminal width (default 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<u16>,
    /// Terminal height (default 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u16>,
    /// `TERM` for the command under a terminal (default `xterm-256color`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub term: Option<String>,
    /// Keep escape sequences; only repair UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<bool>,
    /// Also hold the preview to this many model tokens (o200k).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// More patterns (regular expressions) for the preview's highlights.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub highlight: Vec<String>,
    /// No highlights from the omitted middle (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_highlights: Option<bool>,
    /// Answer with a `running` preview if the command has not exited after this long, and
    /// let it go on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub yield_ms: Option<u64>,
    /// Stop the command's process group if this connection closes before the run ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill_on_disconnect: Option<bool>,
    /// Stream the output while the command runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<StreamMode>,
    /// Most bytes the run's spill file takes, at most the daemon's own cap (its default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_spill: Option<u64>,
    /// Leave credentials in the text this answer carries (`[redacted: KIND]` otherwise);
    /// the spill always keeps them. Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_redact: bool,
    /// Answer with a `running` preview (and `ready`) as soon as a line of output matches this
    /// regular expression, instead of waiting for `yield_ms` or the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// Answer with a `running` preview (and `ready`) as soon as this TCP port accepts a
    /// connection on localhost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_port: Option<u16>,
    /// Most bytes of memory for the whole run (default: the daemon's `--memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    /// Most processes and threads at once in the run (default: the daemon's `--pids`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<u64>,
    /// CPU time for the whole run, as a number of cores (default: the daemon's `--cpu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<f64>,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Still going (only in the index and in live views).
    Running,
    /// Exited by itself; see `exit_code`.
    Exited,
    /// Killed by a signal it did not get from spillway; see `signal`.
    Signaled,
    /// Killed by spillway after its timeout.
    TimedOut,
    /// Killed on request, or by the daemon shutting down.
    Killed,
    /// The daemon died while it ran (found at the next start).
    Interrupted,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Exited => "exited",
            RunStatus::Signaled => "signaled",
            RunStatus::TimedOut => "timed_out",
            RunStatus::Killed => "killed",
            RunStatus::Interrupted => "interrupted",
        }
    }
}

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
}

/// A running command's preview: what it has printed so far (or, asked with `new`, since the
/// caller's last preview), and how long it has printed nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunningEvent {
    pub id: RunId,
    pub pid: u32,
    /// RFC 3339.
    pub started_at: String,
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

/// A resource limit the run reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitHit {
    /// `memory` or `pids`.
    pub resource: String,
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
    /// RFC 3339.
    pub started_at: String,
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
    pub runs: Vec<RunRow>,
}

/// A page of a spill, with the run it belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShowEvent {
    pub run: RunRow,
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
    pub run: RunRow,
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
    /// RFC 3339.
    pub started_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExitEvent {
    pub id: RunId,
    pub status: RunStatus,
    pub exit_code: Option<i32>,
    /// Number of the signal that ended the command, if one did.
    pub signal: Option<i32>,
    pub duration_ms: u64,
    /// RFC 3339.
    pub started_at: String,
    /// RFC 3339.
    pub ended_at: String,
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

/// Parses one request line, naming what is wrong with it precisely.
pub fn parse_request(line: &str) -> Result<Request, ErrorEvent> {
    let bad = |code, message: String| ErrorEvent { code, message };
    let value: serde_json::Value = serde_json::from_str(line).map_err(|e| {
        bad(
            ErrorCode::MalformedJson,
            format!("request is not valid JSON: {e}"),
        )
    })?;
    let serde_json::Value::Object(mut fields) = value else {
        return Err(bad(
            ErrorCode::MalformedJson,
            "request must be a JSON object".into(),
        ));
    };
    match fields.remove("v") {
        Some(v) if v.as_u64() == Some(u64::from(PROTOCOL_VERSION)) => {}
        Some(v) => {
            return Err(bad(
                ErrorCode::UnsupportedVersion,
                format!(
                    "protocol version {v} is not supported; this daemon speaks v={PROTOCOL_VERSION}"
                ),
            ));
        }
        None => {
            return Err(bad(
                ErrorCode::UnsupportedVersion,
                format!("missing protocol version: add \"v\": {PROTOCOL_VERSION}"),
            ));
        }
    }
    let op = match fields.remove("op") {
        Some(serde_json::Value::String(op)) => op,
        _ => {
            return Err(bad(
                ErrorCode::UnknownOp,
                format!("missing \"op\": expected one of {OPS}"),
            ));
        }
    };
    let rest = serde_json::Value::Object(fields);
    let fields_of = |op: &'static str| {
        move |e: serde_json::Error| bad(ErrorCode::BadRequest, format!("bad {op} request: {e}"))
    };
    match op.as_str() {
        "run" => {
            let run: RunRequest = serde_json::from_value(rest).map_err(fields_of("run"))?;
            run.check().map_err(|m| bad(ErrorCode::BadRequest, m))?;
            Ok(Request::Run(Box::new(run)))
        }
        "ping" => no_fields(rest, "ping").map(|()| Request::Ping),
        "stats" => no_fields(rest, "stats").map(|()| Request::Stats),
        "history" => serde_json::from_value(rest)
            .map(Request::History)
            .map_err(fields_of("history")),
        "show" => serde_json::from_value(rest)
            .map(Request::Show)
            .map_err(fields_of("show")),
        "grep" => serde_json::from_value(rest)
            .map(Request::Grep)
            .map_err(fields_of("grep")),
        "purge" => serde_json::from_value(rest)
            .map(Request::Purge)
            .map_err(fields_of("purge")),
        "wait" => serde_json::from_value(rest)
            .map(Request::Wait)
            .map_err(fields_of("wait")),
        "send" => serde_json::from_value(rest)
            .map(Request::Send)
            .map_err(fields_of("send")),
        "follow" => serde_json::from_value(rest)
            .map(Request::Follow)
            .map_err(fields_of("follow")),
        "ps" => serde_json::from_value(rest)
            .map(Request::Ps)
            .map_err(fields_of("ps")),
        "kill" => serde_json::from_value(rest)
            .map(Request::Kill)
            .map_err(fields_of("kill")),
        other => Err(bad(
            ErrorCode::UnknownOp,
            format!("unknown op {other:?}: expected one of {OPS}"),
        )),
    }
}

/// Ops without fields still refuse unknown ones, like the others.
fn no_fields(rest: serde_json::Value, op: &str) -> Result<(), ErrorEvent> {
    match rest {
        serde_json::Value::Object(fields) if fields.is_empty() => Ok(()),
        _ => Err(ErrorEvent {
            code: ErrorCode::BadRequest,
            message: format!("{op} takes no fields besides v and op"),
        }),
    }
}

impl RunRequest {
    /// Checks what serde cannot: exactly one of `argv` and `shell`, sane sizes.
    fn check(&self) -> Result<(), String> {
        let command: Result<(), String> = match (&self.argv, &self.shell) {
            (Some(argv), None) if argv.is_empty() => Err("argv must not be empty".into()),
            (Some(argv), None) if argv[0].is_empty() => Err("argv[0] must not be empty".into()),
            (Some(_), None) | (None, Some(_)) => Ok(()),
            (Some(_), Some(_)) => Err("give either argv or shell, not both".into()),
            (None, None) => {
                Err("missing the command: give argv (a list) or shell (a string)".into())
            }
        };
        command?;
        if self.yield_ms == Some(0) {
            return Err("yield_ms must be at least 1".into());
        }
        if self.yield_ms.is_some() && self.stream.is_some() {
            return Err("give either yield_ms or stream, not both".into());
        }
        if (self.until.is_some() || self.until_port.is_some()) && self.stream.is_some() {
            return Err("give either until/until_port or stream, not both".into());
        }
        if self.until_port == Some(0) {
            return Err("until_port must be a port number from 1 to 65535".into());
        }
        if self.cols == Some(0) || self.rows == Some(0) {
            return Err("cols and rows must be at least 1".into());
        }
        let nul = |s: &String| s.contains('\0');
        // `env` and `base_env` alike: a name with '=' would set another variable than it says.
        let bad_variable =
            |(k, v): (&String, &String)| nul(k) || nul(v) || k.contains('=') || k.is_empty();
        let has_nul = self.argv.iter().flatten().any(nul)
            || self.shell.as_ref().is_some_and(nul)
            || self.env.iter().any(bad_variable)
            || self.base_env.iter().flatten().any(bad_variable);
        if has_nul {
            return Err(
                "arguments and environment must not contain NUL, and names not '=' or be empty"
                    .into(),
            );
        }
        Ok(())
    }
}

/// The request line a client sends: `body`'s fields with the envelope (`v`, `op`) added.
pub fn request_line(op: &str, body: &impl Serialize) -> String {
    let mut fields = match serde_json::to_value(body) {
        Ok(serde_json::Value::Object(fields)) => fields,
        _ => serde_json::Map::new(),
    };
    fields.insert("v".into(), PROTOCOL_VERSION.into());
    fields.insert("op".into(), op.into());
    let mut line = serde_json::Value::Object(fields).to_string();
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(line: &str) -> ErrorCode {
        parse_request(line).unwrap_err().code
    }

    #[test]
    fn parses_a_run_request() {
        let r = parse_request(r#"{"v":1,"op":"run","argv":["ls","-l"],"tags":{"s":"1"}}"#).unwrap();
        let Request::Run(run) = r else { panic!() };
        assert_eq!(run.argv.unwrap(), ["ls", "-l"]);
        assert_eq!(run.tags["s"], "1");
        assert_eq!(
            parse_request(r#"{"v":1,"op":"ping"}"#).unwrap(),
            Request::Ping
        );
    }

    #[test]
    fn names_each_kind_of_bad_request() {
        assert_eq!(code("not json"), ErrorCode::MalformedJson);
        assert_eq!(code("[1,2]"), ErrorCode::MalformedJson);
        assert_eq!(
            code(r#"{"op":"run","argv":["ls"]}"#),
            ErrorCode::UnsupportedVersion
        );
        assert_eq!(
            code(r#"{"v":99,"op":"run","argv":["ls"]}"#),
            ErrorCode::UnsupportedVersion
        );
        assert_eq!(code(r#"{"v":1,"argv":["ls"]}"#), ErrorCode::UnknownOp);
        assert_eq!(code(r#"{"v":1,"op":"dance"}"#), ErrorCode::UnknownOp);
        assert_eq!(code(r#"{"v":1,"op":"run"}"#), ErrorCode::BadRequest);
        assert_eq!(
            code(r#"{"v":1,"op":"run","argv":"ls"}"#),
            ErrorCode::BadRequest
        );
        assert_eq!(
            code(r#"{"v":1,"op":"run","argv":[]}"#),
            ErrorCode::BadRequest
        );
        assert_eq!(
            code(r#"{"v":1,"op":"run","argv":["ls"],"shell":"ls"}"#),
            ErrorCode::BadRequest
        );
        assert_eq!(
            code(r#"{"v":1,"op":"run","argv":["ls"],"max_lines":-1}"#),
            ErrorCode::BadRequest
        );
        assert_eq!(
            code(r#"{"v":1,"op":"run","argv":["ls"],"colour":true}"#),
            ErrorCode::BadRequest
        );
        assert_eq!(
            code(r#"{"v":1,"op":"run","argv":["a\u0000b"]}"#),
            ErrorCode::BadRequest
        );
        assert_eq!(
            code(r#"{"v":1,"op":"run","shell":"ls","env":{"A=B":"c"}}"#),
            ErrorCode::BadRequest
        );
        for base_env in [r#"{"A=B":"c"}"#, r#"{"":"c"}"#, r#"{"A":"c\u0000d"}"#] {
            assert_eq!(
                code(&format!(
                    r#"{{"v":1,"op":"run","shell":"ls","base_env":{base_env}}}"#
                )),
                ErrorCode::BadRequest,
                "{base_env}"
            );
        }
    }

    #[test]
    fn run_ids_round_trip_and_are_validated() {
        let id = RunId::generate();
        assert_eq!(id.as_str().parse::<RunId>().unwrap(), id);
        for bad in [
            "",
            "../../etc/passwd",
            "20261121-101502-K3F9",
            "20261121-101502-k3f",
            "2026112a-101502-k3f9",
        ] {
            assert!(bad.parse::<RunId>().is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_the_live_ops() {
        let id = "20261121-101502-k3f7";
        let wait = format!(r#"{{"v":1,"op":"wait","id":"{id}","yield_ms":5,"new":true}}"#);
        let Request::Wait(wait) = parse_request(&wait).unwrap() else {
            panic!()
        };
        assert_eq!(
            (wait.yield_ms, wait.new, wait.caller),
            (Some(5), true, None)
        );
        let send = format!(r#"{{"v":1,"op":"send","id":"{id}","text":"y"}}"#);
        let Request::Send(send) = parse_request(&send).unwrap() else {
            panic!()
        };
        assert!(send.newline && !send.eof, "Enter by default");
        assert!(matches!(
            parse_request(&format!(r#"{{"v":1,"op":"follow","id":"{id}"}}"#)),
            Ok(Request::Follow(_))
        ));
        assert_eq!(
            parse_request(r#"{"v":1,"op":"ps"}"#).unwrap(),
            Request::Ps(PsRequest::default())
        );
        assert!(matches!(
            parse_request(&format!(
                r#"{{"v":1,"op":"kill","id":"{id}","signal":"INT"}}"#
            )),
            Ok(Request::Kill(_))
        ));
        let run = r#"{"v":1,"op":"run","shell":"x","stream":"raw","kill_on_disconnect":true}"#;
        let Request::Run(run) = parse_request(run).unwrap() else {
            panic!()
        };
        assert_eq!(run.stream, Some(StreamMode::Raw));
        for bad in [
            r#"{"v":1,"op":"run","shell":"x","yield_ms":0}"#,
            r#"{"v":1,"op":"run","shell":"x","yield_ms":9,"stream":"text"}"#,
            r#"{"v":1,"op":"wait","id":"x"}"#,
            r#"{"v":1,"op":"send","id":"20261121-101502-k3f7","txt":"y"}"#,
            r#"{"v":1,"op":"ps","all":true}"#,
        ] {
            assert_eq!(code(bad), ErrorCode::BadRequest, "{bad}");
        }
    }

    #[test]
    fn events_are_tagged_lines() {
        let line = Event::error(ErrorCode::BadCwd, "no such directory: /x").to_line();
        assert_eq!(
            line,
            "{\"type\":\"error\",\"code\":\"bad_cwd\",\"message\":\"no such directory: /x\"}\n"
        );
    }
}
