//! The daemon's lifecycle: claiming the data directory and the socket, serving, and shutting
//! down cleanly.
//!
//! Start-up happens before the async runtime exists (no threads yet, so setting the umask for
//! the bind is safe): the data directory is checked and locked (one daemon per data directory,
//! see [`lock`]), then the socket is either inherited from systemd (`LISTEN_FDS`/`LISTEN_PID`)
//! or bound by us ([`socket`]). Binding first takes an exclusive lock on `<socket>.lock`, so of two daemons
//! started at once on one socket exactly one wins, and only the winner may replace a stale
//! socket file left by a crash (one that refuses connections). Nothing at those paths is
//! followed if it is a symbolic link, and nothing but a socket is ever replaced. The soft
//! limit on open files is raised to the hard one, since every client holds one. The index is
//! opened last, with room made for it on a full disk ([`crate::storage::space`]), and what a dead
//! daemon left behind is put right ([`crate::daemon::recover`]). A daemon started by a client tells
//! it how start-up went ([`report`]).
//!
//! SIGTERM or SIGINT (via `signal-hook`) starts a graceful shutdown: stop accepting, stop every
//! running command's process group (TERM, then KILL after the grace period), let each run
//! finish its record and send its `exit` event, remove the socket, exit 0. A daemon started by
//! a client (`--idle-exit`) also shuts down after a quiet period with no runs and no clients.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use signal_hook::iterator::Signals;
use tokio::sync::watch;

use crate::daemon::recover::{process_lives, record_orphan_spills};
use crate::protocol::PurgeRequest;
use crate::storage::index::{INDEX_FILE, Index, IndexError};
use crate::storage::purge::PurgePolicy;
use crate::storage::space::Space;
use crate::storage::spill::DataDir;
use crate::supervisor::pty;

use self::state::{Daemon, Settings};

use self::lock::{DataDirLock, Predecessor};
use self::report::StartReport;
use self::socket::{Listener, claim_socket, lock_path};

mod client;
mod connection;
mod dispatch;
mod ending;
mod errors;
pub(crate) mod lock;
mod output;
mod passed_fds;
mod previews;
pub(crate) mod readiness;
mod recorder;
pub(crate) mod recover;
mod redaction;
mod report;
mod runs;
mod socket;
mod spill_file;
mod state;
mod times;
mod token_counts;
mod verbs;

/// Settings of one daemon, resolved from flags and environment.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub socket: PathBuf,
    pub data_dir: PathBuf,
    /// Exit after this long with no runs and no clients (daemons started by a client).
    pub idle_exit: Option<Duration>,
    /// Timeout for runs that do not ask for one.
    pub default_timeout: Option<Duration>,
    /// Between SIGTERM and SIGKILL when a run's process group is stopped.
    pub kill_grace: Duration,
    /// Retention, disk quota and orphan grace for spills.
    pub policy: PurgePolicy,
    /// Cap on each run's spill file.
    pub max_spill: u64,
    /// How long a client may take to finish a request line, and to take each event.
    pub client_timeout: Duration,
    /// Redacts credentials from what clients are sent; None with `--no-redact`.
    pub redactor: Option<std::sync::Arc<crate::engine::redact::Redactor>>,
    /// Standard output is a pipe to the client that started this daemon: say there whether
    /// start-up went well ([`report`]).
    pub report_start: bool,
    /// Cgroups or not for runs, and their default limits.
    pub containment: crate::supervisor::cgroup::Containment,
}

/// Most connections served at once...
const MAX_CLIENTS: usize = 4096;
/// ...and at most this share of the open-file limit (the rest is for runs, spills and the index).
const CLIENTS_SHARE_OF_FILES: u64 = 2;

/// How often the daemon purges old spills after the one at start-up.
const PURGE_INTERVAL: Duration = Duration::from_secs(3600);
/// How often the daemon reaps processes that escaped their runs and died (a zombie costs only
/// a process-table slot, so a few seconds late is fine), and looks whether it has gone quiet.
const TIDY_INTERVAL: Duration = Duration::from_secs(2);

