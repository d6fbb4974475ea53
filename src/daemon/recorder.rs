//! Recording runs' starts and ends in the index without losing one to a busy database.
//!
//! Another process may hold the index's write lock for a while: a `spillway truncate`
//! registering its spill, an operator's `sqlite3` shell left in a transaction, a backup. SQLite's
//! busy timeout covers short waits; past it a write fails with `SQLITE_BUSY`. A run's record must
//! not be dropped then, and the run must not wait for the lock either. So every record goes into
//! one ordered queue, served by a thread with a connection of its own (readers keep theirs, which
//! WAL lets read meanwhile), which retries the write at the head of the queue until the lock is
//! free: a run's end is never written before its start, and nothing is lost while the daemon
//! lives. A caller waits for its write while the index is free (so a client that is told a run
//! has ended finds it in `history`), but at most [`PATIENCE`], and not at all while the index is
//! known to be locked; the write is then applied later, in order.
//!
//! A record with nothing ahead of it (the queue empty, no write under way, the index not known
//! to be locked) is written by its caller at once, on the caller's worker thread, rather than
//! handed to the thread and waited for: each hand-off is a wake-up of a sleeping thread, and a
//! short run's start and end each waited for two. The worker's other tasks are not handed on
//! meanwhile either ([`crate::blocking`]): that too wakes a thread, for a transaction of a
//! tenth of a millisecond. Only the write that first meets another process's lock holds its
//! worker longer, for SQLite's busy timeout ([`BUSY_TIMEOUT`]); the next ones are queued
//! without trying. A caller that finds the index locked puts its record at the head of the
//! queue, where it would have been, and waits as the others do.
//!
//! A full disk is not waited out: a run must not wait for room, and a queue held up by it would
//! hold up every later run's record. A write that fails for want of space gives up the data
//! directory's space reserve (`crate::storage::space`) and tries again at once; with no reserve
//! left the record is left out, and the caller is told ([`Outcome`]), so that the run's client
//! learns its run is not in the index while it still gets the run's result. A run whose start
//! was left out is written whole at its end if there is room by then. A write that fails for
//! any other reason (a damaged file) is left out and told the same way: retrying would not
//! help.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

use tokio::sync::{oneshot, watch};

use crate::protocol::RunId;
use crate::storage::index::{Index, IndexError, NewRun, RunEnd, RunTokens};
use crate::storage::space::Space;

use crate::sync::lock;

/// Longest a caller waits for its write to reach the index.
const PATIENCE: Duration = Duration::from_secs(1);

/// How long each try of a write waits for another process's lock (SQLite's busy timeout)...
const BUSY_TIMEOUT: Duration = Duration::from_millis(200);
/// ...and the pause before the next try.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// One change to a run's record.
#[derive(Debug)]
pub(super) enum Record {
    Start(NewRun),
    End(RunId, RunEnd),
    /// Its tokens, counted after its end ([`super::token_counts`]).
    Tokens(RunId, RunTokens),
}

impl Record {
    fn id(&self) -> &RunId {
        match self {
            Record::Start(run) => &run.id,
            Record::End(id, _) | Record::Tokens(id, _) => id,
        }
    }
}

/// What became of a record, as its caller learns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Outcome {
    /// It is in the index.
    Written,
    /// It waits for another process's lock, in order, and will be written.
    Pending,
    /// The run is not in the index at all (its start, and then its end, were left out); why.
    Unrecorded(String),
    /// The run's start is in the index but its end is not: it shows as running; why.
    EndUnrecorded(String),
}

/// A record waiting to be written, and who wants to know how it went.
struct Queued {
    record: Record,
    reply: oneshot::Sender<Outcome>,
}

/// What the writer thread has done, for callers waiting on it.
#[derive(Debug, Clone, Copy, Default)]
struct Progress {
    /// Records dealt with (written, or left out after an error), counted from 1.
    done: u64,
    /// The record at the head of the queue is waiting for another process's lock.
    blocked: bool,
}

