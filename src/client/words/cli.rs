//! The command line's words for a run: how it ended (on stderr after its output, or as the
//! last word of `run --follow`), and what to do with one that goes on. Each is worded from
//! the facts [`super`] takes from the daemon's events, never from the daemon's own text; and
//! what the operator's commands (`show`, `grep`, `stats`, `purge`, `daemon`) print for a
//! person, with the times, durations and statuses they print about a run.

use bytesize::ByteSize;
use chrono::{DateTime, Local, Utc};

use super::{Ended, ending, ready_reason};
use std::path::Path;

use crate::protocol::{
    DaemonStatus, ExitEvent, PurgeReport, RunId, RunRecord, RunStatus, RunningEvent, ShowEvent,
    StatsEvent,
};
use crate::storage::grep::MAX_LINE_CHARS;

fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal).map_or_else(
        |_| format!("signal {signal}"),
        |s| format!("signal {signal} ({})", s.as_str()),
    )
}

/// How the run ended, as a clause: `run ID exited with code 3`.
fn how_it_ended(exit: &ExitEvent) -> String {
    let end = ending(exit);
    if end.succeeded {
        return format!("run {} exited with code 0", exit.id);
    }
    let how = match end.ended {
        Ended::TimedOut => format!(
            "timed out after {:.1}s; its process group was killed",
            exit.duration_ms as f64 / 1000.0
        ),
        Ended::Stopped(signal) => format!("was stopped by {}", signal_name(signal)),
        Ended::Killed(signal) => format!("was killed by {}", signal_name(signal)),
        Ended::Exited(code) => format!("exited with code {code}"),
        Ended::Other(status) => format!("ended: {}", status.as_str()),
    };
    let how = match end.out_of_memory {
        Some(hit) => format!(
            "{how}: it reached its memory limit of {} and the kernel's OOM killer ended {}",
            crate::words::human_bytes(hit.limit),
            if hit.events == 1 {
                "a process".to_string()
            } else {
                format!("{} processes", hit.events)
            }
        ),
        None => how,
    };
    format!("run {} {how}", exit.id)
}

/// A one-line account of how the command ended, when it did not simply succeed.
pub fn status_line(exit: &ExitEvent) -> Option<String> {
    (!ending(exit).succeeded).then(|| format!("[spillway: {}]", how_it_ended(exit)))
}

/// How a run ended, always (`status_line` says nothing of a success).
pub fn end_line(exit: &ExitEvent) -> String {
    format!("[spillway: {}]", how_it_ended(exit))
}

/// The last word of `run --follow`: how the run ended, its size and where it all is.
pub fn summary(exit: &ExitEvent) -> String {
    let whole = exit
        .preview
        .spill_path
        .as_deref()
        .map_or_else(String::new, |p| format!("; full output: {p}"));
    format!(
        "[spillway: {} after {:.1}s: {} lines, {}{whole}]",
        how_it_ended(exit),
        exit.duration_ms as f64 / 1000.0,
        exit.preview.total_lines,
        ByteSize::b(exit.preview.total_bytes).display().si()
    )
}

/// What a raw stream's client is told when it fell behind and gets the spill's text from
/// `line` on.
pub fn fell_behind(line: u64) -> String {
    format!(
        "[spillway: the terminal fell behind the command; from here on its normalised text, \
         from line {line}]"
    )
}

/// `[spillway: run ID is still running after 12.3s (no output for 4.0s; 5000 lines so
/// far); ...]`: the state, and the commands to go on with. A run that is ready (`--until`)
/// or waits for input says so first.
pub fn running_line(r: &RunningEvent) -> String {
    let id = &r.id;
    let sw = crate::program::program();
    let elapsed = format!("{:.1}s", r.elapsed_ms as f64 / 1000.0);
    if let Some(ready) = &r.ready {
        return format!(
            "[spillway: run {id} is ready after {elapsed} ({}) and goes on: it is listed by \
             {sw} ps and runs until stopped. Its output: {sw} wait {id} --yield 10s \
             --new; stop it: {sw} kill {id}]",
            ready_reason(ready)
        );
    }
    if let Some(waiting) = &r.waiting_for_input {
        return format!(
            "[spillway: run {id} is waiting for input on its terminal after {elapsed} ({} is \
             blocked reading it; {} lines so far). Answer it: {sw} send {id} TEXT (Enter \
             is pressed after TEXT; --eof ends the input), then {sw} wait {id} --yield 10s \
             --new; stop it: {sw} kill {id}]",
            waiting.command, r.preview.total_lines
        );
    }
    still_running_line(r)
}

