//! Spawning a run's command contained: inside its cgroup from its first instruction where
//! that is its only cgroup and the kernel can (`super::inside`), else into its cgroups before
//! `exec` (so not even its first child is born outside them), with the marker its processes
//! inherit (`SPILLWAY_RUN_ID`), the caller's umask and resource limits, and with an
//! address-space limit where no memory cgroup holds the run. A cgroup that cannot be
//! joined never stops a run: the command is spawned again without it, and tracked through
//! `/proc`.

use std::os::unix::process::CommandExt;
use std::path::Path;

use super::caller::Prepared;
use super::cgroup::RunCgroup;
use super::child_setup::contain_child;
use super::descendants::RUN_ID_ENV;
use super::inside::{self, Outcome, Start};
use super::limits::{Enforcement, Resources};
use super::{LaunchError, RunSpec, command, spawn_error};
use crate::supervisor::{pty, reaper};

/// Spawns the command into its cgroup (if it has one), with its rlimits, as a registered
/// leader. A command that cannot join its cgroup is spawned again without it (tracked
/// through `/proc`), so a cgroup problem never stops a run.
pub(super) fn spawn_contained(
    spec: &RunSpec,
    cwd: &Path,
    program: &Path,
    child: pty::ChildSide,
    cgroup: Option<RunCgroup>,
) -> Result<(u32, Option<RunCgroup>), LaunchError> {
    let none = Resources::default();
    let by_cgroup = cgroup.as_ref().map_or(&none, RunCgroup::enforced);
    let address_space = Enforcement::plan(&spec.resources, by_cgroup).address_space;
    let build = |joins: Vec<std::ffi::CString>, address_space: Option<u64>, namespace: bool| {
        let caller = Prepared::new(spec.caller.as_ref(), address_space.is_some());
        let mut cmd = command(&spec.argv, &spec.env, cwd, program);
        cmd.env(RUN_ID_ENV, spec.id.as_str());
        // SAFETY: the hook runs in the child between fork and exec: it only opens, writes
        // and closes files whose names were made before the fork, and calls umask, setrlimit
        // and unshare, all async-signal-safe; it allocates nothing and takes no lock.
        unsafe {
            cmd.pre_exec(move || {
                if caller.apply()? {
                    // The caller's, not the daemon's raised one: this child's copy of the
                    // setting changes, and the terminal's set-up keeps the limit.
                    pty::keep_file_limit();
                }
                contain_child(&joins, address_space, namespace)
            });
        }
        cmd
    };
    let joins = cgroup
        .as_ref()
        .map(RunCgroup::join_paths)
        .unwrap_or_default();
    let Some(cgroup) = cgroup else {
        let cmd = build(Vec::new(), address_space, false);
        // The leader is reaped by pid: `std`'s handle has nothing more to do once we have it.
        return reaper::spawn_leader(|| pty::spawn(cmd, child).map(|c| c.id()))
            .map(|pid| (pid, None))
            .map_err(|e| spawn_error(&spec.argv[0], e));
    };
    if cgroup.v2_only() {
        let start = Start {
            spec,
            cwd,
            program,
            side: &child,
            cgroup: &cgroup,
            address_space,
        };
        match reaper::spawn_leader(|| match inside::spawn(&start) {
            Outcome::Started(pid) => Ok(pid),
            other => Err(other),
        }) {
            Ok(pid) => {
                tracing::debug!(run = %spec.id, pid, "started inside its cgroup");
                return Ok((pid, Some(cgroup)));
            }
            Err(Outcome::Failed(e)) => {
                // The child is reaped: its cgroup is empty.
                cgroup.remove();
                return Err(spawn_error(&spec.argv[0], e));
            }
            Err(Outcome::Declined | Outcome::Started(_)) => {}
        }
    }
    tracing::debug!(run = %spec.id, "joins its cgroup by writing cgroup.procs");
    // The child's side is consumed by a spawn, so a second try needs copies of it.
    let spare = child.try_clone().map_err(|e| LaunchError::Terminal {
        reason: e.to_string(),
    })?;
    let cmd = build(joins, address_space, cgroup.namespace());
    match reaper::spawn_leader(|| pty::spawn(cmd, child).map(|c| c.id())) {
        Ok(pid) => Ok((pid, Some(cgroup))),
        Err(e) => {
            cgroup.remove();
            let by_rlimit = Enforcement::plan(&spec.resources, &Resources::default());
            let cmd = build(Vec::new(), by_rlimit.address_space, false);
            let pid = reaper::spawn_leader(|| pty::spawn(cmd, spare).map(|c| c.id()))
                .map_err(|e| spawn_error(&spec.argv[0], e))?;
            tracing::warn!(run = %spec.id, "the command could not join its cgroup ({e}): tracked through /proc");
            Ok((pid, None))
        }
    }
}
