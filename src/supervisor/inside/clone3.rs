//! The raw `clone3` system call, with the one use spillway has for it: a child that starts in
//! a given cgroup v2 directory (`CLONE_INTO_CGROUP`, Linux 5.7) with every signal handler
//! reset (`CLONE_CLEAR_SIGHAND`, Linux 5.5), so no handler of the daemon's can run in it.
//! Neither glibc nor the `libc` crate wraps `clone3`, and the `libc` crate has no
//! `struct clone_args` for glibc targets: the kernel's layout is spelled out here.
//!
//! On x86-64 the child shares the daemon's memory until its `exec` (`CLONE_VM | CLONE_VFORK`,
//! as `posix_spawn` starts one) and runs on a stack of its own ([`Stack`]): no copy of the
//! daemon's page tables to make, no copy-on-write faults in the daemon after it, and nothing
//! to unmap at the `exec`. That fork was about a sixth of the daemon's time per short run.
//! The child starts on the new stack with no frame to return to, so the call is made by a few
//! instructions of assembly that call the child's function there ([`spawn_sharing`]); other
//! architectures fork as before ([`fork_into`]).

#[cfg(target_arch = "x86_64")]
use std::ffi::c_void;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `CLONE_CLEAR_SIGHAND` of `<linux/sched.h>`.
const CLONE_CLEAR_SIGHAND: u64 = 0x1_0000_0000;
/// `CLONE_INTO_CGROUP` of `<linux/sched.h>`.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
/// The flags every child of this module is made with.
const FLAGS: u64 = CLONE_INTO_CGROUP | CLONE_CLEAR_SIGHAND;

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
#[cfg(not(target_arch = "x86_64"))]
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
#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn fork_into(cgroup: BorrowedFd<'_>) -> io::Result<Forked> {
    let mut args = CloneArgs {
        flags: FLAGS,
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

/// A child's stack: private anonymous memory, reserved but not committed until touched, with
/// an inaccessible page below it so an overflow faults instead of writing the daemon's memory.
#[cfg(target_arch = "x86_64")]
#[derive(Debug)]
pub(super) struct Stack {
    base: *mut c_void,
    len: usize,
}

#[cfg(target_arch = "x86_64")]
impl Stack {
    /// A stack of at least `size` bytes (whole pages) above its guard page.
    pub(super) fn new(size: usize) -> io::Result<Stack> {
        let page = page_size();
        let len = size.div_ceil(page).saturating_add(1).saturating_mul(page);
        // SAFETY: a fresh private anonymous mapping, placed by the kernel: nothing else of
        // ours is there.
        let base = unsafe {
            nix::libc::mmap(
                std::ptr::null_mut(),
                len,
                nix::libc::PROT_READ | nix::libc::PROT_WRITE,
                nix::libc::MAP_PRIVATE
                    | nix::libc::MAP_ANONYMOUS
                    | nix::libc::MAP_STACK
                    | nix::libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == nix::libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Stack { base, len };
        // SAFETY: the mapping's first page, ours alone.
        if unsafe { nix::libc::mprotect(base, page, nix::libc::PROT_NONE) } == -1 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The usable part: its lowest address and its size (16-byte aligned, as whole pages).
    fn usable(&self) -> (u64, u64) {
        let page = page_size();
        (self.base as u64 + page as u64, (self.len - page) as u64)
    }
}

#[cfg(target_arch = "x86_64")]
impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping made by `new`, no longer used: the child that ran on it has
        // exec'd or exited before `spawn_sharing` returned.
        unsafe {
            nix::libc::munmap(self.base, self.len);
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system.
    let size = unsafe { nix::libc::sysconf(nix::libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096).max(4096)
}

/// Starts a child inside the cgroup whose directory `cgroup` is open on, sharing this
/// process's memory, on `stack`, where it runs `child(arg)`; the calling thread waits until
/// the child has exec'd or exited (`CLONE_VFORK`). The child reports its exit with SIGCHLD.
/// Returns its pid.
///
/// # Safety
///
/// `child` runs in the new process, whose memory is the daemon's: until `exec` or `_exit` it
/// may only make async-signal-safe calls, and may write no memory but `stack` (no allocation,
/// no lock, no global; of the thread-locals, which are the calling thread's, only `errno`,
/// which that thread, waiting meanwhile, reads only after a failed call of its own); it must
/// never return. `arg` must stay valid until this returns.
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn spawn_sharing(
    cgroup: BorrowedFd<'_>,
    stack: &mut Stack,
    child: extern "C" fn(*mut c_void) -> !,
    arg: *mut c_void,
) -> io::Result<u32> {
    let (low, size) = stack.usable();
    let mut args = CloneArgs {
        flags: FLAGS | nix::libc::CLONE_VM as u64 | nix::libc::CLONE_VFORK as u64,
        exit_signal: nix::libc::SIGCHLD as u64,
        stack: low,
        stack_size: size,
        cgroup: cgroup.as_raw_fd() as u64,
        ..CloneArgs::default()
    };
    let ret: i64;
    // SAFETY: `args` is a valid `clone_args` of the size passed, alive for the call. The
    // system call keeps every register but rax, rcx and r11 in both processes. In the parent
    // it returns the pid or -errno and the jump skips the child's part. In the child (0) the
    // kernel has set rsp to the top of `stack` (16-byte aligned, so the call leaves it as
    // the ABI wants at a function's entry) and r12, r13 still hold `child` and `arg`; the
    // child never returns (the caller's contract), and `ud2` stops it if it did.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "mov rdi, r13",
            "call r12",
            "ud2",
            "2:",
            inlateout("rax") nix::libc::SYS_clone3 => ret,
            in("rdi") &raw mut args,
            in("rsi") size_of::<CloneArgs>(),
            in("r12") child,
            in("r13") arg,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    if ret < 0 {
        let errno = i32::try_from(-ret).unwrap_or(nix::libc::EINVAL);
        return Err(io::Error::from_raw_os_error(errno));
    }
    u32::try_from(ret).map_err(|_| io::Error::other(format!("clone3 returned {ret}")))
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