fn still_running_line(r: &RunningEvent) -> String {
    let sw = crate::program::program();
    let secs = |ms: u64| format!("{:.1}s", ms as f64 / 1000.0);
    let (first, last) = (r.first_line, r.preview.total_lines);
    let news = match (first > 1, last) {
        (true, last) if last < first => "nothing new".to_string(),
        (true, last) if last == first => format!("line {last} is new"),
        (true, last) => format!("lines {first}-{last} are new"),
        (false, 1) => "1 line so far".to_string(),
        (false, n) => format!("{n} lines so far"),
    };
    let idle = if r.idle_ms >= 1000 {
        format!("no output for {}; ", secs(r.idle_ms))
    } else {
        String::new()
    };
    format!(
        "[spillway: run {id} is still running after {} ({idle}{news}). More: {sw} wait {id} \
         --yield 10s --new; type into it: {sw} send {id} TEXT; stop it: {sw} kill {id}]",
        secs(r.elapsed_ms),
        id = r.id
    )
}

/// A moment in local time, its zone's offset after it.
pub(crate) fn local_time(t: DateTime<Utc>) -> String {
    t.with_timezone(&Local)
        .format("%Y-%m-%d %H:%M:%S %:z")
        .to_string()
}

/// A setting's period in words: `7 days`, `1 day 12 hours`, `90 seconds` is `1 minute 30
/// seconds`.
pub(crate) fn period(d: std::time::Duration) -> String {
    let s = d.as_secs();
    let parts: Vec<String> = [
        (s / 86_400, "day"),
        (s / 3600 % 24, "hour"),
        (s / 60 % 60, "minute"),
        (s % 60, "second"),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, unit)| format!("{n} {unit}{}", if n == 1 { "" } else { "s" }))
    .collect();
    if parts.is_empty() {
        "0 seconds".into()
    } else {
        parts.join(" ")
    }
}

/// `0.4s`, `8.4s`, `2m03s`, `1h02m`.
pub(crate) fn duration(d: chrono::Duration) -> String {
    let ms = d.num_milliseconds().max(0);
    if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, ms / 1000 % 60)
    } else {
        format!("{}h{:02}m", ms / 3_600_000, ms / 60_000 % 60)
    }
}

pub(crate) fn status_text(r: &RunRecord) -> String {
    match (r.status, r.exit_code, r.signal) {
        (RunStatus::Exited, Some(code), _) => format!("exit {code}"),
        (RunStatus::Signaled, _, Some(signal)) => format!("signal {signal}"),
        (status, _, _) => status.as_str().replace('_', " "),
    }
}

/// `show`'s header: the run's record, then `---` before its lines.
pub(crate) fn show_header(run: &RunRecord) -> String {
    let mut text = format!(
        "run {}  {}  started {}{}\n",
        run.id,
        status_text(run),
        local_time(run.started_at),
        run.ended_at.map_or_else(String::new, |end| format!(
            "  took {}",
            duration(end - run.started_at)
        ))
    );
    text.push_str(&format!("command: {}\ncwd: {}\n", run.command, run.cwd));
    if let Some(spill) = &run.spill_path {
        let state = match (run.spill_complete, run.spill_capped_at_line) {
            (true, _) => String::new(),
            (false, Some(line)) => format!(" (capped: stops in line {line})"),
            (false, None) => " (incomplete)".into(),
        };
        text.push_str(&format!("spill: {spill}{state}\n"));
    }
    text.push_str("---\n");
    text
}

/// `show`'s last line when more lines follow the page: where they are and how to go on.
pub(crate) fn show_continuation(page: &ShowEvent) -> Option<String> {
    let next = page.next_offset?;
    let by_bytes = if page.stopped_by_bytes {
        " (byte limit)"
    } else {
        ""
    };
    Some(format!(
        "[lines {}-{} of {}{by_bytes}; continue with --offset {next}]",
        page.first, page.last, page.total_lines
    ))
}

/// `grep`'s line when it stopped at `--max-count`.
pub(crate) fn grep_limit_line(max_count: usize) -> String {
    format!(
        "[match limit of {max_count} reached; more lines match: refine the pattern or raise \
         --max-count]"
    )
}