/// The records not yet dealt with.
#[derive(Default)]
struct Queue {
    records: VecDeque<Queued>,
    /// Records ever queued.
    queued: u64,
    /// A record is being written (by the thread or a caller): the next waits for it, so that
    /// records are written in the order they came.
    writing: bool,
    closed: bool,
}

/// What writes records: the index connection, the disk, and the runs whose start was left
/// out, to be written whole at their end. Used by one writer at a time (`Queue::writing`).
struct Books {
    index: Index,
    space: Arc<Space>,
    unstarted: HashMap<RunId, NewRun>,
}

/// The queue of records and the thread that writes them.
pub(super) struct Recorder {
    queue: Arc<(Mutex<Queue>, Condvar)>,
    books: Arc<Mutex<Books>>,
    progress: watch::Receiver<Progress>,
}

impl Recorder {
    /// Starts the writer thread on `index`, a connection of its own, on the disk `space`.
    pub(super) fn start(mut index: Index, space: Arc<Space>) -> std::io::Result<Recorder> {
        index
            .set_busy_timeout(BUSY_TIMEOUT)
            .map_err(std::io::Error::other)?;
        let queue = Arc::new((Mutex::new(Queue::default()), Condvar::new()));
        let books = Arc::new(Mutex::new(Books {
            index,
            space,
            unstarted: HashMap::new(),
        }));
        let (progress_tx, progress) = watch::channel(Progress::default());
        let (shared, thread_books) = (Arc::clone(&queue), Arc::clone(&books));
        thread::Builder::new()
            .name("spillway-recorder".into())
            .spawn(move || write_records(&thread_books, &shared, &progress_tx))?;
        Ok(Recorder {
            queue,
            books,
            progress,
        })
    }

    /// Queues `record` and waits for it to be written, unless the index is locked by another
    /// process, and at most [`PATIENCE`]; says what became of it.
    pub(super) async fn record(&self, record: Record) -> Outcome {
        let id = record.id().clone();
        let outcome = tokio::time::timeout(PATIENCE, self.written(record))
            .await
            .unwrap_or(Outcome::Pending);
        if outcome == Outcome::Pending {
            tracing::warn!(
                id = %id,
                "the run index is busy: this run's record is queued and will be written later"
            );
        }
        outcome
    }

    /// Queues `record` and waits for it to be written, unless the index is locked by another
    /// process ([`Outcome::Pending`]), however long the records ahead of it take. For what
    /// runs after a run's end, when the runtime may be ending: it sets no timer, and a timer
    /// polled after the runtime's end panics; whoever waits for it bounds the wait.
    pub(super) async fn written(&self, record: Record) -> Outcome {
        let (reply, outcome) = oneshot::channel();
        let queued = Queued { record, reply };
        // On this worker, without handing its other tasks on (`crate::blocking`): one small
        // transaction, not tried while another process is known to hold the lock.
        if let Some(outcome) = self.write_or_queue(queued) {
            return outcome;
        }
        let mut progress = self.progress.clone();
        tokio::select! {
            outcome = outcome => outcome.unwrap_or_else(|_| {
                Outcome::Unrecorded("the run index's writer has stopped".into())
            }),
            _ = progress.wait_for(|p| p.blocked) => Outcome::Pending,
        }
    }

    /// Writes `queued` here and now if nothing is ahead of it, and says what became of it;
    /// queues it (`None`) when something is, or when the index is locked by another process
    /// (then at the head of the queue: whatever came meanwhile came after it).
    fn write_or_queue(&self, queued: Queued) -> Option<Outcome> {
        let (queue, wake) = &*self.queue;
        {
            let mut queue = lock(queue);
            let ahead = !queue.records.is_empty() || queue.writing || queue.closed;
            if ahead || self.progress.borrow().blocked {
                queue.records.push_back(queued);
                queue.queued += 1;
                wake.notify_one();
                return None;
            }
            queue.writing = true;
        }
        let Queued { record, reply } = queued;
        let written = lock(&self.books).apply(record);
        let mut queue = lock(queue);
        queue.writing = false;
        let outcome = match written {
            Applied::Done(outcome) => Some(outcome),
            Applied::Locked(record) => {
                queue.records.push_front(Queued { record, reply });
                queue.queued += 1;
                None
            }
        };
        // The thread is woken only for records queued behind this one (or this one, given
        // back): waking it for nothing took a context switch on another CPU per record.
        if !queue.records.is_empty() {
            wake.notify_one();
        }
        outcome
    }

