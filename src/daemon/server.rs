//! The socket side of the daemon: accepts connections, reads JSON-Lines requests, answers with
//! events. This module holds the daemon's shared state ([`Daemon`], behind an `Arc` every
//! task clones), the one loop that reads client sockets ([`serve_connection`]), the one writer
//! of events ([`ClientWriter`]), and the dispatch of each request to the handler of its verb:
//! a submodule each (`run`, `wait`, `send`, `follow`, `ps`, `kill`, `history`, `show`, `grep`,
//! `stats`; `ping` and `purge` are a line here), with the registry of runs in flight in `runs`.
//!
//! Each connection is served by its own task, one request at a time; a client wanting two runs
//! at once opens two connections. Runs are owned by the daemon, not by the connection: a client
//! that disconnects mid-run does not stop its command, which completes and is recorded (unless
//! it asked for `kill_on_disconnect`). The writing of runs' records to the index is in
//! `recorder`. No input can panic the daemon or reach
//! another client: every bad line gets an `error` event, and a line over the size limit closes
//! that connection only.
//!
//! Clumsy and hostile clients cost a bounded amount and are dropped: at most
//! [`Settings::max_clients`] connections at once (the next ones get a `too_many_clients` error
//! and are closed); a request line begun must be finished within the client timeout; every event
//! must be taken by the client within the same timeout, so one that stops reading holds at most
//! the kernel's socket buffer and the event being sent, and is then dropped. Idle connections
//! with no request under way may stay open.

mod follow;
mod grep;
mod history;
mod kill;
mod passed_fds;
mod previews;
mod ps;
mod recorder;
mod redaction;
mod run;
mod runs;
mod send;
mod show;
mod stats;
mod status;
mod wait;

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{Notify, Semaphore, watch};

use crate::engine::redact::Redactor;
use crate::engine::tokens;
use crate::protocol::{
    ErrorCode, ErrorEvent, Event, ExitEvent, MAX_REQUEST_BYTES, PROTOCOL_VERSION, PongEvent,
    PurgeReport, PurgeRequest, Request, RunId, parse_request,
};
use crate::storage::index::{Ending, Index, IndexError, RunEnd, RunRow, RunTokens};
use crate::storage::purge::{self, PurgePolicy};
use crate::storage::space::Space;
use crate::storage::spill::DataDir;
use crate::supervisor::cgroup::{CgroupTree, Containment};
use crate::supervisor::limits::Resources;
use crate::supervisor::{Finished, StopReason};
use crate::sync::lock;

use self::grep::{grep, grep_permits};
use self::history::history;
use self::recorder::{Outcome, Record, Recorder};
use self::runs::{RecentRun, RunEntry, Session};
use self::show::show;
use self::stats::stats;

/// How long shutdown waits, past the kill grace, for runs to wind up and clients to be told.
const SHUTDOWN_SLACK: Duration = Duration::from_secs(5);

/// Each connection's read buffer: most request lines fit, and a thousand idle clients cost
/// little.
const READ_BUFFER: usize = 4096;

/// Previews up to this long have their tokens counted on the runtime's thread (tens of
/// microseconds); longer ones on a blocking thread.
const INLINE_COUNT_BYTES: usize = 4096;

/// How long shutdown waits for the runs' records to reach an index another process has locked.
const SHUTDOWN_RECORDS: Duration = Duration::from_secs(10);

/// The daemon's shared state: settings, the runs in flight, and activity for idle exit.
pub struct Daemon {
    data_dir: DataDir,
    /// The run index, for reads and the purge; SQLite work happens on blocking threads, never
    /// on the runtime's workers.
    index: Arc<Mutex<Index>>,
    /// Writes runs' starts and ends, with a connection of its own.
    recorder: Recorder,
    /// The data directory's disk: its reserve, and why a run could not be recorded.
    space: Arc<Space>,
    /// Greps searching at once (see [`grep`]), out of `grep_slots`.
    greps: Arc<Semaphore>,
    grep_slots: usize,
    /// Runs ended and greps done, ever: the memory they used may be handed back.
    work: AtomicU64,
    policy: PurgePolicy,
    default_timeout: Option<Duration>,
    kill_grace: Duration,
    max_spill: u64,
    client_timeout: Duration,
    max_clients: usize,
    redactor: Option<Arc<Redactor>>,
    /// Where runs' cgroups go (`None`: runs are tracked through `/proc`).
    cgroups: Option<Arc<CgroupTree>>,
    /// Limits for runs that ask for none.
    default_resources: Resources,
    /// The runs in flight, until they have ended and been recorded.
    runs: Mutex<HashMap<RunId, Arc<RunEntry>>>,
    /// Runs that ended lately, oldest first, for late `wait`s (bounded).
    recent: Mutex<VecDeque<RecentRun>>,
    /// Client tasks that owe someone an `exit` event: a shutdown waits for them.
    deliveries: AtomicUsize,
    clients: AtomicUsize,
    /// When the daemon last had neither runs nor clients (None while it has some).
    idle_since: Mutex<Option<Instant>>,
    stopping: AtomicBool,
    /// Woken whenever a run ends or a client leaves.
    changed: Notify,
    /// Who this daemon is, for `status`.
    identity: status::Identity,
    /// Asks for shutdown.
    stop: watch::Sender<bool>,
}

