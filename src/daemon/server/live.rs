//! Live runs: the daemon's registry of running commands, and the ops that watch and steer them
//! while they run: `run` itself (with `yield_ms`, `stream` and `kill_on_disconnect`), `wait`,
//! `send`, `follow`, `ps` and `kill`.
//!
//! A run belongs to the daemon, not to the connection that started it. Once launched it is
//! watched by a task of its own ([`watch_run`]), which records its end in the index and
//! publishes its `exit` event to everyone waiting; then the run moves from the registry to a
//! short list of recent runs (its exit event and its callers' places), so that a `wait` that
//! comes a little late still gets the same answer. Older runs are answered from the index and
//! the spill file.
//!
//! Every client task that owes someone a run's `exit` event holds a [`Delivery`], and a
//! shutdown waits (bounded) for those too, so clients are told how their runs ended.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use nix::sys::signal::Signal;
use tokio::io::Interest;
use tokio::net::unix::OwnedReadHalf;
use tokio::sync::{broadcast, oneshot, watch};

use super::recorder::Record;
use super::{
    ClientWriter, Daemon, annotate, exit_event, internal, launch_error, rfc3339, run_spec, send,
    spill_of,
};
use crate::daemon::readiness::Until;
use crate::engine::capture::{Capture, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, Limits, SpillPolicy};
use crate::engine::highlight::Patterns;
use crate::engine::preview::CliSteps;
use crate::engine::snapshot::{Cursor, RangeCapture};
use crate::protocol::{
    Direction, ErrorCode, ErrorEvent, Event, ExitEvent, FollowRequest, KillRequest, KillSignal,
    LaggedEvent, LiveRun, OutputEvent, Preview, PsEvent, PsRequest, RawEvent, RunId, RunRequest,
    RunStatus, RunningEvent, SendRequest, SentEvent, StartedEvent, StreamMode, WaitRequest,
};
use crate::storage::follow::{Start, Tail, open_spill};
use crate::storage::index::{NewRun, RunRow, display_command};
use crate::supervisor::input::{DEFAULT_SEND_TIMEOUT, InputError, Keys};
use crate::supervisor::progress::{Live, SendError, Shape};
use crate::supervisor::{self, Finished, RunControl, StopReason};
use crate::sync::lock;

/// Finished runs kept in memory for late `wait`s: at most this many...
const RECENT_RUNS: usize = 256;
/// ...and for at most this long.
const RECENT_FOR: Duration = Duration::from_secs(3600);

/// How often a follower that is ahead of the spill file (the writer has not caught up yet)
/// looks again.
const FILE_LAG_POLL: Duration = Duration::from_millis(15);

/// How long a preview of new output waits for the spill file to hold what the run has read.
const FILE_CATCH_UP: Duration = Duration::from_secs(2);

/// How often a connection with a request waiting in its buffer is checked for a hang-up.
const HANGUP_POLL: Duration = Duration::from_millis(200);

/// Past the kill grace, how long `kill` waits for the run to end before it answers anyway.
const KILL_SLACK: Duration = Duration::from_secs(10);

/// Where a connection's requests read from, and the runs that die with it.
pub(super) struct Session<'a> {
    pub(super) read: &'a OwnedReadHalf,
    /// Runs started with `kill_on_disconnect` that were handed back running (`yield_ms`).
    pub(super) owned: &'a mut Vec<Weak<RunEntry>>,
}

/// A run in flight.
pub(super) struct RunEntry {
    pub(super) id: RunId,
    pid: u32,
    started_at: DateTime<Utc>,
    argv: Option<Vec<String>>,
    shell: Option<String>,
    cwd: String,
    tags: BTreeMap<String, String>,
    tty: bool,
    control: RunControl,
    live: Arc<Live>,
    /// The run's last event (`exit`, or an `error` if it was lost), once it has ended and
    /// been recorded.
    done: watch::Sender<Option<Arc<Event>>>,
    /// How far each caller's previews have gone (for `wait` with `new`).
    cursors: Cursors,
}

type Cursors = Arc<Mutex<HashMap<String, Cursor>>>;

impl RunEntry {
    /// Stops the run's process group with `signal` (then SIGKILL after the grace).
    pub(super) fn stop(&self, reason: StopReason) {
        self.control.stop(reason);
    }

