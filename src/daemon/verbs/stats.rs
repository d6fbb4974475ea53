//! `stats`: counts, disk use and the token accounting.

use std::io;
use std::sync::Arc;

use crate::protocol::{ErrorEvent, Event, StatsEvent};
use crate::storage::index::{TOKEN_STATS_COMMANDS, TOKEN_STATS_DAYS};

use crate::daemon::client::{ClientWriter, Session, reply};
use crate::daemon::state::Daemon;

/// Answers `stats` with [`stats`]'s event, or the error that stood in its way.
pub(in crate::daemon) async fn apply(
    _request: (),
    daemon: &Arc<Daemon>,
    write: &mut ClientWriter,
    _session: Session<'_>,
) -> io::Result<()> {
    reply(write, stats(daemon).await).await
}

async fn stats(daemon: &Daemon) -> Result<Event, ErrorEvent> {
    daemon.settle_token_counts().await;
    let index = daemon.with_index(|index| index.stats()).await?;
    // The token accounting's days: today (UTC) and the ones before it.
    let today = chrono::Utc::now().date_naive();
    let first_day = today - chrono::Days::new(u64::from(TOKEN_STATS_DAYS - 1));
    let since = first_day.and_time(chrono::NaiveTime::MIN).and_utc();
    let tokens = daemon
        .with_index(move |index| index.token_stats(TOKEN_STATS_COMMANDS, since))
        .await?;
    Ok(Event::Stats(StatsEvent {
        tokens: Some(tokens),
        index,
        max_disk: daemon.policy.max_disk,
        retention_ms: u64::try_from(daemon.policy.retention.as_millis()).unwrap_or(u64::MAX),
        data_dir: daemon.data_dir.root().to_string_lossy().into_owned(),
    }))
}
