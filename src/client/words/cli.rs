//! The command line's words for a run: how it ended (on stderr after its output, or as the
//! last word of `run --follow`), and what to do with one that goes on. Each is worded from
//! the facts [`super`] takes from the daemon's events, never from the daemon's own text; and
//! the times, durations and statuses the operator's commands print about a run.

use bytesize::ByteSize;
use chrono::{DateTime, Local, Utc};

use super::{Ended, ending, ready_reason};
use crate::protocol::{ExitEvent, RunRecord, RunStatus, RunningEvent};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Preview, RunStatus};

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
