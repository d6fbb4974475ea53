//! The registry of runs: each run in flight (its control, its live state, the clients waiting
//! on it), and the runs that ended lately, kept for late `wait`s.
//!
//! A run belongs to the daemon, not to the connection that started it. Once launched it is
//! watched by a task of its own (`ending::watch_run`), which records its end in the index and
//! publishes its `exit` event to everyone waiting; then the run moves from the runs in flight
//! to a short list of recent runs (its exit event and its callers' places), so that a `wait`
//! that comes a little late still gets the same answer. Older runs are answered from the index
//! and the spill file.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio::sync::watch;

use crate::engine::snapshot::Cursor;
use crate::protocol::{Event, RunId};
use crate::supervisor::live::{Live, Shape};
use crate::supervisor::{RunControl, StopReason};
use crate::sync::lock;

/// Finished runs kept in memory for late `wait`s: at most this many...
const RECENT_RUNS: usize = 256;

/// ...and for at most this long.
const RECENT_FOR: Duration = Duration::from_secs(3600);

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
struct RecentRun {
    id: RunId,
    spill_path: Option<PathBuf>,
    shape: Arc<Shape>,
    last: Arc<Event>,
    cursors: Cursors,
    ended: Instant,
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

/// The runs in flight, until they have ended and been recorded, and the recent ones (bounded),
/// oldest first.
#[derive(Default)]
pub(super) struct Registry {
    running: Mutex<HashMap<RunId, Arc<RunEntry>>>,
    recent: Mutex<VecDeque<RecentRun>>,
}

impl Registry {
    pub(super) fn insert(&self, entry: Arc<RunEntry>) {
        lock(&self.running).insert(entry.id.clone(), entry);
    }

    /// Moves an ended run from the runs in flight to the recent runs.
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
        lock(&self.running).remove(&entry.id);
    }

    pub(super) fn find(&self, id: &RunId) -> Found {
        if let Some(entry) = lock(&self.running).get(id) {
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

    /// Whether a run with this id is in flight.
    pub(super) fn is_running(&self, id: &RunId) -> bool {
        lock(&self.running).contains_key(id)
    }

    /// How many runs are in flight.
    pub(super) fn len(&self) -> usize {
        lock(&self.running).len()
    }

    pub(super) fn is_empty(&self) -> bool {
        lock(&self.running).is_empty()
    }

    /// The runs in flight, in no order.
    pub(super) fn running(&self) -> Vec<Arc<RunEntry>> {
        lock(&self.running).values().cloned().collect()
    }
}