    /// Waits, at most `bound`, for every queued record to be dealt with (at shutdown); returns
    /// how many are left.
    pub(super) async fn flush(&self, bound: Duration) -> u64 {
        let queued = lock(&self.queue.0).queued;
        let mut progress = self.progress.clone();
        let _ = tokio::time::timeout(bound, progress.wait_for(|p| p.done >= queued)).await;
        queued.saturating_sub(self.progress.borrow().done)
    }
}

impl Drop for Recorder {
    /// Lets the thread finish what is queued and end; nobody waits for it.
    fn drop(&mut self) {
        let (queue, wake) = &*self.queue;
        lock(queue).closed = true;
        wake.notify_one();
    }
}

/// The writer thread: records in order, each retried while the lock is held elsewhere.
fn write_records(
    books: &Mutex<Books>,
    queue: &(Mutex<Queue>, Condvar),
    progress: &watch::Sender<Progress>,
) {
    while let Some(Queued { record, reply }) = next_record(queue) {
        let outcome = write_waiting(&mut lock(books), record, progress);
        {
            let (queue, wake) = queue;
            lock(queue).writing = false;
            wake.notify_one();
        }
        let _ = reply.send(outcome);
        let was_blocked = progress.borrow().blocked;
        if was_blocked {
            tracing::info!("the run index is free again: writing the queued records");
        }
        progress.send_modify(|p| {
            p.done += 1;
            p.blocked = false;
        });
    }
}

/// Writes `record`, waiting out another process's lock: tried again every [`RETRY_PAUSE`],
/// with the callers told the index is blocked meanwhile.
fn write_waiting(
    books: &mut Books,
    mut record: Record,
    progress: &watch::Sender<Progress>,
) -> Outcome {
    loop {
        match books.apply(record) {
            Applied::Done(outcome) => return outcome,
            Applied::Locked(given_back) => record = given_back,
        }
        if !progress.borrow().blocked {
            tracing::warn!(
                "the run index is locked by another process: queueing records until it is free"
            );
            progress.send_modify(|p| p.blocked = true);
        }
        thread::sleep(RETRY_PAUSE);
    }
}

/// What became of a record given to [`Books::apply`].
enum Applied {
    Done(Outcome),
    /// Another process holds the index's lock: the record is given back.
    Locked(Record),
}

impl Books {
    /// Writes one record, and says what became of it; gives it back when another process
    /// holds the index's lock (past SQLite's busy timeout).
    fn apply(&mut self, record: Record) -> Applied {
        let mut writer = Writer {
            index: &mut self.index,
            space: &self.space,
        };
        match record {
            // A taken id (Ok(false)) cannot happen: ids are checked free before a run starts.
            Record::Start(run) => match writer.write(|index| index.insert_run(&run).map(drop)) {
                None => Applied::Locked(Record::Start(run)),
                Some(outcome) => {
                    if outcome != Outcome::Written {
                        self.unstarted.insert(run.id.clone(), run);
                    }
                    Applied::Done(outcome)
                }
            },
            Record::End(id, end) => {
                if let Some(run) = self.unstarted.remove(&id) {
                    match writer.write(|index| index.insert_run(&run).map(drop)) {
                        None => {
                            self.unstarted.insert(id.clone(), run);
                            return Applied::Locked(Record::End(id, end));
                        }
                        Some(Outcome::Written) => {}
                        Some(left_out) => return Applied::Done(left_out),
                    }
                }
                match writer.write(|index| index.finish_run(&id, &end)) {
                    None => Applied::Locked(Record::End(id, end)),
                    Some(Outcome::Unrecorded(why)) => Applied::Done(Outcome::EndUnrecorded(why)),
                    Some(outcome) => Applied::Done(outcome),
                }
            }
            // A run whose start was left out has no row for its tokens to go in.
            Record::Tokens(id, _) if self.unstarted.contains_key(&id) => {
                Applied::Done(Outcome::Unrecorded("its start is not in the index".into()))
            }
            Record::Tokens(id, tokens) => {
                match writer.write(|index| index.record_tokens(&id, &tokens)) {
                    None => Applied::Locked(Record::Tokens(id, tokens)),
                    Some(outcome) => Applied::Done(outcome),
                }
            }
        }
    }
}

