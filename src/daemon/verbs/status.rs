//! `status`: which daemon answers (its pid, version, socket, data directory, uptime) and what
//! it is doing.

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::protocol::{DaemonStatus, Event, PROTOCOL_VERSION};

use crate::daemon::client::{ClientWriter, Session, send};
use crate::daemon::state::Daemon;
use crate::protocol::time::wire_time;

/// Answers `status` with [`status`]'s event.
pub(in crate::daemon) async fn apply(
    _request: (),
    daemon: &Arc<Daemon>,
    write: &mut ClientWriter,
    _session: Session<'_>,
) -> io::Result<()> {
    send(write, &status(daemon)).await
}

fn status(daemon: &Daemon) -> Event {
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
