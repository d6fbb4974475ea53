//! Starting a run's command: its working directory and program checked, its environment
//! made, the process spawned in a session of its own on the run's terminal, and the reader
//! and waiter threads started beside it.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::mpsc;

use chrono::Utc;
use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::unistd::{AccessFlags, Pid, access};
use tokio::sync::oneshot;

use crate::storage::spill::DataDir;
use crate::supervisor::cgroup::RunCgroup;
use crate::supervisor::descendants::Tracker;
use crate::supervisor::limits::{Enforcement, Resources};
use crate::supervisor::pty::{self, Channel};
use crate::supervisor::{contain, reaper, run_threads};

use super::reader::{Drain, Reader};
use super::waiter::Waiter;
use super::{
    Finished, LaunchError, Launched, RunControl, RunSpec, Shared, enforce_deadlines,
    track_while_running,
};

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

/// The blocking part of [`launch`]: checks, spawn, the run's two threads and its deadline task.
pub(super) fn start(mut spec: RunSpec, data_dir: &DataDir) -> Result<Launched, LaunchError> {
    reaper::become_subreaper();
    let cwd = check_cwd(&spec.cwd)?;
    let program = resolve_program(&spec.argv, &spec.env, &cwd)?;
    let terminal = |e: io::Error| LaunchError::Terminal {
        reason: e.to_string(),
    };
    let Channel {
        output,
        mut child,
        input,
    } = match spec.tty {
        Some(size) => pty::open_pty(size.cols, size.rows),
        None => pty::open_pipe(),
    }
    .map_err(terminal)?;
    if let Some(stdin) = spec.stdin.take() {
        child.read_from(stdin);
    }
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
        launched: std::time::Instant::now(),
    };
    if let Err(e) = spawn_thread("wait", pid, move || waiter.run()) {
        shared.abandon();
        return Err(e);
    }
    // From here the waiter owns the clean-up: if the reader cannot start, killing the group is
    // enough for the waiter to reap the command. The reader hands its result on as its last
    // act rather than being joined: the waiter would otherwise wait for the thread's own
    // teardown, on the path to the run's `exit`.
    let read = move || {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| reader.run()));
        // The waiter only goes away after the command has exited, when nobody needs this.
        let _ = reader_tx.send(result);
    };
    match spawn_thread("read", pid, read) {
        Ok(()) => Ok((exited_rx, finished_rx)),
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
pub(super) fn resolve_program(
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
pub(super) fn command(
    argv: &[String],
    env: &[(String, String)],
    cwd: &Path,
    program: &Path,
) -> Command {
    let mut cmd = Command::new(program);
    cmd.arg0(&argv[0])
        .args(&argv[1..])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd);
    cmd
}

/// Words a failed spawn: what `exec` (or the set-up before it) said.
pub(super) fn spawn_error(program: &str, e: io::Error) -> LaunchError {
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

/// Starts one of a run's threads' jobs ([`run_threads`]), named after the job and the run's
/// pid (short enough for Linux's 15-byte thread names).
fn spawn_thread(job: &str, pid: Pid, f: impl FnOnce() + Send + 'static) -> Result<(), LaunchError> {
    run_threads::spawn(format!("{job}-{pid}"), f).map_err(|e| LaunchError::Internal {
        reason: format!("cannot start a thread: {e}"),
    })
}
