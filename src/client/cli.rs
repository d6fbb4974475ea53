//! The command-line edge: parses flags into validated settings, runs the engine, prints.
//!
//! Errors are reported here, once, with their context (`anyhow`); the library modules below
//! return typed errors. A closed stdout (`spillway truncate ... | head`) is not an error.

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use anyhow::Result;
use clap::{Args, Parser, Subcommand};

use crate::client::args::{
    EndpointArgs, OutputArgs, RedactFlag, parse_cores, parse_duration, parse_key_value,
    parse_limit_size, parse_size, parse_spill_cap, parse_when,
};
use crate::client::exit::EXIT_FAILURE;
use crate::client::live_cli;
use crate::client::local::{
    CountTokensArgs, ReadArgs, TruncateArgs, count_tokens, read_spill, truncate,
};
use crate::client::ops;
use crate::client::run_cli::{self, RunArgs};
use crate::engine::redact::Redactor;
use crate::protocol::{
    GrepRequest, HistoryRequest, PurgeRequest, RunId, ShowRequest, StatusFilter,
};
use crate::storage::index::{TOKEN_STATS_COMMANDS, TOKEN_STATS_DAYS};
use crate::storage::purge::PurgePolicy;
use crate::storage::read;

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
    /// Run the daemon in the foreground (logs on stderr; `SPILLWAY_LOG` sets the level), or
    /// see, stop or restart the one that serves (status, stop, restart).
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
    /// Delete old runs and their spills now (retention, quota, orphans), or one run by id.
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
    Init(crate::client::init::InitArgs),
    /// The hook an agent host runs before its shell tool: reads the host's JSON on stdin and
    /// answers with the command rewritten to run through `spillway run` (never fails).
    Hook(HookArgs),
    /// Print a completion script for bash, zsh or fish: `spillway completions bash >
    /// ~/.local/share/bash-completion/completions/spillway`.
    Completions(crate::client::docs_cli::CompletionsArgs),
    /// What runs, where the data goes, which daemon answers, and for each agent host whether
    /// spillway is wired in and active, and what it does with a sample command (writes
    /// nothing, starts nothing; exit code 1 when something needs fixing).
    Doctor(crate::client::doctor::DoctorArgs),
    /// Print the manual page (troff), or write every page into a directory (--dir):
    /// `spillway man | man -l -`.
    Man(crate::client::docs_cli::ManArgs),
    /// Counts a `truncate` run's tokens from the job on stdin and records them (internal:
    /// `truncate` starts it).
    #[command(hide = true)]
    CountTokens(CountTokensArgs),
}

