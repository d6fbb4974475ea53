//! `grep`: searching a run's spill for a client, with its cost bounded whatever the client
//! sends.
//!
//! A pattern is compiled and run on a blocking thread, under three bounds: its length
//! ([`MAX_PATTERN_BYTES`]), what it may compile to ([`PATTERN_SIZE_LIMIT`], and
//! [`PATTERN_DFA_LIMIT`] for its lazy DFA's cache), and how many greps search at once
//! (`Daemon::greps`): the others wait their turn holding only their request. Before these,
//! 64 greps at once with a pattern that compiles to 10 MiB took the daemon to 600 MiB, which it
//! kept (the daemon now also trims its heap once quiet: `crate::daemon`). A refused pattern is
//! quoted by its first bytes only: a 1 MB one used to come back three times over.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::engine::redact::{Counts, Redactor};
use crate::protocol::{ErrorCode, ErrorEvent, Event, GrepEvent, GrepLine, GrepRequest};
use crate::storage::grep::{DEFAULT_MAX_COUNT, grep_file};
use crate::storage::read::{CONTEXT_LINES, read_ranges};

use crate::daemon::client::{ClientWriter, Session, reply};
use crate::daemon::errors::{PATTERN_ECHO_BYTES, bad_request, cut_message, internal};
use crate::daemon::spill_file::spill_of;
use crate::daemon::state::Daemon;

/// Longest grep pattern taken, in bytes: far beyond any real pattern, and a bound on what the
/// greps waiting for a turn hold.
const MAX_PATTERN_BYTES: usize = 64 << 10;

/// Most memory one grep pattern may compile to. The regex crate's own default (10 MiB) let
/// 64 greps of `\w{200}x` take the daemon to 600 MiB; real patterns need far less (`\w{50}`,
/// a pathological one, fits).
const PATTERN_SIZE_LIMIT: usize = 4 << 20;

/// Most memory one grep's lazy DFA may cache (the regex crate's default is 2 MiB per thread
/// and pattern).
const PATTERN_DFA_LIMIT: usize = 1 << 20;

/// Answers `grep` with [`grep`]'s event, or the error that stood in its way.
pub(in crate::daemon) async fn apply(
    request: GrepRequest,
    daemon: &Arc<Daemon>,
    write: &mut ClientWriter,
    _session: Session<'_>,
) -> io::Result<()> {
    reply(write, grep(request, daemon).await).await
}

async fn grep(r: GrepRequest, daemon: &Daemon) -> Result<Event, ErrorEvent> {
    if r.pattern.len() > MAX_PATTERN_BYTES {
        return Err(ErrorEvent {
            code: ErrorCode::BadPattern,
            message: format!(
                "the pattern {} is {} bytes long; at most {MAX_PATTERN_BYTES} are taken",
                quote_start(&r.pattern),
                r.pattern.len()
            ),
        });
    }
    let max_count = match r.max_count {
        Some(0) => return Err(bad_request("max_count must be at least 1".into())),
        Some(n) => n,
        None => DEFAULT_MAX_COUNT,
    };
    let (run, path) = spill_of(r.id, daemon).await?;
    let (pattern, ignore_case, context) = (r.pattern, r.ignore_case, r.context);
    let redactor = daemon.redactor.clone().filter(|_| !r.no_redact);
    let permit = Arc::clone(&daemon.greps)
        .acquire_owned()
        .await
        .map_err(|e| internal(format!("grep queue closed: {e}")))?;
    let searched = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let regex = regex::RegexBuilder::new(&pattern)
            .case_insensitive(ignore_case)
            .size_limit(PATTERN_SIZE_LIMIT)
            .dfa_size_limit(PATTERN_DFA_LIMIT)
            .build()
            .map_err(|e| ErrorEvent {
                code: ErrorCode::BadPattern,
                message: bad_pattern_message(&pattern, &e),
            })?;
        let mut result =
            grep_file(&path, &regex, context, max_count).map_err(|e| internal(e.to_string()))?;
        let mut redactions = Counts::new();
        if let Some(redactor) = redactor {
            redact_in_context(&path, &mut result.lines, &redactor, &mut redactions)
                .map_err(|e| internal(e.to_string()))?;
        }
        Ok((result, redactions))
    })
    .await;
    daemon.work.fetch_add(1, Ordering::SeqCst);
    let (result, redactions) =
        searched.map_err(|e| internal(format!("grep task failed: {e}")))??;
    Ok(Event::Grep(Box::new(GrepEvent {
        redactions,
        run: run.into(),
        result,
        max_count,
    })))
}

