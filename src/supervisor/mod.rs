//! The run engine: starts a command under a PTY (or a pipe), streams its output through the
//! capture engine into a spill file, enforces its timeout and stop requests, and reports how it
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
//! `setsid` may hold the descriptor for ever; the run must still end). When the reader is done,
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

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use chrono::Utc;
use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid, waitpid};
use nix::unistd::{AccessFlags, Pid, access};
use tokio::sync::{Notify, oneshot};

use crate::engine::capture::{Capture, Limits, SpillPolicy};
use crate::engine::highlight::Patterns;
use crate::engine::normalise::{NormaliseOptions, Normaliser};
use crate::engine::tokens;
use crate::protocol::{Direction, Preview, RunId, RunStatus};
use crate::storage::spill::DataDir;
use crate::supervisor::input::Input;
use crate::supervisor::progress::Live;
use pty::{Channel, Chunk, Output};

pub mod cgroup;
mod contain;
pub(crate) mod descendants;
pub(crate) mod input;
pub(crate) mod input_wait;
pub(crate) mod leftovers;
pub mod limits;
pub(crate) mod procfs;
pub(crate) mod progress;
pub(crate) mod pty;
pub(crate) mod reaper;

use self::cgroup::{CgroupTree, RunCgroup};
use self::descendants::{EndReport, Member, Tracker};
use self::limits::{Enforcement, Resources};
use crate::protocol::{LimitHit, StoppedProcess};

/// How often a running command's processes are looked at, so that one killed by its
/// terminal's hangup at the command's exit still has a name in the report.
const TRACK_TICK: Duration = Duration::from_millis(500);

/// How long output may go on after the command has exited before its process group is killed.
pub const EXIT_DRAIN: Duration = Duration::from_millis(300);

/// How long the reader goes on after that kill before it stops reading regardless.
pub const KILLED_DRAIN: Duration = Duration::from_millis(200);

/// Size of each read from a run's output.
const READ_CHUNK: usize = 64 * 1024;

/// How long the end of a run waits for its group's killed members to die before it leaves
/// them unreaped (they have been sent SIGKILL: only a process stuck in the kernel takes this
/// long).
const REAP_PATIENCE: Duration = Duration::from_secs(1);

/// Where `execvp` looks for programs when the environment has no `PATH` (glibc's default).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// Variables that belong to the daemon's own service manager (systemd's socket activation,
/// watchdog and journal), which a command must not inherit: a child that saw `NOTIFY_SOCKET`
/// could report readiness, or stop, on the daemon's behalf.
pub const SERVICE_MANAGER_ENV: &[&str] = &[
    "NOTIFY_SOCKET",
    "LISTEN_PID",
    "LISTEN_FDS",
    "LISTEN_FDNAMES",
    "WATCHDOG_PID",
    "WATCHDOG_USEC",
    "INVOCATION_ID",
    "JOURNAL_STREAM",
    "MANAGERPID",
    "SYSTEMD_EXEC_PID",
];

/// What `pager_safe` sets: pagers that print and exit (`cat`, or empty where the tool then
/// uses no pager), and prompts for credentials or answers turned off, so that no command sits
/// waiting for a key nobody will press.
pub const PAGER_SAFE_ENV: &[(&str, &str)] = &[
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("MANPAGER", "cat"),
    ("SYSTEMD_PAGER", ""),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GH_PAGER", "cat"),
    ("AWS_PAGER", ""),
    ("PSQL_PAGER", "cat"),
    ("GCM_INTERACTIVE", "never"),
    ("DEBIAN_FRONTEND", "noninteractive"),
];

/// A terminal's size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtySize {
    pub cols: u16,
    pub rows: u16,
}

/// Everything needed to start one run; the caller has resolved every default.
#[derive(Debug, Clone)]
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
    /// Most bytes the spill file takes (see [`Capture::with_spill_cap`]).
    pub max_spill: u64,
    /// Where the run's cgroup goes; `None`: the run is tracked through `/proc` alone.
    pub cgroups: Option<Arc<CgroupTree>>,
    /// The run's resource limits.
    pub resources: Resources,
}

