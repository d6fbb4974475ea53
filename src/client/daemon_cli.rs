//! `spillway daemon status|stop|restart`: the daemon in view. Each asks the daemon that
//! serves the socket (and data directory) this client would use, and never starts one just
//! to answer (but `restart`, whose job it is).

use std::io::{self, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use clap::Subcommand;

use crate::client::args::OutputArgs;
use crate::client::ops::print_json;
use crate::client::words::cli::{daemon_status, daemon_stopped, no_daemon, no_daemon_to_stop};
use crate::client::{Connection, Endpoint};
use crate::protocol::{DaemonStatus, Event, Request};

/// Exit code of `daemon status` when no daemon answers (as `systemctl status` uses).
const EXIT_NOT_RUNNING: u8 = 3;

/// How long `stop` waits for the daemon to exit: its runs' kill grace, twice, and slack.
const STOP_PATIENCE: Duration = Duration::from_secs(60);

#[derive(Debug, Subcommand)]
pub(crate) enum DaemonAction {
    /// Whether a daemon answers, and which: pid, version, socket, data directory, uptime,
    /// runs in flight. Exit code 3 when none runs.
    Status(OutputArgs),
    /// Stop the daemon as SIGTERM does: its runs are stopped and their clients told.
    Stop(OutputArgs),
    /// Stop the daemon, then start one of this client's version (as a command would, exiting
    /// after 15 minutes idle). A daemon under systemd: `systemctl --user restart spillway`.
    Restart(OutputArgs),
}

pub(crate) fn act(action: DaemonAction) -> Result<ExitCode> {
    match action {
        DaemonAction::Status(output) => status(&output.endpoint.resolve()?, output.json),
        DaemonAction::Stop(output) => {
            stop(&output.endpoint.resolve()?, output.json)?;
            Ok(ExitCode::SUCCESS)
        }
        DaemonAction::Restart(output) => {
            let endpoint = output.endpoint.resolve()?;
            stop(&endpoint, output.json)?;
            // Opening a connection starts a daemon of this build when none answers.
            drop(Connection::open(&endpoint)?);
            status(&endpoint, output.json)
        }
    }
}

/// The daemon's status, if one answers.
pub(crate) fn ask_status(endpoint: &Endpoint) -> Result<Option<DaemonStatus>> {
    let Some(mut connection) = Connection::existing(endpoint)? else {
        return Ok(None);
    };
    connection.send(&Request::Status)?;
    match connection.next_event()? {
        Event::Status(status) => Ok(Some(status)),
        Event::Error(error) => bail!(
            "the daemon at {} cannot say its status ({}): it may be older than this client",
            endpoint.socket.display(),
            error.message
        ),
        other => bail!(
            "unexpected answer from the daemon: {}",
            other.to_line().trim_end()
        ),
    }
}

fn status(endpoint: &Endpoint, json: bool) -> Result<ExitCode> {
    let Some(status) = ask_status(endpoint)? else {
        if json {
            println!("null");
        } else {
            println!("{}", no_daemon(&endpoint.socket, &endpoint.data_dir));
        }
        return Ok(ExitCode::from(EXIT_NOT_RUNNING));
    };
    if json {
        return print_json(&Event::Status(status));
    }
    write!(io::stdout().lock(), "{}", daemon_status(&status))?;
    Ok(ExitCode::SUCCESS)
}

/// Asks the daemon to shut down and waits for its process to go.
fn stop(endpoint: &Endpoint, json: bool) -> Result<()> {
    let Some(mut connection) = Connection::existing(endpoint)? else {
        if !json {
            eprintln!("{}", no_daemon_to_stop(&endpoint.socket));
        }
        return Ok(());
    };
    connection.send(&Request::Shutdown)?;
    let stopping = match connection.next_event()? {
        Event::Stopping(stopping) => stopping,
        Event::Error(error) => bail!(
            "the daemon at {} refused to stop ({}): it may be older than this client; stop it \
             with SIGTERM",
            endpoint.socket.display(),
            error.message
        ),
        other => bail!(
            "unexpected answer from the daemon: {}",
            other.to_line().trim_end()
        ),
    };
    drop(connection);
    let deadline = Instant::now() + STOP_PATIENCE;
    while std::path::Path::new(&format!("/proc/{}", stopping.pid)).exists()
        && !is_zombie(stopping.pid)
    {
        if Instant::now() >= deadline {
            bail!(
                "the daemon (pid {}) has not exited after {}s",
                stopping.pid,
                STOP_PATIENCE.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if !json {
        eprintln!("{}", daemon_stopped(stopping.pid, stopping.runs));
    }
    Ok(())
}

/// A daemon this client started and has not reaped yet is a zombie: it has exited.
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(|s| s == "Z"))
        })
        .unwrap_or(false)
}
