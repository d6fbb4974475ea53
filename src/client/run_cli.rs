//! `spillway run` on the command line: its flags, the request they make, and the run through
//! the daemon (or, for an agent host's shell tool, through [`crate::client::host_run`]), printed
//! as a preview, live at a terminal, or as JSON.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;

use crate::client::Connection;
use crate::client::args::{
    CompactArg, EndpointArgs, HighlightArgs, LimitArgs, RedactFlag, ResourceArgs, UntilArgs,
    parse_duration, parse_key_value, parse_spill_cap,
};
use crate::client::exit::print_exit;
use crate::client::interrupt::{self, Forwarder, RunEvents};
use crate::client::live_cli::{self, LiveRunArgs};
use crate::client::run_request::{self, ToRun};
use crate::client::stdin;
use crate::protocol::{Direction, Event, Request, RunRequest};

pub(crate) mod plain;

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    redact: RedactFlag,
    #[command(flatten)]
    limits: LimitArgs,
    /// Cap on this run's spill file (e.g. 100MiB) [default: the daemon's --max-spill].
    #[arg(long, value_name = "SIZE", value_parser = parse_spill_cap)]
    max_spill: Option<u64>,
    #[command(flatten)]
    highlights: HighlightArgs,
    #[command(flatten)]
    compact: CompactArg,
    /// Also hold the preview to this many model tokens (o200k tokenizer).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_tokens: Option<u64>,
    /// Which part of a long output to keep.
    #[arg(long, value_enum, default_value_t)]
    direction: Direction,
    /// Kill the command's process group after this long (e.g. 90s, 10m, 2h); 0: never, not
    /// even after the daemon's --default-timeout.
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
    /// Terminal width [default: this terminal's when the output is shown live on one, else 200].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    cols: Option<u16>,
    /// Terminal height [default: this terminal's when the output is shown live on one, else 50].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
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
    /// Run this shell command line with `sh -c` instead of CMD (sh, not bash: agent hooks and
    /// MCP runs use `bash -c`; for bash syntax give `-- bash -c 'COMMAND'`).
    #[arg(
        short = 'c',
        long = "shell",
        value_name = "COMMAND",
        conflicts_with = "command"
    )]
    shell: Option<String>,
    #[command(flatten)]
    endpoint: EndpointArgs,
    /// Run for an agent host's shell tool (what `spillway hook` writes): the preview fits
    /// under that host's own output cap, no exit line is added (the host states the exit
    /// code), and when the daemon cannot be reached (the host's sandbox) the command runs in
    /// this process instead.
    #[arg(long, value_enum, value_name = "HOST", conflicts_with_all = ["json", "follow", "yield_after", "until", "until_port"])]
    host: Option<crate::client::hook::Host>,
    /// The command and its arguments (after `--`).
    #[arg(
        value_name = "CMD",
        trailing_var_arg = true,
        required_unless_present = "shell"
    )]
    command: Vec<String>,
}

/// `spillway run`.
pub fn run(args: RunArgs) -> Result<ExitCode> {
    let endpoint = args.endpoint.resolve()?;
    let command = match args.shell {
        Some(shell) => ToRun::Shell(shell),
        None => ToRun::Argv(args.command),
    };
    let begun = run_request::here(command, args.cwd.as_deref())
        .context("cannot determine the working directory")?;
    let live = args.live.at_terminal(args.json, args.until.is_set());
    let stdin = stdin::to_pass();
    // A person watching the run: the command gets this terminal's size, and its changes.
    let watched = live.follow && !args.no_tty && args.cols.is_none() && args.rows.is_none();
    let size = watched.then(interrupt::terminal_size).flatten();
    let request = RunRequest {
        no_redact: args.redact.no_redact,
        env: args.env.into_iter().collect(),
        max_lines: Some(args.limits.max_lines),
        max_bytes: Some(args.limits.max_bytes),
        direction: Some(args.direction),
        // 0 stays 0: no timeout (a sub-millisecond one is rounded up to 1 ms).
        timeout_ms: args.timeout.map(|t| match t.as_millis() {
            0 if t.is_zero() => 0,
            ms => u64::try_from(ms).unwrap_or(u64::MAX).max(1),
        }),
        tags: args.tags.into_iter().collect(),
        tty: Some(!args.no_tty),
        cols: args.cols.or(size.map(|(cols, _)| cols)),
        rows: args.rows.or(size.map(|(_, rows)| rows)),
        term: args.term,
        raw: Some(args.raw),
        max_tokens: args.max_tokens,
        max_spill: args.max_spill,
        highlight: args.highlights.extra.clone(),
        no_highlights: args.highlights.no_highlights.then_some(true),
        // Sent only when off, so a request to an older daemon stays as it was.
        compact: (!args.compact.on()).then_some(false),
        yield_ms: args.live.yield_ms(),
        kill_on_disconnect: live.kill_on_disconnect.then_some(true),
        stream: live.stream(args.json),
        until: args.until.until.clone(),
        until_port: args.until.until_port,
        memory: args.resources.memory,
        pids: args.resources.pids,
        cpu: args.resources.cpu,
        stdin_fd: stdin.is_some(),
        ..begun
    };
    args.resources
        .resources()
        .check()
        .map_err(anyhow::Error::msg)?;
    if let Some(host) = args.host {
        // For a host's shell tool: no live output, no terminal size, and the empty standard
        // input `--no-tty` documents (the host's own stdin is not the command's).
        let request = RunRequest {
            stdin_fd: false,
            stream: None,
            cols: args.cols,
            rows: args.rows,
            kill_on_disconnect: args.live.kill_on_disconnect.then_some(true),
            ..request
        };
        return crate::client::host_run::run(host, request, &endpoint);
    }
    let mut connection = Connection::open(&endpoint)?;
    let forwarder = Forwarder::start(&endpoint, size.is_some());
    let request = Request::Run(Box::new(request));
    match stdin {
        Some(fd) => connection.send_passing(&request, fd)?,
        None => connection.send(&request)?,
    }
    let mut events = RunEvents::new(connection, forwarder);
    if live.is_live() || args.until.is_set() {
        return live_cli::finish_run(&mut events, &live, args.json);
    }
    loop {
        match events.next_event()? {
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
