//! What the model reads: each daemon answer as the text of a tool result, in the words of
//! this server's tools (`read_output`, `bash` with `until_port`, ...) rather than the command
//! lines the daemon's text names. Pure functions of the protocol's events and the facts they
//! carry, so the wording is tested without a daemon.

use std::fmt::Write as _;
use std::path::Path;

use crate::client::words::{self, Ended, ready_reason};
use crate::engine::redact::notice_line;
use crate::protocol::{
    ExitEvent, GrepEvent, HistoryEvent, NextStep, Preview, Resource, RunId, RunRecord, RunStatus,
    RunningEvent, SentEvent, ShowEvent, StoppedProcess,
};
use crate::storage::grep::MAX_LINE_CHARS;
use crate::words::{first_server, json_string, limit_reached, stopped_processes};

/// Seconds with one decimal, as the CLI prints durations under a minute.
fn seconds(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

/// Words the daemon's preview (worded for the command line) for this server's tools: its
/// next steps and the line that names what the run's end stopped, each where the preview's
/// facts say it stands, so nothing is parsed back out of the text.
pub fn reword(preview: &mut Preview, id: &RunId, stopped: &[StoppedProcess]) {
    if let Some(line) = stopped_line(stopped) {
        preview.reword_stopped(&line);
    }
    preview.reword_steps(&McpSteps { id: id.clone() });
}

/// Words a finished run's preview for this server's tools: the limits it reached, what its
/// end stopped and its next steps, each where the preview's facts say it stands.
pub fn reword_exit(exit: &mut ExitEvent) {
    let lines: Vec<String> = exit
        .limits_hit
        .iter()
        .map(|hit| limit_reached(hit, parameter(hit.resource)))
        .collect();
    if !lines.is_empty() {
        exit.preview.reword_limits(&lines.join("\n"));
    }
    reword(&mut exit.preview, &exit.id, &exit.stopped);
}

/// The `bash` tool's parameter for a resource's limit.
fn parameter(resource: Resource) -> &'static str {
    match resource {
        Resource::Memory => "memory=\"SIZE\" (e.g. \"2GiB\")",
        Resource::Pids => "pids=N",
        Resource::Cpu => "cpu=CORES",
    }
}

/// Words a notice's next steps as calls of the server's own tools (`read_output`,
/// `grep_output`), which find a run's spill by its id.
#[derive(Debug, Clone)]
pub struct McpSteps {
    pub id: RunId,
}

impl NextStep for McpSteps {
    fn read_from(&self, _spill: &Path, line: u64) -> String {
        format!("call read_output with id=\"{}\" offset={line}", self.id)
    }

    fn search(&self, _spill: &Path, pattern: &str) -> String {
        format!(
            "call grep_output with id=\"{}\" pattern={}",
            self.id,
            json_string(pattern)
        )
    }
}

/// What the run's end stopped, and how to keep a server with this server's `bash` tool; `None`
/// when nothing was stopped.
pub fn stopped_line(stopped: &[StoppedProcess]) -> Option<String> {
    if stopped.is_empty() {
        return None;
    }
    let how = match first_server(stopped) {
        Some((p, port)) if !p.command.starts_with('[') => format!(
            "call bash with command={}, yield_seconds=30 and until_port={port}",
            json_string(&p.command)
        ),
        Some((_, port)) => {
            format!(
                "call bash with the server as the command, yield_seconds=30 and until_port={port}"
            )
        }
        None => "call bash with the server as the command, yield_seconds=30 and until_port=PORT \
                 (or until=REGEX for its ready line)"
            .to_string(),
    };
    Some(format!(
        "[spillway: stopped what the command left running: {}. To keep a server, start it \
         as the command itself, not with &: {how}; it runs until you call kill]",
        stopped_processes(stopped)
    ))
}