/// The daemon's settings, as resolved by `daemon::run`.
pub struct Settings {
    pub default_timeout: Option<Duration>,
    pub kill_grace: Duration,
    pub policy: PurgePolicy,
    /// Cap on each run's spill file; a run may ask for less, never more.
    pub max_spill: u64,
    /// How long a client may take to finish a request line, and to take each event.
    pub client_timeout: Duration,
    /// Connections served at once; more are refused with an error.
    pub max_clients: usize,
    /// Redacts credentials from what clients are sent (None: `--no-redact`).
    pub redactor: Option<Arc<Redactor>>,
    /// The data directory's disk space and its reserve.
    pub space: Arc<Space>,
    /// Cgroups or not, and default limits.
    pub containment: Containment,
    /// Runs a dead daemon left `running` (now recorded as interrupted): whatever they left is
    /// found and stopped at start-up.
    pub interrupted: Vec<RunId>,
    /// The socket the daemon listens on, for `status`.
    pub socket: PathBuf,
    /// Asks the daemon to shut down (`shutdown`, as SIGTERM does).
    pub stop: watch::Sender<bool>,
}

impl Daemon {
    /// A daemon on `index`; `records` is a second connection to it, for writing runs' records.
    pub fn new(
        data_dir: DataDir,
        index: Index,
        records: Index,
        settings: Settings,
    ) -> std::io::Result<Self> {
        // Every run's end counts tokens: the tokenizer's ~120 ms build is better paid now.
        tokens::warm_up();
        let cgroups = settings.containment.tree(data_dir.root()).map(Arc::new);
        sweep_interrupted(settings.interrupted, cgroups.clone(), settings.kill_grace);
        Ok(Daemon {
            cgroups,
            default_resources: settings.containment.defaults,
            data_dir,
            index: Arc::new(Mutex::new(index)),
            recorder: Recorder::start(records, Arc::clone(&settings.space))?,
            space: settings.space,
            greps: Arc::new(Semaphore::new(grep_permits())),
            grep_slots: grep_permits(),
            work: AtomicU64::new(0),
            policy: settings.policy,
            default_timeout: settings.default_timeout,
            kill_grace: settings.kill_grace,
            max_spill: settings.max_spill,
            client_timeout: settings.client_timeout,
            max_clients: settings.max_clients,
            redactor: settings.redactor,
            runs: Mutex::new(HashMap::new()),
            recent: Mutex::new(VecDeque::new()),
            deliveries: AtomicUsize::new(0),
            clients: AtomicUsize::new(0),
            idle_since: Mutex::new(Some(Instant::now())),
            stopping: AtomicBool::new(false),
            changed: Notify::new(),
            identity: status::Identity::now(settings.socket),
            stop: settings.stop,
        })
    }

