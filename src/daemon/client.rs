//! A client as a verb sees it while it answers one request: the writer every event goes out
//! through (redacted, and taken by the client in time or the client is dropped), the read side
//! where a hang-up shows, the runs that die with the connection, and the descriptors that came
//! with the request.
//!
//! The verbs write through [`send`] only, so no answer can skip redaction ([`super::redaction`])
//! or the stall timeout; they know nothing of the connection loop that reads requests.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use crate::engine::redact::Redactor;
use crate::protocol::{ErrorEvent, Event};

use super::redaction;
use super::runs::RunEntry;

/// How often a connection with a request waiting in its buffer is checked for a hang-up.
const HANGUP_POLL: Duration = Duration::from_millis(200);

/// A client's side of the connection for events: each event must be taken whole within the
/// stall timeout, or the client is dropped. A client that stops reading then holds no task, no
/// memory beyond the event being sent, and no shutdown.
pub(super) struct ClientWriter {
    half: OwnedWriteHalf,
    stall: Duration,
    /// Redacts the text of what is sent, unless the request or the daemon turned it off.
    redactor: Option<Arc<Redactor>>,
}

impl ClientWriter {
    pub(super) fn new(half: OwnedWriteHalf, stall: Duration) -> ClientWriter {
        ClientWriter {
            half,
            stall,
            redactor: None,
        }
    }

    /// Redacts what is sent from now on with `redactor` (`None`: sends it as it is), as the
    /// request being answered asks.
    pub(super) fn redact_with(&mut self, redactor: Option<Arc<Redactor>>) {
        self.redactor = redactor;
    }
}

/// Sends one event, redacted, within the stall timeout.
pub(super) async fn send(write: &mut ClientWriter, event: &Event) -> io::Result<()> {
    let redacted = write
        .redactor
        .as_deref()
        .and_then(|r| redaction::redacted(event, r));
    let line = redacted.as_ref().unwrap_or(event).to_line();
    match tokio::time::timeout(write.stall, write.half.write_all(line.as_bytes())).await {
        Ok(written) => written,
        Err(_) => {
            tracing::warn!("a client took no events for the client timeout: dropping it");
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client stopped reading",
            ))
        }
    }
}

/// Sends an answer, or the error that stood in its way.
pub(super) async fn reply(
    write: &mut ClientWriter,
    answer: Result<Event, ErrorEvent>,
) -> io::Result<()> {
    send(write, &answer.unwrap_or_else(Event::Error)).await
}

/// Where a connection's requests read from, and the runs that die with it.
pub(super) struct Session<'a> {
    pub(super) read: &'a OwnedReadHalf,
    /// Runs started with `kill_on_disconnect` that were handed back running (`yield_ms`).
    pub(super) owned: &'a mut Vec<Weak<RunEntry>>,
    /// The file descriptors sent with the request's line (`SCM_RIGHTS`), oldest first.
    pub(super) fds: Vec<OwnedFd>,
}

/// Resolves when the client has hung up (closed, or shut down its sending side). A request
/// already waiting in the socket is left there: it is checked again every [`HANGUP_POLL`].
pub(super) async fn client_gone(read: &OwnedReadHalf) {
    loop {
        match read.ready(Interest::READABLE).await {
            Ok(ready) if ready.is_read_closed() => return,
            Ok(_) => tokio::time::sleep(HANGUP_POLL).await,
            Err(_) => return,
        }
    }
}

pub(super) fn hung_up() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, "the client hung up")
}
