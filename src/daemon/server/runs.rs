//! The registry of runs in flight: each run's entry (its control, its live state, the clients
//! waiting on it), the recent runs kept for late `wait`s, and the helpers every verb on a run
//! shares.
//!
//! A run belongs to the daemon, not to the connection that started it. Once launched it is
//! watched by a task of its own (`run::watch_run`), which records its end in the index and
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
use tokio::io::Interest;
use tokio::net::unix::OwnedReadHalf;
use tokio::sync::watch;

use crate::engine::snapshot::Cursor;
use crate::protocol::{ErrorCode, ErrorEvent, Event, RunId};
use crate::supervisor::live::{Live, Shape};
use crate::supervisor::{RunControl, StopReason};
use crate::sync::lock;

use super::Daemon;

/// Finished runs kept in memory for late `wait`s: at most this many...
const RECENT_RUNS: usize = 256;

/// ...and for at most this long.
const RECENT_FOR: Duration = Duration::from_secs(3600);

/// How often a connection with a request waiting in its buffer is checked for a hang-up.
const HANGUP_POLL: Duration = Duration::from_millis(200);

/// Where a connection's requests read from, and the runs that die with it.
pub(super) struct Session<'a> {
    pub(super) read: &'a OwnedReadHalf,
    /// Runs started with `kill_on_disconnect` that were handed back running (`yield_ms`).
    pub(super) owned: &'a mut Vec<Weak<RunEntry>>,
    /// The file descriptors sent with the request's line (`SCM_RIGHTS`), oldest first.
    pub(super) fds: Vec<std::os::fd::OwnedFd>,
}

/// A run in flight.
pub(super) struct RunEntry {
    pub(super) id: RunId,
    pub(super) pid: u32,
    pub(super) started_at: DateTime<Utc>,
    pub(super) argv: Option<Vec<String>>,
    pub(super) shell: Option<String>,
    pub(super) cwd: String,
    pub(super) tags: BTreeMap<String, String>,
    pub(super) tty: bool,
    pub(super) control: RunControl,
    pub(super) live: Arc<Live>,
    /// The run's last event (`exit`, or an `error` if it was lost), once it has ended and
    /// been recorded.
    pub(super) done: watch::Sender<Option<Arc<Event>>>,
    /// How far each caller's previews have gone (for `wait` with `new`).
    pub(super) cursors: Cursors,
}

pub(super) type Cursors = Arc<Mutex<HashMap<String, Cursor>>>;

impl RunEntry {
    /// Stops the run's process group with `signal` (then SIGKILL after the grace).
    pub(super) fn stop(&self, reason: StopReason) {
        self.control.stop(reason);
    }

    pub(super) fn is_done(&self) -> bool {
        self.done.borrow().is_some()
    }

    /// Waits for the run's last event.
    pub(super) async fn finished(&self) -> Arc<Event> {
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

    pub(super) fn spill_path(&self) -> Option<&Path> {
        self.live.spill_path()
    }
}

/// A run that ended a short while ago.
pub(super) struct RecentRun {
    pub(super) id: RunId,
    pub(super) spill_path: Option<PathBuf>,
    pub(super) shape: Arc<Shape>,
    pub(super) last: Arc<Event>,
    pub(super) cursors: Cursors,
    pub(super) ended: Instant,
}

/// Where a run was found.
pub(super) enum Found {
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
    pub(super) fn delivery(&self) -> Delivery<'_> {
        self.deliveries.fetch_add(1, Ordering::SeqCst);
        Delivery(self)
    }

    /// Moves an ended run from the registry to the recent runs.
    pub(super) fn retire(&self, entry: &RunEntry, last: Arc<Event>) {
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

    pub(super) fn find(&self, id: &RunId) -> Found {
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

pub(super) fn error(code: ErrorCode, message: String) -> ErrorEvent {
    ErrorEvent { code, message }
}

pub(super) fn unknown_run(id: &RunId) -> ErrorEvent {
    error(ErrorCode::UnknownRun, format!("no run with id {id}"))
}

pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
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

/// The run a request about a running command names, or why there is none.
pub(super) async fn running_run(
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