/// How a finished run ended, in words; a non-zero exit code is an outcome, not a failure of
/// the tool, so it is said plainly.
pub fn ending(exit: &ExitEvent) -> String {
    let end = words::ending(exit);
    let how = match end.ended {
        Ended::TimedOut => "timed out; its process group was killed".to_string(),
        Ended::Stopped(signal) => format!("was stopped by signal {signal}"),
        Ended::Killed(signal) => format!("was killed by signal {signal}"),
        Ended::Exited(code) => format!("exited with code {code}"),
        Ended::Other(status) => format!("ended: {}", status.as_str()),
    };
    let how = match end.out_of_memory {
        Some(hit) => format!(
            "{how}: it reached its memory limit of {} and the kernel's OOM killer ended a \
             process (raise it with memory=...)",
            crate::words::human_bytes(hit.limit)
        ),
        None => how,
    };
    format!(
        "[spillway: run {} {how} after {}; {} lines of output]",
        exit.id,
        seconds(exit.duration_ms),
        exit.preview.total_lines
    )
}

/// A finished run: its preview (notice included), then how it ended.
pub fn exit_text(exit: &ExitEvent) -> String {
    let mut text = exit.preview.content.clone();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&ending(exit));
    text
}

/// A run still going: its preview so far, then what to do next, in tool calls.
pub fn running_text(running: &RunningEvent) -> String {
    let mut text = running.preview.content.clone();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    let id = &running.id;
    let elapsed = seconds(running.elapsed_ms);
    if let Some(ready) = &running.ready {
        let _ = write!(
            text,
            "[spillway: run {id} is ready after {elapsed} ({}) and goes on until you call kill \
             with id=\"{id}\". Its new output: call wait with id=\"{id}\" yield_seconds=5]",
            ready_reason(ready)
        );
        return text;
    }
    if let Some(waiting) = &running.waiting_for_input {
        let _ = write!(
            text,
            "[spillway: run {id} is waiting for input on its terminal after {elapsed} ({} is \
             blocked reading it). Answer it: call send_input with id=\"{id}\" text=\"...\" \
             (Enter is pressed after it), then call wait with id=\"{id}\" yield_seconds=5; \
             stop it: call kill with id=\"{id}\"]",
            waiting.command
        );
        return text;
    }
    let _ = write!(
        text,
        "[spillway: run {id} is still running after {} (no output for {}; {} lines so far). \
         More: call wait with id=\"{id}\" yield_seconds=10; type into it: call send_input with \
         id=\"{id}\" text=\"...\"; stop it: call kill with id=\"{id}\"]",
        seconds(running.elapsed_ms),
        seconds(running.idle_ms),
        running.preview.total_lines
    );
    text
}

/// A page of a spill, and where to go on.
pub fn show_text(page: &ShowEvent) -> String {
    let mut text = page.text.clone();
    if let Some(line) = notice_line(&page.redactions) {
        text.push_str(&line);
        text.push('\n');
    }
    match page.next_offset {
        Some(next) => {
            let _ = write!(
                text,
                "[lines {}-{} of {}; continue: call read_output with id=\"{}\" offset={next}]",
                page.first, page.last, page.total_lines, page.run.id
            );
        }
        None => {
            let _ = write!(
                text,
                "[lines {}-{} of {}: the end of the output]",
                page.first, page.last, page.total_lines
            );
        }
    }
    text
}

