//! The tools' arguments: typed, with the JSON schema (and its descriptions, from these doc
//! comments) that a model reads to call them. Unknown fields are refused, as the socket
//! protocol refuses them, so a misspelt option is an error rather than silently ignored.

use std::collections::BTreeMap;

use crate::protocol::Direction;
use schemars::JsonSchema;
use serde::Deserialize;

/// Arguments of `bash`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashParams {
    /// The command line, run with `bash -c` under a pseudo-terminal (pagers are disabled).
    pub command: String,
    /// Absolute working directory [default: the MCP server's own, usually the project's].
    pub cwd: Option<String>,
    /// Kill the command's whole process group after this many seconds.
    pub timeout_seconds: Option<f64>,
    /// Return after this many seconds if the command is still running, with a preview of its
    /// output so far; it goes on, and `wait`, `send_input` and `kill` take its id.
    pub yield_seconds: Option<f64>,
    /// For a server started on purpose (as the command itself, not with `&`): return as soon
    /// as a line of output matches this regular expression, e.g. "Listening on"; the server
    /// goes on until `kill`.
    pub until: Option<String>,
    /// For a server started on purpose: return as soon as this TCP port accepts connections
    /// on localhost; the server goes on until `kill`.
    pub until_port: Option<u16>,
    /// Most memory for the whole run, e.g. "512MiB" or "2GB"; past it the kernel kills a
    /// process of the run (out of memory).
    pub memory: Option<String>,
    /// Most processes at once in the run; past it fork fails.
    pub pids: Option<u64>,
    /// CPU time for the whole run, in cores (e.g. 0.5 or 2).
    pub cpu: Option<f64>,
    /// Most lines of output in the preview [default: 2000].
    pub max_lines: Option<u64>,
    /// Most bytes of output in the preview [default: 51200].
    pub max_bytes: Option<u64>,
    /// Also hold the preview to this many model tokens.
    pub max_tokens: Option<u64>,
    /// Fold lines alike (the same words, other numbers, names or paths) into one marker each,
    /// in outputs of 1000 tokens or more [default: true]; false shows them as they are.
    pub compact: Option<bool>,
    /// Which part of a long output the preview keeps: the first lines (`head`), the last
    /// (`tail`), or both ends (`both`, the default).
    pub direction: Option<Direction>,
    /// Labels for the run, e.g. {"task": "fix-build"}; `history` filters by them.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

/// Arguments of `read_output`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadParams {
    /// The run's id, as a result or notice gives it (e.g. "20261121-101502-k3f7").
    pub id: String,
    /// First line to return, 1-based [default: 1]: a notice's `offset=N` works as is.
    pub offset: Option<u64>,
    /// Most lines to return [default: 2000; also at most 50 KiB].
    pub limit: Option<usize>,
}

/// Arguments of `grep_output`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepParams {
    /// The run's id.
    pub id: String,
    /// A regular expression (Rust `regex` syntax, like extended grep: `error|warning`,
    /// `^FAIL`, `\d+ failed`).
    pub pattern: String,
    /// Match without regard to case.
    #[serde(default)]
    pub ignore_case: bool,
    /// Lines of context before and after each match [default: 0; at most 50].
    pub context: Option<usize>,
    /// Most matching lines to return [default: 100].
    pub max_count: Option<usize>,
}

/// Arguments of `wait`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitParams {
    /// The id of a run that `bash` returned still running.
    pub id: String,
    /// Return after this many seconds if it is still running, with a preview; without it,
    /// wait for the end.
    pub yield_seconds: Option<f64>,
    /// Show only output you have not been shown yet [default: true]; false shows it all.
    pub new_only: Option<bool>,
    /// Return as soon as a line of output (one you have not been shown, with new_only)
    /// matches this regular expression.
    pub until: Option<String>,
    /// Return as soon as this TCP port accepts connections on localhost.
    pub until_port: Option<u16>,
}

/// Arguments of `send_input`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendParams {
    /// The id of a running command.
    pub id: String,
    /// What to type, e.g. "y" for a [y/N] prompt. Control characters act as keys:
    /// "\u0003" is Ctrl-C.
    #[serde(default)]
    pub text: String,
    /// Press Enter after the text [default: true].
    pub newline: Option<bool>,
    /// Then end the input (Ctrl-D), for a command that reads until end of input.
    #[serde(default)]
    pub eof: bool,
}

/// Arguments of `kill`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KillParams {
    /// The id of a running command.
    pub id: String,
    /// The signal: TERM (default), INT, KILL, HUP, ... or a number. SIGKILL follows after a
    /// grace period if the command is still running.
    pub signal: Option<String>,
}

/// Arguments of `history`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryParams {
    /// Only runs started within this long ("90s", "2h", "7d") or since this RFC 3339 time.
    pub since: Option<String>,
    /// "failed" (anything but exit code 0), or a status: running, exited, signaled,
    /// timed_out, killed, interrupted.
    pub status: Option<String>,
    /// Only runs whose command line contains this text.
    pub command: Option<String>,
    /// Only runs with all these tags.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Most runs to list, newest first [default: 20].
    pub limit: Option<usize>,
}