    /// Runs `work` on the index on a blocking thread.
    async fn with_index<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Index) -> Result<T, IndexError> + Send + 'static,
    ) -> Result<T, ErrorEvent> {
        let index = Arc::clone(&self.index);
        tokio::task::spawn_blocking(move || {
            let mut index = lock(&index);
            // Opened read-only on a full disk: writable again once the disk has room, so that
            // reads see what the recorder has written since and a purge can delete rows.
            if index.is_read_only() {
                let _ = index.writable();
            }
            work(&mut index)
        })
        .await
        .map_err(|e| internal(format!("index task failed: {e}")))?
        .map_err(|e| internal(format!("index: {e}")))
    }

    /// Runs one purge pass (retention, quota, orphans) and logs what went.
    pub async fn purge(&self, request: PurgeRequest) -> Result<PurgeReport, ErrorEvent> {
        if let Some(id) = request.id {
            return self
                .purge_run(id, request.older_than_ms, request.dry_run)
                .await;
        }
        let mut policy = self.policy.clone();
        if let Some(ms) = request.older_than_ms {
            policy.retention = Duration::from_millis(ms);
        }
        let spills = self.data_dir.spills_dir();
        let space = Arc::clone(&self.space);
        let report = self
            .with_index(move |index| {
                // The purge deletes files before rows, but a row needs a little room too.
                if !request.dry_run {
                    space.make_room();
                }
                purge::purge(index, &spills, &policy, chrono::Utc::now(), request.dry_run)
            })
            .await?;
        let runs = report.expired.len() + report.evicted.len();
        if !report.dry_run && (runs > 0 || !report.orphans.is_empty()) {
            tracing::info!(
                runs,
                orphans = report.orphans.len(),
                freed_bytes = report.freed_bytes,
                "purged"
            );
        }
        Ok(report)
    }

    /// `purge` with an `id`: deletes that one finished run and its spill.
    async fn purge_run(
        &self,
        id: RunId,
        older_than: Option<u64>,
        dry_run: bool,
    ) -> Result<PurgeReport, ErrorEvent> {
        use crate::storage::purge::PurgeRunError;
        if older_than.is_some() {
            return Err(bad_request(
                "give either id or older_than_ms, not both".into(),
            ));
        }
        if lock(&self.runs).contains_key(&id) {
            return Err(bad_request(PurgeRunError::Running(id).to_string()));
        }
        let spills = self.data_dir.spills_dir();
        let max_disk = self.policy.max_disk;
        let index = Arc::clone(&self.index);
        let done = tokio::task::spawn_blocking(move || {
            purge::purge_run(&mut lock(&index), &spills, &id, max_disk, dry_run)
        })
        .await
        .map_err(|e| internal(format!("purge task failed: {e}")))?;
        match done {
            Ok(report) => {
                if !dry_run {
                    tracing::info!(runs = 1, freed_bytes = report.freed_bytes, "purged one run");
                }
                Ok(report)
            }
            Err(e @ PurgeRunError::Unknown(_)) => Err(ErrorEvent {
                code: ErrorCode::UnknownRun,
                message: e.to_string(),
            }),
            Err(e @ PurgeRunError::Running(_)) => Err(bad_request(e.to_string())),
            Err(e) => Err(internal(e.to_string())),
        }
    }

    /// How many runs are going.
    pub fn runs_in_flight(&self) -> usize {
        lock(&self.runs).len()
    }

    /// No run is going and no grep is searching.
    pub fn is_quiet(&self) -> bool {
        self.runs_in_flight() == 0 && self.greps.available_permits() == self.grep_slots
    }

    /// Runs ended and greps done so far: when this has moved and the daemon is quiet, the
    /// memory they used may be handed back.
    pub fn work_done(&self) -> u64 {
        self.work.load(Ordering::SeqCst)
    }

    /// The data directory's disk space.
    pub fn space(&self) -> Arc<Space> {
        Arc::clone(&self.space)
    }

    /// How long the daemon has had no runs and no clients.
    pub fn idle_for(&self) -> Duration {
        lock(&self.idle_since).map_or(Duration::ZERO, |since| since.elapsed())
    }

    /// Stops every run's process group and waits (bounded) for the runs to finish and their
    /// clients to be sent their `exit` events; then stops whatever is left of them.
    pub async fn stop_all_runs(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        for entry in lock(&self.runs).values() {
            entry.stop(StopReason::Shutdown);
        }
        // A run's end takes the group's grace, and then its leftovers' grace.
        let deadline = tokio::time::Instant::now() + 2 * self.kill_grace + SHUTDOWN_SLACK;
        loop {
            let changed = self.changed.notified();
            if lock(&self.runs).is_empty() && self.deliveries.load(Ordering::SeqCst) == 0 {
                break;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                tracing::warn!("shutdown: gave up waiting for runs to end");
                break;
            }
        }
        let (cgroups, grace) = (self.cgroups.clone(), self.kill_grace);
        let swept = tokio::task::spawn_blocking(move || {
            let mut left = 0;
            if let Some(tree) = &cgroups {
                left += tree.sweep(None);
                tree.remove_if_empty();
            }
            left + crate::supervisor::descendants::sweep_descendants(grace)
        })
        .await
        .unwrap_or(0);
        if swept > 0 {
            tracing::warn!(processes = swept, "shutdown: stopped what runs left behind");
        }
    }

    /// Waits (bounded) for the runs' records to be written, at shutdown.
    pub async fn flush_records(&self) {
        let left = self.recorder.flush(SHUTDOWN_RECORDS).await;
        if left > 0 {
            tracing::error!(
                records = left,
                "shutdown: the run index stayed locked; these runs' records are lost"
            );
        }
    }

    fn register(&self, id: RunId, entry: Arc<RunEntry>) {
        lock(&self.runs).insert(id, entry);
        self.update_idle();
    }

    fn unregister(&self, id: &RunId) {
        lock(&self.runs).remove(id);
        self.work.fetch_add(1, Ordering::SeqCst);
        self.update_idle();
        self.changed.notify_waiters();
    }

    /// Counts a new client in, unless there are already as many as the daemon serves.
    fn client_arrived(self: &Arc<Self>) -> Option<ClientGuard> {
        let admitted = self
            .clients
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.max_clients).then_some(n + 1)
            })
            .is_ok();
        self.update_idle();
        admitted.then(|| ClientGuard(Arc::clone(self)))
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

    /// A run id no recorded run has.
    async fn fresh_run_id(&self) -> Result<RunId, ErrorEvent> {
        loop {
            let id = RunId::generate();
            let taken = {
                let (id, running) = (id.clone(), lock(&self.runs).contains_key(&id));
                running
                    || self
                        .with_index(move |index| index.get(&id))
                        .await?
                        .is_some()
            };
            if !taken {
                return Ok(id);
            }
        }
    }

    /// Completes a run's record (see [`Recorder`]: a busy index delays it, never loses it).
    /// `finished.preview` is the one clients are given (annotated), whose tokens are counted
    /// here: cheap, as previews are bounded (and measured from a sample past
    /// [`tokens::EXACT_MAX_BYTES`], which only a `max_bytes` over it allows).
    async fn record_end(&self, id: &RunId, finished: &Finished) -> Outcome {
        let preview = &finished.preview;
        // A short preview (a short run's) is counted at once: less than a hop to another thread.
        let counted = if preview.content.len() <= INLINE_COUNT_BYTES {
            Ok(tokens::measure(&preview.content))
        } else {
            let content = preview.content.clone();
            tokio::task::spawn_blocking(move || tokens::measure(&content)).await
        };
        let tokens = counted.ok().map(|preview_tokens| RunTokens {
            output: finished.output_tokens.tokens,
            preview: preview_tokens.tokens,
            output_estimated: finished.output_tokens.estimated || preview_tokens.estimated,
        });
        let ending = Ending {
            ended_at: finished.ended_at,
            status: finished.status,
            exit_code: finished.exit_code,
            signal: finished.signal,
        };
        let end = RunEnd::new(ending, &finished.preview, tokens);
        self.recorder.record(Record::End(id.clone(), end)).await
    }
}

