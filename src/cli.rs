//! The command-line edge: parses flags into validated settings, runs the engine, prints.
//!
//! Errors are reported here, once, with their context (`anyhow`); the library modules below
//! return typed errors. A closed stdout (`spillway truncate ... | head`) is not an error.

use std::io::{self, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use serde::{Deserialize, Serialize};

use crate::capture::{Capture, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, Limits, SpillPolicy};
use crate::client::{Connection, Endpoint};
use crate::config::{SOCKET_ENV, socket_path};
use crate::highlight::Patterns;
use crate::index::{
    INDEX_FILE, Index, NewRun, RunEnd, RunTokens, TOKEN_STATS_COMMANDS, TOKEN_STATS_DAYS,
};
use crate::live_cli::{self, LiveRunArgs};
use crate::normalise::{NormaliseOptions, Normaliser};
use crate::ops;
use crate::preview::{CliSteps, Direction, Preview};
use crate::protocol::{
    Event, ExitEvent, GrepRequest, HistoryRequest, PurgeRequest, RunId, RunRequest, RunStatus,
    ShowRequest, request_line,
};
use crate::purge::PurgePolicy;
use crate::read::{self, ReadRequest};
use crate::redact::Redactor;
use crate::spill::{DATA_DIR_ENV, DataDir};

/// Exit code for spillway's own failures (bad flags, unreadable input), as `timeout(1)` uses.
const EXIT_FAILURE: u8 = 125;
/// Exit code of a run that timed out, as `timeout(1)` uses.
const EXIT_TIMED_OUT: u8 = 124;

/// Size of each read from standard input.
const READ_CHUNK: usize = 256 * 1024;

#[derive(Debug, Parser)]
#[command(
    name = "spillway",
    version,
    about = "Bounded previews of command output for AI agents; every byte kept on disk."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Read standard input to its end and print a preview that fits a model's context.
    ///
    /// Terminal escapes are stripped and progress bars collapsed; when the output is over the
    /// limits, the whole of it is written to a spill file whose path the notice gives.
    Truncate(TruncateArgs),
    /// Print lines of a spill file, a page at a time.
    Read(ReadArgs),
    /// Run a command under a pseudo-terminal in the daemon and print its preview.
    ///
    /// Starts a daemon if none is running. Exits with the command's exit code: 128+N when
    /// signal N ended it, 124 when it timed out, 125 when spillway itself failed.
    Run(Box<RunArgs>),
    /// Run the daemon in the foreground (logs on stderr; `SPILLWAY_LOG` sets the level).
    Daemon(DaemonArgs),
    /// List past and running runs, newest first.
    History(HistoryArgs),
    /// Print a run's output a page at a time, with its record.
    Show(ShowArgs),
    /// Search a run's output with a regular expression.
    Grep(GrepArgs),
    /// Runs by status, spill disk use against the quota, database size, and the model tokens
    /// runs' outputs and previews cost, by command and by day.
    Stats(StatsArgs),
    /// Delete old runs and their spills now (retention, quota, orphans).
    Purge(PurgeArgs),
    /// Wait for a run: its next preview (with --yield) or its end.
    Wait(live_cli::WaitArgs),
    /// Type into a running command's terminal.
    Send(live_cli::SendArgs),
    /// Print a run's output from the start, then live until it ends.
    Follow(live_cli::FollowArgs),
    /// List the running commands.
    Ps(live_cli::PsArgs),
    /// Signal a run's whole process group and wait for it to end.
    Kill(live_cli::KillArgs),
    /// Serve the Model Context Protocol on stdin/stdout: tools bash, read_output,
    /// grep_output, wait, send_input, kill and history, backed by the daemon.
    ///
    /// Starts a daemon if none is running. Configure an agent to launch `spillway mcp`.
    Mcp(McpArgs),
    /// Wire spillway into an agent host: its shell tool runs through `spillway run`, and
    /// `spillway mcp` is registered for reading, searching and steering runs.
    ///
    /// Backs up each file before its first edit (FILE.spillway-backup); `--uninstall` undoes it.
    Init(crate::init::InitArgs),
    /// The hook an agent host runs before its shell tool: reads the host's JSON on stdin and
    /// answers with the command rewritten to run through `spillway run` (never fails).
    Hook(HookArgs),
    /// Counts a `truncate` run's tokens from the job on stdin and records them (internal:
    /// `truncate` starts it).
    #[command(hide = true)]
    CountTokens(CountTokensArgs),
}

