//! The raw `clone3` system call, with the one use spillway has for it: a child that starts in
//! a given cgroup v2 directory (`CLONE_INTO_CGROUP`, Linux 5.7) with every signal handler
//! reset (`CLONE_CLEAR_SIGHAND`, Linux 5.5), so no handler of the daemon's can run in it.
//! Neither glibc nor the `libc` crate wraps `clone3`, and the `libc` crate has no
//! `struct clone_args` for glibc targets: the kernel's layout is spelled out here.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `CLONE_CLEAR_SIGHAND` of `<linux/sched.h>`.
const CLONE_CLEAR_SIGHAND: u64 = 0x1_0000_0000;
/// `CLONE_INTO_CGROUP` of `<linux/sched.h>`.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` of `<linux/sched.h>` up to `cgroup` (`CLONE_ARGS_SIZE_VER2`, 88 bytes):
/// a kernel that knows a shorter form refuses this size only if a field it lacks is set
/// (`E2BIG`), which is how an old kernel says it has no `CLONE_INTO_CGROUP`.
#[repr(C)]
#[derive(Debug, Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// Who returned from [`fork_into`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Forked {
    /// The caller, with the child's pid.
    Parent(u32),
    /// The child, born in the cgroup: a copy of the calling thread alone, on a copy of its
    /// stack, as after `fork`.
    Child,
}

/// Forks like `fork`, but the child is born inside the cgroup whose directory `cgroup` is
/// open on, and it reports its exit with SIGCHLD.
///
/// # Safety
///
/// As `fork` in a multi-threaded process: in [`Forked::Child`], only async-signal-safe calls
/// may be made until `exec` or `_exit` (no allocation, no lock another thread may have held).
pub(super) unsafe fn fork_into(cgroup: BorrowedFd<'_>) -> io::Result<Forked> {
    let mut args = CloneArgs {
        flags: CLONE_INTO_CGROUP | CLONE_CLEAR_SIGHAND,
        exit_signal: nix::libc::SIGCHLD as u64,
        cgroup: cgroup.as_raw_fd() as u64,
        ..CloneArgs::default()
    };
    // SAFETY: `args` is a valid `clone_args` of the size passed, alive for the call; without
    // CLONE_VM or a stack the child runs on a copy of this one, as after fork (the caller's
    // contract covers what it may do there).
    let ret =
        unsafe { nix::libc::syscall(nix::libc::SYS_clone3, &raw mut args, size_of::<CloneArgs>()) };
    match ret {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Forked::Child),
        pid => u32::try_from(pid)
            .map(Forked::Parent)
            .map_err(|_| io::Error::other(format!("clone3 returned {pid}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_arguments_have_the_kernels_second_layout() {
        // CLONE_ARGS_SIZE_VER2: the first size with `cgroup`.
        assert_eq!(size_of::<CloneArgs>(), 88);
        assert_eq!(std::mem::offset_of!(CloneArgs, cgroup), 80);
    }
}
