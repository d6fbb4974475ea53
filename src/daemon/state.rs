//! The daemon's shared state, behind an `Arc` every task clones: its settings, the registry of
//! runs ([`Registry`]), the index and the recorder of runs' records, the grep queue, and the
//! counts that decide idle exit and shutdown (clients connected, clients owed an `exit`).
//!
//! The verbs read and change the daemon only through this; none of it knows how requests
//! arrive or answers leave.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio::sync::{Notify, Semaphore, watch};

use crate::engine::redact::Redactor;
use crate::engine::tokens;
use crate::protocol::{ErrorCode, ErrorEvent, Event, RunId};
use crate::storage::index::{Index, IndexError};
use crate::storage::purge::PurgePolicy;
use crate::storage::space::Space;
use crate::storage::spill::DataDir;
use crate::supervisor::StopReason;
use crate::supervisor::cgroup::{CgroupTree, Containment};
use crate::supervisor::limits::Resources;
use crate::sync::lock;

use super::errors::{error, internal, unknown_run};
use super::recorder::Recorder;
use super::runs::{Found, Registry, RunEntry};
use super::token_counts::{SETTLE_PATIENCE, TokenCounts};

/// How long shutdown waits, past the kill grace, for runs to wind up and clients to be told.
const SHUTDOWN_SLACK: Duration = Duration::from_secs(5);

/// How long shutdown waits for the runs' records to reach an index another process has locked.
const SHUTDOWN_RECORDS: Duration = Duration::from_secs(10);

/// The daemon's shared state: settings, the runs in flight, and activity for idle exit.
pub struct Daemon {
    pub(super) data_dir: DataDir,
    /// The run index, for reads and the purge; SQLite work happens on blocking threads, never
    /// on the runtime's workers.
    pub(super) index: Arc<Mutex<Index>>,
    /// Writes runs' starts and ends, with a connection of its own.
    pub(super) recorder: Recorder,
    /// Ended runs' token counts under way.
    pub(super) token_counts: TokenCounts,
    /// The data directory's disk: its reserve, and why a run could not be recorded.
    pub(super) space: Arc<Space>,
    /// Greps searching at once (see [`grep_permits`]), out of `grep_slots`.
    pub(super) greps: Arc<Semaphore>,
    grep_slots: usize,
    /// Runs ended and greps done, ever: the memory they used may be handed back.
    pub(super) work: AtomicU64,
    pub(super) policy: PurgePolicy,
    pub(super) default_timeout: Option<Duration>,
    pub(super) kill_grace: Duration,
    pub(super) max_spill: u64,
    pub(super) client_timeout: Duration,
    pub(super) max_clients: usize,
    pub(super) redactor: Option<Arc<Redactor>>,
    /// Where runs' cgroups go (`None`: runs are tracked through `/proc`).
    pub(super) cgroups: Option<Arc<CgroupTree>>,
    /// Limits for runs that ask for none.
    pub(super) default_resources: Resources,
    /// The runs in flight, until they have ended and been recorded, and the recent ones.
    pub(super) runs: Registry,
    /// Client tasks that owe someone an `exit` event: a shutdown waits for them.
    deliveries: AtomicUsize,
    pub(super) clients: AtomicUsize,
    /// When the daemon last had neither runs nor clients (None while it has some).
    idle_since: Mutex<Option<Instant>>,
    pub(super) stopping: AtomicBool,
    /// Woken whenever a run ends or a client leaves.
    changed: Notify,
    /// Who this daemon is, for `status`.
    pub(super) identity: Identity,
    /// Asks for shutdown.
    pub(super) stop: watch::Sender<bool>,
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

/// What does not change while the daemon lives.
pub(super) struct Identity {
    pub(super) socket: PathBuf,
    pub(super) started_at: DateTime<Utc>,
    pub(super) started: Instant,
}

impl Identity {
    fn now(socket: PathBuf) -> Identity {
        Identity {
            socket,
            started_at: Utc::now(),
            started: Instant::now(),
        }
    }
}

/// Greps that compile and search at once: one per core, at most 4. The rest wait their turn,
/// holding only their request, so memory stays bounded whatever the clients send.
fn grep_permits() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(1, 4))
}

impl Daemon {
    /// A daemon on `index`; `records` is a second connection to it, for writing runs' records.
    pub fn new(
        data_dir: DataDir,
        index: Index,
        records: Index,
        settings: Settings,
    ) -> std::io::Result<Self> {
        // Every run's end counts tokens and redacts, and most runs' output holds a line the
        // highlight patterns try: the split pattern's, the redaction rules' and the highlight
        // patterns' compilations are better paid now.
        tokens::warm_up();
        crate::engine::redact::warm_up(crate::engine::redact::Warm::EveryRule);
        crate::engine::highlight::Patterns::defaults().compile_now();
        let cgroups = settings.containment.tree(data_dir.root()).map(Arc::new);
        sweep_interrupted(settings.interrupted, cgroups.clone(), settings.kill_grace);
        Ok(Daemon {
            cgroups,
            default_resources: settings.containment.defaults,
            data_dir,
            index: Arc::new(Mutex::new(index)),
            recorder: Recorder::start(records, Arc::clone(&settings.space))?,
            token_counts: TokenCounts::new(),
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
            runs: Registry::default(),
            deliveries: AtomicUsize::new(0),
            clients: AtomicUsize::new(0),
            idle_since: Mutex::new(Some(Instant::now())),
            stopping: AtomicBool::new(false),
            changed: Notify::new(),
            identity: Identity::now(settings.socket),
            stop: settings.stop,
        })
    }

