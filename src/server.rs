//! The socket side of the daemon: accepts connections, reads JSON-Lines requests, answers with
//! events. The one place that touches client sockets.
//!
//! Each connection is served by its own task, one request at a time; a client wanting two runs
//! at once opens two connections. Runs are owned by the daemon, not by the connection: a client
//! that disconnects mid-run does not stop its command, which completes and is recorded. No input
//! can panic the daemon or reach another client: every bad line gets an `error` event, and a
//! line over the size limit closes that connection only.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chrono::SecondsFormat;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{Notify, watch};

use crate::capture::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, Limits};
use crate::protocol::{
    ErrorCode, ErrorEvent, Event, ExitEvent, MAX_REQUEST_BYTES, PROTOCOL_VERSION, PongEvent,
    Request, RunId, RunRequest, StartedEvent, parse_request,
};
use crate::spill::DataDir;
use crate::supervisor::{
    self, Finished, LaunchError, RunControl, RunSpec, StopReason, TtySize, child_env,
};

/// Terminal size and type a run gets unless it asks otherwise.
const DEFAULT_COLS: u16 = 200;
const DEFAULT_ROWS: u16 = 50;
const DEFAULT_TERM: &str = "xterm-256color";

/// How long shutdown waits, past the kill grace, for runs to wind up and clients to be told.
const SHUTDOWN_SLACK: Duration = Duration::from_secs(5);

/// The daemon's shared state: settings, the runs in flight, and activity for idle exit.
#[derive(Debug)]
pub struct Daemon {
    data_dir: DataDir,
    default_timeout: Option<Duration>,
    kill_grace: Duration,
    runs: Mutex<HashMap<RunId, RunControl>>,
    clients: AtomicUsize,
    /// When the daemon last had neither runs nor clients (None while it has some).
    idle_since: Mutex<Option<Instant>>,
    stopping: AtomicBool,
    /// Woken whenever a run ends or a client leaves.
    changed: Notify,
}

impl Daemon {
    pub fn new(data_dir: DataDir, default_timeout: Option<Duration>, kill_grace: Duration) -> Self {
        Daemon {
            data_dir,
            default_timeout,
            kill_grace,
            runs: Mutex::new(HashMap::new()),
            clients: AtomicUsize::new(0),
            idle_since: Mutex::new(Some(Instant::now())),
            stopping: AtomicBool::new(false),
            changed: Notify::new(),
        }
    }

    /// How long the daemon has had no runs and no clients.
    pub fn idle_for(&self) -> Duration {
        lock(&self.idle_since).map_or(Duration::ZERO, |since| since.elapsed())
    }

    /// Stops every run's process group and waits (bounded) for the runs to finish and their
    /// clients to hear of it.
    pub async fn stop_all_runs(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        for control in lock(&self.runs).values() {
            control.stop(StopReason::Shutdown);
        }
        let deadline = tokio::time::Instant::now() + self.kill_grace + SHUTDOWN_SLACK;
        loop {
            let changed = self.changed.notified();
            if lock(&self.runs).is_empty() && self.clients.load(Ordering::SeqCst) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                tracing::warn!("shutdown: gave up waiting for runs and clients");
                return;
            }
        }
    }

    fn register(&self, id: RunId, control: RunControl) {
        lock(&self.runs).insert(id, control);
        self.update_idle();
    }

    fn unregister(&self, id: &RunId) {
        lock(&self.runs).remove(id);
        self.update_idle();
        self.changed.notify_waiters();
    }

    fn client_arrived(&self) -> ClientGuard<'_> {
        self.clients.fetch_add(1, Ordering::SeqCst);
        self.update_idle();
        ClientGuard(self)
    }

    fn update_idle(&self) {
        let busy = self.clients.load(Ordering::SeqCst) > 0 || !lock(&self.runs).is_empty();
        let mut idle_since = lock(&self.idle_since);
        match (busy, *idle_since) {
            (true, _) => *idle_since = None,
            (false, None) => *idle_since = Some(Instant::now()),
            (false, Some(_)) => {}
        }
    }
}

/// Counts a connected client for as long as it lives.
struct ClientGuard<'a>(&'a Daemon);

impl Drop for ClientGuard<'_> {
    fn drop(&mut self) {
        self.0.clients.fetch_sub(1, Ordering::SeqCst);
        self.0.update_idle();
        self.0.changed.notify_waiters();
    }
}

/// Locks a mutex, recovering from poisoning: the data behind these locks stays consistent.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Accepts connections until `stop` turns true.
pub async fn accept_until_stopped(
    listener: UnixListener,
    daemon: std::sync::Arc<Daemon>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let daemon = std::sync::Arc::clone(&daemon);
                    tokio::spawn(async move { serve_connection(stream, &daemon).await });
                }
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

async fn serve_connection(stream: UnixStream, daemon: &Daemon) {
    let _client = daemon.client_arrived();
    let peer = stream.peer_cred().map(|cred| cred.uid());
    let (read, mut write) = stream.into_split();
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
    let mut reader = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = MAX_REQUEST_BYTES as u64 + 1;
        match (&mut reader).take(limit).read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
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
        if answer(&line, daemon, &mut write).await.is_err() {
            return; // The client is gone; its runs go on.
        }
    }
}

