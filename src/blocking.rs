//! Blocking work called from the daemon's async code, done where the caller stands.
//!
//! `tokio::task::spawn_blocking` hands the work to a thread of the blocking pool and the
//! result back to a worker: two wake-ups of sleeping threads, each 10-250 µs on a virtual
//! machine whose idle CPUs sleep deeply, and a short run's start and end made four of them.
//! `block_in_place` does the work on the calling worker thread instead, and hands that
//! worker's other tasks to another thread meanwhile, so nothing waits for a wake-up. It needs
//! the multi-threaded runtime (the daemon's); on a single-threaded runtime (a test's), [`run`]
//! sends the work to the blocking pool as before.
//!
//! That hand-over wakes a thread too (the one that takes the worker's tasks), so work shorter
//! than a wake-up is not sent here at all: a run's record in the index, one small transaction,
//! is written by its caller as it stands (`crate::daemon::recorder`).

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::task::JoinError;

/// Runs `work`, which blocks, from async code: on this worker thread when the runtime can
/// spare it, else on the blocking pool. A panic in `work` is the caller's; the error is the
/// blocking pool's refusal, when the runtime is shutting down.
pub async fn run<T, F>(work: F) -> Result<T, JoinError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    if can_block_in_place() {
        return Ok(tokio::task::block_in_place(work));
    }
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        if e.is_panic() {
            std::panic::resume_unwind(e.into_panic());
        }
        e
    })
}

/// Whether this thread is in a multi-threaded runtime, whose workers can hand their tasks on.
fn can_block_in_place() -> bool {
    Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread)
}
