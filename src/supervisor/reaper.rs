//! Reaping: this process adopts the orphans of its runs, and none may stay a zombie.
//!
//! The daemon is a *child subreaper* ([`become_subreaper`]): a process orphaned inside a run is
//! handed to it rather than to an init that may never reap it. Each run's waiter reaps its
//! leader and, at the run's end, the members of its process group. What neither reaches is a
//! process that left the group (`setsid`, a daemonising tool), outlived its parent and died
//! later: it stays a zombie of ours. [`reap_strays`], called now and then, reaps those.
//!
//! A stray reaper must never take a run leader's exit status from its waiter. So leaders are
//! spawned through [`spawn_leader`], which registers the pid under the lock that
//! [`reap_strays`] holds while it looks: a leader is never seen unregistered, however early
//! it dies; [`forget_leader`] removes it once its waiter has reaped it.
//!
//! Every process reaped here ([`reap_zombie`]) is remembered for a while with how it died
//! ([`Reaped`]): the processes a terminal's hangup ends as a run's command exits die before
//! anyone can look at them alive, and their exit status is how the run learns of them
//! ([`hung_up_since`]).

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, Once};
use std::time::Instant;

use super::procfs::{Stat, all_processes, own_children, stat};
use crate::sync::lock;
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

/// Processes reaped lately, newest last (bounded).
static REAPED: Mutex<VecDeque<Reaped>> = Mutex::new(VecDeque::new());

/// How many reaped processes are remembered.
const REMEMBERED: usize = 4096;

/// A process this one reaped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reaped {
    pub pid: u32,
    /// Its start time (clock ticks after boot), which with the pid names it.
    pub start: u64,
    pub pgrp: u32,
    /// Its name (`comm`): a zombie has no command line left.
    pub comm: String,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
    pub at: Instant,
}

/// Run leaders spawned and not yet reaped by their waiters.
static LEADERS: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

fn leaders() -> MutexGuard<'static, BTreeSet<i32>> {
    lock(&LEADERS)
}

/// Whether [`become_subreaper`] succeeded.
static SUBREAPER: AtomicBool = AtomicBool::new(false);

/// Makes this process a child subreaper (once). Failure is logged; runs still work, but the
/// orphans of their commands go to init, out of our sight (but for their marker, see
/// [`crate::supervisor::descendants`]).
pub fn become_subreaper() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| match nix::sys::prctl::set_child_subreaper(true) {
        Ok(()) => SUBREAPER.store(true, Ordering::Relaxed),
        Err(e) => {
            tracing::warn!("cannot become a child subreaper ({e}); orphans of runs may linger");
        }
    });
}

/// Whether this process is a child subreaper, so that the orphans of runs come to it.
pub fn is_subreaper() -> bool {
    SUBREAPER.load(Ordering::Relaxed)
}

/// Spawns a run's leader with `spawn` (which returns its pid) and registers it, so that
/// [`reap_strays`] leaves it to its waiter.
pub fn spawn_leader<E>(spawn: impl FnOnce() -> Result<u32, E>) -> Result<u32, E> {
    let mut leaders = leaders();
    let pid = spawn()?;
    leaders.insert(pid as i32);
    Ok(pid)
}

/// The leader `pid` has been reaped by its waiter: it is no longer ours to protect.
pub fn forget_leader(pid: u32) {
    leaders().remove(&(pid as i32));
}

/// Whether `pid` is a run's leader not yet reaped by its waiter.
pub fn is_leader(pid: u32) -> bool {
    i32::try_from(pid).is_ok_and(|pid| leaders().contains(&pid))
}

/// Reaps the zombie child `pid`, remembering what it was and how it died; `None` if it was
/// not a zombie child of ours (anymore).
pub fn reap_zombie(pid: i32) -> Option<WaitStatus> {
    let stat = u32::try_from(pid)
        .ok()
        .and_then(|p| Some((p, std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?)));
    let status = waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)).ok()?;
    let signal = match status {
        WaitStatus::Signaled(_, signal, _) => Some(signal as i32),
        WaitStatus::Exited(..) => None,
        _ => return Some(status),
    };
    if let Some((pid, text)) = stat
        && let Some(info) = crate::supervisor::procfs::parse_stat(pid, &text)
    {
        let comm = crate::supervisor::procfs::comm_of(&text)
            .unwrap_or("?")
            .to_string();
        let mut reaped = lock(&REAPED);
        if reaped.len() >= REMEMBERED {
            reaped.pop_front();
        }
        reaped.push_back(Reaped {
            pid,
            start: info.start,
            pgrp: info.pgrp,
            comm,
            signal,
            at: Instant::now(),
        });
    }
    Some(status)
}

/// The processes of group `pgrp` reaped since `since` that SIGHUP killed: what a terminal's
/// hangup ended when a run's command exited.
pub fn hung_up_since(pgrp: u32, since: Instant) -> Vec<Reaped> {
    let reaped = lock(&REAPED);
    reaped
        .iter()
        .filter(|r| r.pgrp == pgrp && r.at >= since && r.signal == Some(Signal::SIGHUP as i32))
        .cloned()
        .collect()
}

/// Reaps the zombies among this process's children that no waiter is responsible for;
/// returns how many. Reads `/proc`; call it every few seconds.
pub fn reap_strays() -> usize {
    let leaders = leaders();
    let mut reaped = 0;
    for pid in own_zombies() {
        if leaders.contains(&pid) {
            continue;
        }
        if let Some(status) = reap_zombie(pid) {
            tracing::debug!(pid, ?status, "reaped a stray process");
            reaped += 1;
        }
    }
    reaped
}

/// Pids of this process's zombie children: looked for among its children as the kernel lists
/// them (a few small reads, where the daemon's tidying every two seconds otherwise read every
/// process of the machine), else among every process.
fn own_zombies() -> Vec<i32> {
    let me = std::process::id();
    let processes: Vec<Stat> = match own_children() {
        Some(children) => children.into_iter().filter_map(stat).collect(),
        None => all_processes(),
    };
    processes
        .into_iter()
        .filter(|p| p.zombie && p.ppid == me)
        .filter_map(|p| i32::try_from(p.pid).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child that died unreaped is found among this process's zombies, and only until it
    /// is reaped.
    #[test]
    fn a_dead_child_is_among_the_zombies_until_reaped() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        while !own_zombies().contains(&pid) {
            assert!(
                Instant::now() < deadline,
                "the child never showed as a zombie"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child.wait().unwrap();
        assert!(!own_zombies().contains(&pid));
    }
}
