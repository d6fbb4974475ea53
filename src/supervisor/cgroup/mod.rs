//! Control groups for runs: every process a command starts stays in its run's cgroup whatever
//! it does (`setsid`, double forks, daemonising, closing its descriptors), so the daemon can
//! list them all and stop them all, and the kernel can hold them to resource limits.
//!
//! The daemon looks for a cgroup v2 hierarchy it may write to once, at start-up
//! ([`CgroupTree::discover`]): its own cgroup when that is delegated to it (the systemd unit's
//! `Delegate=yes`), or any writable one (a root daemon on a hybrid host, whose v2 hierarchy is
//! mounted beside the v1 controllers). Runs get `<base>/spillway-<key>/<run id>`, where the
//! key comes from the data directory, so a daemon restarted after a crash finds the cgroups of
//! the runs its predecessor left behind. A command starts inside its cgroup (`clone3` with
//! `CLONE_INTO_CGROUP`, where its only cgroup is a v2 one and the kernel has it) or joins
//! it between fork and exec, so not even its first child can be born outside it.
//!
//! Stopping uses `cgroup.kill` (Linux 5.14) where it exists; elsewhere the cgroup is frozen,
//! each process in it is sent SIGKILL, and it is thawed, so nothing can fork its way out of
//! the kill. Resource limits use the v2 controllers enabled for the tree, else the v1
//! hierarchies of a hybrid host (`memory`, `pids`, `cpu`), each only where it can be written.
//!
//! Nothing here panics or fails a run: a cgroup that cannot be made or joined leaves the run
//! to the `/proc` tracking of [`super::descendants`].

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::limits::Resources;
use crate::protocol::Resource;
use crate::protocol::{LimitHit, RunId};

mod limit_files;
mod mounts;

use limit_files::{write_v1_limit, write_v2_limit};
use mounts::{base_for_runs, join_cgroup, parse_mount, remove_empty_siblings, v1_dir};

/// Set (to anything but `0` or empty) in the daemon's environment, it never uses cgroups: runs
/// are tracked through `/proc` alone, as where no cgroup can be had.
pub const NO_CGROUP_ENV: &str = "SPILLWAY_NO_CGROUP";

/// Set in the daemon's environment, it stops cgroups by freezing them and killing each process
/// even where `cgroup.kill` exists, so that path is tested on every kernel.
pub const NO_CGROUP_KILL_ENV: &str = "SPILLWAY_NO_CGROUP_KILL";

/// The controllers a run's limits use.
const CONTROLLERS: [Resource; 3] = [Resource::Memory, Resource::Pids, Resource::Cpu];

/// How long removing a stopped cgroup waits for its last processes to be gone.
const REMOVE_PATIENCE: Duration = Duration::from_secs(2);

/// Where the runs' cgroups go; found once by the daemon.
#[derive(Debug, Clone)]
pub struct CgroupTree {
    /// The v2 directory holding one cgroup per run.
    dir: PathBuf,
    /// `cgroup.kill` exists (Linux 5.14+).
    has_kill: bool,
    /// The v2 hierarchy is mounted with `nsdelegate`: a cgroup namespace is then a boundary
    /// no process inside can move a process across.
    nsdelegate: bool,
    /// Controllers enabled for the runs' cgroups in v2.
    v2: Vec<Resource>,
    /// v1 directories for runs, for the controllers v2 does not have here.
    v1: Vec<(Resource, PathBuf)>,
}

/// One run's cgroups.
#[derive(Debug)]
pub struct RunCgroup {
    dir: PathBuf,
    has_kill: bool,
    /// Its command gets a cgroup namespace rooted at it (see `CgroupTree::nsdelegate`).
    namespace: bool,
    /// The v1 cgroups of its limits.
    v1: Vec<(Resource, PathBuf)>,
    /// Where each limit is enforced, for the end's report.
    limits: Resources,
    /// Which resources the v2 cgroup limits.
    v2: Vec<Resource>,
}

/// How a daemon contains its runs: its flags.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Containment {
    /// Track runs through `/proc` alone, never with cgroups (`--no-cgroup`, or
    /// [`NO_CGROUP_ENV`]).
    pub no_cgroup: bool,
    /// Limits for runs that ask for none (`--memory`, `--pids`, `--cpu`).
    pub defaults: Resources,
}