/// Builds a child's environment: `base` without the variables of the daemon's service manager
/// ([`SERVICE_MANAGER_ENV`]), then, if `pager_safe`, [`PAGER_SAFE_ENV`] over it, then
/// `TERM=term` if given, then `overrides` over everything. The result is sorted by name, each
/// name once (the last value given wins).
pub fn child_env(
    base: impl IntoIterator<Item = (String, String)>,
    pager_safe: bool,
    term: Option<&str>,
    overrides: &BTreeMap<String, String>,
) -> Vec<(String, String)> {
    let mut env: BTreeMap<String, String> = base
        .into_iter()
        .filter(|(name, _)| !SERVICE_MANAGER_ENV.contains(&name.as_str()))
        .collect();
    if pager_safe {
        for (name, value) in PAGER_SAFE_ENV {
            env.insert((*name).to_string(), (*value).to_string());
        }
    }
    if let Some(term) = term {
        env.insert("TERM".to_string(), term.to_string());
    }
    env.extend(overrides.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.into_iter().collect()
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
    /// The preview, worded with [`CliSteps`].
    pub preview: Preview,
    /// The model tokens of the whole output (see [`crate::engine::capture::Capture::output_tokens`]).
    pub output_tokens: tokens::Count,
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
/// executed, no PTY or pipe. The checks and the spawn run on tokio's blocking pool; once the
/// command has started, dropping this future does not stop it (nor its timeout).
///
/// The first launch makes this process a child subreaper (see the module docs).
pub async fn launch(spec: RunSpec, data_dir: &DataDir) -> Result<Launched, LaunchError> {
    let data_dir = data_dir.clone();
    match tokio::task::spawn_blocking(move || start(spec, &data_dir)).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(LaunchError::Internal {
            reason: e.to_string(),
        }),
    }
}

/// The blocking part of [`launch`]: checks, spawn, the run's two threads and its deadline task.
fn start(spec: RunSpec, data_dir: &DataDir) -> Result<Launched, LaunchError> {
    reaper::become_subreaper();
    let cwd = check_cwd(&spec.cwd)?;
    let program = resolve_program(&spec.argv, &spec.env, &cwd)?;
    let terminal = |e: io::Error| LaunchError::Terminal {
        reason: e.to_string(),
    };
    let Channel {
        output,
        child,
        input,
    } = match spec.tty {
        Some(size) => pty::open_pty(size.cols, size.rows),
        None => pty::open_pipe(),
    }
    .map_err(terminal)?;
    let (wake_rx, wake_tx) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| terminal(e.into()))?;
    let cgroup = spec.cgroups.as_ref().and_then(|tree| {
        tree.create(&spec.id, &spec.resources)
            .map_err(|e| tracing::warn!(run = %spec.id, "no cgroup for the run: {e}"))
            .ok()
    });
    let (pid, cgroup) = contain::spawn_contained(&spec, &cwd, &program, child, cgroup)?;
    let none = Resources::default();
    let enforcement = Enforcement::plan(
        &spec.resources,
        cgroup.as_ref().map_or(&none, RunCgroup::enforced),
    );
    let started_at = Utc::now();
    let tracker = Tracker::new(spec.id.clone(), pid, cgroup);
    let shared = Arc::new(Shared::new(
        spec.id.clone(),
        pid,
        spec.kill_grace,
        tracker,
        enforcement.notice(),
    ));
    let reader = Reader::new(
        &spec,
        output,
        input,
        data_dir,
        Drain::new(Arc::clone(&shared), wake_rx),
    );
    let live = Arc::clone(&reader.live);
    let spill_path = live.spill_path().map(Path::to_path_buf);
    let (exited, finished) = start_threads(&shared, reader, wake_tx, started_at)?;
    // Blocking-pool threads run inside the runtime's context.
    tokio::spawn(enforce_deadlines(Arc::clone(&shared), spec.timeout, exited));
    tokio::spawn(track_while_running(Arc::clone(&shared)));
    Ok(Launched {
        pid,
        started_at,
        spill_path,
        control: RunControl { shared },
        live,
        finished,
    })
}

