//! One struct per verb: what each request carries, with its defaults.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::preview::Direction;
use super::record::RunStatus;
use super::run_id::RunId;
use super::time::rfc3339_opt;

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
    /// The preview's line limit, instead of the run's (the preview is then made from the
    /// spill; the other limit defaults as `run`'s does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_lines: Option<u64>,
    /// The preview's byte limit, instead of the run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
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
    /// A running command's output from now on as `raw` events, the bytes as it writes them
    /// (colours, redrawn progress bars), after the text so far; a finished run's is text.
    /// Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub raw: bool,
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
    pub signal: Option<KillSignal>,
    /// Leave credentials in the text this answer carries (`[redacted: KIND]` otherwise);
    /// the spill always keeps them. Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_redact: bool,
}

/// `{"op": "resize"}`: a running command's terminal's new size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResizeRequest {
    pub id: RunId,
    /// Columns, at least 1.
    pub cols: u16,
    /// Rows, at least 1.
    pub rows: u16,
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
    #[serde(default, with = "rfc3339_opt", skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
    /// Only runs started before this time (RFC 3339).
    #[serde(default, with = "rfc3339_opt", skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
    /// A status (`exited`, `timed_out`, ...) or `failed` (anything but exit code 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusFilter>,
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
    /// Delete this one finished run and its spill instead (not with `older_than_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<RunId>,
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
    /// Fold lines alike into template markers in the preview (default true); `false` is the
    /// preview without template folds, as before them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compact: Option<bool>,
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
    /// With `stream: "text"`, stop the `output` events once this many bytes of text were
    /// sent (the event that reaches it is sent whole); the `exit` still comes. For a client
    /// that shows only the output's first lines live: a big output then costs it nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_max_bytes: Option<u64>,
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
    /// The command's standard input is the file descriptor sent with this request's line
    /// (`SCM_RIGHTS`, on the line's first byte), as a shell gives a command its own: a pipe
    /// or a file the caller holds. Default false: the terminal under a PTY, `/dev/null`
    /// without one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stdin_fd: bool,
    /// The caller's umask and resource limits, for the command (default: the daemon's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<super::CallerContext>,
}

impl RunRequest {
    /// Checks what serde cannot: exactly one of `argv` and `shell`, sane sizes, and every rule
    /// about the request alone (the daemon then only holds it to its own caps).
    pub(super) fn check(&self) -> Result<(), String> {
        self.program()?;
        if self.yield_ms == Some(0) {
            return Err("yield_ms must be at least 1".into());
        }
        if self.stream_max_bytes.is_some() && self.stream != Some(StreamMode::Text) {
            return Err("stream_max_bytes goes with stream \"text\" only".into());
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
        if let Some(cwd) = &self.cwd
            && !cwd.starts_with('/')
        {
            return Err(format!("cwd must be an absolute path, got {cwd:?}"));
        }
        if self.max_spill == Some(0) {
            return Err("max_spill must be at least 1".into());
        }
        if self.max_tokens == Some(0) {
            return Err("max_tokens must be at least 1".into());
        }
        if self.no_highlights == Some(true) && !self.highlight.is_empty() {
            return Err("give highlight patterns or no_highlights, not both".into());
        }
        self.caller
            .as_ref()
            .map_or(Ok(()), super::CallerContext::check)
    }

    /// The program and arguments to run: `argv` as given, or `sh -c` with `shell`; or why the
    /// request names none (neither, both, or an empty program).
    pub fn program(&self) -> Result<Vec<String>, String> {
        match (&self.argv, &self.shell) {
            (Some(argv), None) if argv.is_empty() => Err("argv must not be empty".into()),
            (Some(argv), None) if argv[0].is_empty() => Err("argv[0] must not be empty".into()),
            (Some(argv), None) => Ok(argv.clone()),
            (None, Some(shell)) => Ok(vec!["sh".into(), "-c".into(), shell.clone()]),
            (Some(_), Some(_)) => Err("give either argv or shell, not both".into()),
            (None, None) => {
                Err("missing the command: give argv (a list) or shell (a string)".into())
            }
        }
    }
}

/// Which runs `history` keeps, by status: `failed`, or a status by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum StatusFilter {
    /// Exactly this status.
    Is(RunStatus),
    /// Not (exited with code 0): exited non-zero, signaled, timed_out, killed, interrupted.
    /// Running runs, and runs that exited without a code (truncate's), are not failed.
    Failed,
}

impl TryFrom<String> for StatusFilter {
    type Error = String;

    fn try_from(name: String) -> Result<StatusFilter, String> {
        if name == "failed" {
            return Ok(StatusFilter::Failed);
        }
        RunStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == name)
            .map(StatusFilter::Is)
            .ok_or_else(|| {
                format!(
                    "unknown status {name:?}: expected failed, running, exited, signaled, \
                     timed_out, killed or interrupted"
                )
            })
    }
}

impl std::str::FromStr for StatusFilter {
    type Err = String;

    fn from_str(name: &str) -> Result<StatusFilter, String> {
        StatusFilter::try_from(name.to_string())
    }
}

impl From<StatusFilter> for String {
    fn from(filter: StatusFilter) -> String {
        match filter {
            StatusFilter::Is(status) => status.as_str().to_string(),
            StatusFilter::Failed => "failed".to_string(),
        }
    }
}

/// The signal a `kill` sends: given as a name (`TERM`, `SIGTERM`, `term`) or a number, sent
/// as its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "SignalText", into = "String")]
pub struct KillSignal(pub nix::sys::signal::Signal);

/// A signal as a request may spell it: a number or a name.
#[derive(Deserialize)]
#[serde(untagged)]
enum SignalText {
    Number(i32),
    Name(String),
}

impl std::str::FromStr for KillSignal {
    type Err = String;

    /// `TERM`, `SIGTERM`, `term` or `15`.
    fn from_str(text: &str) -> Result<KillSignal, String> {
        use nix::sys::signal::Signal;
        let bad = || {
            format!("unknown signal {text:?}: give a name such as TERM, INT, KILL, HUP or a number")
        };
        let text = text.trim();
        let signal = match text.parse::<i32>() {
            Ok(number) => Signal::try_from(number).map_err(|_| bad())?,
            Err(_) => {
                let upper = text.to_ascii_uppercase();
                let name = if upper.starts_with("SIG") {
                    upper
                } else {
                    format!("SIG{upper}")
                };
                name.parse::<Signal>().map_err(|_| bad())?
            }
        };
        Ok(KillSignal(signal))
    }
}

impl TryFrom<SignalText> for KillSignal {
    type Error = String;

    fn try_from(text: SignalText) -> Result<KillSignal, String> {
        match text {
            SignalText::Number(n) => n.to_string().parse(),
            SignalText::Name(name) => name.parse(),
        }
    }
}

impl From<KillSignal> for String {
    fn from(signal: KillSignal) -> String {
        signal.0.as_str().to_string()
    }
}

impl Default for KillSignal {
    fn default() -> KillSignal {
        KillSignal(nix::sys::signal::Signal::SIGTERM)
    }
}
