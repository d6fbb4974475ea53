//! Whether a running command waits for input, from the kernel rather than from guesswork on
//! its output: a prompt is a process of the terminal's foreground group blocked reading the
//! terminal.
//!
//! The foreground group is the `tpgid` of the command's `/proc/PID/stat` (what `tcgetpgrp`
//! gives on the terminal); each of its tasks is looked at in `/proc/PID/task/TID/syscall`: a
//! task blocked in `read`, `readv` or `pread64` on a descriptor that is the run's terminal is
//! waiting for someone to type. A quiet command (`sleep 30`, a build between two lines, a
//! server waiting for connections) is blocked elsewhere and is not flagged. Only the read
//! family is recognised: a program that waits in `poll` or `epoll_wait` (Node's readline, an
//! editor) waits on many things at once, and which of them cannot be told from outside.

use std::fs;

use super::procfs::{Stat, all_processes, command_line, stat};
use crate::protocol::InputWait;

/// x86-64 and aarch64 numbers of the system calls that read one descriptor, with the position
/// of the descriptor among the arguments (always the first).
#[cfg(target_arch = "x86_64")]
const READS: [u64; 3] = [0, 17, 19]; // read, pread64, readv
#[cfg(target_arch = "aarch64")]
const READS: [u64; 3] = [63, 67, 65]; // read, pread64, readv
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const READS: [u64; 0] = [];

/// The process of `leader`'s run that is blocked reading the run's terminal, if one is.
pub fn waiting_for_input(leader: u32) -> Option<InputWait> {
    let lead = stat(leader)?;
    if lead.tty == 0 || lead.tpgid <= 0 {
        return None; // no terminal: a `--no-tty` run reads /dev/null
    }
    let foreground = u32::try_from(lead.tpgid).ok()?;
    let terminal = fs::read_link(format!("/proc/{leader}/fd/0")).ok();
    let group: Vec<Stat> = all_processes()
        .into_iter()
        .filter(|p| p.pgrp == foreground && !p.zombie && p.tty == lead.tty)
        .collect();
    group
        .iter()
        .find(|p| reads_terminal(p.pid, terminal.as_deref()))
        .map(|p| InputWait {
            pid: p.pid,
            command: command_line(p.pid),
        })
}

/// Whether a task of `pid` is blocked in a read of a terminal descriptor (the run's, when
/// known).
fn reads_terminal(pid: u32, terminal: Option<&std::path::Path>) -> bool {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|task| {
        let Ok(text) = fs::read_to_string(task.path().join("syscall")) else {
            return false;
        };
        let Some(fd) = blocked_read_fd(&text) else {
            return false;
        };
        let Ok(target) = fs::read_link(format!("/proc/{pid}/fd/{fd}")) else {
            return false;
        };
        match terminal {
            Some(terminal) => target == terminal,
            None => target.to_str().is_some_and(|t| t.starts_with("/dev/pts/")),
        }
    })
}

/// The descriptor a task blocked in a read waits on, from `/proc/PID/task/TID/syscall`
/// (`0 0x0 0x5615... 0x1000 ...`: the call's number, then its arguments in hex; `running`
/// when the task is not in a system call).
fn blocked_read_fd(syscall: &str) -> Option<u64> {
    let mut fields = syscall.split_whitespace();
    let number: u64 = fields.next()?.parse().ok()?;
    if !READS.contains(&number) {
        return None;
    }
    u64::from_str_radix(fields.next()?.trim_start_matches("0x"), 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn reads_are_told_from_other_calls() {
        assert_eq!(
            blocked_read_fd("0 0x0 0x56151aa9af40 0x1000 0x1000 0x7f3 0x0 0x7ffc 0x7f88"),
            Some(0)
        );
        assert_eq!(
            blocked_read_fd("19 0x3 0x1 0x1 0 0 0 0x7ffc 0x7f88"),
            Some(3)
        );
        assert_eq!(
            blocked_read_fd("230 0x0 0x0 0x7ffc 0x7ffc 0x0 0x0 0x7ffc"),
            None
        );
        assert_eq!(blocked_read_fd("running"), None);
        assert_eq!(blocked_read_fd(""), None);
    }

    #[test]
    fn a_process_without_a_terminal_waits_for_nothing() {
        // The test runner's own process has no terminal under CI, and is not blocked in a
        // read of one while it runs this.
        assert_eq!(waiting_for_input(std::process::id()), None);
    }
}
