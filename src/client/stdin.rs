//! Which standard input `spillway run` passes to its command: its own, as a shell would give
//! it, when that is a pipe, a file or a socket. The descriptor itself goes to the daemon
//! (`stdin_fd`), so the command reads exactly what it would have read run directly: the same
//! bytes, its end of file, nothing read ahead by spillway (a `while read` loop around
//! `spillway run` keeps its lines), and nothing waited for that the command does not read.
//!
//! A terminal is not passed (the command has its own, the run's PTY, or `/dev/null` with
//! `--no-tty`, as before), nor is `/dev/null`, nor a closed stdin: those runs are as they
//! always were. A host that gives its commands a pipe it never closes gives it to them the
//! same way through spillway: a command that reads it waits as it would have without spillway
//! (`</dev/null` on the `spillway run` line gives it an empty input).

use std::io::IsTerminal;
use std::os::fd::{AsFd, BorrowedFd};

use nix::sys::stat::{SFlag, fstat, stat};

/// This process's standard input, if it is to be passed to the command.
pub(crate) fn to_pass() -> Option<BorrowedFd<'static>> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return None;
    }
    // A closed fd 0 fails here: the command gets what it gets without one.
    let meta = fstat(stdin.as_fd()).ok()?;
    let kind = SFlag::from_bits_truncate(meta.st_mode) & SFlag::S_IFMT;
    if kind == SFlag::S_IFCHR && is_dev_null(meta.st_rdev) {
        return None;
    }
    // SAFETY: fd 0 stays open for the life of the process (nothing here closes it), which
    // outlives every use of the borrow.
    Some(unsafe { BorrowedFd::borrow_raw(0) })
}

fn is_dev_null(rdev: nix::libc::dev_t) -> bool {
    stat("/dev/null").is_ok_and(|null| null.st_rdev == rdev)
}
