//! `kill`: signals a run's process group and answers with its exit once it has ended.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use crate::protocol::{ErrorEvent, Event, KillRequest, KillSignal};
use crate::supervisor::StopReason;

use crate::daemon::client::{ClientWriter, Session, reply};
use crate::daemon::errors::internal;
use crate::daemon::state::Daemon;

/// Past the kill grace, how long `kill` waits for the run to end before it answers anyway.
const KILL_SLACK: Duration = Duration::from_secs(10);

/// Answers `kill` with the run's exit once [`kill`] has seen it end, or the error that stood in its way.
pub(in crate::daemon) async fn apply(
    request: KillRequest,
    daemon: &Arc<Daemon>,
    write: &mut ClientWriter,
    _session: Session<'_>,
) -> io::Result<()> {
    reply(write, kill(request, daemon).await).await
}

/// `kill`: signals a run's process group and answers with its exit once it has ended.
async fn kill(request: KillRequest, daemon: &Daemon) -> Result<Event, ErrorEvent> {
    let KillSignal(signal) = request.signal.unwrap_or_default();
    let entry = daemon.running_run(&request.id, "be signalled").await?;
    let _delivery = daemon.delivery();
    tracing::info!(id = %entry.id, signal = signal.as_str(), "kill requested");
    entry.stop(StopReason::Kill(signal));
    let patience = daemon.kill_grace + KILL_SLACK;
    match tokio::time::timeout(patience, entry.finished()).await {
        Ok(last) => Ok((*last).clone()),
        Err(_) => Err(internal(format!(
            "run {} was sent {signal} but has not ended after {}s",
            entry.id,
            patience.as_secs()
        ))),
    }
}
