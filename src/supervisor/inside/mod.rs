//! Starting a run's command inside its cgroup: `clone3` with `CLONE_INTO_CGROUP` makes the
//! child in the run's cgroup v2 directory, so it is there from its first instruction without
//! writing itself into `cgroup.procs`. That write, the `Command` path's way
//! (`super::contain`), waits for the kernel's cgroup lock taken for writing (an RCU grace
//! period, about 12 ms on the project's machine) and was most of what a short run added.
//!
//! Used where the run's only cgroup is a v2 one (a v1 hierarchy of a hybrid host still needs
//! the write). Where the kernel has no `clone3` or no `CLONE_INTO_CGROUP`, or a seccomp
//! filter refuses it, the first try says so and every later run goes the `Command` way
//! (decided once, and logged at debug level); so does every run of a daemon started with
//! [`NO_CLONE_INTO_CGROUP_ENV`]. A run whose cgroup the kernel will not start it in (removed
//! under it, refused) goes the `Command` way alone.

#[cfg(target_arch = "x86_64")]
use std::ffi::c_void;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use super::caller::Prepared;
use super::cgroup::{RunCgroup, switch_on};
use super::descendants::RUN_ID_ENV;
use super::{RunSpec, pty};

mod child;
mod clone3;

use child::{Exec, Setup};
#[cfg(not(target_arch = "x86_64"))]
use clone3::Forked;

/// Set (to anything but `0` or empty) in the daemon's environment, commands join their
/// cgroups by writing `cgroup.procs` as on a kernel without `clone3`, so that path is tested
/// on every kernel.
pub const NO_CLONE_INTO_CGROUP_ENV: &str = "SPILLWAY_NO_CLONE_INTO_CGROUP";

/// Whether `clone3` with `CLONE_INTO_CGROUP` is used: not tried yet, works, or not here.
static CLONE_INTO: AtomicU8 = AtomicU8::new(UNTRIED);
const UNTRIED: u8 = 0;
const WORKS: u8 = 1;
const OFF: u8 = 2;

/// How a start inside the cgroup went.
#[derive(Debug)]
pub(super) enum Outcome {
    /// The command runs, inside its cgroup, as this pid.
    Started(u32),
    /// The child was made but its set-up or `exec` failed (reaped already): the run's error,
    /// the one the `Command` path would give.
    Failed(io::Error),
    /// Not started: the `Command` path is the way (the reason is logged).
    Declined,
}

/// What [`spawn`] starts: the command of `spec`, resolved to `program`, in `cwd`, on `side`,
/// in `cgroup`, with `address_space` as its limit (where no memory cgroup holds it).
#[derive(Debug)]
pub(super) struct Start<'a> {
    pub spec: &'a RunSpec,
    pub cwd: &'a Path,
    pub program: &'a Path,
    pub side: &'a pty::ChildSide,
    pub cgroup: &'a RunCgroup,
    pub address_space: Option<u64>,
}

/// Starts the command inside its cgroup, if this daemon does so (see the module's comment).
/// `side` stays the caller's: it is closed by the caller, and still there for the `Command`
/// path after [`Outcome::Declined`].
pub(super) fn spawn(start: &Start<'_>) -> Outcome {
    if !in_use() {
        return Outcome::Declined;
    }
    let run = &start.spec.id;
    let prepared = Exec::new(
        start.program,
        &start.spec.argv,
        &start.spec.env,
        (RUN_ID_ENV, run.as_str()),
        start.cwd,
    )
    .and_then(|exec| Ok((exec, open_dir(start.cgroup.dir())?, pipe_ends(start.side)?)));
    let (exec, dir, (stdin, stdout, stderr)) = match prepared {
        Ok(ready) => ready,
        Err(e) => {
            tracing::debug!(run = %run, "not started inside its cgroup ({e})");
            return Outcome::Declined;
        }
    };
    let caller = Prepared::new(start.spec.caller.as_ref(), start.address_space.is_some());
    let setup = Setup {
        exec: &exec,
        stdio: [stdin.as_raw_fd(), stdout.as_raw_fd(), stderr.as_raw_fd()],
        caller: &caller,
        address_space: start.address_space,
        namespace: start.cgroup.namespace(),
        terminal: start.side.is_terminal(),
        file_limit: pty::commands_file_limit(),
    };
    match fork_and_exec(&setup, &dir) {
        Ok(outcome) => outcome,
        Err(e) => {
            refused(run, &e);
            Outcome::Declined
        }
    }
}

/// Whether to try `clone3`: not when it failed before, nor when the daemon's environment
/// turns it off (read once, at the first run with a cgroup).
fn in_use() -> bool {
    match CLONE_INTO.load(Ordering::Relaxed) {
        UNTRIED if switch_on(NO_CLONE_INTO_CGROUP_ENV) => {
            CLONE_INTO.store(OFF, Ordering::Relaxed);
            tracing::debug!(
                "{NO_CLONE_INTO_CGROUP_ENV} is set: commands join their cgroups by writing cgroup.procs"
            );
            false
        }
        OFF => false,
        _ => true,
    }
}

