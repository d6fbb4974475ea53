//! The supervisor: starts a command under a PTY (or a pipe), streams its output through the
//! engine (normaliser and capture) into a spill file, enforces its timeout and stop requests, and reports how it
//! ended with a bounded preview.
//!
//! This module owns a run's lifecycle, from the checks that come before the start to the moment
//! its last process is gone. Each run has:
//!
//! - a **process group** of its own: the command leads a new session, so its pid is its group's
//!   id, and every signal spillway sends (timeout, stop, clean-up) goes to the whole group;
//! - a **reader thread** that owns the output descriptor, a [`Normaliser`] and a [`Capture`], so
//!   a chatty or slow run never stalls the async runtime or another run; it reads 64 KiB at a
//!   time and only polls when a read would block;
//! - a **waiter thread** that waits for the command to exit *without reaping it*, so that the
//!   group's id cannot be reused by an unrelated process while spillway may still signal it;
//! - a small **async task** that fires the timeout and turns a stop's SIGTERM into SIGKILL after
//!   the grace period.
//!
//! # The process group never outlives its run
//!
//! Once the command (the group's leader) has exited, the reader drains the output until end of
//! file. Processes left in the group may hold the terminal or pipe open: if the end has not come
//! [`EXIT_DRAIN`] after the exit, the whole group gets SIGKILL, and the reader goes on for at
//! most [`KILLED_DRAIN`] more before it stops regardless (a process that left the group with
//! `setsid` may hold the descriptor for ever; the run must still end). Neither deadline cuts
//! short output whose writers are all gone: what the pipe or terminal still holds is read to
//! its end, since nothing can add to it. When the reader is done,
//! whatever is left of the group gets SIGKILL, the leader is reaped, and the group's other
//! members are reaped too: spillway makes itself a *child subreaper* on its first launch, so
//! that processes orphaned inside a run are handed to it rather than to an init that may never
//! reap them (see [`crate::supervisor::reaper`], which also reaps those that left the group and died
//! later). A run is finished when its leader has been reaped and its reader has stopped.
//!
//! # Nothing a run started outlives it
//!
//! A process can leave the group (`setsid`, a daemonising tool), so the group is not the
//! whole of a run: every process it starts is also tracked, by a cgroup of its own where the
//! daemon can make one, else through `/proc` ([`descendants`], [`cgroup`]). When the run ends,
//! whatever its command left running is stopped (SIGTERM, the kill grace, then a kill that
//! nothing can fork its way out of) and named in the result ([`Finished::stopped`]). The same
//! cgroups hold the run to its resource limits ([`limits`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chrono::Utc;
use nix::sys::signal::Signal;
use tokio::sync::oneshot;

use crate::engine::capture::{Limits, OutputSource};
use crate::engine::highlight::Patterns;
use crate::protocol::{Direction, Preview, RunId, RunStatus};
use crate::storage::spill::DataDir;
use crate::supervisor::live::Live;

pub mod caller;
pub mod cgroup;
mod child_setup;
mod contain;
pub(crate) mod descendants;
mod heavy_output;
pub(crate) mod input;
pub(crate) mod input_wait;
mod inside;
pub(crate) mod leftovers;
pub mod limits;
pub(crate) mod live;
mod members;
pub(crate) mod procfs;
pub(crate) mod pty;
pub(crate) mod reaper;
pub mod strays;

use self::cgroup::CgroupTree;
use self::descendants::Member;
use self::limits::Resources;
use crate::protocol::{LimitHit, StoppedProcess};
mod reader;
mod run_threads;
mod shared;
mod spawn;
mod waiter;

use shared::{Cause, Shared};
pub use spawn::child_env;
use spawn::command;
use spawn::{spawn_error, start};

/// How often a running command's processes are looked at, so that one killed by its
/// terminal's hangup at the command's exit still has a name in the report.
const TRACK_TICK: Duration = Duration::from_millis(500);