/// Runs the daemon in the foreground until it is told to stop (or idles out).
pub fn run(config: DaemonConfig) -> Result<()> {
    crate::allocator::limit_arenas();
    let mut report = StartReport::new(config.report_start);
    let (opened, signals, runtime) = match start(&config) {
        Ok(started) => started,
        Err(e) => {
            report.failed(&e);
            return Err(e);
        }
    };
    report.ready();
    // Served from a task, on the runtime's workers: `block_on`'s own future runs on this
    // thread, which every accepted connection would wake before a worker took it over.
    runtime.block_on(async {
        match tokio::spawn(serve(config, opened, signals)).await {
            Ok(served) => served,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(e).context("the daemon's task was cancelled"),
        }
    })
}

/// Everything up to serving: the data directory and its lock, the socket, the index.
fn start(config: &DaemonConfig) -> Result<(Opened, Signals, tokio::runtime::Runtime)> {
    // Caught from the very start: a SIGTERM while the socket is being claimed or the index
    // opened (systemd stopping a unit that is still starting) waits in the queue and becomes
    // an orderly shutdown instead of killing the daemon mid-way.
    let signals = catch_signals()?;
    // The daemon's children are its runs' commands and their orphans: any other is stopped
    // at a run's end (`crate::supervisor::strays`).
    crate::supervisor::strays::enable();
    let files = raise_file_limit();
    let data_dir = DataDir::open(&config.data_dir)
        .with_context(|| format!("cannot use data directory {}", config.data_dir.display()))?;
    let (lock, predecessor) = DataDirLock::acquire(data_dir.root(), &config.socket)?;
    let space = Arc::new(Space::new(data_dir.root()));
    // The index before the socket: a client that finds the socket must find a daemon that
    // will serve it, not one that is about to fail on its index (a full disk, a damaged file)
    // and reset the connection; that client waits for the socket and reads why instead.
    let (index, records, interrupted) = open_index(&data_dir, &predecessor, &space)?;
    let listener = claim_socket(&config.socket)?;
    lock.heartbeat();
    let max_clients = usize::try_from(files / CLIENTS_SHARE_OF_FILES)
        .unwrap_or(usize::MAX)
        .min(MAX_CLIENTS);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("spillway-daemon")
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            listener.release(&config.socket);
            return Err(e).context("cannot start the async runtime");
        }
    };
    let opened = Opened {
        data_dir,
        lock,
        space,
        index,
        records,
        listener,
        max_clients,
        interrupted,
    };
    Ok((opened, signals, runtime))
}

/// What start-up set up for [`serve`].
struct Opened {
    data_dir: DataDir,
    /// Held until the daemon exits: no other daemon serves this data directory meanwhile.
    lock: DataDirLock,
    space: Arc<Space>,
    index: Index,
    /// A second connection to the index, for writing runs' records.
    records: Index,
    listener: Listener,
    max_clients: usize,
    /// Runs a dead daemon left, for the sweep of what they left running.
    interrupted: Vec<crate::protocol::RunId>,
}

/// Raises the soft limit on open files to the hard limit (every client holds a descriptor, and
/// a soft limit of 1024 would let a few hundred idle clients starve the runs); commands get the
/// old soft limit back, as programs that `select()` or close every descriptor expect. Returns
/// the limit now in force.
fn raise_file_limit() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 1024;
    };
    if soft >= hard {
        return soft;
    }
    match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
        Ok(()) => {
            pty::give_commands_file_limit(soft);
            hard
        }
        Err(e) => {
            tracing::warn!(soft, hard, error = %e, "cannot raise the open-file limit");
            soft
        }
    }
}