/// Stops, on a thread of its own, what the runs of a dead daemon left running: their
/// leftover cgroups, and every process with their marker.
fn sweep_interrupted(ids: Vec<RunId>, cgroups: Option<Arc<CgroupTree>>, grace: Duration) {
    if ids.is_empty() {
        return;
    }
    let sweep = move || {
        let in_cgroups = cgroups.as_ref().map_or(0, |tree| tree.sweep(Some(&ids)));
        let by_marker = crate::supervisor::descendants::sweep_markers(&ids, grace);
        if in_cgroups + by_marker > 0 {
            tracing::warn!(
                runs = ids.len(),
                processes = in_cgroups + by_marker,
                "stopped what the runs of a daemon that died left running"
            );
        }
    };
    if let Err(e) = std::thread::Builder::new()
        .name("spillway-sweep".into())
        .spawn(sweep)
    {
        tracing::warn!("cannot look for what a dead daemon's runs left: {e}");
    }
}

/// Counts a connected client for as long as it lives.
struct ClientGuard(Arc<Daemon>);

impl Drop for ClientGuard {
    fn drop(&mut self) {
        self.0.clients.fetch_sub(1, Ordering::SeqCst);
        self.0.update_idle();
        self.0.changed.notify_waiters();
    }
}

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
struct OwnedRuns(Vec<std::sync::Weak<RunEntry>>);

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
    write.redactor = match &request {
        Ok(request) if !request.no_redact() => daemon.redactor.clone(),
        _ => None,
    };
    match request {
        Err(error) => send(write, &Event::Error(error)).await,
        Ok(Request::Ping) => {
            let pong = Event::Pong(PongEvent {
                protocol: PROTOCOL_VERSION,
                version: env!("CARGO_PKG_VERSION").to_string(),
                pid: std::process::id(),
            });
            send(write, &pong).await
        }
        Ok(Request::Run(run)) => run::serve_run(*run, daemon, write, session).await,
        Ok(Request::Wait(request)) => reply(write, wait::wait(request, daemon).await).await,
        Ok(Request::Send(request)) => reply(write, send::send_input(request, daemon).await).await,
        Ok(Request::Follow(request)) => follow::follow(request, daemon, write).await,
        Ok(Request::Ps(request)) => send(write, &ps::ps(&request, daemon)).await,
        Ok(Request::Kill(request)) => reply(write, kill::kill(request, daemon).await).await,
        Ok(Request::History(request)) => reply(write, history(request, daemon).await).await,
        Ok(Request::Show(request)) => reply(write, show(request, daemon).await).await,
        Ok(Request::Grep(request)) => reply(write, grep(request, daemon).await).await,
        Ok(Request::Stats) => reply(write, stats(daemon).await).await,
        Ok(Request::Purge(request)) => {
            let report = daemon.purge(request).await.map(Event::Purge);
            reply(write, report).await
        }
        Ok(Request::Resize(request)) => reply(write, send::resize(request, daemon).await).await,
        Ok(Request::Status) => send(write, &status::status(daemon)).await,
        Ok(Request::Shutdown) => send(write, &status::shut_down(daemon)).await,
    }
}