/// Matches as `grep -n` prints them (`N:` a match, `N-` context, `--` between groups), and
/// what stopped the search.
pub fn grep_text(found: &GrepEvent, pattern: &str, context: usize) -> String {
    let mut text = String::new();
    let mut previous: Option<u64> = None;
    for line in &found.result.lines {
        if context > 0 && previous.is_some_and(|p| line.line > p + 1) {
            text.push_str("--\n");
        }
        let mark = if line.matched { ':' } else { '-' };
        let _ = writeln!(text, "{}{mark}{}", line.line, line.text);
        previous = Some(line.line);
    }
    let id = &found.run.id;
    if found.result.matches == 0 {
        let _ = write!(
            text,
            "[no line of run {id}'s output matches {}]",
            json_string(pattern)
        );
        return text;
    }
    let _ = write!(text, "[{} matching lines", found.result.matches);
    if found.result.limit_hit {
        let _ = write!(
            text,
            "; the limit of {} was reached and more lines match: refine the pattern or raise max_count",
            found.max_count
        );
    }
    if found.result.lines_cut {
        let _ = write!(
            text,
            "; lines longer than {MAX_LINE_CHARS} characters were cut: read one whole with \
             read_output id=\"{id}\" offset=N limit=1"
        );
    }
    text.push(']');
    if let Some(line) = notice_line(&found.redactions) {
        text.push('\n');
        text.push_str(&line);
    }
    text
}

/// A sent text, and how to see what the command made of it.
pub fn sent_text(sent: &SentEvent) -> String {
    format!(
        "[spillway: typed {} bytes into run {id}; see what it does: call wait with id=\"{id}\" yield_seconds=5]",
        sent.bytes,
        id = sent.id
    )
}

/// Runs newest first, one line each: id, start, how it ended, size, tokens (of the output,
/// and of the preview the model was given), command; then the listed runs' token totals.
pub fn history_text(history: &HistoryEvent) -> String {
    if history.runs.is_empty() {
        return "[no runs match]".to_string();
    }
    let mut text = String::new();
    let (mut counted, mut output, mut preview, mut estimated) = (0, 0, 0, false);
    for run in &history.runs {
        let tokens = match (run.output_tokens, run.preview_tokens) {
            (Some(o), Some(p)) => {
                (counted, output, preview) = (counted + 1, output + o, preview + p);
                let mark = if run.output_tokens_estimated == Some(true) {
                    estimated = true;
                    "~"
                } else {
                    ""
                };
                format!("{mark}{o}->{p} tokens")
            }
            _ => "-".to_string(),
        };
        let _ = writeln!(
            text,
            "{}  {}  {}  {}  {tokens}  {}",
            run.id,
            run.started_at.format("%Y-%m-%dT%H:%M:%SZ"),
            status_text(run),
            run.total_lines
                .map_or_else(|| "-".to_string(), |n| format!("{n} lines")),
            run.command
        );
    }
    if counted > 0 {
        let _ = write!(
            text,
            "[tokens of the {counted} runs counted: {output} of output, {preview} in previews, {} saved{}]",
            i128::from(output) - i128::from(preview),
            if estimated { "; ~: estimated" } else { "" }
        );
    }
    text
}

fn status_text(run: &RunRecord) -> String {
    match (run.status, run.exit_code, run.signal) {
        (RunStatus::Exited, Some(code), _) => format!("exit {code}"),
        (_, _, Some(signal)) => format!("{} (signal {signal})", run.status.as_str()),
        (status, _, _) => status.as_str().to_string(),
    }
}

