//! `purge`: deleting old runs' spills and rows now (retention, quota, orphans), as the daemon
//! does at start-up and every hour, or one finished run by its id.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use crate::protocol::{ErrorCode, ErrorEvent, Event, PurgeReport, PurgeRequest, RunId};
use crate::storage::purge::{self, PurgeRunError};
use crate::sync::lock;

use crate::daemon::client::{ClientWriter, Session, reply};
use crate::daemon::errors::{bad_request, internal};
use crate::daemon::state::Daemon;

/// Answers `purge` with [`purge`]'s report, or the error that stood in its way.
pub(in crate::daemon) async fn apply(
    request: PurgeRequest,
    daemon: &Arc<Daemon>,
    write: &mut ClientWriter,
    _session: Session<'_>,
) -> io::Result<()> {
    reply(write, purge(daemon, request).await.map(Event::Purge)).await
}

/// Runs one purge pass (retention, quota, orphans) and logs what went.
pub(in crate::daemon) async fn purge(
    daemon: &Daemon,
    request: PurgeRequest,
) -> Result<PurgeReport, ErrorEvent> {
    if let Some(id) = request.id {
        return purge_run(daemon, id, request.older_than_ms, request.dry_run).await;
    }
    let mut policy = daemon.policy.clone();
    if let Some(ms) = request.older_than_ms {
        policy.retention = Duration::from_millis(ms);
    }
    let spills = daemon.data_dir.spills_dir();
    let space = Arc::clone(&daemon.space);
    let report = daemon
        .with_index(move |index| {
            // The purge deletes files before rows, but a row needs a little room too.
            if !request.dry_run {
                space.make_room();
            }
            purge::purge(index, &spills, &policy, chrono::Utc::now(), request.dry_run)
        })
        .await?;
    let runs = report.expired.len() + report.evicted.len();
    if !report.dry_run && (runs > 0 || !report.orphans.is_empty()) {
        tracing::info!(
            runs,
            orphans = report.orphans.len(),
            freed_bytes = report.freed_bytes,
            "purged"
        );
    }
    Ok(report)
}

/// `purge` with an `id`: deletes that one finished run and its spill.
async fn purge_run(
    daemon: &Daemon,
    id: RunId,
    older_than: Option<u64>,
    dry_run: bool,
) -> Result<PurgeReport, ErrorEvent> {
    if older_than.is_some() {
        return Err(bad_request(
            "give either id or older_than_ms, not both".into(),
        ));
    }
    if daemon.runs.is_running(&id) {
        return Err(bad_request(PurgeRunError::Running(id).to_string()));
    }
    let spills = daemon.data_dir.spills_dir();
    let max_disk = daemon.policy.max_disk;
    let index = Arc::clone(&daemon.index);
    let done = tokio::task::spawn_blocking(move || {
        purge::purge_run(&mut lock(&index), &spills, &id, max_disk, dry_run)
    })
    .await
    .map_err(|e| internal(format!("purge task failed: {e}")))?;
    match done {
        Ok(report) => {
            if !dry_run {
                tracing::info!(runs = 1, freed_bytes = report.freed_bytes, "purged one run");
            }
            Ok(report)
        }
        Err(e @ PurgeRunError::Unknown(_)) => Err(ErrorEvent {
            code: ErrorCode::UnknownRun,
            message: e.to_string(),
        }),
        Err(e @ PurgeRunError::Running(_)) => Err(bad_request(e.to_string())),
        Err(e) => Err(internal(e.to_string())),
    }
}
