//! What a command started by `clone3` does between its birth and `exec`, and everything it
//! needs made beforehand: the child may not allocate or take a lock (another thread of the
//! daemon may hold the allocator's), so every C string and pointer array is built in the
//! parent, and the child makes system calls only. Where it shares the daemon's memory until
//! `exec` (`super::clone3`), it also writes nothing but its own stack (and `errno`, the
//! spawning thread's, which waits meanwhile and reads it only after a call of its own fails):
//! every setting it needs (the open-file limit) is read in the parent, and each step's result
//! stays in its frames.
//!
//! The steps are those of `std::process::Command`'s child followed by the hooks the
//! `Command` path installs (`super::super::child_setup`, `super::super::pty`), in the same
//! order: stdio, working directory, the caller's umask and limits, the address-space limit and
//! the cgroup namespace, default signal dispositions and a new session with its controlling
//! terminal, an empty signal mask, then `execvpe` (which, as `std`'s `execvp`, runs a script
//! without `#!` with `/bin/sh`). A failed step sends its `errno` to the parent through a
//! close-on-exec pipe, as `std` does, and the child exits.

use std::collections::BTreeMap;
use std::ffi::{CString, c_char};
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::libc;

use crate::supervisor::caller::Prepared;
use crate::supervisor::child_setup::contain_child;
use crate::supervisor::pty;

/// A program, its arguments, environment and working directory as C strings, with the
/// null-terminated pointer arrays `execvpe` takes.
#[derive(Debug)]
pub(super) struct Exec {
    program: CString,
    cwd: CString,
    _argv: Vec<CString>,
    argv: Vec<*const c_char>,
    _envp: Vec<CString>,
    envp: Vec<*const c_char>,
}

impl Exec {
    /// `program` run as `argv` (`argv[0]` its name) in `cwd`, with `env` and then `extra`
    /// over it as its whole environment (sorted by name, the last value of a name winning, as
    /// `std`'s `Command` makes it). Fails on a NUL byte, which the `Command` path then
    /// reports in its own words.
    pub(super) fn new(
        program: &Path,
        argv: &[String],
        env: &[(String, String)],
        extra: (&str, &str),
        cwd: &Path,
    ) -> io::Result<Exec> {
        let c = |bytes: &[u8]| CString::new(bytes).map_err(io::Error::from);
        let mut vars: BTreeMap<&str, &str> =
            env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        vars.insert(extra.0, extra.1);
        let args = argv
            .iter()
            .map(|a| c(a.as_bytes()))
            .collect::<io::Result<Vec<_>>>()?;
        let vars = vars
            .into_iter()
            .map(|(k, v)| c(format!("{k}={v}").as_bytes()))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Exec {
            program: c(program.as_os_str().as_bytes())?,
            cwd: c(cwd.as_os_str().as_bytes())?,
            argv: pointers(&args),
            _argv: args,
            envp: pointers(&vars),
            _envp: vars,
        })
    }

    /// The stack the child needs, with room to spare: its own frames are small, but
    /// `execvpe` copies the argument pointers onto it to run a script without `#!` by
    /// `/bin/sh`.
    pub(super) fn stack_size(&self) -> usize {
        const FRAMES: usize = 256 << 10;
        FRAMES + self.argv.len().saturating_add(2) * size_of::<*const c_char>()
    }
}

/// The strings' pointers, then a null one.
fn pointers(strings: &[CString]) -> Vec<*const c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// Everything the child does before `exec`, made ready in the parent.
#[derive(Debug)]
pub(super) struct Setup<'a> {
    pub exec: &'a Exec,
    /// Its stdin, stdout and stderr, each numbered 3 or more (so putting one in place never
    /// overwrites another).
    pub stdio: [RawFd; 3],
    pub caller: &'a Prepared,
    pub address_space: Option<u64>,
    pub namespace: bool,
    /// stdout is a terminal to make the controlling one.
    pub terminal: bool,
    /// The daemon's open-file limit for commands (`pty::commands_file_limit`), read here: the
    /// child shares the daemon's memory and may not change the setting as a forked one does.
    pub file_limit: Option<u64>,
}

/// A copy of `fd` numbered 3 or more (close-on-exec: the child's `dup2` makes the copy it
/// keeps), so that putting one of the child's stdio in place never overwrites another: a
/// daemon started with a standard descriptor closed can have a run's pipe at 0, 1 or 2.
pub(super) fn above_stdio(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let high = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(3))?;
    // SAFETY: F_DUPFD_CLOEXEC returned a new descriptor that nothing else owns.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(high) })
}