/// How often a run's processes are looked at in its first [`EARLY`]; after it the looks
/// come twice as late each, up to [`TRACK_TICK`]. A background child of a command that is
/// done within a second (`server & sleep 0.3`) is then named by its command line, read while
/// it lived, rather than by the name its zombie keeps (`[sleep]`), even when a loaded
/// machine starts the shell late. A look reads the run's few processes: cheap.
const FIRST_LOOK: Duration = Duration::from_millis(25);

/// The part of a run during which its processes are looked at every [`FIRST_LOOK`].
const EARLY: Duration = Duration::from_secs(1);

/// A terminal's size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtySize {
    pub cols: u16,
    pub rows: u16,
}

/// Everything needed to start one run; the caller has resolved every default.
#[derive(Debug)]
pub struct RunSpec {
    pub id: RunId,
    /// Program and arguments; a shell command line arrives as `["sh", "-c", line]`. The program
    /// is looked up in the `PATH` of `env` unless it contains a `/` (then it is taken relative
    /// to `cwd`).
    pub argv: Vec<String>,
    /// Working directory: must exist and be a directory (checked by [`launch`]).
    pub cwd: PathBuf,
    /// The child's complete environment (see [`child_env`]); nothing of the daemon's is added.
    pub env: Vec<(String, String)>,
    /// `Some`: under a PTY of this size (stdin is the PTY too). `None`: stdout and stderr share
    /// one pipe, and stdin is `/dev/null`.
    pub tty: Option<TtySize>,
    /// Kill the process group after this long (SIGTERM, then SIGKILL after `kill_grace`).
    pub timeout: Option<Duration>,
    /// Delay between the first signal of a timeout, stop or shutdown and SIGKILL.
    pub kill_grace: Duration,
    pub limits: Limits,
    pub direction: Direction,
    /// Keep escape sequences; only repair UTF-8 ([`NormaliseOptions::raw`]).
    pub raw: bool,
    /// Pass the raw output on as it is read ([`Live::take_raw`]), for a client that shows it
    /// live.
    pub raw_stream: bool,
    /// Patterns for the preview's highlights; `None` turns them off.
    pub highlights: Option<Patterns>,
    /// Also hold the preview to this many model tokens.
    pub max_tokens: Option<usize>,
    /// Fold lines alike into template markers in the preview (`compact`).
    pub compact: bool,
    /// Most bytes the spill file takes (see [`Capture::with_spill_cap`]).
    pub max_spill: u64,
    /// Where the run's cgroup goes; `None`: the run is tracked through `/proc` alone.
    pub cgroups: Option<Arc<CgroupTree>>,
    /// The run's resource limits.
    pub resources: Resources,
    /// The command's standard input instead of the terminal or `/dev/null`: a descriptor the
    /// client passed (its own stdin, a pipe or a file).
    pub stdin: Option<std::os::fd::OwnedFd>,
    /// The caller's umask and resource limits for the command; `None`: the daemon's.
    pub caller: Option<crate::protocol::CallerContext>,
}

/// What prevented a run from starting. Nothing after the start is an error: it is in
/// [`Finished`].
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The working directory does not exist, is not a directory or cannot be entered.
    #[error("bad working directory {}: {reason}", cwd.display())]
    BadCwd { cwd: PathBuf, reason: String },
    /// The program could not be started: not found, not executable, not a valid executable.
    #[error("cannot run {program:?}: {reason}")]
    Spawn { program: String, reason: String },
    /// No PTY or pipe could be created for the output.
    #[error("cannot create the command's terminal or pipe: {reason}")]
    Terminal { reason: String },
    /// The daemon could not set the run up (no thread could be started, or the runtime is
    /// shutting down).
    #[error("cannot start the run: {reason}")]
    Internal { reason: String },
}

/// Why spillway stops a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Signal the whole group with this signal, then SIGKILL after the grace period.
    Kill(Signal),
    /// The daemon is shutting down: SIGTERM, then SIGKILL after the grace period.
    Shutdown,
}

/// A handle to stop a run: cheap to clone, usable from any thread.
#[derive(Debug, Clone)]
pub struct RunControl {
    shared: Arc<Shared>,
}

