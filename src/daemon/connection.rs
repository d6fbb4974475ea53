//! The socket side of the daemon: accepts connections, checks who is at the other end, reads
//! JSON-Lines requests, and hands each to [`dispatch`](super::dispatch::dispatch).
//!
//! Each connection is served by its own task, one request at a time; a client wanting two runs
//! at once opens two connections. Runs are owned by the daemon, not by the connection: a client
//! that disconnects mid-run does not stop its command, which completes and is recorded (unless
//! it asked for `kill_on_disconnect`). No input can panic the daemon or reach another client:
//! every bad line gets an `error` event, and a line over the size limit closes that connection
//! only.
//!
//! Clumsy and hostile clients cost a bounded amount and are dropped: at most
//! [`Settings::max_clients`](super::state::Settings::max_clients) connections at once (the next
//! ones get a `too_many_clients` error and are closed); a request line begun must be finished
//! within the client timeout; every event must be taken by the client within the same timeout
//! ([`ClientWriter`]), so one that stops reading holds at most the kernel's socket buffer and
//! the event being sent, and is then dropped. Idle connections with no request under way may
//! stay open.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;

use crate::protocol::{ErrorCode, ErrorEvent, Event, MAX_REQUEST_BYTES, parse_request};
use crate::supervisor::StopReason;

use super::client::{ClientWriter, Session, send};
use super::dispatch::dispatch;
use super::passed_fds;
use super::runs::RunEntry;
use super::state::{ClientGuard, Daemon};

/// Each connection's read buffer: most request lines fit, and a thousand idle clients cost
/// little.
const READ_BUFFER: usize = 4096;

/// Accepts connections until `stop` turns true.
pub async fn accept_until_stopped(
    listener: UnixListener,
    daemon: Arc<Daemon>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                // Counted here, not in the task, so that a burst cannot overshoot the cap.
                Ok((stream, _)) => match daemon.client_arrived() {
                    Some(client) => {
                        tokio::spawn(serve_connection(stream, Arc::clone(&daemon), client));
                    }
                    None => {
                        tokio::spawn(refuse_connection(stream, Arc::clone(&daemon)));
                    }
                },
                Err(e) => {
                    // Out of file descriptors, typically: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            _ = stop.changed() => return,
        }
    }
}

/// Refuses peers of another user: the socket's mode already keeps them out; this is the
/// second lock on the door.
fn check_peer(peer_uid: u32, my_uid: u32) -> Result<(), ErrorEvent> {
    if peer_uid == my_uid {
        Ok(())
    } else {
        Err(ErrorEvent {
            code: ErrorCode::Forbidden,
            message: format!(
                "this spillway daemon serves uid {my_uid} only; connection from uid {peer_uid} refused"
            ),
        })
    }
}

/// Stops the `kill_on_disconnect` runs a connection leaves behind running (a run that has
/// ended is gone from the registry, and so from here).
struct OwnedRuns(Vec<Weak<RunEntry>>);

impl Drop for OwnedRuns {
    fn drop(&mut self) {
        for entry in self.0.drain(..).filter_map(|e| e.upgrade()) {
            if !entry.is_done() {
                tracing::info!(id = %entry.id, "client gone: stopping its run (kill_on_disconnect)");
                entry.stop(StopReason::Kill(nix::sys::signal::Signal::SIGHUP));
            }
        }
    }
}

/// Tells a client past the cap why it is not served, and closes.
async fn refuse_connection(stream: UnixStream, daemon: Arc<Daemon>) {
    let max_clients = daemon.max_clients;
    tracing::warn!(max_clients, "too many clients: connection refused");
    let (_read, write) = stream.into_split();
    let mut write = ClientWriter::new(write, daemon.client_timeout);
    let message = format!(
        "this daemon already serves {max_clients} connections, its limit; close some and retry"
    );
    let _ = send(
        &mut write,
        &Event::error(ErrorCode::TooManyClients, message),
    )
    .await;
}