/// Redacts each block of consecutive reported lines with the lines around it in the spill
/// (a match inside a private key's body is redacted as the whole key is), as well as when the
/// answer is sent.
fn redact_in_context(
    path: &Path,
    lines: &mut [GrepLine],
    redactor: &Redactor,
    counts: &mut Counts,
) -> std::io::Result<()> {
    let mut blocks = Vec::new();
    let mut start = 0;
    while start < lines.len() {
        let mut end = start + 1;
        while end < lines.len() && lines[end].line == lines[end - 1].line + 1 {
            end += 1;
        }
        blocks.push(start..end);
        start = end;
    }
    let ranges: Vec<(u64, u64, bool)> = blocks
        .iter()
        .flat_map(|b| {
            let (first, last) = (lines[b.start].line, lines[b.end - 1].line);
            [
                (first.saturating_sub(CONTEXT_LINES).max(1), first - 1, true),
                (last + 1, last + CONTEXT_LINES, false),
            ]
        })
        .collect();
    let around = read_ranges(path, &ranges)?;
    for (block, pair) in blocks.into_iter().zip(around.chunks(2)) {
        let text: String = lines[block.clone()]
            .iter()
            .map(|l| format!("{}\n", l.text))
            .collect();
        let redacted = redactor.redact_window(&pair[0], &text, &pair[1], counts);
        if redacted == text {
            continue;
        }
        for (line, new) in lines[block].iter_mut().zip(redacted.split('\n')) {
            if line.text != new {
                line.text = new.to_string();
            }
        }
    }
    Ok(())
}

/// Why a pattern was refused, quoting at most its first [`PATTERN_ECHO_BYTES`] bytes: the
/// regex crate's own message quotes the whole pattern (twice the size of a 1 MB pattern, with
/// its caret line), so for a long one only its last line (what is wrong) is kept.
fn bad_pattern_message(pattern: &str, error: &regex::Error) -> String {
    let reason = error.to_string();
    if pattern.len() <= PATTERN_ECHO_BYTES {
        return format!("bad pattern {pattern:?}: {reason}");
    }
    let what = reason.lines().last().unwrap_or_default();
    format!(
        "bad pattern {} ({} bytes): {}",
        quote_start(pattern),
        pattern.len(),
        cut_message(what, 4 * PATTERN_ECHO_BYTES)
    )
}

/// The first [`PATTERN_ECHO_BYTES`] bytes of `text` (at a character boundary), quoted, with
/// `…` when there is more.
fn quote_start(text: &str) -> String {
    if text.len() <= PATTERN_ECHO_BYTES {
        return format!("{text:?}");
    }
    let end = (0..=PATTERN_ECHO_BYTES)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    format!("{:?}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_pattern_is_quoted_short() {
        let huge = format!("{}(", "a".repeat(1_000_000));
        let error = regex::Regex::new(&huge).unwrap_err();
        let message = bad_pattern_message(&huge, &error);
        assert!(message.len() < 1000, "{} bytes", message.len());
        assert!(
            message.starts_with(&format!(
                "bad pattern \"{}\"… (1000001 bytes): ",
                "a".repeat(100)
            )),
            "{message}"
        );
        assert!(message.contains("unclosed group"), "{message}");
        // A short one is quoted whole, with the regex crate's own explanation.
        let short = String::from("a(");
        let error = regex::Regex::new(&short).unwrap_err();
        let message = bad_pattern_message(&short, &error);
        assert!(
            message.starts_with("bad pattern \"a(\": regex parse error"),
            "{message}"
        );
        // Cut at a character boundary.
        let wide = "é".repeat(200);
        assert_eq!(quote_start(&wide), format!("{:?}…", "é".repeat(50)));
    }
}
