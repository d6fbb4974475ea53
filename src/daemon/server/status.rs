//! `status` and `shutdown`: which daemon answers (its pid, version, socket, data directory,
//! uptime) and what it is doing, and stopping it from a client as SIGTERM does.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Instant;

use chrono::{DateTime, Utc};

use crate::protocol::{DaemonStatus, Event, PROTOCOL_VERSION, StoppingEvent};

use super::Daemon;
use crate::protocol::time::wire_time;

/// What does not change while the daemon lives.
pub(super) struct Identity {
    socket: PathBuf,
    started_at: DateTime<Utc>,
    started: Instant,
}

impl Identity {
    pub(super) fn now(socket: PathBuf) -> Identity {
        Identity {
            socket,
            started_at: Utc::now(),
            started: Instant::now(),
        }
    }
}

pub(super) fn status(daemon: &Daemon) -> Event {
    let identity = &daemon.identity;
    Event::Status(DaemonStatus {
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        protocol: PROTOCOL_VERSION,
        socket: identity.socket.to_string_lossy().into_owned(),
        data_dir: daemon.data_dir.root().to_string_lossy().into_owned(),
        started_at: wire_time(identity.started_at),
        uptime_ms: u64::try_from(identity.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        runs: daemon.runs_in_flight() as u64,
        clients: daemon.clients.load(Ordering::SeqCst) as u64,
    })
}

/// Begins the shutdown SIGTERM begins: runs are stopped, their clients told, then the daemon
/// exits.
pub(super) fn shut_down(daemon: &Daemon) -> Event {
    tracing::info!("shutdown requested by a client");
    let runs = daemon.runs_in_flight() as u64;
    let _ = daemon.stop.send(true);
    Event::Stopping(StoppingEvent {
        pid: std::process::id(),
        runs,
    })
}