impl RunControl {
    /// Signals the run's whole process group (with SIGCONT after any signal but SIGKILL, so
    /// that stopped members act on it), and SIGKILL after the grace period if the command is
    /// still running then. The first stop (or the timeout, whichever comes first) decides the
    /// run's status ([`RunStatus::Killed`] here); a later call only sends its signal. A stop
    /// that comes after the command has exited only hurries its leftover processes, and once
    /// the run has ended it does nothing.
    pub fn stop(&self, reason: StopReason) {
        let signal = match reason {
            StopReason::Kill(signal) => signal,
            StopReason::Shutdown => Signal::SIGTERM,
        };
        self.shared.begin_stop(Cause::Killed, signal);
    }

    /// Whether a stop (or the timeout) has begun: the run is on its way out.
    pub fn is_stopping(&self) -> bool {
        self.shared.state().cause.is_some()
    }

    /// The run's processes now, other than its command (blocking: reads `/proc` or the
    /// run's cgroup).
    pub fn members(&self) -> Vec<Member> {
        self.shared.tracker.members(false)
    }

    /// Whether a process of the run, its command included, listens on TCP `port` (blocking:
    /// reads `/proc`).
    pub fn listens_on(&self, port: u16) -> bool {
        let mut pids = vec![self.shared.pgid.as_raw() as u32];
        pids.extend(self.members().into_iter().map(|m| m.pid));
        descendants::listening_on(&pids, port)
    }
}

/// How a run ended.
#[derive(Debug)]
pub struct Finished {
    /// [`RunStatus::Exited`] when the command exited by itself, [`RunStatus::Signaled`] when a
    /// signal spillway did not send killed it, [`RunStatus::TimedOut`] or [`RunStatus::Killed`]
    /// when spillway stopped it (then `exit_code` or `signal` say how it ended).
    pub status: RunStatus,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub started_at: chrono::DateTime<Utc>,
    /// When the command had been reaped and its output read to the end.
    pub ended_at: chrono::DateTime<Utc>,
    /// The preview, its next steps named as command lines ([`crate::program::CliSteps`]).
    pub preview: Preview,
    /// Where the token accounting finds the whole output's text
    /// ([`crate::engine::capture::Capture::take_output_source`]): read and counted after the run's
    /// `exit` has been given, which it is not part of.
    pub output: OutputSource,
    /// What the command left running when it ended, which was then stopped.
    pub stopped: Vec<StoppedProcess>,
    /// The resource limits the run reached.
    pub limits_hit: Vec<LimitHit>,
    /// Says which asked-for limits did not hold for the whole run, if any.
    pub limits_note: Option<String>,
}

/// A run that has started.
#[derive(Debug)]
pub struct Launched {
    /// The command's pid, which is also its process group's and session's id.
    pub pid: u32,
    pub started_at: chrono::DateTime<Utc>,
    /// The spill file (`None` when it could not be created; the preview's notice says why).
    pub spill_path: Option<PathBuf>,
    pub control: RunControl,
    /// The output so far, the counters and the terminal's input, while the run goes on.
    pub live: Arc<Live>,
    /// Resolves when the run has finished. It fails only if the run's reader thread panicked,
    /// which would be a bug.
    pub finished: oneshot::Receiver<Finished>,
}

/// Starts a run; must be called inside a tokio runtime, which must keep running for the
/// timeout and the grace periods to be enforced.
///
/// Errors only for what prevents the start: a bad `cwd`, a program that cannot be found or
/// executed, no PTY or pipe. The checks and the spawn block (see [`crate::blocking`]); once the
/// command has started, dropping this future does not stop it (nor its timeout).
///
/// The first launch makes this process a child subreaper (see the module docs).
pub async fn launch(spec: RunSpec, data_dir: &DataDir) -> Result<Launched, LaunchError> {
    let data_dir = data_dir.clone();
    match crate::blocking::run(move || start(spec, &data_dir)).await {
        Ok(result) => result,
        Err(e) => Err(LaunchError::Internal {
            reason: e.to_string(),
        }),
    }
}

