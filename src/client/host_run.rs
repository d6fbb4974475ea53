//! A run on behalf of an agent host (`spillway run --host HOST`, and Claude Code's shell
//! prefix): the host must see nothing change but the output its model reads.
//!
//! - The preview fits under the host's own cap ([`crate::client::hook::budget`]), so the host
//!   never cuts it again.
//! - Nothing is added that the host already says: no `[spillway: ... exited with code N]` line
//!   (the host reports the exit code the command gave, which is passed on).
//! - spillway fails open for execution: when the daemon cannot be reached (an agent host's
//!   sandbox refuses Unix sockets) or refuses the run before starting it, the command runs in
//!   this process instead ([`crate::client::local_run`]), with the same preview. A caller that
//!   is itself inside a sandbox (a seccomp filter, `no_new_privs`, or a host's sandbox marker)
//!   never asks the daemon, which runs outside every sandbox: its command runs here, where the
//!   sandbox holds it.

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::Result;

use crate::client::connection::{Connection, Endpoint};
use crate::client::exit::exit_code;
use crate::client::hook::Host;
use crate::client::hook::budget;
use crate::client::live_head;
use crate::client::local_run::{self, LocalRun};
use crate::engine::capture::Limits;
use crate::protocol::{Event, Request, RunRequest, StreamMode};
use crate::supervisor::child_env;

/// Environment variables the hosts set inside their sandboxes.
const SANDBOX_MARKERS: [&str; 2] = ["SANDBOX_RUNTIME", "CODEX_SANDBOX"];

/// Runs `request` for `host` and prints its preview; the exit code is the command's.
pub(crate) fn run(host: Host, mut request: RunRequest, endpoint: &Endpoint) -> Result<ExitCode> {
    let asked = (
        request.max_lines.unwrap_or(u64::MAX),
        request.max_bytes.unwrap_or(u64::MAX),
    );
    let budget = budget::for_host(host, |name| std::env::var(name).ok()).within(asked.0, asked.1);
    request.max_lines = Some(budget.max_lines);
    request.max_bytes = Some(budget.max_bytes);
    // A daemon that could not be reached, or refused the run before starting it: run here.
    if !is_sandboxed()
        && let Ok(Some(code)) = through_daemon(host, &request, endpoint)
    {
        return Ok(code);
    }
    here(&request, endpoint)
}

/// The run through the daemon: Some(exit code) once the command has run, None when it was
/// refused before it started (then it may run here instead; never twice).
///
/// For Claude Code, which shows the model what a call has printed so far when it moves the
/// call to the background at its timeout, the output's first lines are printed as they come
/// ([`live_head`]).
fn through_daemon(
    host: Host,
    request: &RunRequest,
    endpoint: &Endpoint,
) -> Result<Option<ExitCode>> {
    let mut request = request.clone();
    let mut head = None;
    if host == Host::ClaudeCode
        && let (Some(lines), Some(bytes)) = (request.max_lines, request.max_bytes)
    {
        let (live, lines, bytes) = live_head::split(lines, bytes);
        request.max_lines = Some(lines);
        request.max_bytes = Some(bytes);
        request.stream = Some(StreamMode::Text);
        // Enough for the head to see the first line it has no room for; no more.
        request.stream_max_bytes = Some(live.max_bytes() + 1);
        head = Some(live);
    }
    let mut connection = Connection::open(endpoint)?;
    connection.send(&Request::Run(Box::new(request)))?;
    let mut started = false;
    loop {
        match connection.next_event() {
            Ok(Event::Started(_)) => started = true,
            Ok(Event::Output(output)) => {
                if let Some(head) = &mut head {
                    head.take(&output.text, &mut io::stdout().lock())?;
                }
            }
            Ok(Event::Exit(exit)) => {
                let content = &exit.preview.content;
                match &head {
                    Some(head) => print(&head.rest_of(content))?,
                    None => print(content)?,
                }
                return Ok(Some(ExitCode::from(exit_code(&exit))));
            }
            Ok(Event::Error(error)) if !started => {
                tracing::debug!(message = %error.message, "the daemon refused a host run");
                return Ok(None);
            }
            Ok(Event::Error(error)) => {
                let _ = writeln!(io::stderr(), "spillway: error: {}", error.message);
                return Ok(Some(ExitCode::from(crate::client::exit::EXIT_FAILURE)));
            }
            Ok(_) => continue,
            Err(e) if !started => return Err(e),
            Err(e) => {
                let _ = writeln!(io::stderr(), "spillway: error: {e:#}");
                return Ok(Some(ExitCode::from(crate::client::exit::EXIT_FAILURE)));
            }
        }
    }
}

/// The run in this process.
fn here(request: &RunRequest, endpoint: &Endpoint) -> Result<ExitCode> {
    let argv = match (&request.argv, &request.shell) {
        (Some(argv), _) => argv.clone(),
        (None, Some(line)) => vec!["sh".into(), "-c".into(), line.clone()],
        (None, None) => anyhow::bail!("no command to run"),
    };
    let limits = Limits::new(
        request.max_lines.unwrap_or(u64::MAX),
        request.max_bytes.unwrap_or(u64::MAX),
    )?;
    if let Some(cwd) = &request.cwd {
        std::env::set_current_dir(cwd)?;
    }
    let base = request
        .base_env
        .clone()
        .unwrap_or_else(|| std::env::vars().collect());
    let env = child_env(base, request.pager_safe.unwrap_or(true), None, &request.env);
    let outcome = local_run::run(&LocalRun {
        argv: &argv,
        env,
        limits,
        max_tokens: request
            .max_tokens
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        compact: request.compact.unwrap_or(true),
        data_dir: &endpoint.data_dir,
        redact: !request.no_redact,
    })?;
    print(&outcome.preview.content)?;
    Ok(ExitCode::from(outcome.exit_code))
}

fn print(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Whether this process runs inside a sandbox the daemon is outside of: one of the hosts'
/// markers is set, or the kernel says a seccomp filter or `no_new_privs` holds us (both are
/// inherited by everything a sandboxed shell starts, and neither can be dropped).
pub(crate) fn is_sandboxed() -> bool {
    if SANDBOX_MARKERS
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()))
    {
        return true;
    }
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status.lines().any(|line| {
        let mut fields = line.split_whitespace();
        match (fields.next(), fields.next()) {
            (Some("NoNewPrivs:"), Some(value)) => value != "0",
            (Some("Seccomp:"), Some(value)) => value != "0",
            _ => false,
        }
    })
}