/// `grep`'s line when some lines were cut, with how to see one whole.
pub(crate) fn grep_cut_line(id: &RunId) -> String {
    format!(
        "[lines longer than {MAX_LINE_CHARS} characters were cut; see one whole with: {} show \
         {id} --offset N --limit 1]",
        crate::program::program()
    )
}

/// `stats`' figures of the index and the spills, a line each, before the token accounting.
pub(crate) fn stats_summary(stats: &StatsEvent) -> String {
    let index = &stats.index;
    let total: u64 = index.runs_by_status.values().sum();
    let by_status: Vec<String> = index
        .runs_by_status
        .iter()
        .map(|(status, n)| format!("{status} {n}"))
        .collect();
    let share = if stats.max_disk == 0 {
        0.0
    } else {
        index.spill_bytes as f64 * 100.0 / stats.max_disk as f64
    };
    let when = |t: Option<DateTime<Utc>>| t.map_or_else(|| "-".into(), local_time);
    format!(
        "runs: {total} ({})\nspills: {} of a {} quota ({share:.1}%)\noldest run: {}\n\
         newest run: {}\ndatabase: {}\nretention: {}\ndata directory: {}\n",
        by_status.join(", "),
        ByteSize::b(index.spill_bytes),
        ByteSize::b(stats.max_disk),
        when(index.oldest),
        when(index.newest),
        ByteSize::b(index.database_bytes),
        period(std::time::Duration::from_millis(stats.retention_ms)),
        stats.data_dir
    )
}

/// `stats`' token line from a daemon that does not count tokens.
pub(crate) const NO_TOKENS: &str = "tokens: not counted by this daemon (an older spillway)";

/// What `purge` deleted (or, dry, would delete), a line each, then the totals.
pub(crate) fn purge_text(report: &PurgeReport) -> String {
    let verb = if report.dry_run {
        "would delete"
    } else {
        "deleted"
    };
    let mut text = String::new();
    for (why, runs) in [
        ("expired", &report.expired),
        ("over quota", &report.evicted),
        ("asked for", &report.deleted),
    ] {
        for run in runs {
            text.push_str(&format!(
                "{verb} run {} ({why}, started {}, {})\n",
                run.id,
                local_time(run.started_at),
                ByteSize::b(run.bytes)
            ));
        }
    }
    for orphan in &report.orphans {
        text.push_str(&format!(
            "{verb} orphan file {} ({})\n",
            orphan.path,
            ByteSize::b(orphan.bytes)
        ));
    }
    for id in &report.marked_missing {
        text.push_str(&format!(
            "run {id}: its spill file is gone (record kept, marked missing)\n"
        ));
    }
    text.push_str(&format!(
        "{}: {} runs, {} orphan files, {} freed; spills now {} of {}\n",
        if report.dry_run { "dry run" } else { "purged" },
        report.expired.len() + report.evicted.len() + report.deleted.len(),
        report.orphans.len(),
        ByteSize::b(report.freed_bytes),
        ByteSize::b(report.spill_bytes_after),
        ByteSize::b(report.max_disk)
    ));
    text
}

/// `daemon status` when a daemon answers: what it is, a fact a line.
pub(crate) fn daemon_status(status: &DaemonStatus) -> String {
    let mine = env!("CARGO_PKG_VERSION");
    let version = if status.version == mine {
        status.version.clone()
    } else {
        format!(
            "{} (this client is {mine}: `{} daemon restart`)",
            status.version,
            crate::program::program()
        )
    };
    format!(
        "spillway daemon: running\n  pid:            {}\n  version:        {version}\n  \
         socket:         {}\n  data directory: {}\n  uptime:         {} (since {})\n  \
         runs in flight: {}\n",
        status.pid,
        status.socket,
        status.data_dir,
        duration(chrono::Duration::milliseconds(
            i64::try_from(status.uptime_ms).unwrap_or(i64::MAX)
        )),
        crate::protocol::time::wire_text(&status.started_at),
        status.runs
    )
}

/// `daemon status` when none answers.
pub(crate) fn no_daemon(socket: &Path, data_dir: &Path) -> String {
    format!(
        "no daemon is running on {} (data directory {}); any command starts one",
        socket.display(),
        data_dir.display()
    )
}

/// `daemon stop` when none answers.
pub(crate) fn no_daemon_to_stop(socket: &Path) -> String {
    format!("[spillway: no daemon is running on {}]", socket.display())
}

