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
        start: fields.get(19)?.parse().ok()?,
    })
}

/// The stat of `pid`, while it exists.
pub fn stat(pid: u32) -> Option<Stat> {
    parse_stat(pid, &fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The name (`comm`) in a stat line.
pub fn comm_of(text: &str) -> Option<&str> {
    Some(&text[text.find('(')? + 1..text.rfind(')')?])
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
                children.extend(
                    text.split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                );
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
        assert_eq!((s.start, s.zombie), (12345, false));
        assert_eq!(comm_of(line), Some("a) b"));
        assert!(parse_stat(1, "garbage").is_none());
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
