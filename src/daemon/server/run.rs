//! `run`: resolves the request, launches the command, registers it, and streams its events
//! (`started`, then `running`, `output` or `raw` as asked, then `exit`); a task of its own
//! watches each run to its end.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::sync::{broadcast, oneshot, watch};

use crate::daemon::readiness::Until;
use crate::engine::capture::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, Limits};
use crate::engine::highlight::Patterns;
use crate::engine::normalise::{DEFAULT_COLS, DEFAULT_ROWS};
use crate::protocol::cut::shown_end;
use crate::protocol::{
    ErrorCode, ErrorEvent, Event, LaggedEvent, RawEvent, RunId, RunRequest, StartedEvent,
    StreamMode,
};
use crate::storage::follow::Start;
use crate::storage::index::NewRun;
use crate::supervisor;
use crate::supervisor::limits::Resources;
use crate::supervisor::{Finished, LaunchError, RunSpec, StopReason, TtySize, child_env};

use super::follow::{follow_live, open_tail};
use super::previews::running_event;
use super::recorder::{Outcome, Record};
use super::runs::{Cursors, RunEntry, Session, client_gone, hung_up};
use super::{ClientWriter, Daemon, bad_request, exit_event, grep, send};
use crate::protocol::time::wire_time;

/// Starts a run and answers for it: `started`, then its `exit`, a `running` preview after
/// `yield_ms`, or its output streamed and then its `exit`.
pub(super) async fn serve_run(
    request: RunRequest,
    daemon: &Arc<Daemon>,
    write: &mut ClientWriter,
    session: Session<'_>,
) -> io::Result<()> {
    let Session { read, owned, fds } = session;
    if daemon.stopping.load(Ordering::SeqCst) {
        let message = "the daemon is shutting down and takes no new runs";
        return send(write, &Event::error(ErrorCode::ShuttingDown, message)).await;
    }
    let id = match daemon.fresh_run_id().await {
        Ok(id) => id,
        Err(error) => return send(write, &Event::Error(error)).await,
    };
    let yield_after = request.yield_ms.map(Duration::from_millis);
    let until = match Until::new(request.until.as_deref(), request.until_port) {
        Ok(until) => until,
        Err(message) => return send(write, &Event::error(ErrorCode::BadPattern, message)).await,
    };
    let kill_on_disconnect = request.kill_on_disconnect.unwrap_or(false);
    let stream = request.stream;
    let (argv, shell, tags) = (
        request.argv.clone(),
        request.shell.clone(),
        request.tags.clone(),
    );
    let stdin = match passed_stdin(request.stdin_fd, fds) {
        Ok(stdin) => stdin,
        Err(error) => return send(write, &Event::Error(error)).await,
    };
    let spec = match run_spec(id.clone(), request, daemon) {
        Ok(spec) => RunSpec { stdin, ..spec },
        Err(error) => return send(write, &Event::Error(error)).await,
    };
    let cwd = spec.cwd.to_string_lossy().into_owned();
    let tty = spec.tty.is_some();
    let launched = match supervisor::launch(spec, &daemon.data_dir).await {
        Ok(launched) => launched,
        Err(e) => return send(write, &launch_error(&e)).await,
    };
    let spill_path = launched
        .spill_path
        .as_ref()
        .map(|p| p.to_string_lossy().into_owned());
    let entry = Arc::new(RunEntry {
        id: id.clone(),
        pid: launched.pid,
        started_at: launched.started_at,
        argv: argv.clone(),
        shell: shell.clone(),
        cwd: cwd.clone(),
        tags: tags.clone(),
        tty,
        control: launched.control.clone(),
        live: Arc::clone(&launched.live),
        done: watch::channel(None).0,
        cursors: Cursors::default(),
    });
    daemon.register(id.clone(), Arc::clone(&entry));
    let record = NewRun {
        id: id.clone(),
        argv,
        shell,
        cwd,
        tags,
        started_at: launched.started_at,
        spill_path: spill_path.clone(),
        pid: Some(launched.pid),
        owner_pid: std::process::id(),
    };
    daemon.recorder.record(Record::Start(record)).await;
    tracing::info!(id = %id, pid = launched.pid, "run started");
    tokio::spawn(watch_run(
        Arc::clone(daemon),
        Arc::clone(&entry),
        launched.finished,
    ));
    let _delivery = daemon.delivery();
    let started = Event::Started(StartedEvent {
        id: id.clone(),
        pid: launched.pid,
        spill_path,
        started_at: wire_time(launched.started_at),
    });
    let gone = async {
        if kill_on_disconnect {
            client_gone(read).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    let answer = async {
        send(write, &started).await?;
        match (yield_after.is_some() || until.is_some(), stream) {
            (true, None) => {
                let ready = async {
                    match &until {
                        Some(until) => Some(
                            until
                                .ready(entry.spill_path(), 1, entry.live.committed(), {
                                    let run = entry.control.clone();
                                    move |port| run.listens_on(port)
                                })
                                .await,
                        ),
                        None => std::future::pending().await,
                    }
                };
                let after = async {
                    match yield_after {
                        Some(after) => tokio::time::sleep(after).await,
                        None => std::future::pending().await,
                    }
                };
                let ready = tokio::select! {
                    last = entry.finished() => return send(write, &last).await,
                    () = after => None,
                    ready = ready => ready,
                };
                let event = running_event(&entry, false, "", ready, None).await;
                send(write, &event).await?;
                if kill_on_disconnect {
                    owned.push(Arc::downgrade(&entry));
                }
                Ok(())
            }
            (true, Some(_)) => unreachable_mix(write).await,
            (false, Some(StreamMode::Text)) => {
                let last = follow_live(&entry, Start::Line(1), write).await?;
                send(write, &last).await
            }
            (false, Some(StreamMode::Raw)) => {
                let last = stream_raw(&entry, write).await?;
                send(write, &last).await
            }
            (false, None) => {
                let last = entry.finished().await;
                send(write, &last).await
            }
        }
    };
    let result = tokio::select! {
        result = answer => result,
        () = gone => Err(hung_up()),
    };
    if result.is_err() && kill_on_disconnect && !entry.is_done() {
        tracing::info!(id = %entry.id, "client gone: stopping its run (kill_on_disconnect)");
        entry.stop(StopReason::Kill(Signal::SIGHUP));
    }
    result
}

/// The command's standard input when the request asks for the descriptor sent with it
/// (`stdin_fd`): the first one that came; any other is closed. `None` when not asked for.
fn passed_stdin(
    asked: bool,
    fds: Vec<std::os::fd::OwnedFd>,
) -> Result<Option<std::os::fd::OwnedFd>, ErrorEvent> {
    let first = fds.into_iter().next();
    match (asked, first) {
        (false, _) => Ok(None),
        (true, Some(fd)) => Ok(Some(fd)),
        (true, None) => Err(bad_request(
            "stdin_fd is set but no file descriptor came with the request line (send it with \
             SCM_RIGHTS on the line's first byte)"
                .into(),
        )),
    }
}

/// `yield_ms` (or `until`) with `stream` is refused when the request is parsed; answers it
/// anyway rather than panic.
async fn unreachable_mix(write: &mut ClientWriter) -> io::Result<()> {
    let message = "give either yield_ms/until or stream, not both";
    send(write, &Event::error(ErrorCode::BadRequest, message)).await
}

/// Waits for a run to end, records it, tells everyone waiting, and retires it.
async fn watch_run(
    daemon: Arc<Daemon>,
    entry: Arc<RunEntry>,
    finished: oneshot::Receiver<Finished>,
) {
    let id = entry.id.clone();
    let last = match finished.await {
        Ok(mut finished) => {
            tracing::info!(id = %id, status = finished.status.as_str(), "run ended");
            annotate(&mut finished);
            let outcome = daemon.record_end(&id, &finished).await;
            note_unrecorded(&mut finished, &id, &outcome);
            exit_event(id.clone(), finished)
        }
        Err(_) => Event::error(ErrorCode::Internal, format!("run {id} was lost")),
    };
    let last = Arc::new(last);
    entry.done.send_replace(Some(Arc::clone(&last)));
    daemon.retire(&entry, last);
}

/// Sends a run's raw output as it is read; a client that falls behind gets a `lagged` event
/// and then the normalised text from the line where it was. Returns the run's last event.
async fn stream_raw(entry: &RunEntry, write: &mut ClientWriter) -> io::Result<Arc<Event>> {
    let Some(mut raw) = entry.live.take_raw() else {
        return follow_live(entry, Start::Line(1), write).await;
    };
    let mut done = entry.done.subscribe();
    let mut carry = Vec::new();
    let mut delivered = 0;
    loop {
        let chunk = tokio::select! {
            biased;
            chunk = raw.recv() => chunk,
            _ = done.changed() => {
                // The reader has finished: what is left in the channel is all there is.
                loop {
                    match raw.try_recv() {
                        Ok(chunk) => {
                            send_raw(write, &mut carry, &chunk.bytes, false).await?;
                        }
                        Err(broadcast::error::TryRecvError::Lagged(_)) => {
                            return lagged(entry, delivered, write).await;
                        }
                        Err(_) => break,
                    }
                }
                send_raw(write, &mut carry, &[], true).await?;
                return Ok(entry.finished().await);
            }
        };
        match chunk {
            Ok(chunk) => {
                delivered = chunk.committed;
                send_raw(write, &mut carry, &chunk.bytes, false).await?;
            }
            Err(broadcast::error::RecvError::Lagged(_)) => {
                return lagged(entry, delivered, write).await;
            }
            Err(broadcast::error::RecvError::Closed) => return Ok(entry.finished().await),
        }
    }
}

/// A raw client fell behind: from here on it gets the normalised text, from the start of the
/// line it had reached.
async fn lagged(
    entry: &RunEntry,
    delivered: u64,
    write: &mut ClientWriter,
) -> io::Result<Arc<Event>> {
    let Some(path) = entry.spill_path().map(Path::to_path_buf) else {
        return Ok(entry.finished().await);
    };
    let line = match open_tail(path, Start::Byte(delivered)).await {
        Ok(tail) => tail.next_line(),
        Err(_) => 1,
    };
    send(write, &Event::Lagged(LaggedEvent { line })).await?;
    follow_live(entry, Start::Line(line), write).await
}

/// Sends raw bytes as UTF-8, keeping a character cut at the end for the next chunk.
async fn send_raw(
    write: &mut ClientWriter,
    carry: &mut Vec<u8>,
    bytes: &[u8],
    last: bool,
) -> io::Result<()> {
    carry.extend_from_slice(bytes);
    let keep = match std::str::from_utf8(carry) {
        Ok(_) => 0,
        Err(e) if e.error_len().is_none() && !last => carry.len() - e.valid_up_to(),
        Err(_) => 0,
    };
    let mut cut = carry.len() - keep;
    if !last {
        cut = held_back(&carry[..cut]);
    }
    if cut == 0 {
        return Ok(());
    }
    let data = String::from_utf8_lossy(&carry[..cut]).into_owned();
    carry.drain(..cut);
    send(write, &Event::Raw(RawEvent { data })).await
}

/// Most bytes of a raw stream held back as a piece that could be a secret being written.
const MAX_RAW_HOLD: usize = 4096;

/// Where a raw chunk may end: before a trailing piece that could be a secret's start
/// (`crate::protocol::cut`), which goes out with the next chunk, so redaction sees it whole.
fn held_back(bytes: &[u8]) -> usize {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return bytes.len();
    };
    let end = shown_end(text);
    if bytes.len() - end > MAX_RAW_HOLD {
        bytes.len()
    } else {
        end
    }
}

/// Terminal type a run gets unless it asks otherwise (its size: the normaliser's defaults,
/// [`DEFAULT_COLS`] x [`DEFAULT_ROWS`], which its screen model assumes when told nothing).
const DEFAULT_TERM: &str = "xterm-256color";

fn launch_error(e: &LaunchError) -> Event {
    let code = match e {
        LaunchError::BadCwd { .. } => ErrorCode::BadCwd,
        LaunchError::Spawn { .. } => ErrorCode::SpawnFailed,
        LaunchError::Terminal { .. } | LaunchError::Internal { .. } => ErrorCode::Internal,
    };
    Event::error(code, e.to_string())
}

/// Tells the model, in the preview's notice, what was stopped and which limits were hit.
pub(super) fn annotate(f: &mut Finished) {
    crate::supervisor::leftovers::annotate(
        &mut f.preview,
        &f.stopped,
        &f.limits_hit,
        f.limits_note.as_deref(),
    );
}

/// Tells the client, in one line after the preview's notice, that its run is not (wholly) in
/// the run index, why, and what that means: the result it is given is all it will get from
/// `history`. Nothing is said of a run that was recorded.
fn note_unrecorded(f: &mut Finished, id: &RunId, outcome: &Outcome) {
    let line = match outcome {
        Outcome::Written | Outcome::Pending => return,
        Outcome::Unrecorded(why) => format!(
            "[spillway: run {id} was not recorded in the run index, so `spillway history` will \
             not list it: {why}]"
        ),
        Outcome::EndUnrecorded(why) => format!(
            "[spillway: the end of run {id} was not recorded in the run index, so `spillway \
             history` shows it as running until a later daemon marks it interrupted: {why}]"
        ),
    };
    crate::supervisor::leftovers::annotate(&mut f.preview, &[], &[], Some(&line));
}

/// Resolves a request into a run specification, with the daemon's defaults.
fn run_spec(id: RunId, r: RunRequest, daemon: &Daemon) -> Result<RunSpec, ErrorEvent> {
    let bad = bad_request;
    let limits = Limits::new(
        r.max_lines.unwrap_or(DEFAULT_MAX_LINES as u64),
        r.max_bytes.unwrap_or(DEFAULT_MAX_BYTES as u64),
    )
    .map_err(|e| bad(e.to_string()))?;
    let timeout = match r.timeout_ms {
        // As `timeout(1)`'s 0: no timeout at all, not even the daemon's default.
        Some(0) => None,
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
    let max_spill = match r.max_spill {
        Some(0) => return Err(bad("max_spill must be at least 1".into())),
        Some(n) if n > daemon.max_spill => {
            return Err(bad(format!(
                "max_spill {n} is over this daemon's cap of {} bytes (its --max-spill)",
                daemon.max_spill
            )));
        }
        Some(n) => n,
        None => daemon.max_spill,
    };
    let max_tokens = match r.max_tokens {
        Some(0) => return Err(bad("max_tokens must be at least 1".into())),
        Some(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
        None => None,
    };
    let resources = Resources {
        memory: r.memory,
        pids: r.pids,
        cpu: r.cpu,
    };
    resources.check().map_err(bad)?;
    let highlights = if r.no_highlights.unwrap_or(false) {
        if !r.highlight.is_empty() {
            return Err(bad(
                "give highlight patterns or no_highlights, not both".into()
            ));
        }
        None
    } else {
        Some(Patterns::with_extra(&r.highlight).map_err(|e| ErrorEvent {
            code: ErrorCode::BadPattern,
            message: grep::cut_message(&e.to_string(), 4 * grep::PATTERN_ECHO_BYTES),
        })?)
    };
    Ok(RunSpec {
        id,
        argv,
        cwd,
        env: child_env(base, r.pager_safe.unwrap_or(true), term, &r.env),
        tty,
        timeout,
        kill_grace: daemon.kill_grace,
        limits,
        direction: r.direction.unwrap_or_default(),
        raw: r.raw.unwrap_or(false),
        raw_stream: r.stream == Some(StreamMode::Raw),
        highlights,
        max_tokens,
        max_spill,
        cgroups: daemon.cgroups.clone(),
        resources: resources.or(daemon.default_resources),
        stdin: None,
        caller: r.caller.clone(),
    })
}
