//! The command line for live runs: `run --yield` and `run --follow`, and `wait`, `send`,
//! `follow`, `ps` and `kill`. Each talks to the daemon through the socket, like the ops
//! commands, and maps a run's end to an exit code as `spillway run` does. The output that
//! `run --follow` and `follow` stream is printed by `live_stream.rs`.

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::client::Connection;
use crate::client::args::{OutputArgs, RedactFlag, parse_duration};
use crate::client::calls::{self, RunAnswer};
use crate::client::exit::{exit_code, print_exit};
use crate::client::interrupt::RunEvents;
use crate::client::live_stream::{echo_json, stream};
use crate::client::ops::print_json;
use crate::client::words::cli::{end_line, fell_behind, running_line};
use crate::client::words::tables::ps_table;
use crate::protocol::{
    Event, FollowRequest, KillRequest, KillSignal, PsRequest, Request, RunId, RunningEvent,
    SendRequest, StreamMode, WaitRequest,
};

/// Exit code of `run --yield` and `wait` when the command is still running (`EX_TEMPFAIL`:
/// try again).
pub const EXIT_STILL_RUNNING: u8 = 75;

/// `spillway run`'s flags for live runs.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct LiveRunArgs {
    /// If the command has not exited after this long, print a preview of its output so far
    /// and return (exit code 75); it goes on (see `spillway wait`).
    #[arg(long = "yield", value_name = "DURATION", value_parser = parse_duration)]
    pub yield_after: Option<Duration>,
    /// Print the output live while the command runs (raw, with colours, on a terminal;
    /// the normalised text otherwise), then a summary. The default when standard output is
    /// a terminal (and neither --yield, --until nor --json is given).
    #[arg(long, conflicts_with = "yield_after")]
    pub follow: bool,
    /// Print only the preview when the command ends, even at a terminal (as agents read it).
    #[arg(long, conflicts_with = "follow")]
    pub no_follow: bool,
    /// Stop the command (SIGHUP to its process group, then SIGKILL) if this client goes away
    /// before it ends, e.g. on Ctrl-C.
    #[arg(long, conflicts_with = "yield_after")]
    pub kill_on_disconnect: bool,
}

impl LiveRunArgs {
    /// `yield_ms`, for the request.
    pub fn yield_ms(&self) -> Option<u64> {
        self.yield_after
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1))
    }

    /// How to stream, for the request: raw bytes only to a terminal, and not as JSON.
    pub fn stream(&self, json: bool) -> Option<StreamMode> {
        self.follow.then(|| {
            if !json && io::stdout().is_terminal() {
                StreamMode::Raw
            } else {
                StreamMode::Text
            }
        })
    }

    /// These flags with `follow` on when the output goes to a terminal and nothing asks for
    /// a single answer: a person watching a build sees it as it goes.
    pub fn at_terminal(self, json: bool, until: bool) -> LiveRunArgs {
        let single = json || until || self.no_follow || self.yield_after.is_some();
        LiveRunArgs {
            follow: self.follow || (!single && io::stdout().is_terminal()),
            ..self
        }
    }

    /// Whether `run` must read more than `started` and `exit`.
    pub fn is_live(&self) -> bool {
        self.follow || self.yield_after.is_some()
    }
}

#[derive(Debug, Args)]
pub struct WaitArgs {
    #[command(flatten)]
    redact: RedactFlag,
    /// The run's id.
    id: RunId,
    /// Return a preview if the command is still running after this long (exit code 75);
    /// without it, wait for the end.
    #[arg(long = "yield", value_name = "DURATION", value_parser = parse_duration)]
    yield_after: Option<Duration>,
    /// Preview only the output since the last preview this caller was given.
    #[arg(long)]
    new: bool,
    /// Whose previews --new counts [default: one name shared by callers that give none].
    #[arg(long, env = "SPILLWAY_CALLER", value_name = "NAME")]
    caller: Option<String>,
    #[command(flatten)]
    until: WaitUntilArgs,
    /// Most lines of output to show, 1 to 1000000, instead of the run's own limit (the
    /// preview is then made from the spill file).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=crate::engine::capture::MAX_MAX_LINES as u64))]
    max_lines: Option<u64>,
    /// Most bytes of output to show, 1 to 67108864 (64 MiB), instead of the run's own limit.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=crate::engine::capture::MAX_MAX_BYTES as u64))]
    max_bytes: Option<u64>,
    #[command(flatten)]
    output: OutputArgs,
}

