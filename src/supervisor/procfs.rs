//! Reading processes from `/proc`: their stat lines, names and command lines. Shared by the
//! reaper (which looks for zombies) and the descendants' tracking (which looks for a run's
//! processes), so neither needs the other for it.

use std::fs;

use crate::protocol::cut::cut_chars;

/// Longest command line kept for a report.
const MAX_COMMAND: usize = 200;

/// The fields of `/proc/PID/stat` used here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub pid: u32,
    pub ppid: u32,
    pub pgrp: u32,
    pub sid: u32,
    /// The controlling terminal's device number (0: none).
    pub tty: i64,
    /// The terminal's foreground process group (-1: none).
    pub tpgid: i64,
    /// Clock ticks after boot: with the pid, names one process for ever.
    pub start: u64,
    pub zombie: bool,
    /// It has begun to exit (`PF_EXITING` in its flags): its memory, and so its command
    /// line, may be gone already, and nothing sent to it matters any more.
    pub exiting: bool,
}

/// `PF_EXITING` in the flags of `/proc/PID/stat`.
const PF_EXITING: u64 = 0x4;

/// The signals whose default action ends a process, as bits of the masks in
/// `/proc/PID/status` (signal n is bit n - 1): all but those that by default are ignored
/// (SIGCHLD, SIGCONT, SIGURG, SIGWINCH) or stop (SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU).
const FATAL_BY_DEFAULT: u64 = !(bit(libc::SIGCHLD)
    | bit(libc::SIGCONT)
    | bit(libc::SIGURG)
    | bit(libc::SIGWINCH)
    | bit(libc::SIGSTOP)
    | bit(libc::SIGTSTP)
    | bit(libc::SIGTTIN)
    | bit(libc::SIGTTOU));

/// Signal `n`'s bit in a mask of `/proc/PID/status`.
const fn bit(n: i32) -> u64 {
    1 << (n - 1)
}

