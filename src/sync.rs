//! Locks that outlive a panic. A thread that panics while holding one of the crate's mutexes
//! leaves behind data that is still whole (a registry, a counter, a scanner's state), never a
//! half-made invariant, so the next holder takes it as it is rather than spreading the panic
//! to every run of the daemon.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, taking the data as it is when a holder panicked.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Waits on `condvar` with `guard`, taking the data as it is when a holder panicked.
pub fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar.wait(guard).unwrap_or_else(PoisonError::into_inner)
}