/// `daemon stop` once the daemon's process is gone, with how many runs it stopped.
pub(crate) fn daemon_stopped(pid: u32, runs: u64) -> String {
    let runs = match runs {
        0 => String::new(),
        1 => "; its 1 run was stopped".into(),
        n => format!("; its {n} runs were stopped"),
    };
    format!("[spillway: the daemon (pid {pid}) has stopped{runs}]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Preview, RunStatus};

    #[test]
    fn the_operator_s_lines_read_as_one_sentence_each() {
        assert_eq!(
            grep_limit_line(3),
            "[match limit of 3 reached; more lines match: refine the pattern or raise \
             --max-count]"
        );
        let id: RunId = "20261121-101502-k3f7".parse().unwrap();
        assert!(
            grep_cut_line(&id).ends_with(&format!(
                "characters were cut; see one whole with: {} show 20261121-101502-k3f7 \
                 --offset N --limit 1]",
                crate::program::program()
            )),
            "{}",
            grep_cut_line(&id)
        );
        assert_eq!(
            daemon_stopped(42, 0),
            "[spillway: the daemon (pid 42) has stopped]"
        );
        assert_eq!(
            daemon_stopped(42, 1),
            "[spillway: the daemon (pid 42) has stopped; its 1 run was stopped]"
        );
        assert_eq!(
            daemon_stopped(42, 3),
            "[spillway: the daemon (pid 42) has stopped; its 3 runs were stopped]"
        );
    }

    #[test]
    fn periods_read_as_words() {
        let d = std::time::Duration::from_secs;
        assert_eq!(period(d(7 * 86_400)), "7 days");
        assert_eq!(period(d(86_400 + 12 * 3600)), "1 day 12 hours");
        assert_eq!(period(d(90)), "1 minute 30 seconds");
        assert_eq!(period(d(0)), "0 seconds");
    }

    #[test]
    fn durations_read_naturally() {
        let d = chrono::Duration::milliseconds;
        assert_eq!(duration(d(420)), "0.4s");
        assert_eq!(duration(d(8_421)), "8.4s");
        assert_eq!(duration(d(123_000)), "2m03s");
        assert_eq!(duration(d(3_720_000)), "1h02m");
    }

    fn empty_preview() -> Preview {
        Preview::whole(String::new(), 0)
    }

    fn running(first_line: u64, total_lines: u64, idle_ms: u64) -> RunningEvent {
        RunningEvent {
            id: "20261121-101502-k3f7".parse().unwrap(),
            pid: 1,
            started_at: chrono::DateTime::UNIX_EPOCH,
            elapsed_ms: 12_345,
            idle_ms,
            first_line,
            ready: None,
            waiting_for_input: None,
            preview: Preview {
                total_lines,
                ..empty_preview()
            },
        }
    }

    #[test]
    fn the_running_line_says_what_is_new_and_what_to_do() {
        let line = running_line(&running(1, 5000, 4000));
        assert!(line.contains("still running after 12.3s"), "{line}");
        assert!(
            line.contains("no output for 4.0s; 5000 lines so far"),
            "{line}"
        );
        assert!(line.contains("spillway wait 20261121-101502-k3f7 --yield 10s --new"));
        let new = running_line(&running(41, 60, 10));
        assert!(
            new.contains("lines 41-60 are new") && !new.contains("no output"),
            "{new}"
        );
        assert!(running_line(&running(61, 60, 0)).contains("(nothing new)"));
        assert!(running_line(&running(60, 60, 0)).contains("(line 60 is new)"));
        assert!(running_line(&running(1, 1, 0)).contains("(1 line so far)"));
    }

    #[test]
    fn a_summary_names_the_end_the_size_and_the_spill() {
        let exit = ExitEvent {
            id: "20261121-101502-k3f7".parse().unwrap(),
            status: RunStatus::Exited,
            exit_code: Some(0),
            signal: None,
            duration_ms: 8421,
            started_at: chrono::DateTime::UNIX_EPOCH,
            ended_at: chrono::DateTime::UNIX_EPOCH,
            first_line: None,
            stopped: Vec::new(),
            limits_hit: Vec::new(),
            preview: Preview {
                spill_path: Some("/s.log".into()),
                total_lines: 3,
                total_bytes: 12,
                ..empty_preview()
            },
        };
        assert_eq!(
            summary(&exit),
            "[spillway: run 20261121-101502-k3f7 exited with code 0 after 8.4s: 3 lines, 12 B; full output: /s.log]"
        );
    }
}