/// `wait`'s readiness flags (as `run`'s, without `--follow` to conflict with).
#[derive(Debug, Clone, Args)]
pub struct WaitUntilArgs {
    /// Return as soon as a line of output matches this regular expression (with --new, a
    /// line not shown before); exit code 75, the command goes on.
    #[arg(long, value_name = "REGEX")]
    until: Option<String>,
    /// Return as soon as this TCP port accepts a connection on localhost; exit code 75.
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    until_port: Option<u16>,
}

#[derive(Debug, Args)]
pub struct SendArgs {
    /// The run's id.
    id: RunId,
    /// The text to type, then Enter (unless --no-newline).
    #[arg(conflicts_with = "stdin")]
    text: Option<String>,
    /// Type the text without pressing Enter.
    #[arg(long)]
    no_newline: bool,
    /// Then end the input (the terminal's EOF character, Ctrl-D).
    #[arg(long)]
    eof: bool,
    /// Read the text from standard input (to its end) instead of TEXT.
    #[arg(long)]
    stdin: bool,
    /// How long the command may take to read it.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    timeout: Duration,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct FollowArgs {
    #[command(flatten)]
    redact: RedactFlag,
    /// The run's id.
    id: RunId,
    /// Start at this line (1-based) instead of the first.
    #[arg(long, value_name = "N")]
    from_line: Option<u64>,
    /// A running command's output as it writes it (colours, progress bars) after the text so
    /// far, even when stdout is not a terminal (at a terminal it is the default).
    #[arg(long)]
    raw: bool,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct PsArgs {
    /// Only runs with this tag (repeatable).
    #[arg(long = "tag", value_name = "K=V", value_parser = crate::client::args::parse_key_value)]
    tags: Vec<(String, String)>,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct KillArgs {
    #[command(flatten)]
    redact: RedactFlag,
    /// The run's id.
    id: RunId,
    /// The signal for the whole process group: a name (TERM, INT, KILL, HUP, ...) or a number.
    /// SIGKILL follows after the daemon's kill grace if the command is still running.
    #[arg(long, short = 's', value_name = "SIGNAL", default_value = "TERM")]
    signal: KillSignal,
    #[command(flatten)]
    output: OutputArgs,
}

/// Reads a live `run`'s answer after the request was sent: a `running` preview, or the output
/// streamed and then the exit.
pub fn finish_run(connection: &mut RunEvents, live: &LiveRunArgs, json: bool) -> Result<ExitCode> {
    if live.follow {
        return stream(connection, live.stream(json) == Some(StreamMode::Raw), json);
    }
    loop {
        match connection.next_event()? {
            Event::Started(_) => {}
            Event::Running(running) => return print_running(&running, json),
            Event::Exit(exit) => return print_exit(&exit, json),
            Event::Error(error) => {
                if json {
                    println!("{}", Event::Error(error.clone()).to_line().trim_end());
                }
                bail!("{}", error.message);
            }
            _ => {}
        }
    }
}

/// Prints a running command's preview and how to go on; exits 75.
fn print_running(running: &RunningEvent, json: bool) -> Result<ExitCode> {
    let mut out = io::stdout().lock();
    if json {
        serde_json::to_writer(&mut out, &Event::Running(Box::new(running.clone())))?;
        out.write_all(b"\n")?;
    } else {
        out.write_all(running.preview.content.as_bytes())?;
    }
    out.flush()?;
    if !json {
        eprintln!("{}", running_line(running));
    }
    Ok(ExitCode::from(EXIT_STILL_RUNNING))
}

pub fn wait(args: WaitArgs) -> Result<ExitCode> {
    let request = WaitRequest {
        no_redact: args.redact.no_redact,
        id: args.id,
        yield_ms: args
            .yield_after
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)),
        new: args.new,
        caller: args.caller,
        until: args.until.until,
        until_port: args.until.until_port,
        max_lines: args.max_lines,
        max_bytes: args.max_bytes,
    };
    let endpoint = args.output.endpoint.resolve_existing()?;
    match calls::wait(&endpoint, request)? {
        RunAnswer::Running(running) => print_running(&running, args.output.json),
        RunAnswer::Exit(exit) => print_exit(&exit, args.output.json),
    }
}

