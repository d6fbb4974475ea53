//! `history`: past and running runs from the index, newest first.

use std::io;
use std::sync::Arc;

use crate::protocol::{ErrorEvent, Event, HistoryEvent, HistoryRequest, RunRecord};
use crate::storage::index::HistoryFilter;

use crate::daemon::client::{ClientWriter, Session, reply};
use crate::daemon::state::Daemon;

/// Most runs one `history` answer lists.
const MAX_HISTORY: usize = 10_000;

/// Answers `history` with [`history`]'s event, or the error that stood in its way.
pub(in crate::daemon) async fn apply(
    request: HistoryRequest,
    daemon: &Arc<Daemon>,
    write: &mut ClientWriter,
    _session: Session<'_>,
) -> io::Result<()> {
    reply(write, history(request, daemon).await).await
}

async fn history(r: HistoryRequest, daemon: &Daemon) -> Result<Event, ErrorEvent> {
    daemon.settle_token_counts().await;
    let filter = HistoryFilter {
        since: r.since,
        until: r.until,
        status: r.status,
        command_contains: r.command,
        tags: r.tags.into_iter().collect(),
        limit: r.limit.unwrap_or(0).min(MAX_HISTORY),
    };
    let rows = daemon
        .with_index(move |index| index.history(&filter))
        .await?;
    Ok(Event::History(HistoryEvent {
        runs: rows.into_iter().map(RunRecord::from).collect(),
    }))
}