/// Opens the index (and a second connection to it for the run records), and puts right what
/// a dead daemon left: its runs left `running` are marked `interrupted`, and the spills it
/// started and never recorded are recorded as `interrupted` runs. On a nearly full disk the
/// space reserve is given up first; an index that still cannot be opened for writing is opened
/// read-only, so that every read answers (and is made writable by its first write once there
/// is room), and what the dead daemon left is put right at a later start. Only an index that
/// cannot be opened at all is reported as a full disk, in one line. The runs marked
/// `interrupted` are returned, so what they left running can be stopped.
fn open_index(
    data_dir: &DataDir,
    predecessor: &Predecessor,
    space: &Space,
) -> Result<(Index, Index, Vec<crate::protocol::RunId>)> {
    space.make_room();
    let path = data_dir.root().join(INDEX_FILE);
    let full = |e: &IndexError| (e.is_full() || e.is_io_failure()) && space.full_disk().is_some();
    let writable = match Index::open(&path) {
        Err(e) if (e.is_full() || e.is_io_failure()) && space.release() => Index::open(&path),
        other => other,
    };
    let (mut index, records) = match writable {
        Ok(index) => {
            let records = Index::open(&path)?;
            (index, records)
        }
        Err(e) if full(&e) => match read_only_pair(&path) {
            Ok(pair) => {
                tracing::warn!(
                    error = %e,
                    "the disk is full: the run index is open read-only until there is room"
                );
                pair
            }
            Err(_) => return Err(full_disk(space, &e)),
        },
        Err(e) => return Err(e.into()),
    };
    if index.is_read_only() {
        return Ok((index, records, Vec::new()));
    }
    match recover(&mut index, data_dir, predecessor) {
        Ok(interrupted) => Ok((index, records, interrupted)),
        // Recovery writes; the runs it would mark stay as they are until the next start. An
        // index that opened for writing (its write-ahead log and shared memory were left
        // behind) but cannot take a write is the read-only case that the opening itself
        // found: read-only it answers the same way, whatever the previous daemon left.
        Err(e) if full(&e) => {
            tracing::warn!(
                error = %e,
                "the disk is full: the runs of a daemon that died are marked interrupted at the next start"
            );
            match read_only_pair(&path) {
                Ok((index, records)) => {
                    tracing::warn!(
                        "the disk is full: the run index is open read-only until there is room"
                    );
                    Ok((index, records, Vec::new()))
                }
                // Still answering reads, and telling each run's client its record is lost.
                Err(_) => Ok((index, records, Vec::new())),
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// Two read-only connections to the index at `path` ([`Index::open_read_only`]).
fn read_only_pair(path: &Path) -> Result<(Index, Index), IndexError> {
    Ok((Index::open_read_only(path)?, Index::open_read_only(path)?))
}

/// The one-line error of a daemon that cannot open its index on a full disk.
fn full_disk(space: &Space, e: &IndexError) -> anyhow::Error {
    match space.full_disk() {
        Some(full) => anyhow::anyhow!("{full} ({e})"),
        None => anyhow::anyhow!("{e}"),
    }
}

/// Puts right what a dead daemon left in the index (see [`open_index`]); returns the runs
/// marked `interrupted`.
fn recover(
    index: &mut Index,
    data_dir: &DataDir,
    predecessor: &Predecessor,
) -> Result<Vec<crate::protocol::RunId>, IndexError> {
    let now = chrono::Utc::now();
    // A new daemon may get a dead one's pid (pid 1 in a container): never count ourselves.
    let me = std::process::id();
    let interrupted = index.recover_interrupted(now, predecessor.alive_at, |pid| {
        pid != me && process_lives(pid)
    })?;
    if !interrupted.is_empty() {
        tracing::warn!(
            runs = interrupted.len(),
            "marked runs of a daemon that died as interrupted"
        );
    }
    if let Some(pid) = predecessor.pid.filter(|&pid| pid != me) {
        let spills = data_dir.spills_dir();
        let recorded = record_orphan_spills(index, &spills, pid, predecessor.alive_at, now)?;
        if !recorded.is_empty() {
            tracing::warn!(
                runs = recorded.len(),
                "recorded as interrupted the runs a daemon that died had started but not recorded"
            );
        }
    }
    Ok(interrupted)
}

async fn serve(config: DaemonConfig, opened: Opened, signals: Signals) -> Result<()> {
    let Opened {
        data_dir,
        lock,
        space,
        index,
        records,
        listener,
        max_clients,
        interrupted,
    } = opened;
    let (std_listener, owned_socket) = match listener {
        Listener::Bound {
            listener,
            _lock: lock,
        } => (listener, Some((config.socket.clone(), lock))),
        Listener::Inherited(listener) => (listener, None),
    };
    let listener = tokio::net::UnixListener::from_std(std_listener)
        .context("cannot register the socket with the runtime")?;
    let (stop_tx, stop_rx) = watch::channel(false);
    watch_signals(signals, stop_tx.clone())?;
    let settings = Settings {
        default_timeout: config.default_timeout,
        kill_grace: config.kill_grace,
        policy: config.policy.clone(),
        max_spill: config.max_spill,
        client_timeout: config.client_timeout,
        max_clients,
        redactor: config.redactor.clone(),
        space,
        containment: config.containment.clone(),
        interrupted,
        socket: config.socket.clone(),
        stop: stop_tx.clone(),
    };
    let daemon = Arc::new(
        Daemon::new(data_dir, index, records, settings).context("cannot start the run recorder")?,
    );
    let mut chores = tokio::task::JoinSet::new();
    chores.spawn(purge_periodically(Arc::clone(&daemon)));
    chores.spawn(tidy_periodically(Arc::clone(&daemon), lock));
    if let Some(idle) = config.idle_exit {
        chores.spawn(exit_when_idle(Arc::clone(&daemon), idle, stop_tx));
    }
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Ready]);
    connection::accept_until_stopped(listener, Arc::clone(&daemon), stop_rx).await;

    let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
    tracing::info!("shutting down: stopping running commands");
    daemon.stop_all_runs().await;
    daemon.flush_records().await;
    if let Some((socket, _lock)) = owned_socket {
        let _ = std::fs::remove_file(&socket);
        let _ = std::fs::remove_file(lock_path(&socket));
    }
    // Ended here, not by the runtime's end: a chore blocking on its worker thread (a purge)
    // would go on after the runtime's timers are gone, and panic at its next sleep. Only
    // now is the data directory's lock (the tidy chore's) let go, the socket removed.
    chores.shutdown().await;
    tracing::info!("stopped");
    Ok(())
}

/// Catches SIGTERM and SIGINT (their default action would kill the daemon).
fn catch_signals() -> Result<Signals> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    Signals::new([SIGTERM, SIGINT]).context("cannot catch signals")
}

/// Turns the caught signals into a shutdown request, on a thread of its own.
fn watch_signals(mut signals: Signals, stop: watch::Sender<bool>) -> Result<()> {
    std::thread::Builder::new()
        .name("spillway-signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                tracing::info!(signal, "signal received");
                let _ = stop.send(true);
            }
        })
        .context("cannot start the signal thread")?;
    Ok(())
}