/// Answers one request line; an error means the client can no longer be written to.
async fn answer(line: &[u8], daemon: &Daemon, write: &mut OwnedWriteHalf) -> std::io::Result<()> {
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
    match parse_request(text) {
        Err(error) => send(write, &Event::Error(error)).await,
        Ok(Request::Ping) => {
            let pong = Event::Pong(PongEvent {
                protocol: PROTOCOL_VERSION,
                version: env!("CARGO_PKG_VERSION").to_string(),
                pid: std::process::id(),
            });
            send(write, &pong).await
        }
        Ok(Request::Run(run)) => serve_run(*run, daemon, write).await,
    }
}

async fn send(write: &mut OwnedWriteHalf, event: &Event) -> std::io::Result<()> {
    write.write_all(event.to_line().as_bytes()).await
}

/// Starts a run, sends `started`, and sends `exit` when it ends. The run itself is driven by a
/// task of its own, so it completes even if this client goes away.
async fn serve_run(
    request: RunRequest,
    daemon: &Daemon,
    write: &mut OwnedWriteHalf,
) -> std::io::Result<()> {
    if daemon.stopping.load(Ordering::SeqCst) {
        let message = "the daemon is shutting down and takes no new runs";
        return send(write, &Event::error(ErrorCode::ShuttingDown, message)).await;
    }
    let spec = match run_spec(request, daemon) {
        Ok(spec) => spec,
        Err(error) => return send(write, &Event::Error(error)).await,
    };
    let id = spec.id.clone();
    let launched = match supervisor::launch(spec, &daemon.data_dir).await {
        Ok(launched) => launched,
        Err(e) => return send(write, &launch_error(&e)).await,
    };
    daemon.register(id.clone(), launched.control.clone());
    tracing::info!(id = %id, pid = launched.pid, "run started");
    let started = Event::Started(StartedEvent {
        id: id.clone(),
        pid: launched.pid,
        spill_path: launched
            .spill_path
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned()),
        started_at: rfc3339(launched.started_at),
    });
    // A client that is already gone still gets its run completed and recorded.
    let started_sent = send(write, &started).await;
    let finished = launched.finished.await;
    daemon.unregister(&id);
    let event = match finished {
        Ok(finished) => {
            tracing::info!(id = %id, status = finished.status.as_str(), "run ended");
            exit_event(id, finished)
        }
        Err(_) => Event::error(ErrorCode::Internal, format!("run {id} was lost")),
    };
    started_sent?;
    send(write, &event).await
}

fn launch_error(e: &LaunchError) -> Event {
    let code = match e {
        LaunchError::BadCwd { .. } => ErrorCode::BadCwd,
        LaunchError::Spawn { .. } => ErrorCode::SpawnFailed,
        LaunchError::Terminal { .. } | LaunchError::Internal { .. } => ErrorCode::Internal,
    };
    Event::error(code, e.to_string())
}

fn rfc3339(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn exit_event(id: RunId, f: Finished) -> Event {
    let duration_ms = (f.ended_at - f.started_at).num_milliseconds().max(0) as u64;
    Event::Exit(Box::new(ExitEvent {
        id,
        status: f.status,
        exit_code: f.exit_code,
        signal: f.signal,
        duration_ms,
        started_at: rfc3339(f.started_at),
        ended_at: rfc3339(f.ended_at),
        preview: f.preview,
    }))
}

/// Resolves a request into a run specification, with the daemon's defaults.
fn run_spec(r: RunRequest, daemon: &Daemon) -> Result<RunSpec, ErrorEvent> {
    let bad = |message: String| ErrorEvent {
        code: ErrorCode::BadRequest,
        message,
    };
    let limits = Limits::new(
        r.max_lines.unwrap_or(DEFAULT_MAX_LINES as u64),
        r.max_bytes.unwrap_or(DEFAULT_MAX_BYTES as u64),
    )
    .map_err(|e| bad(e.to_string()))?;
    let timeout = match r.timeout_ms {
        Some(0) => return Err(bad("timeout_ms must be at least 1".into())),
        Some(ms) => Some(Duration::from_millis(ms)),
        None => daemon.default_timeout,
    };
    let cwd = match r.cwd {
        Some(cwd) if !cwd.starts_with('/') => {
            return Err(bad(format!("cwd must be an absolute path, got {cwd:?}")));
        }
        Some(cwd) => PathBuf::from(cwd),
        None => std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from),
    };
    let tty = r.tty.unwrap_or(true).then(|| TtySize {
        cols: r.cols.unwrap_or(DEFAULT_COLS),
        rows: r.rows.unwrap_or(DEFAULT_ROWS),
    });
    let term = tty
        .as_ref()
        .map(|_| r.term.as_deref().unwrap_or(DEFAULT_TERM));
    let base: BTreeMap<String, String> = r.base_env.unwrap_or_else(|| std::env::vars().collect());
    let argv = match (r.argv, r.shell) {
        (Some(argv), _) => argv,
        (None, Some(shell)) => vec!["sh".into(), "-c".into(), shell],
        (None, None) => return Err(bad("missing the command".into())),
    };
    Ok(RunSpec {
        id: RunId::generate(),
        argv,
        cwd,
        env: child_env(base, r.pager_safe.unwrap_or(true), term, &r.env),
        tty,
        timeout,
        kill_grace: daemon.kill_grace,
        limits,
        direction: r.direction.unwrap_or_default(),
        raw: r.raw.unwrap_or(false),
    })
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
