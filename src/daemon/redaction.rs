//! Credentials out of every text the daemon sends a client: previews (final, yielded, `wait`),
//! pages (`show`), matches (`grep`), followed text, raw chunks, error messages, and every
//! command line (`history`, `ps`, the record `show` and `grep` carry, `stats`' by-command
//! keys, what a run's end stopped, what waits for input) and side text (the `until` line). The
//! one place every event passes (`send`) calls [`redacted`], so no answer can forget it; the
//! spill files keep every byte. A request's `no_redact` or the daemon's `--no-redact` turns it
//! off.
//!
//! Every event type and every field of the structs they carry is named below, without `..`
//! or a catch-all arm: a new event or a new field does not compile until it is decided here
//! whether it carries text.

use crate::engine::redact::Redactor;
use crate::protocol::{
    CommandTokens, Counts, DaemonStatus, ErrorEvent, Event, ExitEvent, GrepEvent, GrepLine,
    GrepResult, HistoryEvent, InputWait, LaggedEvent, LiveRun, OutputEvent, PongEvent, PsEvent,
    PurgeReport, RawEvent, Ready, ResizedEvent, RunRecord, RunningEvent, SentEvent, ShowEvent,
    StartedEvent, StatsEvent, StoppedProcess, StoppingEvent, TokenStats,
};
use crate::supervisor::leftovers::cli_notice;

/// Elements of an argv before an argument that redaction sees it with: enough for
/// `mysql -u root -h db --port 3306 -pSECRET`, and a bound on the work a long argv costs.
const ARGV_CONTEXT: usize = 16;

/// `event` with the credentials in its text replaced; `None` when it carries no text.
pub(super) fn redacted(event: &Event, redactor: &Redactor) -> Option<Event> {
    let mut event = event.clone();
    let r = redactor;
    let mut uncounted = Counts::new();
    match &mut event {
        Event::Started(StartedEvent {
            id: _,
            pid: _,
            spill_path: _,
            started_at: _,
        })
        | Event::Pong(PongEvent {
            protocol: _,
            version: _,
            pid: _,
        })
        | Event::Lagged(LaggedEvent { line: _ })
        | Event::Sent(SentEvent { id: _, bytes: _ })
        | Event::Resized(ResizedEvent {
            id: _,
            cols: _,
            rows: _,
        })
        | Event::Stopping(StoppingEvent { pid: _, runs: _ }) => return None,
        // The daemon's own paths and counters: what its user configured, nothing a run wrote.
        Event::Status(DaemonStatus {
            pid: _,
            version: _,
            protocol: _,
            socket: _,
            data_dir: _,
            started_at: _,
            uptime_ms: _,
            runs: _,
            clients: _,
        }) => return None,
        // Ids, generated spill paths and numbers only.
        Event::Purge(PurgeReport {
            dry_run: _,
            expired: _,
            evicted: _,
            orphans: _,
            deleted: _,
            marked_missing: _,
            freed_bytes: _,
            spill_bytes_after: _,
            max_disk: _,
        }) => return None,
        Event::Exit(exit) => exit_event(exit, r),
        Event::Error(ErrorEvent { code: _, message }) => r.redact_into(message, &mut uncounted),
        Event::History(HistoryEvent { runs }) => {
            for run in runs {
                record(run, r);
            }
        }
        Event::Show(page) => {
            let ShowEvent {
                run,
                text,
                first: _,
                last: _,
                total_lines: _,
                next_offset: _,
                stopped_by_bytes: _,
                redactions,
            } = &mut **page;
            record(run, r);
            r.redact_into(text, redactions);
        }
        Event::Grep(found) => {
            let GrepEvent {
                run,
                result:
                    GrepResult {
                        lines,
                        matches: _,
                        limit_hit: _,
                        lines_cut: _,
                    },
                max_count: _,
                redactions,
            } = &mut **found;
            record(run, r);
            redact_lines(lines, r, redactions);
        }
        Event::Stats(StatsEvent {
            index: _,
            max_disk: _,
            retention_ms: _,
            data_dir: _,
            tokens,
        }) => {
            if let Some(TokenStats {
                totals: _,
                runs_without_tokens: _,
                by_command,
                by_day: _,
            }) = tokens
            {
                for CommandTokens { command, totals: _ } in by_command {
                    r.redact_into(command, &mut uncounted);
                }
            }
        }
        Event::Running(running) => {
            let RunningEvent {
                id: _,
                pid: _,
                started_at: _,
                elapsed_ms: _,
                idle_ms: _,
                first_line: _,
                ready,
                waiting_for_input,
                preview,
            } = &mut **running;
            match ready {
                Some(Ready::Line { line: _, text }) => r.redact_into(text, &mut uncounted),
                Some(Ready::Port { port: _ }) | None => {}
            }
            if let Some(InputWait { pid: _, command }) = waiting_for_input {
                r.redact_into(command, &mut uncounted);
            }
            preview.redact(r);
        }
        Event::Output(OutputEvent { line: _, text }) => r.redact_into(text, &mut uncounted),
        Event::Raw(RawEvent { data }) => r.redact_into(data, &mut uncounted),
        Event::Ps(PsEvent { runs }) => {
            for run in runs {
                live_run(run, r);
            }
        }
    }
    Some(event)
}

