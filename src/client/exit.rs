//! How a finished run is shown on the command line, and the exit code `spillway run` passes
//! on for it (as `timeout(1)` does: 124 for a timeout, 128+N for a signal).

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::Result;

use crate::protocol::{Event, ExitEvent, Resource, RunStatus};

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
    let memory = exit
        .limits_hit
        .iter()
        .find(|h| h.resource == Resource::Memory);
    let how = match memory {
        Some(hit) => format!(
            "{how}: it reached its memory limit of {} and the kernel's OOM killer ended {}",
            crate::words::human_bytes(hit.limit),
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