impl Containment {
    /// The runs' cgroup tree for a daemon of `data_dir`, unless cgroups are off or none can
    /// be had (then it says why in the log).
    pub fn tree(&self, data_dir: &Path) -> Option<CgroupTree> {
        if self.no_cgroup || switch_on(NO_CGROUP_ENV) {
            tracing::info!("cgroups are off: runs are tracked through /proc");
            return None;
        }
        match CgroupTree::discover(&tree_key(data_dir)) {
            Ok(tree) => {
                tracing::info!(
                    cgroup = %tree.dir().display(),
                    controllers = ?tree.controllers(),
                    "runs get cgroups"
                );
                Some(tree)
            }
            Err(why) => {
                tracing::info!("no cgroups for runs ({why}): runs are tracked through /proc");
                None
            }
        }
    }
}

/// The name part of a data directory's runs' cgroup tree: the same for every daemon of that
/// directory (so a new one finds a dead one's cgroups), different for others. FNV-1a of the
/// canonical path, and the uid.
pub fn tree_key(data_dir: &Path) -> String {
    let path = data_dir
        .canonicalize()
        .unwrap_or_else(|_| data_dir.to_path_buf());
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in path.as_os_str().as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{}-{hash:016x}", nix::unistd::geteuid())
}

/// Whether an environment switch is on (set, and neither empty nor `0`).
pub fn switch_on(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0")
}

impl CgroupTree {
    /// Finds a cgroup v2 hierarchy this process may make cgroups in, and makes the runs'
    /// directory `spillway-<key>` there; says why not when it cannot.
    pub fn discover(key: &str) -> Result<CgroupTree, String> {
        let mounts = fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
        let own = fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
        let (mount, root, nsdelegate) = mounts
            .lines()
            .filter_map(parse_mount)
            .find(|m| m.fstype == "cgroup2")
            .map(|m| {
                let nsdelegate = m.options.split(',').any(|o| o == "nsdelegate");
                (m.point, m.root, nsdelegate)
            })
            .ok_or("no cgroup v2 hierarchy is mounted")?;
        let own_path = own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .ok_or("this process has no cgroup v2 path")?;
        let here = join_cgroup(&mount, &root, own_path);
        let base = base_for_runs(&mount, &here);
        let dir = base.join(format!("spillway-{key}"));
        fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        remove_empty_siblings(&dir);
        let has_kill = dir.join("cgroup.kill").exists() && !switch_on(NO_CGROUP_KILL_ENV);
        let v2 = enable_controllers(&base, &dir);
        let v1 = CONTROLLERS
            .iter()
            .filter(|c| !v2.contains(c))
            .filter_map(|&c| v1_dir(c, &mounts, &own, key).map(|dir| (c, dir)))
            .collect();
        Ok(CgroupTree {
            dir,
            has_kill,
            nsdelegate,
            v2,
            v1,
        })
    }

    /// The v2 directory of the runs' cgroups.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Which controllers limits can use: v2's, then v1's.
    pub fn controllers(&self) -> Vec<Resource> {
        let mut all = self.v2.clone();
        all.extend(self.v1.iter().map(|(c, _)| *c));
        all
    }

    /// Makes run `id`'s cgroup (and a v1 cgroup for each limit v2 cannot hold) and writes its
    /// limits. A limit no controller here can hold is left out of the returned cgroup's
    /// [`RunCgroup::enforced`].
    pub fn create(&self, id: &RunId, limits: &Resources) -> io::Result<RunCgroup> {
        // Another daemon's start may have removed the directory while it was empty.
        fs::create_dir_all(&self.dir)?;
        let dir = self.dir.join(id.as_str());
        make_fresh(&dir)?;
        let mut run = RunCgroup {
            dir,
            has_kill: self.has_kill,
            namespace: self.nsdelegate,
            v1: Vec::new(),
            limits: Resources::default(),
            v2: Vec::new(),
        };
        for resource in limits.asked() {
            if self.v2.contains(&resource) {
                if let Err(e) = write_v2_limit(&run.dir, resource, limits) {
                    tracing::warn!(run = %id, ?resource, "cannot set the limit: {e}");
                    continue;
                }
                run.v2.push(resource);
                run.limits.copy(resource, limits);
            } else if let Some((_, parent)) = self.v1.iter().find(|(c, _)| *c == resource) {
                let dir = parent.join(id.as_str());
                // Another daemon's shutdown may have removed the parent while it was empty,
                // as for v2 above: without it the limit would silently not hold.
                let made = fs::create_dir_all(parent)
                    .and_then(|()| make_fresh(&dir))
                    .and_then(|()| write_v1_limit(&dir, resource, limits));
                match made {
                    Ok(()) => {
                        run.v1.push((resource, dir));
                        run.limits.copy(resource, limits);
                    }
                    Err(e) => {
                        let _ = fs::remove_dir(&dir);
                        tracing::warn!(run = %id, ?resource, "cannot set the v1 limit: {e}");
                    }
                }
            }
        }
        Ok(run)
    }