/// Starts the waiter, then the reader; returns the receivers that learn of the command's exit
/// and of the end of the run. If a thread cannot start, the command is killed and reaped.
fn start_threads(
    shared: &Arc<Shared>,
    reader: Reader,
    wake: OwnedFd,
    started_at: chrono::DateTime<Utc>,
) -> Result<(oneshot::Receiver<()>, oneshot::Receiver<Finished>), LaunchError> {
    let pid = shared.pgid;
    let (exited_tx, exited_rx) = oneshot::channel();
    let (finished_tx, finished_rx) = oneshot::channel();
    let (reader_tx, reader_rx) = mpsc::channel();
    let waiter = Waiter {
        shared: Arc::clone(shared),
        wake,
        exited: exited_tx,
        reader: reader_rx,
        finished: finished_tx,
        started_at,
    };
    if let Err(e) = spawn_thread("wait", pid, move || waiter.run()) {
        shared.abandon();
        return Err(e);
    }
    // From here the waiter owns the clean-up: if the reader cannot start, killing the group is
    // enough for the waiter to reap the command.
    match spawn_thread("read", pid, move || reader.run()) {
        Ok(handle) => {
            // The waiter only goes away after the command has exited, when nobody needs this.
            let _ = reader_tx.send(handle);
            Ok((exited_rx, finished_rx))
        }
        Err(e) => {
            shared.signal(Signal::SIGKILL);
            Err(e)
        }
    }
}

/// Checks that `cwd` is a directory we can enter; returns it made absolute.
fn check_cwd(cwd: &Path) -> Result<PathBuf, LaunchError> {
    let bad = |reason: String| LaunchError::BadCwd {
        cwd: cwd.to_path_buf(),
        reason,
    };
    let meta = std::fs::metadata(cwd).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => bad("no such directory".into()),
        _ => bad(e.to_string()),
    })?;
    if !meta.is_dir() {
        return Err(bad("not a directory".into()));
    }
    access(cwd, AccessFlags::X_OK).map_err(|e| bad(format!("cannot enter it: {}", e.desc())))?;
    std::path::absolute(cwd).map_err(|e| bad(e.to_string()))
}

/// Finds the program `argv[0]` names, as `execvp` would but in the child's `PATH` (from `env`,
/// else [`DEFAULT_PATH`]): a name with a `/` is a path (relative to `cwd`), any other is looked
/// up in each `PATH` directory in turn (relative ones, and empty ones, against `cwd`).
fn resolve_program(
    argv: &[String],
    env: &[(String, String)],
    cwd: &Path,
) -> Result<PathBuf, LaunchError> {
    let Some(name) = argv.first().filter(|name| !name.is_empty()) else {
        return Err(LaunchError::Spawn {
            program: String::new(),
            reason: "the command is empty".into(),
        });
    };
    if name.contains('/') {
        return Ok(cwd.join(name));
    }
    let search = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map_or(DEFAULT_PATH, |(_, v)| v.as_str());
    let mut not_executable = None;
    for dir in search.split(':') {
        let candidate = cwd.join(dir).join(name);
        if !candidate.is_file() {
            continue;
        }
        if access(&candidate, AccessFlags::X_OK).is_ok() {
            return Ok(candidate);
        }
        not_executable.get_or_insert(candidate);
    }
    let reason = match not_executable {
        Some(path) => format!("{} is not executable (permission denied)", path.display()),
        None => format!("program not found (searched PATH={search})"),
    };
    Err(LaunchError::Spawn {
        program: name.clone(),
        reason,
    })
}

/// The command for `program` with `argv[0]` as its name: only `env` as its environment.
fn command(argv: &[String], env: &[(String, String)], cwd: &Path, program: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.arg0(&argv[0])
        .args(&argv[1..])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd);
    cmd
}

/// Words a failed spawn: what `exec` (or the set-up before it) said.
fn spawn_error(program: &str, e: io::Error) -> LaunchError {
    let reason = match e.raw_os_error().map(Errno::from_raw) {
        Some(Errno::ENOENT) => "not found (or its #! interpreter is missing)".into(),
        Some(Errno::EACCES) => "permission denied (not executable?)".into(),
        Some(Errno::ENOEXEC) => "not an executable format".into(),
        _ => e.to_string(),
    };
    LaunchError::Spawn {
        program: program.to_string(),
        reason,
    }
}

/// Spawns one of a run's threads, named after its job and the run's pid (short enough for
/// Linux's 15-byte thread names).
fn spawn_thread<T: Send + 'static>(
    job: &str,
    pid: Pid,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<T>, LaunchError> {
    thread::Builder::new()
        .name(format!("{job}-{pid}"))
        .spawn(f)
        .map_err(|e| LaunchError::Internal {
            reason: format!("cannot start a thread: {e}"),
        })
}

/// Why spillway ended a run, if it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    TimedOut,
    Killed,
}

/// Where the run's leader (the command itself) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leader {
    Running,
    /// Exited but not reaped: its pid, and so the group's id, cannot be reused yet.
    Exited,
    /// Reaped: the group's id may now belong to someone else, so nothing is sent to it.
    Reaped,
}