/// Writes one change, giving the disk's reserve to the index when the disk is full.
struct Writer<'a> {
    index: &'a mut Index,
    space: &'a Space,
}

impl Writer<'_> {
    /// What became of the change; `None` when another process holds the index's lock.
    fn write(&mut self, change: impl Fn(&mut Index) -> Result<(), IndexError>) -> Option<Outcome> {
        loop {
            match change(self.index) {
                Ok(()) => return Some(Outcome::Written),
                Err(e) if e.is_busy() => return None,
                Err(e)
                    if e.is_full() || (e.is_io_failure() && self.space.full_disk().is_some()) =>
                {
                    if self.space.release() {
                        continue;
                    }
                    tracing::error!(
                        error = %e,
                        "the disk is full and its reserve used up: a run's record is left out of the index (spillway purge frees room)"
                    );
                    return Some(Outcome::Unrecorded(self.space.unrecorded()));
                }
                Err(e) => {
                    tracing::error!(error = %e, "cannot record the run");
                    return Some(Outcome::Unrecorded(format!(
                        "the run index could not be written ({e})"
                    )));
                }
            }
        }
    }
}

/// The next record to write, once none is being written, marked as being written; None
/// once the recorder is gone and the queue is empty.
fn next_record(queue: &(Mutex<Queue>, Condvar)) -> Option<Queued> {
    let (queue, wake) = queue;
    let mut queue = lock(queue);
    loop {
        if !queue.writing {
            if let Some(record) = queue.records.pop_front() {
                queue.writing = true;
                return Some(record);
            }
            if queue.closed {
                return None;
            }
        }
        queue = crate::sync::wait(wake, queue);
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Instant;

    use rusqlite::Connection;

    use super::*;
    use crate::protocol::RunStatus;
    use crate::storage::index::INDEX_FILE;
    use crate::storage::index::tests::{cap_at_current_size, end, id, new_run, open_temp};

    fn status(index: &Index, n: u32) -> Option<RunStatus> {
        index.get(&id(n)).unwrap().map(|row| row.status)
    }

    /// A recorder on the index in `dir`, with a connection of its own.
    fn recorder_in(dir: &Path) -> Recorder {
        let space = Arc::new(Space::new(dir));
        Recorder::start(Index::open(&dir.join(INDEX_FILE)).unwrap(), space).unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn records_wait_out_another_processs_lock_in_order() {
        let (dir, reader) = open_temp();
        let recorder = recorder_in(dir.path());
        let at = chrono::Utc::now();
        recorder.record(Record::Start(new_run(1, at))).await;
        assert_eq!(status(&reader, 1), Some(RunStatus::Running));

        // Another process takes the write lock, for longer than SQLite's busy timeout.
        let holder = Connection::open(dir.path().join(INDEX_FILE)).unwrap();
        holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
        let started = Instant::now();
        let records = [
            Record::End(id(1), end(RunStatus::Exited, Some(0), 10)),
            Record::Start(new_run(2, at)),
            Record::End(id(2), end(RunStatus::Exited, Some(1), 20)),
        ];
        for record in records {
            recorder.record(record).await;
        }
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "callers do not wait for the lock: {:?}",
            started.elapsed()
        );
        // Readers still read, and none of the queued records is there yet.
        assert_eq!(status(&reader, 1), Some(RunStatus::Running));
        assert_eq!(status(&reader, 2), None);
        tokio::time::sleep(Duration::from_secs(6)).await;
        assert_eq!(status(&reader, 2), None);
        holder.execute_batch("COMMIT").unwrap();

        assert_eq!(recorder.flush(Duration::from_secs(20)).await, 0);
        assert_eq!(status(&reader, 1), Some(RunStatus::Exited));
        assert_eq!(status(&reader, 2), Some(RunStatus::Exited));
    }

    /// Records written at once by their callers and records queued behind a lock another
    /// process takes now and then keep their order: every run's end lands after its start,
    /// none is lost, and each caller's record is in the index when it is told `Written`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn records_written_at_once_or_queued_keep_their_order() {
        let (dir, reader) = open_temp();
        let recorder = Arc::new(recorder_in(dir.path()));
        let path = dir.path().join(INDEX_FILE);
        let holder = Connection::open(path).unwrap();
        holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
        let holder = std::thread::spawn(move || {
            for _ in 0..3 {
                std::thread::sleep(Duration::from_millis(250));
                holder.execute_batch("COMMIT").unwrap();
                std::thread::sleep(Duration::from_millis(60));
                holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
            }
            holder.execute_batch("COMMIT").unwrap();
        });
        let at = chrono::Utc::now();
        // Spread over the lock's comings and goings: some runs start and end while it is
        // held, some while it is free, some across a change.
        let runs: Vec<_> = (1..=40)
            .map(|n| {
                let recorder = Arc::clone(&recorder);
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(u64::from(n) * 25)).await;
                    let started = recorder.record(Record::Start(new_run(n, at))).await;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let ending = end(RunStatus::Exited, Some(0), n.into());
                    let ended = recorder.record(Record::End(id(n), ending)).await;
                    (n, started, ended)
                })
            })
            .collect();
        for run in runs {
            let (n, started, ended) = run.await.unwrap();
            for outcome in [started, ended] {
                assert!(
                    matches!(outcome, Outcome::Written | Outcome::Pending),
                    "run {n}: {outcome:?}"
                );
            }
        }
        holder.join().unwrap();
        assert_eq!(recorder.flush(Duration::from_secs(20)).await, 0);
        for n in 1..=40 {
            assert_eq!(status(&reader, n), Some(RunStatus::Exited), "run {n}");
        }
    }

    /// Without a thread to spare (a single-threaded runtime), a record is still written by
    /// its caller, and found at once.
    #[tokio::test]
    async fn a_single_threaded_caller_writes_its_record_itself() {
        let (dir, reader) = open_temp();
        let recorder = recorder_in(dir.path());
        let at = chrono::Utc::now();
        assert_eq!(
            recorder.record(Record::Start(new_run(1, at))).await,
            Outcome::Written
        );
        assert_eq!(status(&reader, 1), Some(RunStatus::Running));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_record_the_full_disk_refuses_is_left_out_and_told_and_holds_up_nothing() {
        let (dir, reader) = open_temp();
        let space = Arc::new(Space::new(dir.path()));
        let writer = Index::open(&dir.path().join(INDEX_FILE)).unwrap();
        cap_at_current_size(&writer);
        let recorder = Recorder::start(writer, space).unwrap();
        let at = chrono::Utc::now();
        let mut big = new_run(1, at);
        big.argv = Some(vec!["x".repeat(1 << 20)]);

        let started = recorder.record(Record::Start(big)).await;
        assert!(
            matches!(&started, Outcome::Unrecorded(why) if why.contains("is full")),
            "{started:?}"
        );
        // The next run is recorded: the refused one holds nothing up.
        let small = recorder.record(Record::Start(new_run(2, at))).await;
        assert_eq!(small, Outcome::Written);
        let end_small = Record::End(id(2), end(RunStatus::Exited, Some(0), 1));
        assert_eq!(recorder.record(end_small).await, Outcome::Written);
        assert_eq!(status(&reader, 2), Some(RunStatus::Exited));
        // The refused run's end tries its whole row again, and is told it is still left out.
        let end_big = Record::End(id(1), end(RunStatus::Exited, Some(0), 1));
        let ended = recorder.record(end_big).await;
        assert!(matches!(ended, Outcome::Unrecorded(_)), "{ended:?}");
        assert_eq!(status(&reader, 1), None);
        assert_eq!(recorder.flush(Duration::from_secs(20)).await, 0);
    }
}
