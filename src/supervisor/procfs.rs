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