#[derive(Debug)]
struct State {
    leader: Leader,
    cause: Option<Cause>,
    /// When a stop's SIGKILL is due.
    kill_at: Option<Instant>,
}

/// What a run's threads, its deadline task and its [`RunControl`]s share.
#[derive(Debug)]
struct Shared {
    /// For the logs.
    id: RunId,
    /// The process group's id (the leader's pid).
    pgid: Pid,
    kill_grace: Duration,
    state: Mutex<State>,
    /// Set when the leader has exited: the reader checks it after each read.
    leader_exited: AtomicBool,
    /// Wakes the deadline task when a stop begins.
    stopping: Notify,
    /// Every process of the run.
    tracker: Tracker,
    /// See [`Finished::limits_note`].
    limits_note: Option<String>,
}

impl Shared {
    fn new(
        id: RunId,
        pid: u32,
        kill_grace: Duration,
        tracker: Tracker,
        limits_note: Option<String>,
    ) -> Shared {
        Shared {
            tracker,
            limits_note,
            id,
            // `std` made the u32 from a pid_t, so this gives back the kernel's value.
            pgid: Pid::from_raw(pid as i32),
            kill_grace,
            state: Mutex::new(State {
                leader: Leader::Running,
                cause: None,
                kill_at: None,
            }),
            leader_exited: AtomicBool::new(false),
            stopping: Notify::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        crate::sync::lock(&self.state)
    }

    /// Starts stopping the run for `cause` with `signal` (see [`RunControl::stop`]).
    fn begin_stop(&self, cause: Cause, signal: Signal) {
        let mut state = self.state();
        match state.leader {
            Leader::Reaped => return,
            Leader::Running if state.cause.is_none() => {
                state.cause = Some(cause);
                state.kill_at = Instant::now().checked_add(self.kill_grace);
            }
            Leader::Running | Leader::Exited => {}
        }
        self.send(signal);
        drop(state);
        self.stopping.notify_one();
    }

    /// Sends `signal` to the group, unless the run has ended.
    fn signal(&self, signal: Signal) {
        let state = self.state();
        if state.leader != Leader::Reaped {
            self.send(signal);
        }
    }

    /// Sends `signal` to the group, and SIGCONT after it so stopped members act on it. The
    /// caller holds the state lock and has checked that the leader is not reaped.
    fn send(&self, signal: Signal) {
        let send = |signal| match killpg(self.pgid, signal) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => tracing::warn!(run = %self.id, "cannot send {signal} to the group: {e}"),
        };
        send(signal);
        if signal != Signal::SIGKILL && signal != Signal::SIGCONT {
            send(Signal::SIGCONT);
        }
    }

    fn kill_at(&self) -> Option<Instant> {
        self.state().kill_at
    }

    fn mark_exited(&self) {
        let mut state = self.state();
        if state.leader == Leader::Running {
            state.leader = Leader::Exited;
        }
        self.leader_exited.store(true, Ordering::Release);
    }

    /// Kills what is left of the group and reaps the leader; returns how it ended (`None` if
    /// it had been reaped by someone else).
    fn reap(&self) -> Option<WaitStatus> {
        let mut state = self.state();
        self.send(Signal::SIGKILL);
        let status = loop {
            match waitpid(self.pgid, None) {
                Err(Errno::EINTR) => continue,
                Ok(status) => break Some(status),
                Err(e) => {
                    tracing::warn!(run = %self.id, "cannot reap the command: {e}");
                    break None;
                }
            }
        };
        state.leader = Leader::Reaped;
        reaper::forget_leader(self.pgid.as_raw() as u32);
        status
    }

    /// Gives up on a run whose waiter could not start: kills the group and reaps the leader.
    fn abandon(&self) {
        self.tracker.stop(Duration::ZERO);
        self.reap();
        self.reap_members();
        self.tracker.finish(Vec::new(), Vec::new(), &[]);
    }

