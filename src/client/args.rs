//! Flags and values that several client commands share (the CLI's, the live-run commands',
//! the MCP server's), parsed once here so that none of them imports another for them.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use chrono::{DateTime, Utc};
use clap::Args;

use crate::client::Endpoint;
use crate::config::{SOCKET_ENV, socket_path};
use crate::engine::capture::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, MAX_MAX_BYTES, MAX_MAX_LINES};
use crate::engine::highlight::Patterns;
use crate::storage::spill::{DATA_DIR_ENV, DataDir};

/// Where the daemon is, and how to print its answer.
#[derive(Debug, Args)]
pub(crate) struct OutputArgs {
    /// Print the daemon's answer as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) endpoint: EndpointArgs,
}

#[derive(Debug, Args)]
pub(crate) struct EndpointArgs {
    /// The daemon's socket [default: $XDG_RUNTIME_DIR/spillway/spillway.sock, else
    /// <data-dir>/spillway.sock].
    #[arg(long, env = SOCKET_ENV, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// The data directory: the run index, spill files and the daemon's lock and log
    /// [default: $XDG_STATE_HOME/spillway, else ~/.local/state/spillway].
    #[arg(long, env = DATA_DIR_ENV, value_name = "DIR")]
    data_dir: Option<PathBuf>,
}

impl EndpointArgs {
    /// The endpoint as the environment names it (`SPILLWAY_SOCKET`, `SPILLWAY_DATA_DIR`), for
    /// callers with no command line of their own (Claude Code's shell prefix).
    pub(crate) fn from_env() -> EndpointArgs {
        let path = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        EndpointArgs {
            socket: path(SOCKET_ENV),
            data_dir: path(DATA_DIR_ENV),
        }
    }

    /// Its socket, as `--socket` gives it.
    pub(crate) fn set_socket(&mut self, socket: PathBuf) {
        self.socket = Some(socket);
    }

    /// Its data directory, as `--data-dir` gives it.
    pub(crate) fn set_data_dir(&mut self, data_dir: PathBuf) {
        self.data_dir = Some(data_dir);
    }

    /// The daemon a client talks to: the socket given, else the one of the daemon that serves
    /// the data directory (see [`serving_socket`]).
    pub(crate) fn resolve(&self) -> Result<Endpoint> {
        let data_dir = DataDir::locate(self.data_dir.as_deref())?;
        let socket = match &self.socket {
            Some(_) => socket_path(self.socket.as_deref(), &data_dir),
            None => serving_socket(&data_dir),
        };
        Ok(Endpoint { socket, data_dir })
    }

    /// As [`EndpointArgs::resolve`], for commands that ask about runs: a data directory that
    /// does not exist has no runs to ask about, and is neither created nor given a daemon (a
    /// mistyped `--data-dir` is an error, not an empty history). A socket given explicitly
    /// is tried all the same unless nobody listens there: that daemon has its own data
    /// directory, which this client may not even see.
    pub(crate) fn resolve_existing(&self) -> Result<Endpoint> {
        let endpoint = self.resolve()?;
        let nobody_there = || {
            std::os::unix::net::UnixStream::connect(&endpoint.socket).is_err_and(|e| {
                matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                )
            })
        };
        if !endpoint.data_dir.is_dir() && (self.socket.is_none() || nobody_there()) {
            bail!(
                "no data directory {}: no run was ever made there (is --data-dir or \
                 SPILLWAY_DATA_DIR mistyped?); nothing was created",
                endpoint.data_dir.display()
            );
        }
        Ok(endpoint)
    }

    /// The paths as configured, for the daemon itself.
    pub(crate) fn resolve_own(&self) -> Result<Endpoint> {
        let data_dir = DataDir::locate(self.data_dir.as_deref())?;
        Ok(Endpoint {
            socket: socket_path(self.socket.as_deref(), &data_dir),
            data_dir,
        })
    }
}

/// The socket of the daemon that serves `data_dir` when none is given: the one that daemon
/// wrote into the data directory's lock file, if it answers there (a daemon started with
/// another `XDG_RUNTIME_DIR`: by systemd, cron, sudo or an agent host), else the default one
/// (where a daemon is started if none answers).
fn serving_socket(data_dir: &std::path::Path) -> PathBuf {
    let default = socket_path(None, data_dir);
    match crate::daemon::lock::recorded_socket(data_dir) {
        Some(recorded)
            if recorded != default
                && std::os::unix::net::UnixStream::connect(&recorded).is_ok() =>
        {
            recorded
        }
        _ => default,
    }
}

/// `--no-redact`, on every command whose text a model may read.
#[derive(Debug, Clone, Copy, Default, Args)]
pub(crate) struct RedactFlag {
    /// Show credentials as they are. By default text that may reach a model has them replaced
    /// by `[redacted: KIND]` (the spill file always keeps the original).
    #[arg(long)]
    pub(crate) no_redact: bool,
}

/// When a run that starts a server is ready (`--yield` returns then, with exit code 75).
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct UntilArgs {
    /// Return as soon as a line of output matches this regular expression (exit code 75;
    /// the command goes on).
    #[arg(long, value_name = "REGEX", conflicts_with = "follow")]
    pub(crate) until: Option<String>,
    /// Return as soon as this TCP port accepts a connection on localhost (exit code 75; the
    /// command goes on).
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..), conflicts_with = "follow")]
    pub(crate) until_port: Option<u16>,
}