/// The timeout and the stop's SIGKILL, until the leader exits.
async fn enforce_deadlines(
    shared: Arc<Shared>,
    timeout: Option<Duration>,
    mut exited: oneshot::Receiver<()>,
) {
    let timeout_at = timeout.and_then(|t| Instant::now().checked_add(t));
    loop {
        let kill_at = shared.kill_at();
        tokio::select! {
            _ = &mut exited => return,
            () = shared.stopping.notified() => {}
            () = sleep_until(kill_at) => {
                shared.signal(Signal::SIGKILL);
                return;
            }
            () = sleep_until(timeout_at.filter(|_| kill_at.is_none())) => {
                shared.begin_stop(Cause::TimedOut, Signal::SIGTERM);
            }
        }
    }
}

/// Looks at the run's processes now and then while its command runs (see [`FIRST_LOOK`],
/// [`EARLY`] and [`TRACK_TICK`]).
async fn track_while_running(shared: Arc<Shared>) {
    // Not at once: a short command is done before the first look.
    let begun = Instant::now();
    let mut wait = FIRST_LOOK;
    loop {
        tokio::time::sleep(wait).await;
        if begun.elapsed() >= EARLY {
            wait = (wait * 2).min(TRACK_TICK);
        }
        if shared.leader_exited.load(Ordering::Acquire) {
            return;
        }
        let looker = Arc::clone(&shared);
        if tokio::task::spawn_blocking(move || looker.tracker.refresh())
            .await
            .is_err()
        {
            return;
        }
    }
}

/// Sleeps until `at`, or for ever.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use super::spawn::resolve_program;
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn child_env_strips_the_service_manager_then_layers_pager_term_and_overrides() {
        let base = env(&[
            ("NOTIFY_SOCKET", "/run/x"),
            ("LISTEN_FDS", "3"),
            ("PAGER", "less"),
            ("HOME", "/home/a"),
            ("TERM", "dumb"),
        ]);
        let overrides = BTreeMap::from([("GIT_PAGER".to_string(), "delta".to_string())]);
        let got: BTreeMap<_, _> = child_env(base.clone(), true, Some("xterm-256color"), &overrides)
            .into_iter()
            .collect();
        assert!(!got.contains_key("NOTIFY_SOCKET") && !got.contains_key("LISTEN_FDS"));
        assert_eq!(got["PAGER"], "cat");
        assert_eq!(got["GIT_PAGER"], "delta");
        assert_eq!(got["AWS_PAGER"], "");
        assert_eq!(got["TERM"], "xterm-256color");
        assert_eq!(got["HOME"], "/home/a");

        let plain: BTreeMap<_, _> = child_env(base, false, None, &BTreeMap::new())
            .into_iter()
            .collect();
        assert_eq!(plain["PAGER"], "less");
        assert_eq!(plain["TERM"], "dumb");
        assert!(!plain.contains_key("GIT_TERMINAL_PROMPT"));
    }

    #[test]
    fn programs_are_found_in_the_childs_path() {
        let tmp = tempfile::tempdir().unwrap();
        let argv = |name: &str| vec![name.to_string()];
        let path = env(&[("PATH", "/nonexistent:/bin")]);
        assert_eq!(
            resolve_program(&argv("sh"), &path, tmp.path()).unwrap(),
            Path::new("/bin/sh")
        );
        assert_eq!(
            resolve_program(&argv("./x"), &path, tmp.path()).unwrap(),
            tmp.path().join("./x")
        );
        let err = resolve_program(&argv("sh"), &env(&[("PATH", "/nonexistent")]), tmp.path())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("not found") && err.contains("PATH=/nonexistent"),
            "{err}"
        );

        std::fs::write(tmp.path().join("tool"), "#!/bin/sh\n").unwrap();
        let rel = env(&[("PATH", ".")]);
        let err = resolve_program(&argv("tool"), &rel, tmp.path()).unwrap_err();
        assert!(err.to_string().contains("not executable"), "{err}");
        assert!(resolve_program(&[], &rel, tmp.path()).is_err());
    }
}