#[derive(Debug, Args)]
struct CountTokensArgs {
    /// The data directory whose index holds the run.
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,
    /// The run.
    id: RunId,
}

#[derive(Debug, Args)]
struct HookArgs {
    /// The host whose hook JSON comes on stdin.
    #[arg(value_enum)]
    host: crate::hook::Host,
}

#[derive(Debug, Args)]
struct McpArgs {
    #[command(flatten)]
    endpoint: EndpointArgs,
}

#[derive(Debug, Args)]
struct HistoryArgs {
    #[command(flatten)]
    redact: RedactFlag,
    /// Only runs started within this long (e.g. 2h), or since this RFC 3339 time.
    #[arg(long, value_name = "WHEN", value_parser = parse_when)]
    since: Option<DateTime<Utc>>,
    /// Only runs started before this long ago, or before this RFC 3339 time.
    #[arg(long, value_name = "WHEN", value_parser = parse_when)]
    until: Option<DateTime<Utc>>,
    /// `failed` (anything but exit code 0) or a status: running, exited, signaled, timed_out,
    /// killed, interrupted.
    #[arg(long, value_name = "STATUS")]
    status: Option<String>,
    /// Only runs whose command line contains this text.
    #[arg(long, value_name = "SUBSTR")]
    command: Option<String>,
    /// Only runs with this tag (repeatable).
    #[arg(long = "tag", value_name = "K=V", value_parser = parse_key_value)]
    tags: Vec<(String, String)>,
    /// Most runs to list.
    #[arg(long, value_name = "N", default_value_t = 50)]
    limit: usize,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, Args)]
struct ShowArgs {
    #[command(flatten)]
    redact: RedactFlag,
    /// The run's id, as `run` and `history` print it.
    id: RunId,
    /// First line to print (1-based).
    #[arg(long, value_name = "N", default_value_t = 1)]
    offset: u64,
    /// Most lines to print.
    #[arg(long, value_name = "M", default_value_t = read::DEFAULT_READ_LIMIT)]
    limit: usize,
    /// Only the lines: no header, no continuation notice.
    #[arg(long)]
    raw: bool,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, Args)]
struct GrepArgs {
    #[command(flatten)]
    redact: RedactFlag,
    /// The run's id.
    id: RunId,
    /// A regular expression (Rust regex syntax).
    pattern: String,
    /// Match case-insensitively.
    #[arg(short = 'i', long)]
    ignore_case: bool,
    /// Lines of context around each match.
    #[arg(short = 'C', long, value_name = "N", default_value_t = 0)]
    context: usize,
    /// Most matches to print.
    #[arg(long, value_name = "N", default_value_t = crate::grep::DEFAULT_MAX_COUNT)]
    max_count: usize,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, Args)]
struct StatsArgs {
    #[command(flatten)]
    output: OutputArgs,
    /// Commands in the token table, most tokens saved first [default: 10; with --json, all
    /// the daemon sends, up to 100].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=TOKEN_STATS_COMMANDS as i64))]
    top: Option<u16>,
    /// Days in the token table, today (UTC) included [default: 14; with --json, all the
    /// daemon sends, up to 90].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(TOKEN_STATS_DAYS)))]
    days: Option<u32>,
}

#[derive(Debug, Args)]
struct PurgeArgs {
    /// Delete finished runs older than this instead of the daemon's retention (e.g. 3d).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    older_than: Option<Duration>,
    /// Only say what would be deleted.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    output: OutputArgs,
}

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
    /// Where spill files go [default: $XDG_STATE_HOME/spillway, else ~/.local/state/spillway].
    #[arg(long, env = DATA_DIR_ENV, value_name = "DIR")]
    data_dir: Option<PathBuf>,
}