/// Parses `/proc/PID/stat`. The command name (in parentheses) may hold anything, so the
/// fields are read after its last `)`.
pub fn parse_stat(pid: u32, text: &str) -> Option<Stat> {
    let fields: Vec<&str> = text[text.rfind(')')? + 1..].split_whitespace().collect();
    Some(Stat {
        pid,
        zombie: *fields.first()? == "Z",
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        sid: fields.get(3)?.parse().ok()?,
        tty: fields.get(4)?.parse().ok()?,
        tpgid: fields.get(5)?.parse().ok()?,
        exiting: fields.get(6)?.parse::<u64>().ok()? & PF_EXITING != 0,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// Whether the process is already dying: a zombie, exiting, or with a signal pending that
/// will end it when it next runs (one neither blocked, ignored nor caught, whose default
/// action is to end it, SIGKILL among them).
///
/// A process killed with its group a moment ago may not have run since: it is dying by this
/// test as soon as `kill` has returned. Such a process is not one a run left running, and a
/// stop need not signal it again.
pub fn dying(s: &Stat) -> bool {
    s.zombie
        || s.exiting
        || fs::read_to_string(format!("/proc/{}/status", s.pid))
            .map_or(true, |status| fatal_signal_pending(&status))
}

/// Whether a `/proc/PID/status` text shows a pending signal that will end the process.
fn fatal_signal_pending(status: &str) -> bool {
    let mask = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .unwrap_or(0)
    };
    let pending = mask("SigPnd") | mask("ShdPnd");
    let handled = mask("SigBlk") | mask("SigIgn") | mask("SigCgt");
    pending & bit(libc::SIGKILL) != 0 || pending & !handled & FATAL_BY_DEFAULT != 0
}

/// The stat of `pid`, while it exists.
pub fn stat(pid: u32) -> Option<Stat> {
    parse_stat(pid, &fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The name (`comm`) in a stat line.
pub fn comm_of(text: &str) -> Option<&str> {
    Some(&text[text.find('(')? + 1..text.rfind(')')?])
}

/// The children of this process's main thread: every orphan this process has adopted as a
/// child subreaper, and whatever that thread started itself. The kernel hands an orphan to
/// the first live thread of its reaper's thread group, which is the main thread while that
/// lives (`find_alive_thread` in the kernel's `exit.c`), and a thread that ends hands its
/// children on the same way, so this one read finds what [`own_children`] would among the
/// adopted, where that one reads every thread's list. `None` when the kernel does not list
/// children (`CONFIG_PROC_CHILDREN`).
pub fn adopted_children() -> Option<Vec<u32>> {
    let me = std::process::id();
    let text = fs::read_to_string(format!("/proc/{me}/task/{me}/children")).ok()?;
    Some(pids_in(&text).collect())
}

/// The pids a `/proc/PID/task/TID/children` file lists.
fn pids_in(text: &str) -> impl Iterator<Item = u32> + '_ {
    text.split_whitespace()
        .filter_map(|p| p.parse::<u32>().ok())
}

/// This process's children now, from each thread's `/proc/PID/task/TID/children` (an orphan
/// the daemon adopts becomes the child of one of its threads): a few small reads where
/// [`all_processes`] reads every process's stat. `None` when the kernel does not list
/// children (`CONFIG_PROC_CHILDREN`), so the caller looks at every process instead. A thread
/// that ends while it is read hands its children to another, maybe one already read: the
/// next look finds them.
pub fn own_children() -> Option<Vec<u32>> {
    let tasks = fs::read_dir(format!("/proc/{}/task", std::process::id())).ok()?;
    let mut children = Vec::new();
    let mut listed = false;
    for task in tasks.flatten() {
        match fs::read_to_string(task.path().join("children")) {
            Ok(text) => {
                listed = true;
                children.extend(pids_in(&text));
            }
            // The thread has ended since the directory was read.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && task.path().exists() => {
                return None;
            }
            Err(_) => {}
        }
    }
    listed.then_some(children)
}

/// Every process now.
pub fn all_processes() -> Vec<Stat> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(stat)
        .collect()
}

/// A process's command line as `ps` shows it (arguments joined by spaces, cut), or its name
/// in brackets when it has none (a zombie, a process that cleared it).
pub fn command_line(pid: u32) -> String {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    if args.is_empty() {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        return format!("[{}]", comm_of(&stat).unwrap_or("?"));
    }
    cut(&args.join(" "))
}

/// `text` cut at [`MAX_COMMAND`] characters, never inside a piece that could be a secret
/// (`crate::protocol::cut`): what is shown is then redacted whole.
pub fn cut(text: &str) -> String {
    match cut_chars(text, MAX_COMMAND) {
        Some(kept) => format!("{kept}..."),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child started from another thread is listed too (it is that thread's child), and one
    /// reaped is not; where the kernel lists no children the answer is `None`, never a list
    /// that misses them.
    #[test]
    fn own_children_are_every_threads_children() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let mut other = std::thread::spawn(|| {
            std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .unwrap()
        })
        .join()
        .unwrap();
        let (a, b) = (child.id(), other.id());
        if let Some(children) = own_children() {
            assert!(
                children.contains(&a) && children.contains(&b),
                "{children:?}"
            );
        } else {
            eprintln!("SKIPPED: this kernel does not list children in /proc");
        }
        child.kill().unwrap();
        child.wait().unwrap();
        other.kill().unwrap();
        other.wait().unwrap();
        if let Some(children) = own_children() {
            assert!(
                !children.contains(&a) && !children.contains(&b),
                "{children:?}"
            );
        }
    }

    #[test]
    fn stat_lines_are_read_after_the_last_parenthesis() {
        let line = "42 (a) b) S 7 42 40 34816 42 4194304 0 0 0 0 1 2 0 0 20 0 1 0 12345 0 0";
        let s = parse_stat(42, line).unwrap();
        assert_eq!(
            (s.ppid, s.pgrp, s.sid, s.tty, s.tpgid),
            (7, 42, 40, 34816, 42)
        );
        assert_eq!((s.start, s.zombie, s.exiting), (12345, false, false));
        let exiting = line.replace(" 4194304 ", " 4194308 ");
        assert!(parse_stat(42, &exiting).unwrap().exiting);
        let zombie = parse_stat(42, &line.replace(" S 7 ", " Z 7 ")).unwrap();
        assert!(zombie.zombie && zombie.ppid == 7);
        assert_eq!(comm_of(line), Some("a) b"));
        assert!(parse_stat(1, "garbage").is_none());
    }

    #[test]
    fn a_pending_signal_is_fatal_unless_blocked_ignored_caught_or_harmless() {
        let status = |pnd: &str, shd: &str, blk: &str, ign: &str, cgt: &str| {
            format!(
                "Name:\tx\nSigPnd:\t{pnd}\nShdPnd:\t{shd}\nSigBlk:\t{blk}\n\
                 SigIgn:\t{ign}\nSigCgt:\t{cgt}\n"
            )
        };
        let none = "0000000000000000";
        let term = "0000000000004000";
        let kill = "0000000000000100";
        let chld = "0000000000010000";
        assert!(!fatal_signal_pending(&status(none, none, none, none, none)));
        assert!(fatal_signal_pending(&status(none, term, none, none, none)));
        assert!(fatal_signal_pending(&status(kill, none, none, none, none)));
        assert!(fatal_signal_pending(&status(none, kill, none, none, none)));
        assert!(!fatal_signal_pending(&status(none, term, term, none, none)));
        assert!(!fatal_signal_pending(&status(none, term, none, term, none)));
        assert!(!fatal_signal_pending(&status(term, none, none, none, term)));
        assert!(!fatal_signal_pending(&status(none, chld, none, none, none)));
        assert!(!fatal_signal_pending("Name:\tx\nSigPnd:\tjunk\n"));
    }

    /// A process sent a fatal signal is dying from the moment `kill` returns, whether or not
    /// it has run since: the test the end of a run relies on not to name what its own stop
    /// killed. Without the pending signal's check this fails often, as the child is
    /// neither a zombie nor exiting until it runs.
    #[test]
    fn a_process_killed_a_moment_ago_is_dying_at_once() {
        for _ in 0..50 {
            let mut child = std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .unwrap();
            let pid = child.id();
            let before = stat(pid).unwrap();
            assert!(!dying(&before), "{before:?}");
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            )
            .unwrap();
            if let Some(after) = stat(pid) {
                assert!(dying(&after), "{after:?}");
            }
            child.wait().unwrap();
        }
    }

    #[test]
    fn long_command_lines_are_cut() {
        let long = "x ".repeat(150);
        assert_eq!(cut(&long).len(), MAX_COMMAND + 3);
        // Never inside a piece: a token cut at the limit is left out whole.
        let token = format!("{} --token ghp_{}", "y ".repeat(90), "aB3".repeat(12));
        assert_eq!(cut(&token), format!("{} --token ...", "y ".repeat(90)));
        assert_eq!(cut("short"), "short");
    }
}
