//! A run's processes as spillway reports and signals them: who each one is (its command
//! line, the ports it listens on), the marker that ties it to its run, and a signal that
//! reaches that very process and no other. Shared by the tracking of runs
//! ([`super::descendants`]) and the sweep of strays ([`super::strays`]).

use std::collections::HashMap;
use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use nix::sys::signal::Signal;

use super::procfs::{command_line, stat};

/// The marker every command inherits: the id of its run.
pub const RUN_ID_ENV: &str = "SPILLWAY_RUN_ID";

/// The run id in a process's environment, if it has the marker (and we may read it).
pub fn marker(pid: u32) -> Option<String> {
    let environ = fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{RUN_ID_ENV}=");
    environ
        .split(|&b| b == 0)
        .rev()
        .find_map(|var| var.strip_prefix(prefix.as_bytes()))
        .map(|id| String::from_utf8_lossy(id).into_owned())
}

/// Sends `signal` to the process `pid` that started at `start`, and to no other: a pidfd pins
/// the process before its start time is checked. Returns whether it was sent.
pub fn signal_exact(pid: u32, start: u64, signal: Signal) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor, or -1.
    let fd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, raw, 0) };
    let Ok(fd) = i32::try_from(fd) else {
        return false;
    };
    if fd < 0 {
        // No pidfds (Linux before 5.3): check, then send; a pid reused in between is the
        // small risk left.
        return stat(pid).is_some_and(|s| s.start == start)
            && nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), signal).is_ok();
    }
    // SAFETY: the kernel just gave us this descriptor; nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    if stat(pid).map(|s| s.start) != Some(start) {
        return false;
    }
    // SAFETY: pidfd_send_signal takes the descriptor, a signal number, a null siginfo and
    // flags 0; it writes nothing of ours.
    let sent = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            signal as i32,
            std::ptr::null::<nix::libc::siginfo_t>(),
            0,
        )
    };
    sent == 0
}

/// A process of a run, other than its command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub pid: u32,
    pub start: u64,
    pub command: String,
    /// TCP ports it listened on, when last looked at.
    pub ports: Vec<u16>,
}

impl Member {
    pub(super) fn key(&self) -> (u32, u64) {
        (self.pid, self.start)
    }
}

/// Listening TCP sockets (IPv4 and IPv6) by inode, with their ports.
fn listening_sockets() -> HashMap<u64, u16> {
    let mut sockets = HashMap::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st ... inode (the 10th field); 0A is LISTEN.
            let (Some(local), Some(&"0A"), Some(inode)) =
                (fields.get(1), fields.get(3), fields.get(9))
            else {
                continue;
            };
            let port = local
                .rsplit_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            if let (Some(port), Ok(inode)) = (port, inode.parse()) {
                sockets.insert(inode, port);
            }
        }
    }
    sockets
}

/// Whether one of `pids` holds a socket listening on TCP `port` (IPv4 or IPv6).
pub fn listening_on(pids: &[u32], port: u16) -> bool {
    let listening = listening_sockets();
    pids.iter()
        .flat_map(|&pid| socket_inodes(pid))
        .any(|inode| listening.get(&inode) == Some(&port))
}

/// The socket inodes among a process's open descriptors.
fn socket_inodes(pid: u32) -> Vec<u64> {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.flatten()
        .filter_map(|fd| {
            let target = fs::read_link(fd.path()).ok()?;
            let text = target.to_str()?;
            text.strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

/// Reads each member's command line again (a process may have exec'd since it was first
/// seen: a shim that runs the real program) and fills in its listening ports (the socket
/// table is read only if one of them has a socket at all).
pub fn describe(members: &mut [Member]) {
    for member in members.iter_mut() {
        if stat(member.pid).is_some_and(|s| s.start == member.start && !s.zombie) {
            member.command = command_line(member.pid);
        }
    }
    find_ports(members);
}

/// Fills in each member's listening ports.
pub(super) fn find_ports(members: &mut [Member]) {
    let inodes: Vec<Vec<u64>> = members.iter().map(|m| socket_inodes(m.pid)).collect();
    if inodes.iter().all(Vec::is_empty) {
        return;
    }
    let listening = listening_sockets();
    for (member, inodes) in members.iter_mut().zip(inodes) {
        let mut ports: Vec<u16> = inodes
            .iter()
            .filter_map(|i| listening.get(i).copied())
            .collect();
        ports.sort_unstable();
        ports.dedup();
        if !ports.is_empty() {
            member.ports = ports;
        }
    }
}