/// Sends an answer, or the error that stood in its way.
async fn reply(write: &mut ClientWriter, answer: Result<Event, ErrorEvent>) -> std::io::Result<()> {
    send(write, &answer.unwrap_or_else(Event::Error)).await
}

fn internal(message: String) -> ErrorEvent {
    ErrorEvent {
        code: ErrorCode::Internal,
        message,
    }
}

fn bad_request(message: String) -> ErrorEvent {
    ErrorEvent {
        code: ErrorCode::BadRequest,
        message,
    }
}

/// Finds a run's record and the spill file it names, refusing any path outside the spills
/// directory: a row is data, never a trusted path.
async fn spill_of(id: RunId, daemon: &Daemon) -> Result<(RunRow, PathBuf), ErrorEvent> {
    let wanted = id.clone();
    let row = daemon
        .with_index(move |index| index.get(&wanted))
        .await?
        .ok_or_else(|| ErrorEvent {
            code: ErrorCode::UnknownRun,
            message: format!("no run with id {id}"),
        })?;
    let missing = |why: &str| ErrorEvent {
        code: ErrorCode::SpillMissing,
        message: format!("the output of run {id} is gone: {why}; its record remains"),
    };
    let Some(path) = row.spill_path.clone() else {
        return Err(missing("it never had a spill file"));
    };
    if row.spill_missing {
        return Err(missing(&format!("{path} was deleted or lost")));
    }
    let path = confine(Path::new(&path), &daemon.data_dir.spills_dir()).ok_or_else(|| {
        missing(&format!(
            "{path} is missing or outside the spills directory"
        ))
    })?;
    // A file another user put in its place is not this run's output.
    let me = nix::unistd::geteuid().as_raw();
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if std::os::unix::fs::MetadataExt::uid(&meta) == me && meta.is_file() => {}
        _ => {
            return Err(missing(&format!(
                "{} is not a file of this user's",
                path.display()
            )));
        }
    }
    Ok((row, path))
}

/// `path` resolved, if it exists and lies inside `dir`.
fn confine(path: &Path, dir: &Path) -> Option<PathBuf> {
    let path = path.canonicalize().ok()?;
    let dir = dir.canonicalize().ok()?;
    (path.starts_with(&dir) && path != dir).then_some(path)
}

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
    fn new(half: OwnedWriteHalf, stall: Duration) -> ClientWriter {
        ClientWriter {
            half,
            stall,
            redactor: None,
        }
    }
}

async fn send(write: &mut ClientWriter, event: &Event) -> std::io::Result<()> {
    let redacted = write
        .redactor
        .as_deref()
        .and_then(|r| redaction::redacted(event, r));
    let line = redacted.as_ref().unwrap_or(event).to_line();
    match tokio::time::timeout(write.stall, write.half.write_all(line.as_bytes())).await {
        Ok(written) => written,
        Err(_) => {
            tracing::warn!("a client took no events for the client timeout: dropping it");
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client stopped reading",
            ))
        }
    }
}

/// The `exit` event of a run whose preview has been [`annotate`]d.
fn exit_event(id: RunId, f: Finished) -> Event {
    let duration_ms = (f.ended_at - f.started_at).num_milliseconds().max(0) as u64;
    Event::Exit(Box::new(ExitEvent {
        id,
        status: f.status,
        exit_code: f.exit_code,
        signal: f.signal,
        duration_ms,
        started_at: crate::protocol::time::wire_time(f.started_at),
        ended_at: crate::protocol::time::wire_time(f.ended_at),
        first_line: None,
        stopped: f.stopped,
        limits_hit: f.limits_hit,
        preview: f.preview,
    }))
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