/// Asks for shutdown once the daemon has had no runs and no clients for `idle`.
async fn exit_when_idle(daemon: Arc<Daemon>, idle: Duration, stop: watch::Sender<bool>) {
    let tick = (idle / 10).clamp(Duration::from_millis(50), Duration::from_secs(30));
    loop {
        tokio::time::sleep(tick).await;
        if daemon.idle_for() >= idle {
            tracing::info!(?idle, "idle: exiting");
            let _ = stop.send(true);
            return;
        }
    }
}

/// Every [`TIDY_INTERVAL`]: reaps the zombies that escaped their runs' process groups (see
/// [`crate::supervisor::reaper`]); touches the data directory's lock file, the daemon's sign of life (see
/// [`lock`]); makes the space reserve again once the disk has room (see [`crate::storage::space`]);
/// and, once the runs and greps are over, hands the memory they freed back to the system
/// (see [`crate::allocator`]).
async fn tidy_periodically(daemon: Arc<Daemon>, lock: DataDirLock) {
    let mut trimmed_after = daemon.work_done();
    loop {
        tokio::time::sleep(TIDY_INTERVAL).await;
        lock.heartbeat();
        let _ = tokio::task::spawn_blocking(crate::supervisor::reaper::reap_strays).await;
        let space = daemon.space();
        let _ = tokio::task::spawn_blocking(move || space.replenish()).await;
        let done = daemon.work_done();
        if daemon.is_quiet() && done != trimmed_after {
            let _ = tokio::task::spawn_blocking(crate::allocator::release_free_memory).await;
            trimmed_after = done;
        }
    }
}

/// Purges at start-up and then every [`PURGE_INTERVAL`].
async fn purge_periodically(daemon: Arc<Daemon>) {
    loop {
        if let Err(e) = verbs::purge::purge(&daemon, PurgeRequest::default()).await {
            tracing::error!(message = %e.message, "purge failed");
        }
        tokio::time::sleep(PURGE_INTERVAL).await;
    }
}