    /// Stops and removes the cgroups of runs a dead daemon left, those `left` names (every
    /// one when `left` is `None`, at shutdown); returns how many processes were in them.
    pub fn sweep(&self, left: Option<&[RunId]>) -> usize {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut found = 0;
        for entry in entries.flatten() {
            let Some(id) = entry
                .file_name()
                .to_str()
                .and_then(|name| name.parse::<RunId>().ok())
            else {
                continue;
            };
            if left.is_some_and(|left| !left.contains(&id)) {
                continue;
            }
            let run = RunCgroup {
                dir: entry.path(),
                has_kill: self.has_kill,
                namespace: false,
                v1: self
                    .v1
                    .iter()
                    .map(|(c, parent)| (*c, parent.join(id.as_str())))
                    .filter(|(_, dir)| dir.exists())
                    .collect(),
                limits: Resources::default(),
                v2: Vec::new(),
            };
            let procs = run.procs();
            found += procs.len();
            if !procs.is_empty() {
                tracing::warn!(run = %id, processes = procs.len(), "stopping what a run left");
                run.kill();
            }
            run.remove();
        }
        found
    }

    /// Removes the runs' directory when no run is left in it (at shutdown).
    pub fn remove_if_empty(&self) {
        for (_, dir) in &self.v1 {
            let _ = fs::remove_dir(dir);
        }
        let _ = fs::remove_dir(&self.dir);
    }
}

impl RunCgroup {
    /// Whether its command gets a cgroup namespace of its own: only where the hierarchy is
    /// mounted with `nsdelegate`, which makes the namespace a boundary. Elsewhere a namespace
    /// would only hide the run's cgroup path from it (a runtime reading its memory limit
    /// through `/proc/self/cgroup` would find the host's) and hold nothing.
    pub fn namespace(&self) -> bool {
        self.namespace
    }

    /// The run's v2 cgroup directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether its v2 directory is its only cgroup (no v1 hierarchy holds one of its
    /// limits): then its command can be started inside it (`super::inside`).
    pub fn v2_only(&self) -> bool {
        self.v1.is_empty()
    }

    /// The `cgroup.procs` files the command writes itself into before `exec`, where it is
    /// not started inside its cgroup.
    pub fn join_paths(&self) -> Vec<CString> {
        std::iter::once(&self.dir)
            .chain(self.v1.iter().map(|(_, dir)| dir))
            .filter_map(|dir| CString::new(dir.join("cgroup.procs").as_os_str().as_bytes()).ok())
            .collect()
    }

    /// The limits this cgroup enforces.
    pub fn enforced(&self) -> &Resources {
        &self.limits
    }

    /// The processes in the cgroup now (never zombies).
    pub fn procs(&self) -> Vec<u32> {
        read_pids(&self.dir.join("cgroup.procs"))
    }