impl EndpointArgs {
    pub(crate) fn resolve(&self) -> Result<Endpoint> {
        let data_dir = DataDir::locate(self.data_dir.as_deref())?;
        Ok(Endpoint {
            socket: socket_path(self.socket.as_deref(), &data_dir),
            data_dir,
        })
    }
}

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    redact: RedactFlag,
    #[command(flatten)]
    limits: LimitArgs,
    /// Cap on this run's spill file (e.g. 100MiB) [default: the daemon's --max-spill].
    #[arg(long, value_name = "SIZE", value_parser = parse_spill_cap)]
    max_spill: Option<u64>,
    #[command(flatten)]
    highlights: HighlightArgs,
    /// Also hold the preview to this many model tokens (o200k tokenizer).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_tokens: Option<u64>,
    /// Which part of a long output to keep.
    #[arg(long, value_enum, default_value_t)]
    direction: Direction,
    /// Kill the command's process group after this long (e.g. 90s, 10m, 2h).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// Working directory [default: the current one].
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Set a variable for the command (repeatable).
    #[arg(long = "env", value_name = "K=V", value_parser = parse_key_value)]
    env: Vec<(String, String)>,
    /// Label the run (repeatable), e.g. --tag session=abc.
    #[arg(long = "tag", value_name = "K=V", value_parser = parse_key_value)]
    tags: Vec<(String, String)>,
    /// Use a pipe instead of a terminal: faster for bulk output; stdin is empty.
    #[arg(long)]
    no_tty: bool,
    /// Terminal width [default: 200].
    #[arg(long, value_name = "N")]
    cols: Option<u16>,
    /// Terminal height [default: 50].
    #[arg(long, value_name = "N")]
    rows: Option<u16>,
    /// TERM for the command [default: xterm-256color].
    #[arg(long, value_name = "TERM")]
    term: Option<String>,
    /// Keep escape sequences; only repair invalid UTF-8.
    #[arg(long)]
    raw: bool,
    /// Print the whole exit event as JSON instead of the preview text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    live: LiveRunArgs,
    #[command(flatten)]
    until: UntilArgs,
    #[command(flatten)]
    resources: ResourceArgs,
    /// Run this shell command line with `sh -c` instead of CMD.
    #[arg(
        short = 'c',
        long = "shell",
        value_name = "COMMAND",
        conflicts_with = "command"
    )]
    shell: Option<String>,
    #[command(flatten)]
    endpoint: EndpointArgs,
    /// The command and its arguments (after `--`).
    #[arg(
        value_name = "CMD",
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required_unless_present = "shell"
    )]
    command: Vec<String>,
}

/// `--no-redact`, on every command whose text a model may read.
#[derive(Debug, Clone, Copy, Args)]
pub(crate) struct RedactFlag {
    /// Show credentials as they are. By default text that may reach a model has them replaced
    /// by `[redacted: KIND]` (the spill file always keeps the original).
    #[arg(long)]
    pub(crate) no_redact: bool,
}

/// When a run that starts a server is ready (`--yield` returns then, with exit code 75).
#[derive(Debug, Clone, Args)]
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

/// Resource limits for the whole run (cgroups; see the README for what holds where).
#[derive(Debug, Clone, Args)]
struct ResourceArgs {
    /// Most memory for the whole run (e.g. 512MiB); past it the kernel's OOM killer ends a
    /// process of the run [default: the daemon's --memory].
    #[arg(long, value_name = "SIZE", value_parser = parse_limit_size)]
    memory: Option<u64>,
    /// Most processes and threads at once in the run; past it fork fails [default: the
    /// daemon's --pids].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pids: Option<u64>,
    /// CPU time for the whole run, in cores (e.g. 0.5 or 2) [default: the daemon's --cpu].
    #[arg(long, value_name = "CORES", value_parser = parse_cores)]
    cpu: Option<f64>,
}

impl ResourceArgs {
    fn resources(&self) -> crate::supervisor::limits::Resources {
        crate::supervisor::limits::Resources {
            memory: self.memory,
            pids: self.pids,
            cpu: self.cpu,
        }
    }
}

fn parse_limit_size(text: &str) -> Result<u64, String> {
    match parse_size(text)? {
        0 => Err("a memory limit must be at least 1 byte".into()),
        size => Ok(size),
    }
}

fn parse_cores(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(cores) if cores.is_finite() && cores > 0.0 => Ok(cores),
        _ => Err(format!(
            "expected a positive number of cores such as 0.5 or 2, got {text:?}"
        )),
    }
}

