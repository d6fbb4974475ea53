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
use crate::engine::snapshot::{Cursor, RangeCapture};
use crate::protocol::{
    ErrorCode, ErrorEvent, Event, ExitEvent, LaggedEvent, Preview, RawEvent, RunId, RunRequest,
    RunningEvent, StartedEvent, StreamMode,
};
use crate::storage::follow::{Start, open_spill};
use crate::storage::index::NewRun;
use crate::supervisor;
use crate::supervisor::limits::Resources;
use crate::supervisor::progress::Shape;
use crate::supervisor::{Finished, LaunchError, RunSpec, StopReason, TtySize, child_env};
use crate::sync::lock;

use super::follow::{follow_live, open_tail};
use super::recorder::Record;
use super::runs::{Cursors, RunEntry, Session, client_gone, hung_up, millis};
use super::{ClientWriter, Daemon, bad_request, exit_event, grep, rfc3339, send};

/// How often a follower that is ahead of the spill file (the writer has not caught up yet)
/// looks again.
pub(super) const FILE_LAG_POLL: Duration = Duration::from_millis(15);

/// How long a preview of new output waits for the spill file to hold what the run has read.
const FILE_CATCH_UP: Duration = Duration::from_secs(2);

/// Starts a run and answers for it: `started`, then its `exit`, a `running` preview after
/// `yield_ms`, or its output streamed and then its `exit`.
pub(super) async fn serve_run(
    request: RunRequest,
    daemon: &Arc<Daemon>,
    write: &mut ClientWriter,
    session: Session<'_>,
) -> io::Result<()> {
    if daemon.stopping.load(Ordering::SeqCst) {
        let message = "the daemon is shutting down and takes no new runs";
        return send(write, &Event::error(ErrorCode::ShuttingDown, message)).await;
    }
    // A run would have nowhere to put its output, and its record might not fit either.
    if let Some(message) = daemon.space.refusal() {
        return send(write, &Event::error(ErrorCode::Internal, message)).await;
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
    let spec = match run_spec(id.clone(), request, daemon) {
        Ok(spec) => spec,
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
        started_at: rfc3339(launched.started_at),
    });
    let Session { read, owned } = session;
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
                                .ready(entry.spill_path(), 1, entry.live.committed())
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
                let event = running_event(&entry, false, "", ready).await;
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
            daemon.record_end(&id, &finished).await;
            exit_event(id.clone(), finished)
        }
        Err(_) => Event::error(ErrorCode::Internal, format!("run {id} was lost")),
    };
    let last = Arc::new(last);
    entry.done.send_replace(Some(Arc::clone(&last)));
    daemon.retire(&entry, last);
}

/// A `running` event: the preview so far, or with `new` of what `caller` has not been shown;
/// `ready` says why it came early, and the kernel says whether the command waits for input.
pub(super) async fn running_event(
    entry: &Arc<RunEntry>,
    new: bool,
    caller: &str,
    ready: Option<crate::protocol::Ready>,
) -> Event {
    let live = Arc::clone(&entry.live);
    let (pid, tty) = (entry.pid, entry.tty);
    let looked = tokio::task::spawn_blocking(move || {
        let waiting = tty
            .then(|| supervisor::input_wait::waiting_for_input(pid))
            .flatten();
        (live.snapshot(), waiting)
    })
    .await;
    let (snapshot, waiting_for_input) = match looked {
        Ok(looked) => looked,
        Err(e) => return Event::error(ErrorCode::Internal, format!("preview failed: {e}")),
    };
    let start = lock(&entry.cursors).get(caller).copied();
    let (preview, first_line, cursor) = match (new, start, entry.spill_path()) {
        (true, Some(start), Some(path)) => {
            let path = path.to_path_buf();
            let shape = entry.live.shape();
            let (to, pending) = (snapshot.committed, snapshot.pending.clone());
            wait_for_file(&path, to).await;
            let range = tokio::task::spawn_blocking(move || {
                range_of_file(&path, &shape, start, to, &pending)
            })
            .await;
            match range {
                Ok(Ok((preview, next))) => (preview, start.lines + 1, next),
                Ok(Err(e)) => return Event::error(ErrorCode::Internal, e),
                Err(e) => {
                    return Event::error(ErrorCode::Internal, format!("preview failed: {e}"));
                }
            }
        }
        _ => (snapshot.preview, 1, snapshot.cursor),
    };
    lock(&entry.cursors).insert(caller.to_string(), cursor);
    Event::Running(Box::new(RunningEvent {
        id: entry.id.clone(),
        pid: entry.pid,
        started_at: rfc3339(entry.started_at),
        elapsed_ms: millis(snapshot.stats.elapsed),
        idle_ms: millis(snapshot.stats.idle),
        first_line,
        ready,
        waiting_for_input,
        preview,
    }))
}

/// Waits (bounded) until the spill file holds `bytes` bytes: what the run had read when a
/// preview was taken, handed to the spill writer moments before.
async fn wait_for_file(path: &Path, bytes: u64) {
    let deadline = tokio::time::Instant::now() + FILE_CATCH_UP;
    while std::fs::metadata(path).map_or(0, |m| m.len()) < bytes
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The preview of spill bytes `start.offset..to` (then `pending`) as lines `start.lines + 1..`.
fn range_of_file(
    path: &Path,
    shape: &Shape,
    start: Cursor,
    to: u64,
    pending: &str,
) -> Result<(Preview, Cursor), String> {
    use std::io::{Seek, SeekFrom};
    let read = || -> io::Result<RangeCapture> {
        let mut file = open_spill(path)?;
        file.seek(SeekFrom::Start(start.offset))?;
        let mut range = RangeCapture::new(shape.limits, start, shape.highlights.clone());
        range.feed_from(file, to.saturating_sub(start.offset))?;
        Ok(range)
    };
    let range = read().map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(range.finish(pending, shape.direction, Some(path)))
}

/// The exit event `caller` gets: the run's own, or with `new` one whose preview covers only
/// what the caller has not been shown.
pub(super) async fn exit_for(
    last: Arc<Event>,
    spill_path: Option<PathBuf>,
    cursors: &Cursors,
    new: bool,
    caller: &str,
    shape: Arc<Shape>,
) -> Event {
    let start = lock(cursors).get(caller).copied();
    let (Event::Exit(exit), true, Some(start), Some(path)) = (&*last, new, start, spill_path)
    else {
        return (*last).clone();
    };
    let to = exit.preview.total_bytes;
    let range =
        tokio::task::spawn_blocking(move || range_of_file(&path, &shape, start, to, "")).await;
    match range {
        Ok(Ok((mut preview, next))) => {
            lock(cursors).insert(caller.to_string(), next);
            crate::supervisor::leftovers::annotate(
                &mut preview,
                &exit.stopped,
                &exit.limits_hit,
                None,
            );
            Event::Exit(Box::new(ExitEvent {
                first_line: Some(start.lines + 1),
                preview,
                ..(**exit).clone()
            }))
        }
        // The spill cannot be read: the whole preview is better than none.
        _ => (*last).clone(),
    }
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
    let cut = carry.len() - keep;
    if cut == 0 {
        return Ok(());
    }
    let data = String::from_utf8_lossy(&carry[..cut]).into_owned();
    carry.drain(..cut);
    send(write, &Event::Raw(RawEvent { data })).await
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

/// Resolves a request into a run specification, with the daemon's defaults.
fn run_spec(id: RunId, r: RunRequest, daemon: &Daemon) -> Result<RunSpec, ErrorEvent> {
    let bad = bad_request;
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
    })
}
