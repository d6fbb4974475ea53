//! The threads a run's reader and waiter work on, kept a while for the next run's once their
//! job is done.
//!
//! Each run has two blocking jobs of its own (reading its output, waiting for its end). A
//! thread started for each and ended with it cost every short run two thread starts and two
//! ends on its path, and an end is dear on a machine with few CPUs: glibc gives the thread's
//! stack back with `madvise`, which has to flush the mapping from every CPU that runs another
//! of the daemon's threads. So a thread whose job is done waits for another, up to
//! [`IDLE_LIFETIME`], and at most [`MAX_IDLE`] wait at a time; a job that finds none waiting
//! starts a thread of its own, so a job never waits for another run's.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::sync::lock;

/// How long a thread with no job waits for one before it ends.
const IDLE_LIFETIME: Duration = Duration::from_secs(10);

/// How many threads at most wait for a job at one time (two a run: enough for a few runs
/// started together, in a daemon that otherwise keeps few threads).
const MAX_IDLE: usize = 8;

/// A job: a run's reader or waiter, with the name its thread takes while it works.
struct Job {
    name: String,
    work: Box<dyn FnOnce() + Send>,
}

/// The jobs not yet taken, and how many threads wait for one.
struct Queue {
    jobs: VecDeque<Job>,
    idle: usize,
}

static QUEUE: Mutex<Queue> = Mutex::new(Queue {
    jobs: VecDeque::new(),
    idle: 0,
});

/// Signalled when a job is queued.
static QUEUED: Condvar = Condvar::new();

/// Runs `work` on a thread named `name` (15 bytes at most are kept, Linux's limit): one
/// waiting for a job if there is one, else a new one. Fails only when no thread can be
/// started.
pub(super) fn spawn(name: String, work: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    let job = Job {
        name,
        work: Box::new(work),
    };
    let mut queue = lock(&QUEUE);
    // Every waiting thread takes a queued job when it wakes: while there are at least as many
    // waiting as queued, this one is taken too.
    if queue.idle > queue.jobs.len() {
        queue.jobs.push_back(job);
        QUEUED.notify_one();
        return Ok(());
    }
    drop(queue);
    let Job { name, work } = job;
    std::thread::Builder::new()
        .name(name)
        .spawn(move || work_from(work))
        .map(drop)
}

/// A pool thread's life: `first` (the thread already bears its name), then whatever jobs are
/// queued, then waiting for more until [`IDLE_LIFETIME`] passes with none, or enough threads
/// wait already.
fn work_from(first: Box<dyn FnOnce() + Send>) {
    first();
    let mut queue = lock(&QUEUE);
    loop {
        if let Some(job) = queue.jobs.pop_front() {
            drop(queue);
            name_this_thread(&job.name);
            (job.work)();
            queue = lock(&QUEUE);
            continue;
        }
        if queue.idle >= MAX_IDLE {
            return;
        }
        queue.idle += 1;
        queue = match QUEUED.wait_timeout_while(queue, IDLE_LIFETIME, |q| q.jobs.is_empty()) {
            Ok((queue, _)) => queue,
            Err(poisoned) => poisoned.into_inner().0,
        };
        queue.idle -= 1;
        if queue.jobs.is_empty() {
            return;
        }
    }
}

/// Names the calling thread (as `ps -L` and `/proc/PID/task/TID/comm` show it) after its job.
fn name_this_thread(name: &str) {
    let mut bytes: Vec<u8> = name.bytes().filter(|&b| b != 0).take(15).collect();
    bytes.push(0);
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes, which `bytes` is,
    // alive for the call.
    unsafe { libc::prctl(libc::PR_SET_NAME, bytes.as_ptr()) };
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    /// The name of the calling thread, as the kernel has it.
    fn kernel_name() -> String {
        let tid = nix::unistd::gettid();
        std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
            .unwrap()
            .trim_end()
            .to_string()
    }

    /// Every job runs, once, on a thread named after it, whether a waiting thread takes it or
    /// a new one; many at once start threads of their own rather than waiting for each other.
    #[test]
    fn every_job_runs_once_under_its_name() {
        let (tx, rx) = mpsc::channel();
        for round in 0..3 {
            let gate = std::sync::Arc::new(std::sync::Barrier::new(21));
            for n in 0..20 {
                let (tx, gate) = (tx.clone(), std::sync::Arc::clone(&gate));
                spawn(format!("job-{round}-{n}"), move || {
                    // All twenty hold their threads at once: none waits for another's.
                    gate.wait();
                    tx.send(((round, n), kernel_name())).unwrap();
                })
                .unwrap();
            }
            gate.wait();
        }
        drop(tx);
        let mut seen: Vec<_> = rx.iter().collect();
        seen.sort();
        assert_eq!(seen.len(), 60);
        for (i, ((round, n), name)) in seen.into_iter().enumerate() {
            assert_eq!((round, n), (i / 20, i % 20));
            assert_eq!(name, format!("job-{round}-{n}"));
        }
        assert!(lock(&QUEUE).idle <= MAX_IDLE);
    }
}