    /// Waits (at most [`SETTLE_PATIENCE`]) for the tokens of the runs ended so far to be in
    /// the index, for a reader of the token accounting (see [`super::token_counts`]).
    pub(super) async fn settle_token_counts(&self) {
        if !self.token_counts.settled(SETTLE_PATIENCE).await {
            tracing::warn!("some ended runs' tokens are still being counted: answering without");
        }
    }

    /// Runs `work` on the index, blocking (see [`crate::blocking`]).
    pub(super) async fn with_index<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Index) -> Result<T, IndexError> + Send + 'static,
    ) -> Result<T, ErrorEvent> {
        let index = Arc::clone(&self.index);
        crate::blocking::run(move || {
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

    /// How many runs are going.
    pub fn runs_in_flight(&self) -> usize {
        self.runs.len()
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
        for entry in self.runs.running() {
            entry.stop(StopReason::Shutdown);
        }
        // A run's end takes the group's grace, and then its leftovers' grace.
        let deadline = tokio::time::Instant::now() + 2 * self.kill_grace + SHUTDOWN_SLACK;
        loop {
            let changed = self.changed.notified();
            if self.runs.is_empty() && self.deliveries.load(Ordering::SeqCst) == 0 {
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
        self.settle_token_counts().await;
        let left = self.recorder.flush(SHUTDOWN_RECORDS).await;
        if left > 0 {
            tracing::error!(
                records = left,
                "shutdown: the run index stayed locked; these runs' records are lost"
            );
        }
    }

    /// Counts a run in flight in.
    pub(super) fn register(&self, entry: Arc<RunEntry>) {
        self.runs.insert(entry);
        self.update_idle();
    }

    /// Moves an ended run to the recent runs, and counts it out.
    pub(super) fn retire(&self, entry: &RunEntry, last: Arc<Event>) {
        self.runs.retire(entry, last);
        self.work.fetch_add(1, Ordering::SeqCst);
        self.update_idle();
        self.changed.notify_waiters();
    }

    /// Counts a new client in, unless there are already as many as the daemon serves.
    pub(super) fn client_arrived(self: &Arc<Self>) -> Option<ClientGuard> {
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
        let busy = self.clients.load(Ordering::SeqCst) > 0 || !self.runs.is_empty();
        let mut idle_since = lock(&self.idle_since);
        match (busy, *idle_since) {
            (true, _) => *idle_since = None,
            (false, None) => *idle_since = Some(Instant::now()),
            (false, Some(_)) => {}
        }
    }

    /// Counts the caller as owing someone an `exit` event until the guard is dropped: a
    /// shutdown waits (bounded) for it, so clients are told how their runs ended.
    pub(super) fn delivery(&self) -> Delivery<'_> {
        self.deliveries.fetch_add(1, Ordering::SeqCst);
        Delivery(self)
    }

    /// A run id no recorded run has.
    pub(super) async fn fresh_run_id(&self) -> Result<RunId, ErrorEvent> {
        loop {
            let id = RunId::generate();
            let taken = {
                let (id, running) = (id.clone(), self.runs.is_running(&id));
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

    /// The run a request about a running command names, or why there is none.
    pub(super) async fn running_run(
        &self,
        id: &RunId,
        doing: &str,
    ) -> Result<Arc<RunEntry>, ErrorEvent> {
        match self.runs.find(id) {
            Found::Running(entry) if !entry.is_done() => Ok(entry),
            Found::Running(_) | Found::Recent { .. } => Err(error(
                ErrorCode::NotRunning,
                format!("run {id} has ended: it cannot {doing}"),
            )),
            Found::Recorded => {
                let wanted = id.clone();
                match self.with_index(move |index| index.get(&wanted)).await? {
                    Some(_) => Err(error(
                        ErrorCode::NotRunning,
                        format!("run {id} has ended: it cannot {doing}"),
                    )),
                    None => Err(unknown_run(id)),
                }
            }
        }
    }
}

/// Counts a connected client for as long as it lives.
pub(super) struct ClientGuard(Arc<Daemon>);

impl Drop for ClientGuard {
    fn drop(&mut self) {
        self.0.clients.fetch_sub(1, Ordering::SeqCst);
        self.0.update_idle();
        self.0.changed.notify_waiters();
    }
}

/// Counts a client task that owes someone an `exit` event, for as long as it lives.
pub(super) struct Delivery<'a>(&'a Daemon);

impl Drop for Delivery<'_> {
    fn drop(&mut self) {
        self.0.deliveries.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_waiters();
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