#[derive(Debug, Args)]
struct DaemonArgs {
    #[command(flatten)]
    endpoint: EndpointArgs,
    /// Exit after this long with no runs and no clients [default: never].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    idle_exit: Option<Duration>,
    /// Timeout for runs that do not set one [default: none].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    default_timeout: Option<Duration>,
    /// Time between SIGTERM and SIGKILL when a run's process group is stopped.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s")]
    kill_grace: Duration,
    /// Delete finished runs and their spills after this long.
    #[arg(long, env = "SPILLWAY_RETENTION", value_name = "DURATION", value_parser = parse_duration, default_value = "7d")]
    retention: Duration,
    /// Disk quota for spills (e.g. 10GiB, 500MB): the oldest finished runs go first.
    #[arg(long, env = "SPILLWAY_MAX_DISK", value_name = "SIZE", value_parser = parse_size, default_value = "10GiB")]
    max_disk: u64,
    /// Cap on each run's spill file: past it the file stops growing (the preview goes on).
    #[arg(long, env = "SPILLWAY_MAX_SPILL", value_name = "SIZE", value_parser = parse_spill_cap, default_value = "1GiB")]
    max_spill: u64,
    /// How long a client may take to finish sending a request line, and to take each event,
    /// before it is dropped (idle connections are kept).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "30s")]
    client_timeout: Duration,
    /// Send clients credentials as they are: no redaction for any request.
    #[arg(long, env = "SPILLWAY_NO_REDACT", value_parser = clap::builder::FalseyValueParser::new())]
    no_redact: bool,
    /// Also redact what this regular expression matches (its group named `secret` if it has
    /// one), as kind `custom` (repeatable).
    #[arg(long = "redact", value_name = "REGEX")]
    redact: Vec<String>,
    /// Standard output is a pipe from the client starting this daemon: write `ready` or
    /// `error: WHY` there once start-up is over (for `crate::client`; not for people).
    #[arg(long, hide = true)]
    report_start: bool,
    /// Never put runs in cgroups: track their processes through /proc alone (also
    /// SPILLWAY_NO_CGROUP=1).
    #[arg(long)]
    no_cgroup: bool,
    /// Default memory limit of a run (e.g. 4GiB) [default: none].
    #[arg(long = "memory", env = "SPILLWAY_MEMORY", value_name = "SIZE", value_parser = parse_limit_size)]
    memory: Option<u64>,
    /// Default limit on a run's processes and threads [default: none].
    #[arg(long = "pids", env = "SPILLWAY_PIDS", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pids: Option<u64>,
    /// Default CPU limit of a run, in cores [default: none].
    #[arg(long = "cpu", env = "SPILLWAY_CPU", value_name = "CORES", value_parser = parse_cores)]
    cpu: Option<f64>,
}

fn parse_spill_cap(text: &str) -> Result<u64, String> {
    match parse_size(text)? {
        0 => Err("the spill cap must be at least 1 byte".into()),
        size => Ok(size),
    }
}

fn parse_size(text: &str) -> Result<u64, String> {
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
    humantime::parse_duration(text)
        .map_err(|e| format!("{e} (expected a duration such as 90s, 10m, 2h or 7d)"))
}

pub(crate) fn parse_key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}

#[derive(Debug, Args)]
struct TruncateArgs {
    #[command(flatten)]
    redact: RedactFlag,
    #[command(flatten)]
    limits: LimitArgs,
    /// Which part of a long output to keep.
    #[arg(long, value_enum, default_value_t)]
    direction: Direction,
    /// Where spill files go [default: $XDG_STATE_HOME/spillway, else ~/.local/state/spillway].
    #[arg(long, env = DATA_DIR_ENV, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Keep escape sequences and carriage returns; only repair invalid UTF-8.
    #[arg(long)]
    raw: bool,
    /// Cap on the spill file: past it the file stops growing (the preview goes on).
    #[arg(long, env = "SPILLWAY_MAX_SPILL", value_name = "SIZE", value_parser = parse_spill_cap, default_value = "1GiB")]
    max_spill: u64,
    /// Print the result object as JSON instead of the preview text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    highlights: HighlightArgs,
    /// Also hold the preview to this many model tokens (o200k tokenizer).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_tokens: Option<u64>,
}

/// Which lines of the omitted middle a preview shows as highlights.
#[derive(Debug, Args)]
struct HighlightArgs {
    /// Also highlight lines matching this regular expression (repeatable).
    #[arg(long = "highlight", value_name = "REGEX")]
    extra: Vec<String>,
    /// Show no highlights from the omitted middle.
    #[arg(long, conflicts_with = "extra")]
    no_highlights: bool,
}

impl HighlightArgs {
    /// The patterns to look for, or None when highlights are off.
    fn patterns(&self) -> Result<Option<Patterns>> {
        if self.no_highlights {
            return Ok(None);
        }
        Ok(Some(Patterns::with_extra(&self.extra)?))
    }
}

#[derive(Debug, Args)]
struct LimitArgs {
    /// Most lines of output to show.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_LINES as u64)]
    max_lines: u64,
    /// Most bytes of output to show.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_BYTES as u64)]
    max_bytes: u64,
}