#[derive(Debug, Args)]
struct HookArgs {
    /// The host whose hook JSON comes on stdin.
    #[arg(value_enum)]
    host: crate::client::hook::Host,
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
    status: Option<StatusFilter>,
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
    #[arg(long, value_name = "N", default_value_t = crate::storage::grep::DEFAULT_MAX_COUNT)]
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
    /// Delete this one finished run and its spill now (one whose output held a secret),
    /// instead of a purge pass.
    #[arg(conflicts_with = "older_than")]
    id: Option<RunId>,
    /// Delete finished runs older than this instead of the daemon's retention (e.g. 3d).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    older_than: Option<Duration>,
    /// Only say what would be deleted.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
struct DaemonArgs {
    #[command(subcommand)]
    action: Option<crate::client::daemon_cli::DaemonAction>,
    #[command(flatten)]
    endpoint: EndpointArgs,
    /// Exit after this long with no runs and no clients [default: never].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    idle_exit: Option<Duration>,
    /// Timeout for runs that do not set one [default: none; 0: none].
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
    /// `error: WHY` there once start-up is over (for `crate::client::connection`; not for people).
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

/// Runs the command line and turns the outcome into an exit code.
pub fn main() -> ExitCode {
    ignore_sigxfsz();
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(code) = crate::client::hook::prefix::main(argv.get(1..).unwrap_or_default()) {
        return code;
    }
    let cli = match parse(&argv) {
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
        Command::Run(args) => run_cli::run(*args),
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
        Command::Init(args) => crate::client::init::run(args),
        Command::Hook(args) => return crate::client::hook::main(args.host),
        Command::CountTokens(args) => count_tokens(args),
        Command::Completions(args) => crate::client::docs_cli::completions::<Cli>(&args),
        Command::Doctor(args) => crate::client::doctor::run(args),
        Command::Man(args) => crate::client::docs_cli::man::<Cli>(&args),
        Command::Mcp(args) => args
            .endpoint
            .resolve()
            .and_then(crate::client::mcp::serve_stdio)
            .map(|()| ExitCode::SUCCESS),
    };
    match outcome {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // Not eprintln!, which panics when standard error cannot be written (a daemon's
            // log on a full disk): the exit code still says what happened.
            let _ = writeln!(io::stderr(), "spillway: error: {}", error_text(&e));
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

/// Parses the command line (`argv`, the program's name first).
///
/// A `run` or a `hook`, which agents start for every shell command, is tried first on a
/// parser that holds only that subcommand's arguments: building every subcommand's took
/// 0.5 M of the 1.8 M instructions of a short run's client, and of the 1.5 M of a hook's. What
/// that parser does not accept (help, a mistake) is parsed again by the whole one, so help and
/// error messages are unchanged.
fn parse(argv: &[std::ffi::OsString]) -> Result<Cli, clap::Error> {
    use clap::FromArgMatches;
    if argv.get(1).is_some_and(|first| first == "run")
        && let Some(run) = run_cli::plain::read(&argv[2..])
    {
        return Ok(Cli {
            command: Command::Run(Box::new(run)),
        });
    }
    let alone = match argv.get(1).and_then(|first| first.to_str()) {
        Some("run") => Some(RunArgs::augment_args(clap::Command::new("run"))),
        Some("hook") => Some(HookArgs::augment_args(clap::Command::new("hook"))),
        _ => None,
    };
    if let Some(subcommand) = alone {
        let quick = clap::Command::new("spillway").subcommand(subcommand);
        if let Ok(cli) = quick
            .try_get_matches_from(argv)
            .and_then(|matches| Cli::from_arg_matches(&matches))
        {
            return Ok(cli);
        }
    }
    Cli::try_parse_from(argv)
}

/// A file-size limit (`ulimit -f`) would otherwise kill us with SIGXFSZ mid-spill; ignored, the
/// write fails with EFBIG instead and the preview is still given.
fn ignore_sigxfsz() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    // SAFETY: installing SIG_IGN runs no code in signal context.
    let _ = unsafe { signal(Signal::SIGXFSZ, SigHandler::SigIgn) };
}

/// An error and its causes on one line, as `{:#}` prints them, but each said once: an error
/// whose message already quotes its cause (`cannot create directory D: No such file or
/// directory (os error 2)`) is not followed by the cause again.
fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let said = cause.to_string();
        if text.contains(&said) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&said);
    }
    text
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

fn history(args: HistoryArgs) -> Result<ExitCode> {
    let request = HistoryRequest {
        no_redact: args.redact.no_redact,
        since: args.since,
        until: args.until,
        status: args.status,
        command: args.command,
        tags: args.tags.into_iter().collect(),
        limit: Some(args.limit),
    };
    ops::history(
        &args.output.endpoint.resolve_existing()?,
        &request,
        args.output.json,
    )
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
    ops::show(&args.output.endpoint.resolve_existing()?, &request, style)
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
    ops::grep(
        &args.output.endpoint.resolve_existing()?,
        &request,
        args.output.json,
    )
}

fn stats(args: StatsArgs) -> Result<ExitCode> {
    let tables = ops::TokenTables {
        top: args.top.map(usize::from),
        days: args.days,
    };
    ops::stats(
        &args.output.endpoint.resolve_existing()?,
        args.output.json,
        tables,
    )
}

fn purge(args: PurgeArgs) -> Result<ExitCode> {
    let request = PurgeRequest {
        older_than_ms: args
            .older_than
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        dry_run: args.dry_run,
        id: args.id,
    };
    ops::purge(
        &args.output.endpoint.resolve_existing()?,
        &request,
        args.output.json,
    )
}

fn daemon(args: DaemonArgs) -> Result<ExitCode> {
    if let Some(action) = args.action {
        return crate::client::daemon_cli::act(action);
    }
    init_logging();
    let endpoint = args.endpoint.resolve_own()?;
    crate::daemon::run(crate::daemon::DaemonConfig {
        socket: endpoint.socket,
        data_dir: endpoint.data_dir,
        idle_exit: args.idle_exit,
        default_timeout: args.default_timeout.filter(|t| !t.is_zero()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_that_quotes_its_cause_says_it_once() {
        let cause = io::Error::from_raw_os_error(2);
        let quoted = anyhow::Error::new(crate::storage::spill::SpillError::CreateDir {
            path: "/proc/nope".into(),
            source: cause,
        })
        .context("cannot use data directory /proc/nope");
        let text = error_text(&quoted);
        assert_eq!(text.matches("os error 2").count(), 1, "{text}");
        assert!(
            text.starts_with("cannot use data directory /proc/nope: cannot create"),
            "{text}"
        );
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(error_text(&plain), "outer: inner");
    }

    /// What `parse` makes of `words`, beside what the whole parser makes of them.
    fn both_parsers(words: &[&str]) -> (String, String) {
        let argv: Vec<std::ffi::OsString> = std::iter::once("spillway")
            .chain(words.iter().copied())
            .map(Into::into)
            .collect();
        let show = |parsed: Result<Cli, clap::Error>| match parsed {
            Ok(cli) => format!("{cli:?}"),
            Err(e) => format!("{:?}: {}", e.kind(), e.render()),
        };
        (show(parse(&argv)), show(Cli::try_parse_from(&argv)))
    }

    #[test]
    fn a_run_or_a_hook_parses_as_the_whole_parser_parses_it() {
        let lines: &[&[&str]] = &[
            &["run", "--", "true"],
            &["run", "true"],
            &[
                "run",
                "--no-tty",
                "--max-lines",
                "40",
                "--",
                "ls",
                "-h",
                "--help",
            ],
            &[
                "run",
                "--timeout",
                "90s",
                "--cwd",
                "/tmp",
                "--env",
                "A=1",
                "--tag",
                "s=x",
                "--",
                "make",
            ],
            &[
                "run",
                "--yield",
                "2s",
                "--max-bytes",
                "2048",
                "--max-tokens",
                "9",
                "cargo",
                "test",
            ],
            &[
                "run",
                "--compact",
                "off",
                "--direction",
                "head",
                "--no-redact",
                "--",
                "echo",
                "-n",
            ],
            &["run", "--json", "--", "sh", "-c", "exit 3"],
            &["ps"],
            &["hook", "codex"],
            &["hook", "claude-code"],
            &["run", "--help"],
            &["run", "-h"],
            &["run"],
            &["run", "--max-lines", "zero", "--", "true"],
            &["run", "--no-such-flag", "--", "true"],
            &["run", "--version"],
            &["--version"],
            &["help", "run"],
            &["hook"],
            &["hook", "nosuchhost"],
            &["hook", "--help"],
        ];
        for (i, words) in lines.iter().enumerate() {
            let (quick, whole) = both_parsers(words);
            assert_eq!(quick, whole, "{words:?}");
            assert_eq!(quick.starts_with("Cli {"), i < 10, "{words:?}: {quick}");
        }
    }
}
