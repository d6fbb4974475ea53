//! `kill`: signals a run's process group and answers with its exit once it has ended.

use std::time::Duration;

use crate::protocol::{ErrorEvent, Event, KillRequest, KillSignal};
use crate::supervisor::StopReason;

use super::runs::running_run;
use super::{Daemon, internal};

/// Past the kill grace, how long `kill` waits for the run to end before it answers anyway.
const KILL_SLACK: Duration = Duration::from_secs(10);

/// `kill`: signals a run's process group and answers with its exit once it has ended.
pub(super) async fn kill(request: KillRequest, daemon: &Daemon) -> Result<Event, ErrorEvent> {
    let KillSignal(signal) = request.signal.unwrap_or_default();
    let entry = running_run(&request.id, daemon, "be signalled").await?;
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
