//! How a finished run is shown on the command line, and the exit code `spillway run` passes
//! on for it (as `timeout(1)` does: 124 for a timeout, 128+N for a signal).

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::Result;

use crate::client::words::cli::status_line;
use crate::protocol::{Event, ExitEvent, RunStatus};

/// Exit code for spillway's own failures (bad flags, unreadable input), as `timeout(1)` uses.
pub(crate) const EXIT_FAILURE: u8 = 125;

/// Exit code of a client that gave up on its run after being interrupted (128 + SIGINT).
pub(crate) const EXIT_INTERRUPTED: u8 = 130;

/// Exit code of a run that timed out, as `timeout(1)` uses.
pub(crate) const EXIT_TIMED_OUT: u8 = 124;

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

/// The exit code `spillway run` passes on, as `timeout(1)` does.
pub(crate) fn exit_code(exit: &ExitEvent) -> u8 {
    match (exit.status, exit.exit_code, exit.signal) {
        (RunStatus::TimedOut, _, _) => EXIT_TIMED_OUT,
        (_, _, Some(signal)) => 128u8.saturating_add(u8::try_from(signal).unwrap_or(127)),
        (_, Some(code), None) => u8::try_from(code & 0xff).unwrap_or(1),
        (_, None, None) => EXIT_FAILURE,
    }
}