/// Runs in the child: the set-up, then `exec`; on failure, `errno` to `report` and exit 127.
///
/// # Safety
///
/// Only in a child of `clone3`/`fork` before `exec`, with `report` the write end of the
/// parent's close-on-exec pipe, and a stack of at least [`Exec::stack_size`].
pub(super) unsafe fn run(setup: &Setup<'_>, report: RawFd) -> ! {
    let error = match prepare(setup) {
        Ok(()) => {
            // SAFETY: the program, arguments and environment are valid C strings in
            // null-terminated arrays, made before the clone and alive in this copy.
            unsafe {
                libc::execvpe(
                    setup.exec.program.as_ptr(),
                    setup.exec.argv.as_ptr(),
                    setup.exec.envp.as_ptr(),
                );
            }
            io::Error::last_os_error()
        }
        Err(e) => e,
    };
    let errno = error.raw_os_error().unwrap_or(libc::EINVAL).to_ne_bytes();
    // SAFETY: write and _exit are async-signal-safe; nothing is left to clean up in a child
    // that never ran the command (its copies of the daemon's descriptors close with it).
    unsafe {
        libc::write(report, errno.as_ptr().cast(), errno.len());
        libc::_exit(127)
    }
}

/// The child's set-up, in the order the `Command` path makes it.
fn prepare(setup: &Setup<'_>) -> io::Result<()> {
    for (target, &fd) in setup.stdio.iter().enumerate() {
        // SAFETY: dup2 is async-signal-safe; the copy it makes is not close-on-exec.
        if unsafe { libc::dup2(fd, target as RawFd) } == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    // SAFETY: a valid C string; chdir is async-signal-safe.
    if unsafe { libc::chdir(setup.exec.cwd.as_ptr()) } == -1 {
        return Err(io::Error::last_os_error());
    }
    let callers_file_limit = setup.caller.apply()?;
    contain_child(&[], setup.address_space, setup.namespace)?;
    let file_limit = if callers_file_limit {
        None
    } else {
        setup.file_limit
    };
    pty::start_session(setup.terminal, file_limit)?;
    // SAFETY: an empty set, made and installed by async-signal-safe calls: the daemon's
    // threads may block signals, which a command must not inherit.
    unsafe {
        let mut none = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&raw mut none);
        if libc::sigprocmask(libc::SIG_SETMASK, &raw const none, std::ptr::null_mut()) == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;
    use std::os::fd::{AsFd, AsRawFd};

    use super::*;

    /// The strings a null-terminated pointer array holds.
    fn strings(array: &[*const c_char]) -> Vec<String> {
        let (last, items) = array.split_last().unwrap();
        assert!(last.is_null(), "the array ends with a null pointer");
        items
            .iter()
            // SAFETY: the pointers are the `Exec`'s own C strings, alive for the test.
            .map(|&p| unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn an_exec_holds_its_command_and_a_sorted_environment_with_the_marker_last() {
        let env = [
            ("PATH".to_string(), "/bin".to_string()),
            ("SPILLWAY_RUN_ID".to_string(), "forged".to_string()),
            ("A".to_string(), "1".to_string()),
        ];
        let argv = ["sh".to_string(), "-c".to_string(), "echo hi".to_string()];
        let exec = Exec::new(
            Path::new("/bin/sh"),
            &argv,
            &env,
            ("SPILLWAY_RUN_ID", "real"),
            Path::new("/tmp"),
        )
        .unwrap();
        assert_eq!(exec.program.to_str().unwrap(), "/bin/sh");
        assert_eq!(exec.cwd.to_str().unwrap(), "/tmp");
        assert_eq!(strings(&exec.argv), argv);
        assert_eq!(
            strings(&exec.envp),
            ["A=1", "PATH=/bin", "SPILLWAY_RUN_ID=real"]
        );
    }

    #[test]
    fn a_nul_byte_is_refused_before_any_child_exists() {
        let argv = ["echo".to_string(), "a\0b".to_string()];
        let made = Exec::new(
            Path::new("/bin/echo"),
            &argv,
            &[],
            ("K", "V"),
            Path::new("/"),
        );
        assert!(made.is_err());
    }

    #[test]
    fn descriptors_are_copied_above_the_standard_ones() {
        let null = nix::fcntl::open(
            "/dev/null",
            nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .unwrap();
        assert!(above_stdio(null.as_fd()).unwrap().as_raw_fd() > 2);
    }
}