    pub(super) fn is_done(&self) -> bool {
        self.done.borrow().is_some()
    }

    /// Waits for the run's last event.
    async fn finished(&self) -> Arc<Event> {
        let mut done = self.done.subscribe();
        loop {
            let current = done.borrow_and_update().clone();
            if let Some(event) = current {
                return event;
            }
            if done.changed().await.is_err() {
                // The sender lives in `self`: it cannot go away while we hold it.
                std::future::pending::<()>().await;
            }
        }
    }

    fn spill_path(&self) -> Option<&Path> {
        self.live.spill_path()
    }
}

/// A run that ended a short while ago.
pub(super) struct RecentRun {
    id: RunId,
    spill_path: Option<PathBuf>,
    shape: Arc<Shape>,
    last: Arc<Event>,
    cursors: Cursors,
    ended: Instant,
}

/// Where a run was found.
enum Found {
    Running(Arc<RunEntry>),
    Recent {
        spill_path: Option<PathBuf>,
        shape: Arc<Shape>,
        last: Arc<Event>,
        cursors: Cursors,
    },
    /// Only in the index.
    Recorded,
}

/// Counts a client task that owes someone an `exit` event, for as long as it lives.
pub(super) struct Delivery<'a>(&'a Daemon);

impl Drop for Delivery<'_> {
    fn drop(&mut self) {
        self.0.deliveries.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }
}

impl Daemon {
    fn delivery(&self) -> Delivery<'_> {
        self.deliveries.fetch_add(1, Ordering::SeqCst);
        Delivery(self)
    }

    /// Moves an ended run from the registry to the recent runs.
    fn retire(&self, entry: &RunEntry, last: Arc<Event>) {
        {
            let mut recent = lock(&self.recent);
            while recent.len() >= RECENT_RUNS
                || recent
                    .front()
                    .is_some_and(|r| r.ended.elapsed() > RECENT_FOR)
            {
                recent.pop_front();
            }
            recent.push_back(RecentRun {
                id: entry.id.clone(),
                spill_path: entry.spill_path().map(Path::to_path_buf),
                shape: entry.live.shape(),
                last,
                cursors: Arc::clone(&entry.cursors),
                ended: Instant::now(),
            });
        }
        self.unregister(&entry.id);
    }

    fn find(&self, id: &RunId) -> Found {
        if let Some(entry) = lock(&self.runs).get(id) {
            return Found::Running(Arc::clone(entry));
        }
        let recent = lock(&self.recent);
        match recent.iter().rev().find(|r| &r.id == id) {
            Some(r) => Found::Recent {
                spill_path: r.spill_path.clone(),
                shape: Arc::clone(&r.shape),
                last: Arc::clone(&r.last),
                cursors: Arc::clone(&r.cursors),
            },
            None => Found::Recorded,
        }
    }
}

fn error(code: ErrorCode, message: String) -> ErrorEvent {
    ErrorEvent { code, message }
}

