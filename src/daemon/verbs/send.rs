//! `send`: typing into a running command's terminal.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use crate::protocol::{ErrorCode, ErrorEvent, Event, SendRequest, SentEvent};
use crate::supervisor::input::{DEFAULT_SEND_TIMEOUT, InputError, Keys};
use crate::supervisor::live::SendError;

use crate::daemon::client::{ClientWriter, Session, reply};
use crate::daemon::errors::{error, internal};
use crate::daemon::state::Daemon;

/// Answers `send` with [`send_input`]'s event, or the error that stood in its way.
pub(in crate::daemon) async fn apply(
    request: SendRequest,
    daemon: &Arc<Daemon>,
    write: &mut ClientWriter,
    _session: Session<'_>,
) -> io::Result<()> {
    reply(write, send_input(request, daemon).await).await
}

/// `send`: types into a running command's terminal.
async fn send_input(request: SendRequest, daemon: &Daemon) -> Result<Event, ErrorEvent> {
    let entry = daemon.running_run(&request.id, "take input").await?;
    if !entry.tty {
        return Err(error(
            ErrorCode::NoInput,
            format!(
                "run {} runs without a terminal (tty false, --no-tty): its input is /dev/null \
                 and takes nothing",
                entry.id
            ),
        ));
    }
    if request.text.is_empty() && !request.newline && !request.eof {
        return Err(error(
            ErrorCode::BadRequest,
            "nothing to send: give text, newline or eof".into(),
        ));
    }
    let timeout = match request.timeout_ms {
        Some(0) => {
            return Err(error(
                ErrorCode::BadRequest,
                "timeout_ms must be at least 1".into(),
            ));
        }
        Some(ms) => Duration::from_millis(ms),
        None => DEFAULT_SEND_TIMEOUT,
    };
    let live = Arc::clone(&entry.live);
    let (text, newline, eof) = (request.text, request.newline, request.eof);
    let sent = tokio::task::spawn_blocking(move || {
        live.send(
            Keys {
                text: text.as_bytes(),
                enter: newline,
                eof,
                timeout,
                cancel: None,
            },
            true,
        )
    })
    .await
    .map_err(|e| internal(format!("send failed: {e}")))?;
    let id = &entry.id;
    match sent {
        Ok(bytes) => Ok(Event::Sent(SentEvent {
            id: id.clone(),
            bytes: bytes as u64,
        })),
        Err(SendError::NoTerminal) => Err(error(
            ErrorCode::NoInput,
            format!("run {id} has no terminal: it takes no input"),
        )),
        Err(SendError::Ended) => Err(error(
            ErrorCode::NotRunning,
            format!("run {id} has ended: it cannot take input"),
        )),
        Err(SendError::Input(e @ InputError::Blocked { .. })) => {
            Err(error(ErrorCode::InputBlocked, format!("run {id}: {e}")))
        }
        Err(SendError::Input(e @ InputError::NoEof)) => {
            Err(error(ErrorCode::BadRequest, format!("run {id}: {e}")))
        }
        Err(SendError::Input(e)) if entry.is_done() || entry.control.is_stopping() => Err(error(
            ErrorCode::NotRunning,
            format!("run {id} is ending: {e}"),
        )),
        Err(SendError::Input(e)) => Err(internal(format!("run {id}: {e}"))),
    }
}
