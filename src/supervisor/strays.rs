//! The sweep at every run's end: a child of the daemon that belongs to no live run is stopped.
//!
//! A run's processes are its cgroup's members, or with no cgroup the ones `/proc` ties to it
//! ([`super::descendants`]). A process can cut both ties: write its pid into a cgroup it can
//! reach outside its run's (a delegated subtree, the root's `cgroup.procs` as root), or with
//! `--no-cgroup` start a session of its own and clear its environment
//! (`setsid -f env -i sleep 304`). It then outlives its run, escapes the run's limits, and, as
//! an orphan the daemon adopted (a child subreaper), lives on as the daemon's child. But the
//! daemon's children are its runs' commands and their orphans only: so when any run ends,
//! every child of the daemon that is no run's command and belongs to no live run, by cgroup,
//! session, process group, marker or having been seen as its, is stopped with its descendants, and the run that ended
//! reports it among what it stopped.
//!
//! Only the daemon sweeps ([`enable`]): a process that merely embeds the supervisor (a test)
//! has children of its own.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::cgroup::procs_of;
use super::members::{Member, describe, marker, signal_exact};
use super::procfs::{Stat, adopted_children, all_processes, command_line, dying, stat};
use super::reaper;
use crate::sync::lock;

/// How often a sweep looks whether the processes it signalled are gone.
const POLL: Duration = Duration::from_millis(20);

/// Whether this process sweeps (the daemon).
static ENABLED: AtomicBool = AtomicBool::new(false);

/// A live run, as the sweep tells its processes: by id (the marker), leader (session and
/// process group), cgroup and what its tracker saw.
struct Live {
    leader: u32,
    cgroup: Option<PathBuf>,
    /// What its tracker has seen as its processes.
    seen: Seen,
}

/// A tracker's processes seen, by pid.
type Seen = Arc<Mutex<BTreeMap<u32, Member>>>;

/// The live runs, by id.
static LIVE: Mutex<BTreeMap<String, Live>> = Mutex::new(BTreeMap::new());

/// Makes this process sweep at every run's end (the daemon calls it once).
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Registers a run as live, from its start to its end.
pub(super) fn register(id: &str, leader: u32, cgroup: Option<PathBuf>, seen: Seen) {
    let live = Live {
        leader,
        cgroup,
        seen,
    };
    lock(&LIVE).insert(id.to_string(), live);
}

/// The run is no longer live: its processes are strays from now on.
pub(super) fn unregister(id: &str) {
    lock(&LIVE).remove(id);
}

/// Stops every child of this process that belongs to no live run, and their descendants:
/// SIGTERM and SIGCONT, up to `grace`, then SIGKILL. Returns what it stopped, named.
pub fn sweep(grace: Duration) -> Vec<Member> {
    if !ENABLED.load(Ordering::Relaxed) {
        return Vec::new();
    }
    let mut strays = find();
    if strays.is_empty() {
        return strays;
    }
    describe(&mut strays);
    tracing::warn!(
        processes = strays.len(),
        "stopping processes that left their runs"
    );
    for m in &strays {
        signal_exact(m.pid, m.start, Signal::SIGTERM);
        signal_exact(m.pid, m.start, Signal::SIGCONT);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && strays.iter().any(alive) {
        std::thread::sleep(POLL);
    }
    for m in strays.iter().filter(|m| alive(m)) {
        signal_exact(m.pid, m.start, Signal::SIGKILL);
    }
    reaper::reap_strays();
    strays
}

fn alive(m: &Member) -> bool {
    stat(m.pid).is_some_and(|s| s.start == m.start && !dying(&s))
}

/// The children of this process that are no run's command and belong to no live run, and
/// their descendants.
///
/// Every run's end sweeps, just before its exit is told, so most sweeps find nothing: the
/// orphans the daemon adopted are looked at first (a stray is one: the daemon's other
/// children are its runs' commands), and every process in `/proc` (five system calls each)
/// only when one of them is a stray, for its descendants. A short run's end was otherwise a
/// scan of the whole machine's processes.
fn find() -> Vec<Member> {
    if let Some(children) = adopted_children() {
        let children: Vec<Stat> = children.into_iter().filter_map(stat).collect();
        if strays_among(&children).is_empty() {
            return Vec::new();
        }
    }
    let all = all_processes();
    let roots = strays_among(&all);
    if roots.is_empty() {
        return Vec::new();
    }
    descendants_of(roots, &all)
}

/// The pids of the processes in `processes` that are children of this process, no run's
/// command, and belong to no live run.
fn strays_among(processes: &[Stat]) -> Vec<u32> {
    let me = std::process::id();
    let live = lock(&LIVE);
    let in_cgroups: HashSet<u32> = live
        .values()
        .filter_map(|l| l.cgroup.as_deref())
        .flat_map(procs_of)
        .collect();
    let belongs = |p: &Stat| {
        in_cgroups.contains(&p.pid)
            || live.values().any(|l| {
                p.sid == l.leader
                    || p.pgrp == l.leader
                    || lock(&l.seen)
                        .get(&p.pid)
                        .is_some_and(|m| m.start == p.start)
            })
            || marker(p.pid).is_some_and(|id| live.contains_key(&id))
    };
    processes
        .iter()
        .filter(|p| p.ppid == me && !p.zombie && !reaper::is_leader(p.pid) && !belongs(p))
        .map(|p| p.pid)
        .collect()
}

/// `roots` and their descendants among `all`, named.
fn descendants_of(roots: Vec<u32>, all: &[Stat]) -> Vec<Member> {
    let mut children: HashMap<u32, Vec<&Stat>> = HashMap::new();
    for p in all {
        children.entry(p.ppid).or_default().push(p);
    }
    let by_pid: HashMap<u32, &Stat> = all.iter().map(|p| (p.pid, p)).collect();
    let mut found = BTreeMap::new();
    let mut queue: VecDeque<u32> = roots.into();
    while let Some(pid) = queue.pop_front() {
        if let Some(p) = by_pid.get(&pid).filter(|p| !p.zombie)
            && found.insert(pid, **p).is_none()
        {
            queue.extend(children.get(&pid).into_iter().flatten().map(|c| c.pid));
        }
    }
    // A dying process's children are looked at all the same: they outlive it.
    found
        .into_values()
        .filter(|s| !dying(s))
        .map(|s| Member {
            pid: s.pid,
            start: s.start,
            command: command_line(s.pid),
            ports: Vec::new(),
        })
        .collect()
}
