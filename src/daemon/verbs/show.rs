//! `show`: a page of a run's spill with its record.

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

use crate::protocol::{ErrorCode, ErrorEvent, Event, ShowEvent, ShowRequest};
use crate::storage::read;
use crate::storage::read::{ReadError, ReadRequest};

use crate::daemon::client::{ClientWriter, Session, reply};
use crate::daemon::errors::{bad_request, internal};
use crate::daemon::spill_file::spill_of;
use crate::daemon::state::Daemon;

/// Answers `show` with [`show`]'s event, or the error that stood in its way.
pub(in crate::daemon) async fn apply(
    request: ShowRequest,
    daemon: &Arc<Daemon>,
    write: &mut ClientWriter,
    _session: Session<'_>,
) -> io::Result<()> {
    reply(write, show(request, daemon).await).await
}

async fn show(r: ShowRequest, daemon: &Daemon) -> Result<Event, ErrorEvent> {
    let (run, path) = spill_of(r.id.clone(), daemon).await?;
    let defaults = ReadRequest::default();
    let request = ReadRequest {
        offset: r.offset.unwrap_or(defaults.offset),
        limit: r.limit.unwrap_or(defaults.limit),
        max_bytes: r.max_bytes.unwrap_or(defaults.max_bytes),
    };
    let redactor = daemon.redactor.clone().filter(|_| !r.no_redact);
    let (page, redactions) = tokio::task::spawn_blocking(move || {
        let (mut page, around) = read::read_page(&path, &request)?;
        let mut redactions = BTreeMap::new();
        if let Some(redactor) = redactor {
            // Redacted here, with the lines around it, as well as when sent: a page inside a
            // private key's body is then redacted as the whole key is.
            page.text =
                redactor.redact_window(&around.before, &page.text, &around.after, &mut redactions);
        }
        Ok((page, redactions))
    })
    .await
    .map_err(|e| internal(format!("read task failed: {e}")))?
    .map_err(|e: ReadError| match e {
        ReadError::NotFound { .. } => ErrorEvent {
            code: ErrorCode::SpillMissing,
            message: format!("the output of run {}: {e}", r.id),
        },
        ReadError::Io { .. } => internal(e.to_string()),
        _ => bad_request(e.to_string()),
    })?;
    Ok(Event::Show(Box::new(ShowEvent {
        redactions,
        run: run.into(),
        next_offset: page.has_more().then_some(page.last + 1),
        text: page.text,
        first: page.first,
        last: page.last,
        total_lines: page.total_lines,
        stopped_by_bytes: page.stopped_by_bytes,
    })))
}