/// A run's end: what it stopped, named in its `stopped` list and in the preview's notice
/// line, and the preview itself.
fn exit_event(exit: &mut ExitEvent, r: &Redactor) {
    let ExitEvent {
        id: _,
        status: _,
        exit_code: _,
        signal: _,
        duration_ms: _,
        started_at: _,
        ended_at: _,
        first_line: _,
        stopped,
        limits_hit: _,
        preview,
    } = exit;
    let mut uncounted = Counts::new();
    for StoppedProcess {
        pid: _,
        command,
        ports: _,
    } in stopped.iter_mut()
    {
        r.redact_into(command, &mut uncounted);
    }
    // The notice line was worded from the commands as they were: word it again from the
    // redacted ones, where it stands (the preview's own redaction leaves it as it is).
    if let Some(line) = cli_notice(stopped) {
        preview.reword_stopped(&line);
    }
    preview.redact(r);
}

/// A run's record: its command in every form, its directory and its tags.
fn record(run: &mut RunRecord, r: &Redactor) {
    let RunRecord {
        id: _,
        argv,
        shell,
        command,
        cwd,
        tags,
        started_at: _,
        ended_at: _,
        status: _,
        exit_code: _,
        signal: _,
        total_lines: _,
        total_bytes: _,
        truncated: _,
        spill_path: _,
        spill_bytes: _,
        spill_complete: _,
        spill_missing: _,
        pid: _,
        spill_capped_at_line: _,
        output_tokens: _,
        preview_tokens: _,
        output_tokens_estimated: _,
    } = run;
    command_texts(argv, shell, command, cwd, tags, r);
}

/// A running command as `ps` lists it.
fn live_run(run: &mut LiveRun, r: &Redactor) {
    let LiveRun {
        id: _,
        pid: _,
        command,
        argv,
        shell,
        cwd,
        tags,
        started_at: _,
        elapsed_ms: _,
        idle_ms: _,
        total_lines: _,
        total_bytes: _,
        tty: _,
        spill_path: _,
        stopping: _,
    } = run;
    command_texts(argv, shell, command, cwd, tags, r);
}

/// The texts that say what a run runs, where, and with which labels: a run's record and a
/// running command's line in `ps` carry the same ones.
fn command_texts(
    argv: &mut Option<Vec<String>>,
    shell: &mut Option<String>,
    command: &mut String,
    cwd: &mut String,
    tags: &mut std::collections::BTreeMap<String, String>,
    r: &Redactor,
) {
    for value in tags.values_mut() {
        r.redact_into(value, &mut Counts::new());
    }
    let mut uncounted = Counts::new();
    r.redact_into(command, &mut uncounted);
    r.redact_into(cwd, &mut uncounted);
    if let Some(shell) = shell {
        r.redact_into(shell, &mut uncounted);
    }
    if let Some(argv) = argv {
        redact_argv(argv, r);
    }
}

/// Redacts each argument with the ones before it (up to [`ARGV_CONTEXT`]), as the command
/// line would be: `--password` `S3cret`, `mysql` ... `-pS3cret`. An argument is replaced by
/// what follows its redacted context when that context comes out of the joined text
/// unchanged, else by its own redaction.
fn redact_argv(argv: &mut [String], r: &Redactor) {
    let original = argv.to_vec();
    for i in 0..argv.len() {
        let context = original[i.saturating_sub(ARGV_CONTEXT)..i].join(" ");
        let alone = r.redact(&original[i]).text.into_owned();
        let redacted = if context.is_empty() {
            alone
        } else {
            let prefix = r.redact(&context).text.into_owned() + " ";
            let joined = format!("{context} {}", original[i]);
            let joined = r.redact(&joined).text;
            match joined.strip_prefix(&prefix) {
                Some(rest) if rest != original[i] => rest.to_string(),
                _ => alone,
            }
        };
        argv[i] = redacted;
    }
}

/// Redacts grep's lines a block of consecutive lines at a time (a key's body lines around a
/// match are seen together), keeping each line's number.
fn redact_lines(lines: &mut [GrepLine], redactor: &Redactor, counts: &mut Counts) {
    let mut start = 0;
    while start < lines.len() {
        let mut end = start + 1;
        while end < lines.len() && lines[end].line == lines[end - 1].line + 1 {
            end += 1;
        }
        let mut block: String = lines[start..end]
            .iter()
            .map(|l| format!("{}\n", l.text))
            .collect();
        redactor.redact_into(&mut block, counts);
        for (line, text) in lines[start..end].iter_mut().zip(block.split('\n')) {
            if line.text != text {
                line.text = text.to_string();
            }
        }
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_argument_is_redacted_with_the_flag_before_it() {
        let mut argv: Vec<String> = ["helm", "--password", "Qm7Tz9xLp2Kw", "repo", "list"]
            .map(String::from)
            .to_vec();
        redact_argv(&mut argv, Redactor::builtin());
        assert_eq!(
            argv,
            ["helm", "--password", "[redacted: password]", "repo", "list"]
        );
        let mut argv: Vec<String> = ["mysql", "-u", "root", "-pQm7Tz9xLp2Kw", "db"]
            .map(String::from)
            .to_vec();
        redact_argv(&mut argv, Redactor::builtin());
        assert_eq!(argv[3], "-p[redacted: password]");
        assert_eq!(argv[4], "db");
        let mut clean: Vec<String> = ["cargo", "test", "--", "x"].map(String::from).to_vec();
        redact_argv(&mut clean, Redactor::builtin());
        assert_eq!(clean, ["cargo", "test", "--", "x"]);
    }
}
