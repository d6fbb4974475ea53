//! Every process a run started, whatever it did to get away, and how they are stopped when the
//! run ends.
//!
//! A run's processes are found two ways. With a cgroup ([`super::cgroup`]) they are simply the
//! cgroup's members: nothing leaves a cgroup by forking, `setsid` or closing descriptors.
//! Without one they are found in `/proc`: the command's descendants; the orphans handed to
//! the daemon (a child subreaper, see [`crate::supervisor::reaper`]) that belong to the run by their
//! session or process group, by having been seen as the run's before, or by the marker every
//! command inherits, `SPILLWAY_RUN_ID=<id>` in its environment; and their descendants. As a
//! subreaper the daemon keeps every orphan of a run in its own tree, so looking for the marker
//! outside it is only needed when the daemon was not one ([`crate::supervisor::reaper::is_subreaper`]),
//! and after a crash, when a new daemon looks for a dead one's leftovers
//! ([`sweep_markers`]). A process that empties its environment and leaves the daemon's tree
//! (through another service) is out of reach of this fallback only.
//!
//! When a run ends, what its command left running is stopped: SIGTERM (and SIGCONT), up to
//! the kill grace for it to go, then `cgroup.kill`, or without a cgroup SIGSTOP to each process
//! until no new one appears, then SIGKILL to all. Signals go through pidfds, so a pid reused
//! by an unrelated process is never signalled. What was stopped is reported, with command
//! lines and listening ports, so the model can be told (see [`crate::supervisor::leftovers`]).
//!
//! A command that exits under a terminal hangs it up, and the kernel sends SIGHUP to its
//! process group at once, before spillway can look: those processes are found afterwards by
//! their exit status (the daemon reaps them, see [`crate::supervisor::reaper::hung_up_since`]), named from
//! what the run's periodic look ([`Tracker::refresh`]) saw of them.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::cgroup::RunCgroup;
pub use super::members::{Member, RUN_ID_ENV, describe, listening_on, signal_exact};
use super::members::{find_ports, marker};
use super::procfs::{Stat, all_processes, command_line, dying, stat};
use crate::protocol::{LimitHit, RunId, StoppedProcess};
use crate::supervisor::reaper;

/// How often a stop looks whether the processes it signalled are gone.
const POLL: Duration = Duration::from_millis(20);

/// How long a kill waits for the killed processes to be gone.
const KILL_PATIENCE: Duration = Duration::from_secs(2);

/// The processes of the run of `id` led by `leader`, found in `/proc` (the fallback: see the
/// module docs); `thorough` also looks for the marker in every process, not only the
/// daemon's orphans.
fn find_in_proc(id: &str, leader: u32, seen: &BTreeMap<u32, Member>, thorough: bool) -> Vec<Stat> {
    let me = std::process::id();
    let all = all_processes();
    let mut children: HashMap<u32, Vec<&Stat>> = HashMap::new();
    for p in &all {
        children.entry(p.ppid).or_default().push(p);
    }
    let ours = |p: &Stat| {
        p.sid == leader
            || p.pgrp == leader
            || seen.get(&p.pid).is_some_and(|m| m.start == p.start)
            || marker(p.pid).as_deref() == Some(id)
    };
    let mut roots: Vec<u32> = vec![leader];
    // Orphans stay in our tree while we are a subreaper: no need to look anywhere else.
    let thorough = thorough && !reaper::is_subreaper();
    for p in &all {
        let orphan = p.ppid == me && p.pid != leader && !reaper::is_leader(p.pid);
        let elsewhere = thorough && p.ppid != me && p.pid != me && !p.zombie;
        if (orphan && ours(p)) || (elsewhere && marker(p.pid).as_deref() == Some(id)) {
            roots.push(p.pid);
        }
    }
    let mut found = BTreeMap::new();
    let mut queue: VecDeque<u32> = roots.into();
    while let Some(pid) = queue.pop_front() {
        for child in children.get(&pid).into_iter().flatten() {
            if found.insert(child.pid, **child).is_none() {
                queue.push_back(child.pid);
            }
        }
        if pid != leader
            && let Some(p) = all.iter().find(|p| p.pid == pid)
        {
            found.insert(pid, *p);
        }
    }
    found.into_values().collect()
}

/// Tracks one run's processes (see the module docs); a live run for the sweep of strays
/// ([`super::strays`]) from its making to its end.
#[derive(Debug)]
pub struct Tracker {
    id: RunId,
    leader: u32,
    cgroup: Option<RunCgroup>,
    /// Every process seen as the run's, by pid, with what it was (shared with the sweep of
    /// strays, for which they are the run's too).
    seen: Arc<Mutex<BTreeMap<u32, Member>>>,
}

/// What a run's end found: what was stopped, and the limits it hit.
#[derive(Debug, Default)]
pub struct EndReport {
    pub stopped: Vec<StoppedProcess>,
    pub limits_hit: Vec<LimitHit>,
}