pub fn send(args: SendArgs) -> Result<ExitCode> {
    let (text, newline) = if args.stdin {
        let mut text = String::new();
        io::Read::read_to_string(&mut io::stdin(), &mut text)
            .context("reading the text from standard input")?;
        (text, !args.no_newline)
    } else {
        match args.text {
            Some(text) => (text, !args.no_newline),
            None => (String::new(), false),
        }
    };
    if text.is_empty() && !newline && !args.eof {
        bail!("nothing to send: give TEXT, --stdin or --eof");
    }
    let request = SendRequest {
        id: args.id,
        text,
        newline,
        eof: args.eof,
        timeout_ms: Some(
            u64::try_from(args.timeout.as_millis())
                .unwrap_or(u64::MAX)
                .max(1),
        ),
    };
    let sent = calls::send(&args.output.endpoint.resolve_existing()?, request)?;
    if args.output.json {
        return print_json(&Event::Sent(sent));
    }
    eprintln!("[spillway: sent {} bytes to run {}]", sent.bytes, sent.id);
    Ok(ExitCode::SUCCESS)
}

pub fn kill(args: KillArgs) -> Result<ExitCode> {
    let request = KillRequest {
        no_redact: args.redact.no_redact,
        id: args.id,
        signal: Some(args.signal),
    };
    let exit = calls::kill(&args.output.endpoint.resolve_existing()?, request)?;
    if args.output.json {
        return print_json(&Event::Exit(exit));
    }
    eprintln!("{}", end_line(&exit));
    Ok(ExitCode::SUCCESS)
}

pub fn follow(args: FollowArgs) -> Result<ExitCode> {
    let json = args.output.json;
    let request = FollowRequest {
        no_redact: args.redact.no_redact,
        id: args.id,
        from_line: args.from_line,
        raw: args.raw || (!json && io::stdout().is_terminal()),
    };
    let mut connection = Connection::open(&args.output.endpoint.resolve_existing()?)?;
    connection.send(&Request::Follow(request))?;
    let mut out = io::stdout().lock();
    let mut at_line_start = true;
    loop {
        let event = connection.next_event()?;
        if json {
            echo_json(&mut out, &event)?;
        }
        let text = match &event {
            Event::Output(output) => Some(output.text.as_str()),
            Event::Raw(raw) => Some(raw.data.as_str()),
            _ => None,
        };
        if let Some(text) = text.filter(|t| !t.is_empty() && !json) {
            out.write_all(text.as_bytes())?;
            out.flush()?;
            at_line_start = text.ends_with('\n');
        }
        match event {
            Event::Lagged(lagged) if !json => {
                let newline = if at_line_start { "" } else { "\n" };
                eprintln!("{newline}{}", fell_behind(lagged.line));
                at_line_start = true;
            }
            Event::Exit(exit) => {
                if !json {
                    eprintln!("{}", end_line(&exit));
                }
                return Ok(ExitCode::from(exit_code(&exit)));
            }
            Event::Error(error) => bail!("{}", error.message),
            _ => {}
        }
    }
}

pub fn ps(args: PsArgs) -> Result<ExitCode> {
    let request = PsRequest {
        tags: args.tags.into_iter().collect(),
    };
    let ps = calls::ps(&args.output.endpoint.resolve_existing()?, request)?;
    if args.output.json {
        return print_json(&Event::Ps(ps));
    }
    let mut out = io::stdout().lock();
    if ps.runs.is_empty() {
        writeln!(out, "no running commands")?;
    } else {
        writeln!(out, "{}", ps_table(&ps.runs))?;
    }
    Ok(ExitCode::SUCCESS)
}