fn unknown_run(id: &RunId) -> ErrorEvent {
    error(ErrorCode::UnknownRun, format!("no run with id {id}"))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Resolves when the client has hung up (closed, or shut down its sending side). A request
/// already waiting in the socket is left there: it is checked again every [`HANGUP_POLL`].
async fn client_gone(read: &OwnedReadHalf) {
    loop {
        match read.ready(Interest::READABLE).await {
            Ok(ready) if ready.is_read_closed() => return,
            Ok(_) => tokio::time::sleep(HANGUP_POLL).await,
            Err(_) => return,
        }
    }
}

fn hung_up() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, "the client hung up")
}

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
async fn running_event(
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
async fn exit_for(
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

/// `wait`: the next preview of a running command, or its exit.
pub(super) async fn wait(request: WaitRequest, daemon: &Daemon) -> Result<Event, ErrorEvent> {
    if request.yield_ms == Some(0) {
        return Err(error(
            ErrorCode::BadRequest,
            "yield_ms must be at least 1".into(),
        ));
    }
    let caller = request.caller.unwrap_or_default();
    let until = Until::new(request.until.as_deref(), request.until_port)
        .map_err(|message| error(ErrorCode::BadPattern, message))?;
    match daemon.find(&request.id) {
        Found::Running(entry) => {
            let _delivery = daemon.delivery();
            // With `new`, only lines this caller has not been shown can make it ready.
            let from_line = match request.new {
                true => lock(&entry.cursors).get(&caller).map_or(1, |c| c.lines + 1),
                false => 1,
            };
            let ready = async {
                match &until {
                    Some(until) => {
                        let committed = entry.live.committed();
                        until.ready(entry.spill_path(), from_line, committed).await
                    }
                    None => std::future::pending().await,
                }
            };
            let after = async {
                match request.yield_ms {
                    Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                    None => std::future::pending().await,
                }
            };
            let (ended, ready) = tokio::select! {
                last = entry.finished() => (Some(last), None),
                () = after => (None, None),
                ready = ready => (None, Some(ready)),
            };
            let shape = entry.live.shape();
            Ok(match ended {
                Some(last) => {
                    let spill = entry.spill_path().map(Path::to_path_buf);
                    exit_for(last, spill, &entry.cursors, request.new, &caller, shape).await
                }
                None => running_event(&entry, request.new, &caller, ready).await,
            })
        }
        Found::Recent {
            spill_path,
            shape,
            last,
            cursors,
        } => Ok(exit_for(last, spill_path, &cursors, request.new, &caller, shape).await),
        Found::Recorded => recorded_exit(request.id, daemon).await,
    }
}

/// The exit event of a run the daemon no longer keeps, rebuilt from its record and its spill
/// (previewed with the default limits).
async fn recorded_exit(id: RunId, daemon: &Daemon) -> Result<Event, ErrorEvent> {
    let wanted = id.clone();
    let row = daemon
        .with_index(move |index| index.get(&wanted))
        .await?
        .ok_or_else(|| unknown_run(&id))?;
    if row.status == RunStatus::Running {
        return Err(internal(format!(
            "run {id} is recorded as running but this daemon is not running it"
        )));
    }
    let preview = match spill_of(id.clone(), daemon).await {
        Ok((_, path)) => tokio::task::spawn_blocking(move || preview_of_file(&path))
            .await
            .map_err(|e| internal(format!("preview failed: {e}")))?
            .map_err(internal)?,
        Err(_) => gone_preview(&row),
    };
    Ok(exit_of_row(&row, preview))
}

/// The preview of a whole spill file, with the default limits.
fn preview_of_file(path: &Path) -> Result<Preview, String> {
    let limits = Limits::new(DEFAULT_MAX_LINES as u64, DEFAULT_MAX_BYTES as u64)
        .map_err(|e| e.to_string())?;
    let read = || -> io::Result<RangeCapture> {
        let file = open_spill(path)?;
        let mut range = RangeCapture::new(limits, Cursor::default(), Some(Patterns::defaults()));
        range.feed_from(file, u64::MAX)?;
        Ok(range)
    };
    let range = read().map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(range.finish("", Direction::Both, Some(path)).0)
}

/// The preview of a run whose output is gone: its counts, and a notice that says so.
fn gone_preview(row: &RunRow) -> Preview {
    let mut capture = Capture::new(Limits::default(), SpillPolicy::Never);
    capture.finish();
    let mut preview = Preview::build(&capture.view(), Direction::Both, &CliSteps);
    preview.content = format!(
        "[spillway: the output of run {} is gone (its spill file was deleted or lost); its record remains]\n",
        row.id
    );
    preview.spill_path = row.spill_path.clone();
    preview.total_lines = row.total_lines.unwrap_or(0);
    preview.total_bytes = row.total_bytes.unwrap_or(0);
    preview.truncated = preview.total_bytes > 0;
    preview.shown = Vec::new();
    preview.omitted_lines = preview.total_lines;
    preview
}

fn exit_of_row(row: &RunRow, preview: Preview) -> Event {
    let ended_at = row.ended_at.unwrap_or(row.started_at);
    let duration_ms = (ended_at - row.started_at).num_milliseconds().max(0) as u64;
    Event::Exit(Box::new(ExitEvent {
        id: row.id.clone(),
        status: row.status,
        exit_code: row.exit_code,
        signal: row.signal,
        duration_ms,
        started_at: rfc3339(row.started_at),
        ended_at: rfc3339(ended_at),
        first_line: None,
        stopped: Vec::new(),
        limits_hit: Vec::new(),
        preview,
    }))
}

/// The run a request about a running command names, or why there is none.
async fn running_run(
    id: &RunId,
    daemon: &Daemon,
    doing: &str,
) -> Result<Arc<RunEntry>, ErrorEvent> {
    match daemon.find(id) {
        Found::Running(entry) if !entry.is_done() => Ok(entry),
        Found::Running(_) | Found::Recent { .. } => Err(error(
            ErrorCode::NotRunning,
            format!("run {id} has ended: it cannot {doing}"),
        )),
        Found::Recorded => {
            let wanted = id.clone();
            match daemon.with_index(move |index| index.get(&wanted)).await? {
                Some(_) => Err(error(
                    ErrorCode::NotRunning,
                    format!("run {id} has ended: it cannot {doing}"),
                )),
                None => Err(unknown_run(id)),
            }
        }
    }
}

/// `send`: types into a running command's terminal.
pub(super) async fn send_input(request: SendRequest, daemon: &Daemon) -> Result<Event, ErrorEvent> {
    let entry = running_run(&request.id, daemon, "take input").await?;
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

/// `kill`: signals a run's process group and answers with its exit once it has ended.
pub(super) async fn kill(request: KillRequest, daemon: &Daemon) -> Result<Event, ErrorEvent> {
    let KillSignal(signal) = request.signal.unwrap_or_default();
    let entry = running_run(&request.id, daemon, "be signalled").await?;
    let _delivery = daemon.delivery();
    tracing::info!(id = %entry.id, signal = signal.as_str(), "kill requested");
    entry.stop(StopReason::Kill(signal));
    let patience = daemon.kill_grace + KILL_SLACK;
    match tokio::time::timeout(patience, entry.finished()).await {
        Ok(last) => Ok((*last).clone()),
        Err(_) => Err(internal(format!(
            "run {} was sent {signal} but has not ended after {}s",
            entry.id,
            patience.as_secs()
        ))),
    }
}

/// `ps`: the running commands, oldest first.
pub(super) fn ps(request: &PsRequest, daemon: &Daemon) -> Event {
    let entries: Vec<Arc<RunEntry>> = lock(&daemon.runs).values().cloned().collect();
    let mut runs: Vec<LiveRun> = entries
        .iter()
        .filter(|e| !e.is_done())
        .filter(|e| request.tags.iter().all(|(k, v)| e.tags.get(k) == Some(v)))
        .map(|e| {
            let stats = e.live.stats();
            LiveRun {
                id: e.id.clone(),
                pid: e.pid,
                command: display_command(e.argv.as_deref(), e.shell.as_deref()),
                argv: e.argv.clone(),
                shell: e.shell.clone(),
                cwd: e.cwd.clone(),
                tags: e.tags.clone(),
                started_at: rfc3339(e.started_at),
                elapsed_ms: millis(stats.elapsed),
                idle_ms: millis(stats.idle),
                total_lines: stats.lines,
                total_bytes: stats.bytes,
                tty: e.tty,
                spill_path: e.spill_path().map(|p| p.to_string_lossy().into_owned()),
                stopping: e.control.is_stopping(),
            }
        })
        .collect();
    runs.sort_by(|a, b| a.started_at.cmp(&b.started_at).then(a.id.cmp(&b.id)));
    Event::Ps(PsEvent { runs })
}

/// `follow`: a run's output from a line on, live until it ends, then its exit.
pub(super) async fn follow(
    request: FollowRequest,
    daemon: &Daemon,
    write: &mut ClientWriter,
) -> io::Result<()> {
    let from = request.from_line.unwrap_or(1);
    if from == 0 {
        let message = "from_line must be at least 1: lines are numbered from 1";
        return send(write, &Event::error(ErrorCode::BadRequest, message)).await;
    }
    let id = request.id;
    match daemon.find(&id) {
        Found::Running(entry) => {
            let _delivery = daemon.delivery();
            let ended = entry.done.borrow().clone();
            if let Some(last) = ended
                && let Err(e) = check_from(&last, from)
            {
                return send(write, &Event::Error(e)).await;
            }
            let last = follow_live(&entry, Start::Line(from), write).await?;
            send(write, &last).await
        }
        Found::Recent {
            spill_path, last, ..
        } => {
            if let Err(e) = check_from(&last, from) {
                return send(write, &Event::Error(e)).await;
            }
            if let Some(path) = spill_path {
                follow_finished(&path, from, write).await?;
            }
            send(write, &last).await
        }
        Found::Recorded => {
            let last = match recorded_exit(id.clone(), daemon).await {
                Ok(last) => last,
                Err(e) => return send(write, &Event::Error(e)).await,
            };
            if let Err(e) = check_from(&last, from) {
                return send(write, &Event::Error(e)).await;
            }
            match spill_of(id, daemon).await {
                Ok((_, path)) => follow_finished(&path, from, write).await?,
                Err(e) => return send(write, &Event::Error(e)).await,
            }
            send(write, &last).await
        }
    }
}

/// A finished run's output has `total_lines`: a follower may start at most just past them.
fn check_from(last: &Event, from: u64) -> Result<(), ErrorEvent> {
    match last {
        Event::Exit(exit) if from > exit.preview.total_lines + 1 => Err(error(
            ErrorCode::BadRequest,
            format!(
                "from_line {from} is past the end of run {}: it has {} lines",
                exit.id, exit.preview.total_lines
            ),
        )),
        _ => Ok(()),
    }
}

/// Opens a tail of `path` off the runtime.
async fn open_tail(path: PathBuf, start: Start) -> io::Result<Tail> {
    tokio::task::spawn_blocking(move || Tail::open(&path, start))
        .await
        .map_err(io::Error::other)?
}

/// Reads what the file has next, off the runtime; returns the tail and the bytes read.
async fn read_tail(mut tail: Tail, last: bool) -> io::Result<(Tail, usize, Vec<OutputEvent>)> {
    tokio::task::spawn_blocking(move || {
        let n = tail.read_more()?;
        let events = tail.events(last && n == 0);
        Ok((tail, n, events))
    })
    .await
    .map_err(io::Error::other)?
}

/// Sends a finished spill file from line `from` to its end.
async fn follow_finished(path: &Path, from: u64, write: &mut ClientWriter) -> io::Result<()> {
    let Ok(mut tail) = open_tail(path.to_path_buf(), Start::Line(from)).await else {
        return Ok(()); // The exit event's notice says what became of the output.
    };
    loop {
        let (next, n, events) = read_tail(tail, true).await?;
        tail = next;
        for event in events {
            send(write, &Event::Output(event)).await?;
        }
        if n == 0 {
            return Ok(());
        }
    }
}

/// Sends a run's output from `start` as it is written, until the run has ended and the spill
/// has been read to its end; returns the run's last event.
async fn follow_live(
    entry: &RunEntry,
    start: Start,
    write: &mut ClientWriter,
) -> io::Result<Arc<Event>> {
    let Some(path) = entry.spill_path().map(Path::to_path_buf) else {
        // No spill file: there is nothing to follow, only the end to wait for.
        return Ok(entry.finished().await);
    };
    let mut committed = entry.live.committed();
    let mut done = entry.done.subscribe();
    let mut tail = match open_tail(path, start).await {
        Ok(tail) => tail,
        Err(_) => return Ok(entry.finished().await),
    };
    loop {
        // Looked at before reading: once the run has ended the file is complete, so a read
        // that then finds its end has seen everything.
        let ended = done.borrow_and_update().clone();
        let (next, n, events) = read_tail(tail, ended.is_some()).await?;
        tail = next;
        for event in events {
            send(write, &Event::Output(event)).await?;
        }
        if n > 0 {
            continue;
        }
        if let Some(last) = ended {
            return Ok(last);
        }
        let written = *committed.borrow_and_update();
        if tail.pos() < written {
            // The spill writer has the bytes and is about to write them.
            tokio::select! {
                () = tokio::time::sleep(FILE_LAG_POLL) => {}
                _ = done.changed() => {}
            }
        } else {
            tokio::select! {
                _ = committed.changed() => {}
                _ = done.changed() => {}
            }
        }
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
