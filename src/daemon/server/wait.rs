//! `wait`: the next preview of a running command, or its `exit`, also for a run that ended a
//! while ago (from the recent runs, else the index and the spill).

use std::io;
use std::path::Path;
use std::time::Duration;

use crate::daemon::readiness::Until;
use crate::engine::capture::{Capture, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, Limits, SpillPolicy};
use crate::engine::highlight::Patterns;
use crate::engine::preview::CliSteps;
use crate::engine::snapshot::{Cursor, RangeCapture};
use crate::protocol::{
    Direction, ErrorCode, ErrorEvent, Event, ExitEvent, Preview, RunId, RunStatus, WaitRequest,
};
use crate::storage::follow::open_spill;
use crate::storage::index::RunRow;
use crate::sync::lock;

use super::run::{exit_for, running_event};
use super::runs::{Found, error, unknown_run};
use super::{Daemon, internal, rfc3339, spill_of};

/// `wait`: the next preview of a running command, or its exit.
pub(super) async fn wait(request: WaitRequest, daemon: &Daemon) -> Result<Event, ErrorEvent> {
    if request.yield_ms == Some(0) {
        return Err(error(
            ErrorCode::BadRequest,
            "yield_ms must be at least 1".into(),
        ));
    }
    let caller = request.caller.unwrap_or_default();
    let until = Until::new(request.until.as_deref(), request.until_port)
        .map_err(|message| error(ErrorCode::BadPattern, message))?;
    match daemon.find(&request.id) {
        Found::Running(entry) => {
            let _delivery = daemon.delivery();
            // With `new`, only lines this caller has not been shown can make it ready.
            let from_line = match request.new {
                true => lock(&entry.cursors).get(&caller).map_or(1, |c| c.lines + 1),
                false => 1,
            };
            let ready = async {
                match &until {
                    Some(until) => {
                        let committed = entry.live.committed();
                        until.ready(entry.spill_path(), from_line, committed).await
                    }
                    None => std::future::pending().await,
                }
            };
            let after = async {
                match request.yield_ms {
                    Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                    None => std::future::pending().await,
                }
            };
            let (ended, ready) = tokio::select! {
                last = entry.finished() => (Some(last), None),
                () = after => (None, None),
                ready = ready => (None, Some(ready)),
            };
            let shape = entry.live.shape();
            Ok(match ended {
                Some(last) => {
                    let spill = entry.spill_path().map(Path::to_path_buf);
                    exit_for(last, spill, &entry.cursors, request.new, &caller, shape).await
                }
                None => running_event(&entry, request.new, &caller, ready).await,
            })
        }
        Found::Recent {
            spill_path,
            shape,
            last,
            cursors,
        } => Ok(exit_for(last, spill_path, &cursors, request.new, &caller, shape).await),
        Found::Recorded => recorded_exit(request.id, daemon).await,
    }
}

/// The exit event of a run the daemon no longer keeps, rebuilt from its record and its spill
/// (previewed with the default limits).
pub(super) async fn recorded_exit(id: RunId, daemon: &Daemon) -> Result<Event, ErrorEvent> {
    let wanted = id.clone();
    let row = daemon
        .with_index(move |index| index.get(&wanted))
        .await?
        .ok_or_else(|| unknown_run(&id))?;
    if row.status == RunStatus::Running {
        return Err(internal(format!(
            "run {id} is recorded as running but this daemon is not running it"
        )));
    }
    let preview = match spill_of(id.clone(), daemon).await {
        Ok((_, path)) => tokio::task::spawn_blocking(move || preview_of_file(&path))
            .await
            .map_err(|e| internal(format!("preview failed: {e}")))?
            .map_err(internal)?,
        Err(_) => gone_preview(&row),
    };
    Ok(exit_of_row(&row, preview))
}

/// The preview of a whole spill file, with the default limits.
fn preview_of_file(path: &Path) -> Result<Preview, String> {
    let limits = Limits::new(DEFAULT_MAX_LINES as u64, DEFAULT_MAX_BYTES as u64)
        .map_err(|e| e.to_string())?;
    let read = || -> io::Result<RangeCapture> {
        let file = open_spill(path)?;
        let mut range = RangeCapture::new(limits, Cursor::default(), Some(Patterns::defaults()));
        range.feed_from(file, u64::MAX)?;
        Ok(range)
    };
    let range = read().map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(range.finish("", Direction::Both, Some(path)).0)
}

/// The preview of a run whose output is gone: its counts, and a notice that says so.
fn gone_preview(row: &RunRow) -> Preview {
    let mut capture = Capture::new(Limits::default(), SpillPolicy::Never);
    capture.finish();
    let mut preview = Preview::build(&capture.view(), Direction::Both, &CliSteps);
    preview.content = format!(
        "[spillway: the output of run {} is gone (its spill file was deleted or lost); its record remains]\n",
        row.id
    );
    preview.spill_path = row.spill_path.clone();
    preview.total_lines = row.total_lines.unwrap_or(0);
    preview.total_bytes = row.total_bytes.unwrap_or(0);
    preview.truncated = preview.total_bytes > 0;
    preview.shown = Vec::new();
    preview.omitted_lines = preview.total_lines;
    preview
}

fn exit_of_row(row: &RunRow, preview: Preview) -> Event {
    let ended_at = row.ended_at.unwrap_or(row.started_at);
    let duration_ms = (ended_at - row.started_at).num_milliseconds().max(0) as u64;
    Event::Exit(Box::new(ExitEvent {
        id: row.id.clone(),
        status: row.status,
        exit_code: row.exit_code,
        signal: row.signal,
        duration_ms,
        started_at: rfc3339(row.started_at),
        ended_at: rfc3339(ended_at),
        first_line: None,
        stopped: Vec::new(),
        limits_hit: Vec::new(),
        preview,
    }))
}