#[derive(Debug, Args)]
struct ReadArgs {
    #[command(flatten)]
    redact: RedactFlag,
    /// The spill file.
    path: PathBuf,
    /// First line to print (1-based).
    #[arg(long, value_name = "N", default_value_t = 1)]
    offset: u64,
    /// Most lines to print.
    #[arg(long, value_name = "M", default_value_t = read::DEFAULT_READ_LIMIT)]
    limit: usize,
    /// Most bytes to print.
    #[arg(long, value_name = "N", default_value_t = read::DEFAULT_READ_MAX_BYTES)]
    max_bytes: usize,
}

/// Runs the command line and turns the outcome into an exit code.
pub fn main() -> ExitCode {
    ignore_sigxfsz();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(EXIT_FAILURE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let outcome = match cli.command {
        Command::Truncate(args) => truncate(args),
        Command::Read(args) => read_spill(args),
        Command::Run(args) => run(*args),
        Command::Daemon(args) => daemon(args),
        Command::History(args) => history(args),
        Command::Show(args) => show(args),
        Command::Grep(args) => grep(args),
        Command::Stats(args) => stats(args),
        Command::Purge(args) => purge(args),
        Command::Wait(args) => live_cli::wait(args),
        Command::Send(args) => live_cli::send(args),
        Command::Follow(args) => live_cli::follow(args),
        Command::Ps(args) => live_cli::ps(args),
        Command::Kill(args) => live_cli::kill(args),
        Command::Init(args) => crate::init::run(args),
        Command::Hook(args) => return crate::hook::main(args.host),
        Command::CountTokens(args) => count_tokens(args),
        Command::Mcp(args) => args
            .endpoint
            .resolve()
            .and_then(crate::mcp::serve_stdio)
            .map(|()| ExitCode::SUCCESS),
    };
    match outcome {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // Not eprintln!, which panics when standard error cannot be written (a daemon's
            // log on a full disk): the exit code still says what happened.
            let _ = writeln!(io::stderr(), "spillway: error: {e:#}");
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

/// A file-size limit (`ulimit -f`) would otherwise kill us with SIGXFSZ mid-spill; ignored, the
/// write fails with EFBIG instead and the preview is still given.
fn ignore_sigxfsz() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    // SAFETY: installing SIG_IGN runs no code in signal context.
    let _ = unsafe { signal(Signal::SIGXFSZ, SigHandler::SigIgn) };
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

fn truncate(args: TruncateArgs) -> Result<ExitCode> {
    let started_at = Utc::now();
    let limits = Limits::new(args.limits.max_lines, args.limits.max_bytes)?;
    let root = DataDir::locate(args.data_dir.as_deref())?;
    let mut normaliser = Normaliser::new(NormaliseOptions {
        raw: args.raw,
        ..NormaliseOptions::default()
    });
    let mut capture = Capture::new(limits, SpillPolicy::WhenTruncated(DataDir::at(&root)))
        .with_spill_cap(args.max_spill)
        .with_highlights(args.highlights.patterns()?);
    let mut stdin = io::stdin().lock();
    let mut buf = vec![0u8; READ_CHUNK];
    let mut text = String::new();
    loop {
        let n = match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("reading standard input"),
        };
        let newlines = normaliser.feed(&buf[..n], &mut text);
        capture.write_owned(&mut text, newlines);
    }
    let newlines = normaliser.finish(&mut text);
    capture.write_owned(&mut text, newlines);
    capture.finish();
    let max_tokens = args
        .max_tokens
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    let mut preview = Preview::build_with(&capture.view(), args.direction, &CliSteps, max_tokens);
    if !args.redact.no_redact {
        preview.redact(Redactor::builtin());
    }
    let registered = match &preview.spill_path {
        Some(spill) => register_truncated(&root, spill, &preview, started_at)
            .inspect_err(|e| {
                eprintln!(
                    "spillway: warning: the spill is not in the index ({e:#}); a purge may remove it"
                );
            })
            .ok(),
        None => None,
    };
    let mut out = io::stdout().lock();
    if args.json {
        serde_json::to_writer(&mut out, &preview)?;
        out.write_all(b"\n")?;
    } else {
        out.write_all(preview.content.as_bytes())?;
    }
    out.flush()?;
    if let Some(id) = registered {
        let job = TokenJob {
            preview: preview.content,
            output: capture.output_text(),
        };
        if let Err(e) = count_tokens_later(&root, &id, &job) {
            eprintln!("spillway: warning: this run's tokens will not be counted ({e:#})");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What the hidden `count-tokens` command counts for a `spillway truncate` run.
#[derive(Debug, Serialize, Deserialize)]
struct TokenJob {
    /// The preview as printed.
    preview: String,
    output: crate::tokens::OutputText,
}

/// Leaves the counting of run `id`'s tokens to a child process (the hidden `count-tokens`,
/// given `job` on its standard input), and returns without waiting for it.
///
/// Counting takes the tokenizer, whose build alone costs 0.2-0.5 s and tens of MiB, and then
/// up to a tenth of a second of BPE: counted in `truncate` itself (with `tiktoken-rs`'s
/// tokenizer, built beside the stream), 256 MiB of log text took 0.70 / 1.00 s (fastest /
/// median) against 0.60 / 0.66 s, and its peak RSS was 60 MiB against 17. The child
/// has no terminal and no pipe of the caller's (so whoever reads this process's output or
/// waits for it is not kept waiting), and its own process group (so a Ctrl-C after this
/// process is gone does not stop it). Until it has written them, or if it never does, the run
/// is one without token counts.
fn count_tokens_later(root: &std::path::Path, id: &RunId, job: &TokenJob) -> Result<()> {
    use std::os::unix::process::CommandExt;
    let job = serde_json::to_vec(job)?;
    let mut child = std::process::Command::new(std::env::current_exe()?)
        .arg("count-tokens")
        .arg("--data-dir")
        .arg(root)
        .arg(id.as_str())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .context("starting the token count")?;
    let mut stdin = child.stdin.take().context("the token count's input")?;
    // Up to 1 MiB: a pipe takes 64 KiB at once, the child reads the rest as it starts.
    stdin
        .write_all(&job)
        .context("handing the output to the token count")
}

/// `count-tokens`: counts a `spillway truncate` run's tokens from the job on standard input
/// and records them in the index.
fn count_tokens(args: CountTokensArgs) -> Result<ExitCode> {
    let job: TokenJob =
        serde_json::from_reader(io::stdin().lock()).context("reading the token job")?;
    let output = job.output.count();
    let preview = crate::tokens::measure(&job.preview);
    let tokens = RunTokens {
        output: output.tokens,
        preview: preview.tokens,
        output_estimated: output.estimated || preview.estimated,
    };
    let mut index = Index::open(&args.data_dir.join(INDEX_FILE))?;
    index.record_tokens(&args.id, &tokens)?;
    Ok(ExitCode::SUCCESS)
}

fn read_spill(args: ReadArgs) -> Result<ExitCode> {
    let request = ReadRequest {
        offset: args.offset,
        limit: args.limit,
        max_bytes: args.max_bytes,
    };
    let mut page = read::read_page(&args.path, &request)?;
    let mut redactions = crate::redact::Counts::new();
    if !args.redact.no_redact {
        Redactor::builtin().redact_into(&mut page.text, &mut redactions);
    }
    let mut out = io::stdout().lock();
    if page.total_lines == 0 {
        writeln!(out, "[{} is empty: 0 lines]", args.path.display())?;
    }
    out.write_all(page.text.as_bytes())?;
    if let Some(notice) = page.notice(|next| format!("--offset {next}")) {
        writeln!(out, "{notice}")?;
    }
    if let Some(line) = crate::redact::notice_line(&redactions) {
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn run(args: RunArgs) -> Result<ExitCode> {
    let endpoint = args.endpoint.resolve()?;
    let cwd = match &args.cwd {
        Some(dir) => std::path::absolute(dir),
        None => std::env::current_dir(),
    }
    .context("cannot determine the working directory")?;
    let (argv, shell) = match args.shell {
        Some(shell) => (None, Some(shell)),
        None => (Some(args.command), None),
    };
    let request = RunRequest {
        no_redact: args.redact.no_redact,
        argv,
        shell,
        cwd: Some(cwd.to_string_lossy().into_owned()),
        env: args.env.into_iter().collect(),
        // The command sees the caller's environment, as if run directly.
        base_env: Some(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
        ),
        pager_safe: None,
        max_lines: Some(args.limits.max_lines),
        max_bytes: Some(args.limits.max_bytes),
        direction: Some(args.direction),
        timeout_ms: args
            .timeout
            .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX).max(1)),
        tags: args.tags.into_iter().collect(),
        tty: Some(!args.no_tty),
        cols: args.cols,
        rows: args.rows,
        term: args.term,
        raw: Some(args.raw),
        max_tokens: args.max_tokens,
        max_spill: args.max_spill,
        highlight: args.highlights.extra.clone(),
        no_highlights: args.highlights.no_highlights.then_some(true),
        yield_ms: args.live.yield_ms(),
        kill_on_disconnect: args.live.kill_on_disconnect.then_some(true),
        stream: args.live.stream(args.json),
        until: args.until.until.clone(),
        until_port: args.until.until_port,
        memory: args.resources.memory,
        pids: args.resources.pids,
        cpu: args.resources.cpu,
    };
    args.resources
        .resources()
        .check()
        .map_err(anyhow::Error::msg)?;
    let mut connection = Connection::open(&endpoint)?;
    connection.send(&request_line("run", &request))?;
    if args.live.is_live() || args.until.is_set() {
        return live_cli::finish_run(&mut connection, &args.live, args.json);
    }
    loop {
        match connection.next_event()? {
            Event::Exit(exit) => return print_exit(&exit, args.json),
            Event::Error(error) => {
                if args.json {
                    println!("{}", Event::Error(error.clone()).to_line().trim_end());
                }
                anyhow::bail!("{}", error.message);
            }
            _ => continue,
        }
    }
}

/// Prints a finished run as an agent should see it and turns its status into an exit code.
pub(crate) fn print_exit(exit: &ExitEvent, json: bool) -> Result<ExitCode> {
    let mut out = io::stdout().lock();
    if json {
        serde_json::to_writer(&mut out, &Event::Exit(Box::new(exit.clone())))?;
        out.write_all(b"\n")?;
    } else {
        out.write_all(exit.preview.content.as_bytes())?;
    }
    out.flush()?;
    if let Some(status) = status_line(exit) {
        eprintln!("{status}");
    }
    Ok(ExitCode::from(exit_code(exit)))
}

fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal).map_or_else(
        |_| format!("signal {signal}"),
        |s| format!("signal {signal} ({})", s.as_str()),
    )
}

/// A one-line account of how the command ended, when it did not simply succeed.
pub(crate) fn status_line(exit: &ExitEvent) -> Option<String> {
    let how = match (exit.status, exit.exit_code, exit.signal) {
        (RunStatus::Exited, Some(0), _) => return None,
        (RunStatus::TimedOut, _, _) => format!(
            "timed out after {:.1}s; its process group was killed",
            exit.duration_ms as f64 / 1000.0
        ),
        (RunStatus::Killed, _, Some(signal)) => format!("was stopped by {}", signal_name(signal)),
        (_, _, Some(signal)) => format!("was killed by {}", signal_name(signal)),
        (_, Some(code), None) => format!("exited with code {code}"),
        (status, None, None) => format!("ended: {}", status.as_str()),
    };
    let memory = exit.limits_hit.iter().find(|h| h.resource == "memory");
    let how = match memory {
        Some(hit) => format!(
            "{how}: it reached its memory limit of {} and the kernel's OOM killer ended {}",
            crate::supervisor::limits::human_bytes(hit.limit),
            if hit.events == 1 {
                "a process".to_string()
            } else {
                format!("{} processes", hit.events)
            }
        ),
        None => how,
    };
    Some(format!("[spillway: run {} {how}]", exit.id))
}

/// The exit code `spillway run` passes on, as `timeout(1)` does.
pub(crate) fn exit_code(exit: &ExitEvent) -> u8 {
    match (exit.status, exit.exit_code, exit.signal) {
        (RunStatus::TimedOut, _, _) => EXIT_TIMED_OUT,
        (_, _, Some(signal)) => 128u8.saturating_add(u8::try_from(signal).unwrap_or(127)),
        (_, Some(code), None) => u8::try_from(code & 0xff).unwrap_or(1),
        (_, None, None) => EXIT_FAILURE,
    }
}

fn history(args: HistoryArgs) -> Result<ExitCode> {
    let request = HistoryRequest {
        no_redact: args.redact.no_redact,
        since: args.since.map(|t| t.to_rfc3339()),
        until: args.until.map(|t| t.to_rfc3339()),
        status: args.status,
        command: args.command,
        tags: args.tags.into_iter().collect(),
        limit: Some(args.limit),
    };
    ops::history(&args.output.endpoint.resolve()?, &request, args.output.json)
}

fn show(args: ShowArgs) -> Result<ExitCode> {
    let request = ShowRequest {
        no_redact: args.redact.no_redact,
        id: args.id,
        offset: Some(args.offset),
        limit: Some(args.limit),
        max_bytes: None,
    };
    let style = if args.output.json {
        ops::ShowStyle::Json
    } else if args.raw {
        ops::ShowStyle::Raw
    } else {
        ops::ShowStyle::Page
    };
    ops::show(&args.output.endpoint.resolve()?, &request, style)
}

fn grep(args: GrepArgs) -> Result<ExitCode> {
    let request = GrepRequest {
        no_redact: args.redact.no_redact,
        id: args.id,
        pattern: args.pattern,
        ignore_case: args.ignore_case,
        context: args.context,
        max_count: Some(args.max_count),
    };
    ops::grep(&args.output.endpoint.resolve()?, &request, args.output.json)
}

fn stats(args: StatsArgs) -> Result<ExitCode> {
    let tables = ops::TokenTables {
        top: args.top.map(usize::from),
        days: args.days,
    };
    ops::stats(&args.output.endpoint.resolve()?, args.output.json, tables)
}

fn purge(args: PurgeArgs) -> Result<ExitCode> {
    let request = PurgeRequest {
        older_than_ms: args
            .older_than
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        dry_run: args.dry_run,
    };
    ops::purge(&args.output.endpoint.resolve()?, &request, args.output.json)
}

fn daemon(args: DaemonArgs) -> Result<ExitCode> {
    init_logging();
    let endpoint = args.endpoint.resolve()?;
    crate::daemon::run(crate::daemon::DaemonConfig {
        socket: endpoint.socket,
        data_dir: endpoint.data_dir,
        idle_exit: args.idle_exit,
        default_timeout: args.default_timeout,
        kill_grace: args.kill_grace,
        policy: PurgePolicy {
            retention: args.retention,
            max_disk: args.max_disk,
            ..PurgePolicy::default()
        },
        max_spill: args.max_spill,
        client_timeout: args.client_timeout,
        redactor: redactor(args.no_redact, &args.redact)?,
        report_start: args.report_start,
        containment: crate::supervisor::cgroup::Containment {
            no_cgroup: args.no_cgroup,
            defaults: crate::supervisor::limits::Resources {
                memory: args.memory,
                pids: args.pids,
                cpu: args.cpu,
            },
        },
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The redaction rules a daemon or a local command applies: none with `--no-redact`, else the
/// built-in ones and the user's.
fn redactor(off: bool, extra: &[String]) -> Result<Option<Arc<Redactor>>> {
    if off {
        return Ok(None);
    }
    Ok(Some(Arc::new(Redactor::with_extra(extra)?)))
}

/// Logs to stderr; `SPILLWAY_LOG` takes a `tracing` filter (default `info`).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SPILLWAY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(io::stderr().is_terminal())
        .with_writer(|| LogWriter)
        .init();
}

/// Standard error for the logs, losing what cannot be written. `tracing-subscriber` reports a
/// failed write with `eprintln!`, which panics when standard error itself cannot be written:
/// a daemon whose log was on a full disk died at its first log line.
struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let _ = io::stderr().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let _ = io::stderr().flush();
        Ok(())
    }
}

/// Records a `truncate` spill in the index, so history lists it and the purge keeps it for the
/// retention period instead of sweeping it up as an orphan.
/// Returns the run's id; its tokens are counted later ([`count_tokens_later`]).
fn register_truncated(
    root: &std::path::Path,
    spill: &str,
    preview: &Preview,
    started_at: DateTime<Utc>,
) -> Result<RunId> {
    let mut index = Index::open(&root.join(INDEX_FILE))?;
    let id = loop {
        let id = RunId::generate();
        let run = NewRun {
            id: id.clone(),
            argv: None,
            shell: Some("spillway truncate".into()),
            cwd: std::env::current_dir()
                .map(|d| d.to_string_lossy().into_owned())
                .unwrap_or_default(),
            tags: [("source".to_string(), "truncate".to_string())].into(),
            started_at,
            spill_path: Some(spill.to_string()),
            pid: None,
            owner_pid: std::process::id(),
        };
        if index.insert_run(&run)? {
            break id;
        }
    };
    let spill_bytes = std::fs::metadata(spill).map_or(0, |m| m.len());
    index.finish_run(
        &id,
        &RunEnd {
            ended_at: Utc::now(),
            status: RunStatus::Exited,
            exit_code: None,
            signal: None,
            total_lines: preview.total_lines,
            total_bytes: preview.total_bytes,
            truncated: preview.truncated,
            spill_bytes,
            spill_complete: spill_bytes == preview.total_bytes,
            spill_capped_at_line: preview.spill_capped.map(|cap| cap.line),
            tokens: None,
        },
    )?;
    Ok(id)
}