/// `clone3` refused to make the child: for good if the kernel or a seccomp filter lacks it,
/// else for this run (its cgroup).
fn refused(run: &crate::protocol::RunId, e: &io::Error) {
    let errno = e.raw_os_error().map(Errno::from_raw);
    if matches!(
        errno,
        Some(Errno::ENOSYS | Errno::EPERM | Errno::EINVAL | Errno::E2BIG)
    ) {
        CLONE_INTO.store(OFF, Ordering::Relaxed);
        tracing::debug!(
            "clone3 with CLONE_INTO_CGROUP is not available ({e}): commands join their cgroups by writing cgroup.procs"
        );
    } else {
        tracing::debug!(run = %run, "clone3 could not start the command in its cgroup ({e})");
    }
}

/// The run's cgroup directory, open for `CLONE_INTO_CGROUP`.
fn open_dir(dir: &Path) -> io::Result<OwnedFd> {
    Ok(nix::fcntl::open(
        dir,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?)
}

/// The command's stdin (`/dev/null` where the side has none), stdout and stderr, each
/// numbered 3 or more.
fn pipe_ends(side: &pty::ChildSide) -> io::Result<(OwnedFd, OwnedFd, OwnedFd)> {
    let (stdin, stdout, stderr) = side.stdio();
    let stdin = match stdin {
        Some(fd) => child::above_stdio(fd)?,
        None => child::above_stdio(
            nix::fcntl::open(
                "/dev/null",
                OFlag::O_RDONLY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )?
            .as_fd(),
        )?,
    };
    Ok((
        stdin,
        child::above_stdio(stdout)?,
        child::above_stdio(stderr)?,
    ))
}

/// Clones the child into the cgroup `dir` is open on, and learns whether its `exec` worked:
/// the child writes its `errno` to a close-on-exec pipe if not, so the parent reads either
/// nothing (the pipe closed by the `exec`) or the error. `Err` is `clone3`'s own failure.
fn fork_and_exec(setup: &Setup<'_>, dir: &OwnedFd) -> io::Result<Outcome> {
    let (report, report_tx) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    let forked = {
        let _forks = pty::fork_lock();
        start_child(setup, dir.as_fd(), report_tx.as_raw_fd())?
    };
    drop(report_tx);
    if CLONE_INTO.swap(WORKS, Ordering::Relaxed) == UNTRIED {
        tracing::debug!("commands start inside their cgroups (clone3 with CLONE_INTO_CGROUP)");
    }
    Ok(match read_report(&report) {
        None => Outcome::Started(forked),
        Some(error) => {
            reap(forked);
            Outcome::Failed(error)
        }
    })
}

/// What the child of [`start_child`] is handed: its set-up and the report pipe's write end.
#[cfg(target_arch = "x86_64")]
struct Handoff<'a> {
    setup: &'a Setup<'a>,
    report: RawFd,
}

/// Starts the child on a stack of its own, sharing the daemon's memory until its `exec`
/// (see `clone3`); returns once it has exec'd or exited, with its pid.
#[cfg(target_arch = "x86_64")]
fn start_child(setup: &Setup<'_>, dir: BorrowedFd<'_>, report: RawFd) -> io::Result<u32> {
    /// The child's first frame, on its new stack.
    extern "C" fn enter(handoff: *mut c_void) -> ! {
        // SAFETY: `handoff` is the parent's `Handoff`, alive until `spawn_sharing` returns,
        // which is after this child has exec'd or exited; `child::run` makes only
        // async-signal-safe calls, writes nothing but this stack (and `errno`) and never
        // returns.
        unsafe {
            let handoff = &*handoff.cast::<Handoff<'_>>();
            child::run(handoff.setup, handoff.report)
        }
    }
    let mut stack = clone3::Stack::new(setup.exec.stack_size())?;
    let handoff = Handoff { setup, report };
    // SAFETY: `enter` keeps the contract (above); `handoff` outlives the call.
    unsafe {
        clone3::spawn_sharing(
            dir,
            &mut stack,
            enter,
            (&raw const handoff).cast_mut().cast(),
        )
    }
}

/// Forks the child, which runs on a copy of the daemon's memory until its `exec`.
#[cfg(not(target_arch = "x86_64"))]
fn start_child(setup: &Setup<'_>, dir: BorrowedFd<'_>, report: RawFd) -> io::Result<u32> {
    // SAFETY: the child only runs `child::run`, which makes async-signal-safe calls on what
    // was prepared before, and never returns.
    match unsafe { clone3::fork_into(dir) }? {
        // SAFETY: this is the new child, before exec; `report` is the pipe's close-on-exec
        // write end.
        Forked::Child => unsafe { child::run(setup, report) },
        Forked::Parent(pid) => Ok(pid),
    }
}

/// The child's `errno`, if it sent one before exiting; `None` once its `exec` closed the pipe.
fn read_report(report: &OwnedFd) -> Option<io::Error> {
    let mut buf = [0u8; 4];
    let mut got = 0;
    while got < buf.len() {
        match nix::unistd::read(report, &mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(Errno::EINTR) => {}
            Err(e) => return Some(e.into()),
        }
    }
    match got {
        0 => None,
        4 => Some(io::Error::from_raw_os_error(i32::from_ne_bytes(buf))),
        _ => Some(io::Error::other(
            "the command's start sent a partial report",
        )),
    }
}

/// Reaps a child that exited before `exec`.
fn reap(pid: u32) {
    let Ok(pid) = i32::try_from(pid) else { return };
    loop {
        match nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None) {
            Err(Errno::EINTR) => {}
            _ => return,
        }
    }
}