impl Tracker {
    pub fn new(id: RunId, leader: u32, cgroup: Option<RunCgroup>) -> Tracker {
        let dir = cgroup.as_ref().map(|c| c.dir().to_path_buf());
        let seen = Arc::new(Mutex::new(BTreeMap::new()));
        super::strays::register(id.as_str(), leader, dir, Arc::clone(&seen));
        Tracker {
            id,
            leader,
            cgroup,
            seen,
        }
    }

    fn seen(&self) -> MutexGuard<'_, BTreeMap<u32, Member>> {
        crate::sync::lock(&self.seen)
    }

    /// The run's living processes now, other than its command.
    pub fn members(&self, thorough: bool) -> Vec<Member> {
        self.members_where(thorough, |s| !s.zombie)
    }

    /// The run's processes now, other than its command, that `keep` keeps.
    fn members_where(&self, thorough: bool, keep: impl Fn(&Stat) -> bool) -> Vec<Member> {
        let stats: Vec<Stat> = match &self.cgroup {
            Some(cgroup) => cgroup.procs().into_iter().filter_map(stat).collect(),
            None => find_in_proc(self.id.as_str(), self.leader, &self.seen(), thorough),
        };
        let mut seen = self.seen();
        stats
            .into_iter()
            .filter(|s| s.pid != self.leader && keep(s))
            .map(|s| match seen.get(&s.pid) {
                Some(m) if m.start == s.start => m.clone(),
                _ => {
                    let member = Member {
                        pid: s.pid,
                        start: s.start,
                        command: command_line(s.pid),
                        ports: Vec::new(),
                    };
                    seen.insert(s.pid, member.clone());
                    member
                }
            })
            .collect()
    }

    /// Looks at the run's processes and remembers them (their command lines and ports), so
    /// that one that dies before spillway can ask still has a name.
    pub fn refresh(&self) {
        let mut members = self.members(false);
        find_ports(&mut members);
        let mut seen = self.seen();
        for member in members.into_iter().filter(|m| !m.ports.is_empty()) {
            seen.insert(member.pid, member);
        }
    }

    /// Stops the run's processes other than its command: SIGTERM and SIGCONT, up to `grace`
    /// for them to go, then a kill. Returns those it signalled, with their ports.
    ///
    /// What is dying already is not among them: a run stopped by spillway (a timeout, a
    /// kill, the daemon's shutdown) had its group signalled with its command, and the
    /// members that signal killed were not left running, though they may not have finished
    /// dying when the command's exit is seen.
    pub fn stop(&self, grace: Duration) -> Vec<Member> {
        let mut stopped = self.members_where(true, |s| !dying(s));
        if stopped.is_empty() {
            return stopped;
        }
        describe(&mut stopped);
        let mut signalled: BTreeSet<(u32, u64)> = BTreeSet::new();
        let deadline = Instant::now() + grace;
        let mut left = stopped.clone();
        loop {
            for m in &left {
                if signalled.insert(m.key()) {
                    signal_exact(m.pid, m.start, Signal::SIGTERM);
                    signal_exact(m.pid, m.start, Signal::SIGCONT);
                }
            }
            if Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(POLL);
            left = self.members_where(false, |s| !dying(s));
            if left.is_empty() {
                return stopped;
            }
            for m in &left {
                if !stopped.iter().any(|s| s.key() == m.key()) {
                    stopped.push(m.clone());
                }
            }
        }
        tracing::info!(run = %self.id, "leftovers ignored SIGTERM for the grace: killing them");
        self.kill();
        stopped
    }

    /// Kills every process of the run but its command, and waits (bounded) until none is left.
    fn kill(&self) {
        if let Some(cgroup) = &self.cgroup {
            // The command itself is a zombie by now: only its leftovers are in the cgroup.
            cgroup.kill();
            return;
        }
        // Without a cgroup to freeze: stop each process, and look again for children forked
        // before the stop arrived, until no new one appears; then kill them all.
        let mut frozen: Vec<Member> = Vec::new();
        for _ in 0..50 {
            let new: Vec<Member> = self
                .members(false)
                .into_iter()
                .filter(|m| !frozen.iter().any(|f| f.key() == m.key()))
                .collect();
            if new.is_empty() {
                break;
            }
            for m in &new {
                signal_exact(m.pid, m.start, Signal::SIGSTOP);
            }
            frozen.extend(new);
        }
        for m in &frozen {
            signal_exact(m.pid, m.start, Signal::SIGKILL);
        }
        let deadline = Instant::now() + KILL_PATIENCE;
        while Instant::now() < deadline {
            let left = self.members(false);
            if left.is_empty() {
                return;
            }
            for m in &left {
                signal_exact(m.pid, m.start, Signal::SIGKILL);
            }
            std::thread::sleep(POLL);
        }
        tracing::warn!(run = %self.id, "leftovers still alive after SIGKILL");
    }

    /// The run's end: what was stopped (`at_exit`: alive when the command exited; `stopped`:
    /// what [`Tracker::stop`] signalled; `hung_up`: processes the terminal's hangup ended, by
    /// pid), the limits it hit; removes its cgroup.
    pub fn finish(
        &self,
        at_exit: Vec<Member>,
        stopped: Vec<Member>,
        hung_up: &[reaper::Reaped],
    ) -> EndReport {
        // Ended: what is left of it now is a stray for the sweep that follows.
        super::strays::unregister(self.id.as_str());
        let mut all: BTreeMap<(u32, u64), Member> = BTreeMap::new();
        for m in at_exit.into_iter().chain(stopped) {
            let entry = all.entry(m.key()).or_insert_with(|| m.clone());
            if entry.ports.is_empty() {
                entry.ports = m.ports;
            }
        }
        {
            let seen = self.seen();
            for dead in hung_up {
                let known = seen.get(&dead.pid).filter(|m| m.start == dead.start);
                let member = known.cloned().unwrap_or_else(|| Member {
                    pid: dead.pid,
                    start: dead.start,
                    command: format!("[{}]", dead.comm),
                    ports: Vec::new(),
                });
                all.entry(member.key()).or_insert(member);
            }
            for member in all.values_mut() {
                if member.ports.is_empty()
                    && let Some(known) = seen.get(&member.pid).filter(|m| m.start == member.start)
                {
                    member.ports = known.ports.clone();
                }
            }
        }
        let limits_hit = self
            .cgroup
            .as_ref()
            .map(RunCgroup::limit_hits)
            .unwrap_or_default();
        if let Some(cgroup) = &self.cgroup {
            cgroup.remove();
        }
        EndReport {
            stopped: all
                .into_values()
                .map(|m| StoppedProcess {
                    pid: m.pid,
                    command: m.command,
                    ports: m.ports,
                })
                .collect(),
            limits_hit,
        }
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        super::strays::unregister(self.id.as_str());
    }
}

