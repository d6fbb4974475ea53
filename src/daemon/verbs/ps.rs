//! `ps`: the running commands.

use std::io;
use std::sync::Arc;

use crate::protocol::{Event, LiveRun, PsEvent, PsRequest};
use crate::storage::index::display_command;

use crate::daemon::client::{ClientWriter, Session, send};
use crate::daemon::runs::RunEntry;
use crate::daemon::state::Daemon;
use crate::daemon::times::millis;
use crate::protocol::time::wire_time;

/// Answers `ps` with [`ps`]'s event.
pub(in crate::daemon) async fn apply(
    request: PsRequest,
    daemon: &Arc<Daemon>,
    write: &mut ClientWriter,
    _session: Session<'_>,
) -> io::Result<()> {
    send(write, &ps(&request, daemon)).await
}

/// `ps`: the running commands, oldest first.
fn ps(request: &PsRequest, daemon: &Daemon) -> Event {
    let entries: Vec<Arc<RunEntry>> = daemon.runs.running();
    let mut runs: Vec<LiveRun> = entries
        .iter()
        .filter(|e| !e.is_done())
        .filter(|e| request.tags.iter().all(|(k, v)| e.tags.get(k) == Some(v)))
        .map(|e| {
            let stats = e.live.stats();
            LiveRun {
                id: e.id.clone(),
                pid: e.pid,
                command: display_command(e.argv.as_deref(), e.shell.as_deref()),
                argv: e.argv.clone(),
                shell: e.shell.clone(),
                cwd: e.cwd.clone(),
                tags: e.tags.clone(),
                started_at: wire_time(e.started_at),
                elapsed_ms: millis(stats.elapsed),
                idle_ms: millis(stats.idle),
                total_lines: stats.lines,
                total_bytes: stats.bytes,
                tty: e.tty,
                spill_path: e.spill_path().map(|p| p.to_string_lossy().into_owned()),
                stopping: e.control.is_stopping(),
            }
        })
        .collect();
    runs.sort_by(|a, b| a.started_at.cmp(&b.started_at).then(a.id.cmp(&b.id)));
    Event::Ps(PsEvent { runs })
}