    /// Waits for the leader to exit, leaving it unreaped.
    fn wait_for_exit(&self) {
        loop {
            match waitid(
                Id::Pid(self.pgid),
                WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT,
            ) {
                Err(Errno::EINTR) => {}
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(run = %self.id, "cannot wait for the command: {e}");
                    return;
                }
            }
        }
    }

    /// Reaps the group's other members: orphans handed to this process (a subreaper) while the
    /// run went on. They have been sent SIGKILL, so the wait is short; a member that is not this
    /// process's child yet becomes one when its dying parent exits, and is reaped in turn.
    fn reap_members(&self) {
        let give_up = Instant::now() + REAP_PATIENCE;
        // Looked at before they are reaped, so that how each died is remembered (see
        // `reaper::hung_up_since`).
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
        loop {
            match waitid(Id::PGid(self.pgid), flags) {
                Ok(WaitStatus::StillAlive) if Instant::now() >= give_up => {
                    tracing::warn!(run = %self.id, "group members still dying: left unreaped");
                    return;
                }
                Ok(WaitStatus::StillAlive) => thread::sleep(Duration::from_millis(1)),
                Ok(status) => match status.pid() {
                    Some(pid) => {
                        reaper::reap_zombie(pid.as_raw());
                    }
                    None => return,
                },
                Err(Errno::EINTR) => {}
                // ECHILD: no child of ours is left in the group.
                Err(_) => return,
            }
        }
    }

    /// The run's status given how its leader ended.
    fn outcome(&self, wait: Option<WaitStatus>) -> (RunStatus, Option<i32>, Option<i32>) {
        let (exit_code, signal) = match wait {
            Some(WaitStatus::Exited(_, code)) => (Some(code), None),
            Some(WaitStatus::Signaled(_, signal, _)) => (None, Some(signal as i32)),
            _ => (None, None),
        };
        let status = match self.state().cause {
            Some(Cause::TimedOut) => RunStatus::TimedOut,
            Some(Cause::Killed) => RunStatus::Killed,
            None if signal.is_some() => RunStatus::Signaled,
            None => RunStatus::Exited,
        };
        (status, exit_code, signal)
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

/// Looks at the run's processes now and then while its command runs (see [`TRACK_TICK`]).
async fn track_while_running(shared: Arc<Shared>) {
    // Not at once: a short command is done before the first look.
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + TRACK_TICK, TRACK_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
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

/// What the reader hands the waiter when the output has ended: the preview, and the whole
/// output's model tokens.
type Finish = (Preview, tokens::Count);

/// The waiter thread: learns of the leader's exit, then, once the reader is done, reaps the
/// leader and the group and sends the result.
struct Waiter {
    shared: Arc<Shared>,
    /// Dropped at the leader's exit, which wakes the reader.
    wake: OwnedFd,
    exited: oneshot::Sender<()>,
    reader: mpsc::Receiver<JoinHandle<(Finish, Output)>>,
    finished: oneshot::Sender<Finished>,
    started_at: chrono::DateTime<Utc>,
}

impl Waiter {
    fn run(self) {
        self.shared.wait_for_exit();
        let exited_at = Instant::now();
        // What the command left running, looked at as soon as it has exited (a stop's
        // signals are still at work on the group then: only what outlives them counts).
        let by_itself = self.shared.state().cause.is_none();
        let mut at_exit = if by_itself {
            self.shared.tracker.members(false)
        } else {
            Vec::new()
        };
        descendants::describe(&mut at_exit);
        self.shared.mark_exited();
        drop(self.wake);
        let _ = self.exited.send(());
        // No reader means the launch failed after the spawn and the group has been killed.
        let read = self.reader.recv().map(JoinHandle::join);
        // A command that exited leaving no process behind has nothing left to stop: only
        // the processes it left could have started more since.
        let stopped = if by_itself && at_exit.is_empty() {
            Vec::new()
        } else {
            self.shared.tracker.stop(self.shared.kill_grace)
        };
        let wait = self.shared.reap();
        self.shared.reap_members();
        let hung_up = if by_itself {
            reaper::hung_up_since(self.shared.pgid.as_raw() as u32, exited_at)
        } else {
            Vec::new()
        };
        let EndReport {
            stopped,
            limits_hit,
        } = self.shared.tracker.finish(at_exit, stopped, &hung_up);
        let ended_at = Utc::now();
        let (preview, output_tokens) = match read {
            // The output is closed only now, after the command's exit: closing a PTY's master
            // hangs the terminal up, and the command, which may have closed its own copies
            // and gone on, would get SIGHUP.
            Ok(Ok((finish, output))) => {
                drop(output);
                finish
            }
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            Err(_) => return,
        };
        let (status, exit_code, signal) = self.shared.outcome(wait);
        let _ = self.finished.send(Finished {
            status,
            exit_code,
            signal,
            started_at: self.started_at,
            ended_at,
            preview,
            output_tokens,
            stopped,
            limits_hit,
            limits_note: self.shared.limits_note.clone(),
        });
    }
}

/// The reader thread: output -> normaliser -> capture (in the run's [`Live`] state), then the
/// preview.
struct Reader {
    output: Output,
    live: Arc<Live>,
    drain: Drain,
}

impl Reader {
    /// A reader of `output` for `spec`'s run; creates the spill file.
    fn new(
        spec: &RunSpec,
        output: Output,
        input: Option<Input>,
        data_dir: &DataDir,
        drain: Drain,
    ) -> Reader {
        let defaults = NormaliseOptions::default();
        // The screen model draws on a terminal of the PTY's size.
        let size = spec.tty.unwrap_or(TtySize {
            cols: defaults.cols,
            rows: defaults.rows,
        });
        let normaliser = Normaliser::new(NormaliseOptions {
            raw: spec.raw,
            cols: size.cols,
            rows: size.rows,
            ..defaults
        });
        let capture = Capture::new(spec.limits, SpillPolicy::Always(data_dir.clone()))
            .with_spill_cap(spec.max_spill)
            .with_highlights(spec.highlights.clone());
        Reader {
            output,
            live: Arc::new(Live::new(
                normaliser,
                capture,
                spec.direction,
                input,
                spec.raw_stream,
                spec.max_tokens,
            )),
            drain,
        }
    }

    /// Reads the output to its end; returns the preview and the output's tokens, and the
    /// output for the waiter to close once the command has exited.
    fn run(mut self) -> (Finish, Output) {
        if let Err(e) = self.pump() {
            tracing::warn!(run = %self.drain.shared.id, "reading the output failed: {e}");
        }
        (self.live.finish(), self.output)
    }

    /// Reads until the end of the output, or until the drain runs out of patience.
    fn pump(&mut self) -> io::Result<()> {
        let mut buf = vec![0; READ_CHUNK];
        loop {
            let chunk = self.output.read(&mut buf)?;
            match chunk {
                Chunk::Data(n) => self.live.feed(&buf[..n]),
                Chunk::Eof => return Ok(()),
                Chunk::WouldBlock => {}
            }
            let limit = match self.drain.patience() {
                Patience::Unlimited => None,
                Patience::For(limit) => Some(limit),
                Patience::Exhausted => {
                    tracing::warn!(
                        run = %self.drain.shared.id,
                        "stopped reading: a process outside the group holds the output open"
                    );
                    return Ok(());
                }
            };
            if chunk == Chunk::WouldBlock {
                self.live.pause();
                self.output.wait(self.drain.wake(), limit)?;
            }
        }
    }
}

/// How long the reader may still wait for output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Patience {
    /// The leader is running: as long as it takes.
    Unlimited,
    For(Duration),
    /// Stop reading.
    Exhausted,
}

/// The reader's side of the policy that follows the leader's exit (see the module docs).
struct Drain {
    shared: Arc<Shared>,
    /// Hung up by the waiter at the leader's exit; dropped once that has been seen.
    wake: Option<OwnedFd>,
    exited_at: Option<Instant>,
    killed_at: Option<Instant>,
}

impl Drain {
    fn new(shared: Arc<Shared>, wake: OwnedFd) -> Drain {
        Drain {
            shared,
            wake: Some(wake),
            exited_at: None,
            killed_at: None,
        }
    }

    fn wake(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.wake.as_ref().map(AsFd::as_fd)
    }

    /// How long the reader may wait now; kills the group when the first grace has run out.
    fn patience(&mut self) -> Patience {
        let exited_at = match self.exited_at {
            Some(at) => at,
            None if !self.shared.leader_exited.load(Ordering::Acquire) => {
                return Patience::Unlimited;
            }
            None => {
                self.wake = None;
                *self.exited_at.insert(Instant::now())
            }
        };
        let now = Instant::now();
        if let Some(killed_at) = self.killed_at {
            return match (killed_at + KILLED_DRAIN).checked_duration_since(now) {
                Some(left) if !left.is_zero() => Patience::For(left),
                _ => Patience::Exhausted,
            };
        }
        match (exited_at + EXIT_DRAIN).checked_duration_since(now) {
            Some(left) if !left.is_zero() => Patience::For(left),
            _ => {
                self.shared.signal(Signal::SIGKILL);
                self.killed_at = Some(now);
                Patience::For(KILLED_DRAIN)
            }
        }
    }
}

#[cfg(test)]
mod tests {
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
