//! `ping`: liveness, and which protocol and version answer.

use std::io;
use std::sync::Arc;

use crate::protocol::{Event, PROTOCOL_VERSION, PongEvent};

use crate::daemon::client::{ClientWriter, Session, send};
use crate::daemon::state::Daemon;

/// Answers `ping` with `pong`.
pub(in crate::daemon) async fn apply(
    _request: (),
    _daemon: &Arc<Daemon>,
    write: &mut ClientWriter,
    _session: Session<'_>,
) -> io::Result<()> {
    let pong = Event::Pong(PongEvent {
        protocol: PROTOCOL_VERSION,
        version: env!("CARGO_PKG_VERSION").to_string(),
        pid: std::process::id(),
    });
    send(write, &pong).await
}
