//! `shutdown`: stopping the daemon from a client, as SIGTERM does.

use std::io;
use std::sync::Arc;

use crate::protocol::{Event, StoppingEvent};

use crate::daemon::client::{ClientWriter, Session, send};
use crate::daemon::state::Daemon;

/// Answers `shutdown` with [`shut_down`]'s event.
pub(in crate::daemon) async fn apply(
    _request: (),
    daemon: &Arc<Daemon>,
    write: &mut ClientWriter,
    _session: Session<'_>,
) -> io::Result<()> {
    send(write, &shut_down(daemon)).await
}

/// Begins the shutdown SIGTERM begins: runs are stopped, their clients told, then the daemon
/// exits.
fn shut_down(daemon: &Daemon) -> Event {
    tracing::info!("shutdown requested by a client");
    let runs = daemon.runs_in_flight() as u64;
    let _ = daemon.stop.send(true);
    Event::Stopping(StoppingEvent {
        pid: std::process::id(),
        runs,
    })
}