    /// Kills every process in the cgroup: `cgroup.kill`, or freeze, SIGKILL each, thaw. Waits
    /// (bounded) until none is left.
    pub fn kill(&self) {
        let deadline = Instant::now() + REMOVE_PATIENCE;
        loop {
            let procs = self.procs();
            if procs.is_empty() || Instant::now() >= deadline {
                return;
            }
            if self.has_kill {
                if let Err(e) = fs::write(self.dir.join("cgroup.kill"), "1") {
                    tracing::warn!(cgroup = %self.dir.display(), "cgroup.kill failed: {e}");
                    self.kill_each(&procs);
                }
            } else {
                self.kill_each(&procs);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Freezes the cgroup (so nothing in it can fork), sends SIGKILL to each process and
    /// thaws it: the way to stop a cgroup without `cgroup.kill`.
    fn kill_each(&self, procs: &[u32]) {
        let freeze = self.dir.join("cgroup.freeze");
        let frozen = fs::write(&freeze, "1").is_ok();
        let mut procs = procs.to_vec();
        if frozen {
            // The freeze takes effect as each task reaches a safe point; a task forked just
            // before it shows up in the next read.
            procs = self.procs();
        }
        for pid in procs {
            if let Ok(pid) = i32::try_from(pid) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        if frozen {
            let _ = fs::write(&freeze, "0");
        }
    }

    /// What the limits caught: OOM kills of the memory limit, forks the pids limit refused.
    pub fn limit_hits(&self) -> Vec<LimitHit> {
        let mut hits = Vec::new();
        for resource in &self.v2 {
            let events = match resource {
                Resource::Memory => event_count(&self.dir.join("memory.events"), "oom_kill"),
                Resource::Pids => event_count(&self.dir.join("pids.events"), "max"),
                Resource::Cpu => 0,
            };
            if let Some(hit) = self.limits.hit(*resource, events) {
                hits.push(hit);
            }
        }
        for (resource, dir) in &self.v1 {
            let events = match resource {
                Resource::Memory => v1_oom_kills(dir),
                Resource::Pids => event_count(&dir.join("pids.events"), "max"),
                Resource::Cpu => 0,
            };
            if let Some(hit) = self.limits.hit(*resource, events) {
                hits.push(hit);
            }
        }
        hits
    }

    /// Removes the run's cgroups once they are empty (bounded wait: a killed process may take
    /// a moment to leave).
    pub fn remove(&self) {
        let deadline = Instant::now() + REMOVE_PATIENCE;
        for dir in std::iter::once(&self.dir).chain(self.v1.iter().map(|(_, d)| d)) {
            loop {
                match fs::remove_dir(dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                    Err(e) if Instant::now() >= deadline => {
                        tracing::warn!(cgroup = %dir.display(), "cannot remove: {e}");
                        break;
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        }
    }
}

/// Enables the limits' controllers for `dir`'s children, through `base`; returns those that
/// took. A cgroup with processes of its own (not the root) cannot pass controllers down: then
/// none is enabled and limits fall to v1 or rlimits.
fn enable_controllers(base: &Path, dir: &Path) -> Vec<Resource> {
    let available = fs::read_to_string(base.join("cgroup.controllers")).unwrap_or_default();
    let mut enabled = Vec::new();
    for resource in CONTROLLERS {
        let name = resource.name();
        if !available.split_whitespace().any(|c| c == name) {
            continue;
        }
        let on = format!("+{name}");
        let ok = fs::write(base.join("cgroup.subtree_control"), &on)
            .and_then(|()| fs::write(dir.join("cgroup.subtree_control"), &on));
        match ok {
            Ok(()) => enabled.push(resource),
            Err(e) => tracing::debug!(controller = name, "cannot enable for runs: {e}"),
        }
    }
    enabled
}

/// Makes `dir` as a fresh cgroup: one left by an earlier daemon under the same name is
/// removed first (it is empty, or a sweep has emptied it).
fn make_fresh(dir: &Path) -> io::Result<()> {
    match fs::create_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let _ = fs::remove_dir(dir);
            fs::create_dir(dir)
        }
        other => other,
    }
}

/// The processes in the cgroup at `dir` now.
pub(super) fn procs_of(dir: &Path) -> Vec<u32> {
    read_pids(&dir.join("cgroup.procs"))
}

fn read_pids(path: &Path) -> Vec<u32> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// The count after `key` in a flat-keyed file such as `memory.events`.
fn event_count(path: &Path, key: &str) -> u64 {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .find_map(|line| {
            let (k, v) = line.split_once(' ')?;
            (k == key).then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0)
}

/// OOM kills in a v1 memory cgroup: `oom_kill` in `memory.oom_control` (Linux 4.13+); on
/// older kernels a limit that was hit (`memory.failcnt`) and a cgroup now under OOM count as
/// one.
fn v1_oom_kills(dir: &Path) -> u64 {
    let control = dir.join("memory.oom_control");
    let text = fs::read_to_string(&control).unwrap_or_default();
    if text.lines().any(|l| l.starts_with("oom_kill ")) {
        return event_count(&control, "oom_kill");
    }
    u64::from(event_count(&control, "under_oom") > 0)
}