async fn serve_connection(stream: UnixStream, daemon: Arc<Daemon>, _client: ClientGuard) {
    let peer = stream.peer_cred().map(|cred| cred.uid());
    let (read, write) = stream.into_split();
    let mut write = ClientWriter::new(write, daemon.client_timeout);
    let me = nix::unistd::geteuid().as_raw();
    if let Err(refusal) = peer
        .map_err(|e| ErrorEvent {
            code: ErrorCode::Forbidden,
            message: format!("cannot identify the peer: {e}"),
        })
        .and_then(|uid| check_peer(uid, me))
    {
        tracing::warn!(message = %refusal.message, "peer refused");
        let _ = send(&mut write, &Event::Error(refusal)).await;
        return;
    }
    let mut reader = BufReader::with_capacity(READ_BUFFER, passed_fds::FdReader::new(read));
    let mut line = Vec::new();
    let mut owned = OwnedRuns(Vec::new());
    loop {
        // Runs that ended on their own need no stopping.
        owned.0.retain(|entry| entry.strong_count() > 0);
        line.clear();
        // An idle connection may wait for ever; a request once begun must arrive in time.
        match reader.fill_buf().await {
            Ok([]) | Err(_) => return,
            Ok(_) => {}
        }
        let limit = MAX_REQUEST_BYTES as u64 + 1;
        let mut request = (&mut reader).take(limit);
        let read = request.read_until(b'\n', &mut line);
        match tokio::time::timeout(daemon.client_timeout, read).await {
            Err(_) => {
                let message = format!(
                    "the request line was not finished within {}; closing",
                    humantime::format_duration(daemon.client_timeout)
                );
                tracing::warn!("a client left a request unfinished: closing its connection");
                let _ = send(
                    &mut write,
                    &Event::error(ErrorCode::RequestTimeout, message),
                )
                .await;
                return;
            }
            Ok(Ok(0) | Err(_)) => return,
            Ok(Ok(_)) => {}
        }
        if !line.ends_with(b"\n") && line.len() > MAX_REQUEST_BYTES {
            let message = format!("request line is over {MAX_REQUEST_BYTES} bytes; closing");
            let _ = send(
                &mut write,
                &Event::error(ErrorCode::RequestTooLarge, message),
            )
            .await;
            return;
        }
        // The descriptors sent with this line are the request's (the others are closed).
        let end = reader.get_ref().position() - reader.buffer().len() as u64;
        let fds = reader.get_mut().take_before(end);
        let session = Session {
            read: reader.get_ref().half(),
            owned: &mut owned.0,
            fds,
        };
        // Boxed: an idle connection's task then holds none of an answer's state.
        if Box::pin(answer(&line, &daemon, &mut write, session))
            .await
            .is_err()
        {
            return; // The client is gone; its runs go on (but for kill_on_disconnect ones).
        }
        // A big request (up to 1 MiB) must not stay allocated while the connection idles.
        if line.capacity() > READ_BUFFER {
            line = Vec::new();
        }
    }
}

/// Answers one request line; an error means the client can no longer be written to.
async fn answer(
    line: &[u8],
    daemon: &Arc<Daemon>,
    write: &mut ClientWriter,
    session: Session<'_>,
) -> std::io::Result<()> {
    let text = match std::str::from_utf8(line) {
        Ok(text) => text.trim(),
        Err(e) => {
            let message = format!("request is not UTF-8: {e}");
            return send(write, &Event::error(ErrorCode::MalformedJson, message)).await;
        }
    };
    if text.is_empty() {
        return Ok(());
    }
    let request = parse_request(text);
    write.redact_with(match &request {
        Ok(request) if !request.no_redact() => daemon.redactor.clone(),
        _ => None,
    });
    match request {
        Err(error) => send(write, &Event::Error(error)).await,
        Ok(request) => dispatch(request, daemon, write, session).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_of_another_uid_are_refused() {
        assert!(check_peer(1000, 1000).is_ok());
        let refusal = check_peer(1001, 1000).unwrap_err();
        assert_eq!(refusal.code, ErrorCode::Forbidden);
        assert!(refusal.message.contains("1001"));
    }
}
