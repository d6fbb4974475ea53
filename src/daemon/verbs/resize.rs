//! `resize`: a running command's terminal's new size.

use std::io;
use std::sync::Arc;

use crate::protocol::{ErrorCode, ErrorEvent, Event, ResizeRequest, ResizedEvent};
use crate::supervisor::live::SendError;

use crate::daemon::client::{ClientWriter, Session, reply};
use crate::daemon::errors::{error, internal};
use crate::daemon::state::Daemon;

/// Answers `resize` with [`resize`]'s event, or the error that stood in its way.
pub(in crate::daemon) async fn apply(
    request: ResizeRequest,
    daemon: &Arc<Daemon>,
    write: &mut ClientWriter,
    _session: Session<'_>,
) -> io::Result<()> {
    reply(write, resize(request, daemon).await).await
}

/// `resize`: gives a running command's terminal a new size (the kernel sends it SIGWINCH).
async fn resize(request: ResizeRequest, daemon: &Daemon) -> Result<Event, ErrorEvent> {
    if request.cols == 0 || request.rows == 0 {
        return Err(error(
            ErrorCode::BadRequest,
            "cols and rows must be at least 1".into(),
        ));
    }
    let entry = daemon.running_run(&request.id, "be resized").await?;
    let live = Arc::clone(&entry.live);
    let (cols, rows, tty) = (request.cols, request.rows, entry.tty);
    let resized = tokio::task::spawn_blocking(move || live.resize(cols, rows, tty))
        .await
        .map_err(|e| internal(format!("resize failed: {e}")))?;
    let id = &entry.id;
    match resized {
        Ok(()) => Ok(Event::Resized(ResizedEvent {
            id: id.clone(),
            cols,
            rows,
        })),
        Err(SendError::NoTerminal) => Err(error(
            ErrorCode::NoInput,
            format!("run {id} runs without a terminal: it has no size"),
        )),
        Err(SendError::Ended) => Err(error(
            ErrorCode::NotRunning,
            format!("run {id} has ended: it cannot be resized"),
        )),
        Err(SendError::Input(e)) => Err(internal(format!("run {id}: {e}"))),
    }
}