/// An id a model gave, checked, or a message that says what an id looks like.
pub fn parse_id(id: &str) -> Result<RunId, String> {
    id.trim().parse().map_err(|e| format!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::capture::{Capture, Limits, SpillPolicy};
    use crate::program::CliSteps;
    use crate::protocol::{Direction, LimitHit};
    use crate::storage::spill::DataDir;

    fn preview(content: &str, total_lines: u64) -> Preview {
        Preview {
            shown: Vec::new(),
            ..Preview::whole(content.to_string(), total_lines)
        }
    }

    fn exit(status: RunStatus, exit_code: Option<i32>, signal: Option<i32>) -> ExitEvent {
        ExitEvent {
            id: "20261121-101502-k3f7".parse().unwrap(),
            status,
            exit_code,
            signal,
            duration_ms: 1234,
            started_at: chrono::DateTime::UNIX_EPOCH,
            ended_at: chrono::DateTime::UNIX_EPOCH,
            first_line: None,
            stopped: Vec::new(),
            limits_hit: Vec::new(),
            preview: preview("boom\n", 1),
        }
    }

    #[test]
    fn a_failed_run_says_its_exit_code() {
        let text = exit_text(&exit(RunStatus::Exited, Some(3), None));
        assert_eq!(
            text,
            "boom\n[spillway: run 20261121-101502-k3f7 exited with code 3 after 1.2s; 1 lines of output]"
        );
        assert!(ending(&exit(RunStatus::TimedOut, None, Some(15))).contains("timed out"));
        assert!(ending(&exit(RunStatus::Signaled, None, Some(9))).contains("killed by signal 9"));
    }

    fn run(n: u32, tokens: Option<(u64, u64, bool)>) -> RunRecord {
        let mut json = serde_json::json!({
            "id": format!("20261121-10150{n}-k3f7"),
            "argv": ["seq", "1", "9"],
            "shell": null,
            "command": "seq 1 9",
            "cwd": "/",
            "tags": {},
            "started_at": "2026-11-21T10:15:02.000Z",
            "ended_at": null,
            "status": "exited",
            "exit_code": 0,
            "signal": null,
            "total_lines": 9,
            "total_bytes": 18,
            "truncated": false,
            "spill_path": null,
            "spill_bytes": 18,
            "spill_complete": true,
            "spill_missing": false,
            "pid": 7,
            "spill_capped_at_line": null,
        });
        if let Some((output, preview, estimated)) = tokens {
            json["output_tokens"] = output.into();
            json["preview_tokens"] = preview.into();
            json["output_tokens_estimated"] = estimated.into();
        }
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn history_gives_each_runs_tokens_and_their_totals() {
        let history = HistoryEvent {
            runs: vec![
                run(1, Some((9_000_000, 1_200, true))),
                run(2, None),
                run(3, Some((18, 18, false))),
            ],
        };
        let text = history_text(&history);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].ends_with("exit 0  9 lines  ~9000000->1200 tokens  seq 1 9"),
            "{text}"
        );
        assert!(lines[1].ends_with("9 lines  -  seq 1 9"), "{text}");
        assert!(lines[2].ends_with("  18->18 tokens  seq 1 9"), "{text}");
        assert_eq!(
            lines[3],
            "[tokens of the 2 runs counted: 9000018 of output, 1218 in previews, 8998800 saved; ~: estimated]"
        );
        let plain = history_text(&HistoryEvent {
            runs: vec![run(2, None)],
        });
        assert_eq!(
            plain.lines().count(),
            1,
            "no totals without tokens: {plain}"
        );
    }

    #[test]
    fn ids_are_checked_with_a_clear_message() {
        assert!(parse_id(" 20261121-101502-k3f7 ").is_ok());
        let message = parse_id("../etc").unwrap_err();
        assert!(message.contains("YYYYMMDD-HHMMSS-xxxx"), "{message}");
    }

    fn server_at(port: u16) -> StoppedProcess {
        StoppedProcess {
            pid: 123,
            command: "python3 -m http.server 8000".into(),
            ports: vec![port],
        }
    }

    #[test]
    fn the_mcp_wording_replaces_the_cli_line() {
        let stopped = [server_at(8000)];
        let mut preview = Preview {
            shown: Vec::new(),
            ..Preview::whole("served\n".into(), 1)
        };
        crate::supervisor::leftovers::annotate(&mut preview, &stopped, &[], None);
        assert!(preview.content.starts_with("served\n[spillway: stopped"));
        reword(&mut preview, &id(), &stopped);
        let content = preview.content;
        assert!(
            content.contains(
                "call bash with command=\"python3 -m http.server 8000\", yield_seconds=30 and \
                 until_port=8000"
            ),
            "{content}"
        );
        assert!(!content.contains("spillway run"), "{content}");
    }

    fn id() -> RunId {
        "20261121-101502-k3f7".parse().unwrap()
    }

    /// Previews of `text` with CLI and MCP wording, spilled under `dir_name`.
    /// A cut preview with a secret in its shown lines and a stopped server: after the daemon's
    /// redaction (which moves the notice and the stopped line), the MCP words both its steps
    /// and its stopped line where the facts say, and the rest of the text stays as it was.
    #[test]
    fn a_redacted_cut_preview_is_reworded_where_its_facts_say() {
        let mut text = String::from("token=ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789\n");
        text.push_str(&numbered(100));
        let (mut cli, _) = both_wordings(&text, 6, Direction::Both, "d");
        let stopped = [server_at(8000)];
        crate::supervisor::leftovers::annotate(&mut cli, &stopped, &[], None);
        cli.redact(crate::engine::redact::Redactor::builtin());
        let [start, end] = cli.stopped_at.unwrap();
        assert!(
            cli.content[start..end].starts_with("[spillway: stopped what the command left"),
            "{}",
            cli.content
        );
        let before = cli.content[..cli.next.as_ref().unwrap().read_at[0]].to_string();
        let after = cli.content[end..].to_string();
        reword(&mut cli, &id(), &stopped);
        let content = &cli.content;
        assert!(content.starts_with(&before), "{content}");
        assert!(content.ends_with(&after), "{content}");
        assert!(
            content.contains(&stopped_line(&stopped).unwrap()),
            "{content}"
        );
        assert!(content.contains("call read_output with id="), "{content}");
        for cli_word in ["spillway read", "grep -n", "spillway run"] {
            assert!(!content.contains(cli_word), "{cli_word}: {content}");
        }
    }

    /// A cut, redacted preview whose run stopped a server and reached two limits: every
    /// line the run's end added is worded with the `bash` tool's parameters, in place, and
    /// the output's own text and the notice between stay as they were.
    #[test]
    fn the_limits_a_run_reached_are_worded_with_the_tools_parameters() {
        let mut text = String::from("token=ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789\n");
        text.push_str(&numbered(100));
        let (cli, _) = both_wordings(&text, 6, Direction::Both, "d");
        let stopped = vec![server_at(8000)];
        let limits_hit = vec![
            LimitHit {
                resource: Resource::Memory,
                limit: 64 << 20,
                events: 1,
            },
            LimitHit {
                resource: Resource::Pids,
                limit: 8,
                events: 3,
            },
        ];
        let mut exit = ExitEvent {
            stopped: stopped.clone(),
            limits_hit: limits_hit.clone(),
            preview: cli,
            ..exit(RunStatus::Signaled, None, Some(9))
        };
        crate::supervisor::leftovers::annotate(&mut exit.preview, &stopped, &limits_hit, None);
        exit.preview
            .redact(crate::engine::redact::Redactor::builtin());
        let body = exit.preview.content[..exit.preview.notice_at.unwrap()].to_string();
        reword_exit(&mut exit);
        let content = &exit.preview.content;
        assert!(content.starts_with(&body), "{content}");
        assert!(content.contains("[redacted: "), "{content}");
        assert!(
            content.contains(
                "memory limit of 64.0 MiB: the kernel's OOM killer ended 1 process (SIGKILL). \
                 Raise it with memory=\"SIZE\""
            ),
            "{content}"
        );
        assert!(
            content
                .contains("3 forks were refused (fork failed with EAGAIN). Raise it with pids=N]"),
            "{content}"
        );
        assert!(
            content.contains(&stopped_line(&stopped).unwrap()),
            "{content}"
        );
        assert!(content.contains("call read_output with id="), "{content}");
        for cli_word in ["--memory", "--pids", "spillway read", "spillway run"] {
            assert!(!content.contains(cli_word), "{cli_word}: {content}");
        }
        let [start, end] = exit.preview.limits_at.unwrap();
        assert!(content[start..end].starts_with("[spillway: the run reached its memory"));
        assert!(content[..end].ends_with("Raise it with pids=N]"));
    }

    fn both_wordings(
        text: &str,
        lines: u64,
        direction: Direction,
        dir_name: &str,
    ) -> (Preview, Preview) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = DataDir::open(&tmp.path().join(dir_name)).unwrap();
        let mut capture = Capture::new(
            Limits::new(lines, 100_000).unwrap(),
            SpillPolicy::Always(dir),
        );
        capture.write(text);
        capture.finish();
        let view = capture.view();
        (
            Preview::build(&view, direction, &CliSteps),
            Preview::build(&view, direction, &McpSteps { id: id() }),
        )
    }

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    #[test]
    fn rewording_equals_building_with_mcp_steps() {
        let mut with_errors = numbered(50);
        with_errors.push_str("src/a.c:3:4: error: it's broken\n");
        for i in 0..30 {
            with_errors.push_str(&format!("make[1]: *** [Makefile:{i}: all] Error 1\n"));
        }
        with_errors.push_str(&numbered(300));
        let cases = [
            (numbered(100), 6, Direction::Both, "plain"),
            (numbered(100), 6, Direction::Head, "with space"),
            (numbered(100), 6, Direction::Tail, "it's quoted"),
            (with_errors, 40, Direction::Both, "errors 'and' quotes"),
        ];
        for (text, lines, direction, dir_name) in cases {
            let (cli, mcp) = both_wordings(&text, lines, direction, dir_name);
            assert!(cli.truncated, "{dir_name}");
            let mut reworded = cli.clone();
            reword(&mut reworded, &id(), &[]);
            assert_eq!(reworded.content, mcp.content, "{dir_name}");
            assert!(!reworded.content.contains("spillway read"), "{dir_name}");
            assert!(!reworded.content.contains("grep -n"), "{dir_name}");
        }
    }

    #[test]
    fn the_mcp_notice_names_the_tools_and_the_id() {
        let (_, mcp) = both_wordings(&numbered(100), 6, Direction::Both, "d");
        assert!(
            mcp.content
                .contains("call read_output with id=\"20261121-101502-k3f7\" offset=4"),
            "{}",
            mcp.content
        );
        assert!(
            mcp.content
                .contains("call grep_output with id=\"20261121-101502-k3f7\" pattern=\"PATTERN\"")
        );
    }

    #[test]
    fn output_that_looks_like_a_step_is_left_alone() {
        let (cli, _) = both_wordings(&numbered(3), 100, Direction::Both, "d");
        let spill = cli.spill_path.clone().unwrap();
        let echoed = format!("spillway read {spill} --offset 2\n");
        let mut preview = Preview {
            truncated: true,
            content: format!("{echoed}\n[spillway: output truncated ...]\n"),
            ..cli
        };
        reword(&mut preview, &id(), &[]);
        assert!(preview.content.starts_with(&echoed));
    }

    #[test]
    fn steps_are_reworded_where_they_stand_after_redaction() {
        // A credential in the shown lines is redacted after the notice is written: the text
        // before the steps changes length, and the steps' places move with it.
        let mut text = String::from("token=ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789\n");
        text.push_str(&numbered(100));
        let (cli, mcp) = both_wordings(&text, 6, Direction::Both, "d");
        let mut redacted = cli.clone();
        redacted.redact(crate::engine::redact::Redactor::builtin());
        assert_ne!(
            redacted.content.len(),
            cli.content.len(),
            "something was redacted"
        );
        reword(&mut redacted, &id(), &[]);
        let notice = |p: &Preview| p.content[p.notice_at.unwrap() + 2..].to_string();
        assert!(
            notice(&redacted).starts_with(&notice(&mcp)[..notice(&mcp).len() - 1]),
            "{}",
            redacted.content
        );
        assert!(!redacted.content.contains("spillway read"));
    }
}
