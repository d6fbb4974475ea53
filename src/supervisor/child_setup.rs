//! The containment a command's child gives itself before `exec`, shared by both ways a run is
//! started: the `Command` path's `pre_exec` hook (`super::contain`) and the child `clone3`
//! makes (`super::inside`). Kept apart from both so each imports it and neither imports the
//! other: `contain` only chooses the path, `inside` only starts the command in its cgroup.
//!
//! It runs between fork and exec, so it makes system calls only: no allocation, no lock.

use std::ffi::CString;
use std::io;

use super::limits;

/// The child's containment before `exec`: into its cgroups (and a cgroup namespace), and its
/// address-space limit.
pub(super) fn contain_child(
    joins: &[CString],
    address_space: Option<u64>,
    namespace: bool,
) -> io::Result<()> {
    for path in joins {
        // SAFETY: `path` is a valid C string; open, write and close are async-signal-safe.
        unsafe {
            let fd = nix::libc::open(path.as_ptr(), nix::libc::O_WRONLY | nix::libc::O_CLOEXEC);
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            let written = nix::libc::write(fd, b"0".as_ptr().cast(), 1);
            let error = io::Error::last_os_error();
            nix::libc::close(fd);
            if written != 1 {
                return Err(error);
            }
        }
    }
    if namespace {
        // A cgroup namespace of its own, rooted at its cgroup, where the kernel offers one
        // (CAP_SYS_ADMIN, and a hierarchy mounted with `nsdelegate`): the command can then
        // move no process, itself included, out of its run's cgroup. Elsewhere it is refused
        // and the sweep of strays at the run's end is what holds (`super::strays`).
        // SAFETY: unshare takes flags only and is async-signal-safe; its failure is ignored.
        unsafe {
            nix::libc::unshare(nix::libc::CLONE_NEWCGROUP);
        }
    }
    if let Some(bytes) = address_space {
        limits::set_address_space(bytes)?;
    }
    Ok(())
}