/// Stops every process `find` finds: SIGTERM and SIGCONT, up to `grace`, then SIGSTOP and
/// SIGKILL. For the sweeps of a daemon's start (a dead daemon's leftovers) and shutdown.
fn stop_found(find: impl Fn() -> Vec<Stat>, grace: Duration) -> usize {
    let first = find();
    if first.is_empty() {
        return 0;
    }
    for p in &first {
        signal_exact(p.pid, p.start, Signal::SIGTERM);
        signal_exact(p.pid, p.start, Signal::SIGCONT);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        reaper::reap_strays();
        if find().is_empty() {
            return first.len();
        }
        std::thread::sleep(POLL);
    }
    let deadline = Instant::now() + KILL_PATIENCE;
    while Instant::now() < deadline {
        let left = find();
        if left.is_empty() {
            break;
        }
        for p in &left {
            signal_exact(p.pid, p.start, Signal::SIGSTOP);
        }
        for p in &left {
            signal_exact(p.pid, p.start, Signal::SIGKILL);
        }
        std::thread::sleep(POLL);
        reaper::reap_strays();
    }
    first.len()
}

/// Finds and stops the processes of the runs `ids` (left by a daemon that died) by their
/// marker; returns how many there were.
pub fn sweep_markers(ids: &[RunId], grace: Duration) -> usize {
    if ids.is_empty() {
        return 0;
    }
    let me = std::process::id();
    let find = || {
        let all = all_processes();
        let marked: BTreeSet<u32> = all
            .iter()
            .filter(|p| !p.zombie && p.pid != me)
            .filter(|p| marker(p.pid).is_some_and(|m| ids.iter().any(|id| id.as_str() == m)))
            .map(|p| p.pid)
            .collect();
        all.into_iter()
            .filter(|p| marked.contains(&p.pid))
            .collect::<Vec<_>>()
    };
    stop_found(find, grace)
}

/// Stops every living descendant of this process (at shutdown, once the runs have ended,
/// whatever is left of them); returns how many there were.
pub fn sweep_descendants(grace: Duration) -> usize {
    let me = std::process::id();
    let find = || {
        let all = all_processes();
        let mut children: HashMap<u32, Vec<Stat>> = HashMap::new();
        for p in &all {
            children.entry(p.ppid).or_default().push(*p);
        }
        let mut found = Vec::new();
        let mut queue = VecDeque::from([me]);
        while let Some(pid) = queue.pop_front() {
            for child in children.get(&pid).into_iter().flatten() {
                queue.push_back(child.pid);
                if !child.zombie {
                    found.push(*child);
                }
            }
        }
        found
    };
    stop_found(find, grace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_seen_as_itself() {
        let me = std::process::id();
        let s = stat(me).unwrap();
        assert_eq!(s.pid, me);
        assert!(command_line(me).len() > 1);
        // Nobody gave the test process a marker (unless it runs inside spillway).
        let _ = marker(me);
        assert!(
            !signal_exact(me, s.start + 1, Signal::SIGTERM),
            "wrong start time"
        );
        assert!(signal_exact(me, s.start, Signal::SIGCONT));
    }

    #[test]
    fn a_listener_is_found_among_its_owners_only() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(listening_on(&[std::process::id()], port));
        assert!(!listening_on(&[], port));
        assert!(!listening_on(&[1], port), "not init's");
    }
}