impl UntilArgs {
    pub(crate) fn is_set(&self) -> bool {
        self.until.is_some() || self.until_port.is_some()
    }
}

/// Resource limits for the whole run (cgroups; docs/daemon.md says what holds where).
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct ResourceArgs {
    /// Most memory for the whole run (e.g. 512MiB); past it the kernel's OOM killer ends a
    /// process of the run [default: the daemon's --memory].
    #[arg(long, value_name = "SIZE", value_parser = parse_limit_size)]
    pub(crate) memory: Option<u64>,
    /// Most processes and threads at once in the run; past it fork fails [default: the
    /// daemon's --pids].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) pids: Option<u64>,
    /// CPU time for the whole run, in cores (e.g. 0.5 or 2) [default: the daemon's --cpu].
    #[arg(long, value_name = "CORES", value_parser = parse_cores)]
    pub(crate) cpu: Option<f64>,
}

impl ResourceArgs {
    pub(crate) fn resources(&self) -> crate::supervisor::limits::Resources {
        crate::supervisor::limits::Resources {
            memory: self.memory,
            pids: self.pids,
            cpu: self.cpu,
        }
    }
}

pub(crate) fn parse_limit_size(text: &str) -> Result<u64, String> {
    match parse_size(text)? {
        0 => Err("a memory limit must be at least 1 byte".into()),
        size => Ok(size),
    }
}

pub(crate) fn parse_cores(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(cores) if cores.is_finite() && cores > 0.0 => Ok(cores),
        _ => Err(format!(
            "expected a positive number of cores such as 0.5 or 2, got {text:?}"
        )),
    }
}

pub(crate) fn parse_spill_cap(text: &str) -> Result<u64, String> {
    match parse_size(text)? {
        0 => Err("the spill cap must be at least 1 byte".into()),
        size => Ok(size),
    }
}

pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    text.parse::<bytesize::ByteSize>()
        .map(|size| size.as_u64())
        .map_err(|e| format!("{e} (expected a size such as 10GiB or 500MB)"))
}

/// A moment given as a duration ago (`2h`) or an RFC 3339 time.
pub(crate) fn parse_when(text: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(ago) = humantime::parse_duration(text) {
        let ago = chrono::Duration::from_std(ago).map_err(|e| e.to_string())?;
        return Ok(Utc::now() - ago);
    }
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| {
            format!("expected a duration ago (90s, 2h, 7d) or an RFC 3339 time, got {text:?}")
        })
}

/// Durations in human form: `90s`, `10m`, `2h`, `7d`.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    if text.trim_start().starts_with('-') {
        return Err(format!(
            "a duration cannot be negative, got {text:?} (expected a duration such as 90s, 10m, \
             2h or 7d)"
        ));
    }
    humantime::parse_duration(text)
        .map_err(|e| format!("{e} (expected a duration such as 90s, 10m, 2h or 7d)"))
}

pub(crate) fn parse_key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}

/// `--compact off|on`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Compact {
    Off,
    #[default]
    On,
}

/// Whether a preview folds lines alike into template markers.
#[derive(Debug, Default, Args)]
pub(crate) struct CompactArg {
    /// Fold lines alike (the same words, other numbers, names or paths) into one marker each,
    /// in outputs of 1000 tokens or more; `off`: show them as they are.
    #[arg(
        long,
        env = "SPILLWAY_COMPACT",
        value_enum,
        value_name = "off|on",
        default_value_t
    )]
    pub(crate) compact: Compact,
}

impl CompactArg {
    pub(crate) fn on(&self) -> bool {
        self.compact == Compact::On
    }
}

/// Which lines of the omitted middle a preview shows as highlights.
#[derive(Debug, Default, Args)]
pub(crate) struct HighlightArgs {
    /// Also highlight lines matching this regular expression (repeatable).
    #[arg(long = "highlight", value_name = "REGEX")]
    pub(crate) extra: Vec<String>,
    /// Show no highlights from the omitted middle.
    #[arg(long, conflicts_with = "extra")]
    pub(crate) no_highlights: bool,
}

impl HighlightArgs {
    /// The patterns to look for, or None when highlights are off.
    pub(crate) fn patterns(&self) -> Result<Option<Patterns>> {
        if self.no_highlights {
            return Ok(None);
        }
        Ok(Some(Patterns::with_extra(&self.extra)?))
    }
}

#[derive(Debug, Args)]
pub(crate) struct LimitArgs {
    /// Most lines of output to show, 1 to 1000000.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_LINES as u64,
          value_parser = clap::value_parser!(u64).range(1..=MAX_MAX_LINES as u64))]
    pub(crate) max_lines: u64,
    /// Most bytes of output to show, 1 to 67108864 (64 MiB).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_BYTES as u64,
          value_parser = clap::value_parser!(u64).range(1..=MAX_MAX_BYTES as u64))]
    pub(crate) max_bytes: u64,
}

impl Default for LimitArgs {
    /// The flags' own defaults.
    fn default() -> LimitArgs {
        LimitArgs {
            max_lines: DEFAULT_MAX_LINES as u64,
            max_bytes: DEFAULT_MAX_BYTES as u64,
        }
    }
}
