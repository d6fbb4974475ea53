//! Previews of a run for its callers: the `running` preview of output so far (of new output
//! only, for `wait --new`), and the `exit` of a run that has ended, from memory or, for an
//! older run, from the index and its spill.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::engine::capture::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, Limits};
use crate::engine::highlight::Patterns;
use crate::engine::snapshot::{Cursor, RangeCapture};
use crate::program::CliSteps;
use crate::protocol::{
    Direction, ErrorCode, ErrorEvent, Event, ExitEvent, Preview, RunId, RunStatus, RunningEvent,
};
use crate::storage::follow::open_spill;
use crate::storage::index::RunRow;
use crate::supervisor;
use crate::supervisor::live::Shape;
use crate::sync::lock;

use super::errors::{internal, unknown_run};
use super::runs::{Cursors, RunEntry};
use super::spill_file::spill_of;
use super::state::Daemon;
use super::times::millis;
use crate::protocol::time::wire_time;

/// How long a preview of new output waits for the spill file to hold what the run has read.
pub(super) const FILE_CATCH_UP: Duration = Duration::from_secs(2);

/// A `running` event: the preview so far, or with `new` of what `caller` has not been shown;
/// `ready` says why it came early, and the kernel says whether the command waits for input.
///
/// With `limits` (a `wait` that asks for other limits than the run's), the preview is made
/// from the spill file with them.
pub(super) async fn running_event(
    entry: &Arc<RunEntry>,
    new: bool,
    caller: &str,
    ready: Option<crate::protocol::Ready>,
    limits: Option<Limits>,
) -> Event {
    let live = Arc::clone(&entry.live);
    let (pid, tty) = (entry.pid, entry.tty);
    let looked = tokio::task::spawn_blocking(move || {
        let waiting = tty
            .then(|| supervisor::input_wait::waiting_for_input(pid))
            .flatten();
        (live.so_far(), waiting)
    })
    .await;
    let (snapshot, waiting_for_input) = match looked {
        Ok(looked) => looked,
        Err(e) => return Event::error(ErrorCode::Internal, format!("preview failed: {e}")),
    };
    let start = lock(&entry.cursors).get(caller).copied().filter(|_| new);
    let start = start.or(limits.map(|_| Cursor::default()));
    let (preview, first_line, cursor) = match (start, entry.spill_path()) {
        (Some(start), Some(path)) => {
            let path = path.to_path_buf();
            let shape = reshaped(entry.live.shape(), limits);
            let (to, pending) = (snapshot.committed, snapshot.pending.clone());
            wait_for_file(&path, to).await;
            let range = tokio::task::spawn_blocking(move || {
                range_of_file(&path, &shape, start, to, &pending)
            })
            .await;
            match range {
                Ok(Ok((preview, next))) => (preview, start.lines + 1, next),
                Ok(Err(e)) => return Event::error(ErrorCode::Internal, e),
                Err(e) => {
                    return Event::error(ErrorCode::Internal, format!("preview failed: {e}"));
                }
            }
        }
        _ => (snapshot.preview, 1, snapshot.cursor),
    };
    lock(&entry.cursors).insert(caller.to_string(), cursor);
    Event::Running(Box::new(RunningEvent {
        id: entry.id.clone(),
        pid: entry.pid,
        started_at: wire_time(entry.started_at),
        elapsed_ms: millis(snapshot.stats.elapsed),
        idle_ms: millis(snapshot.stats.idle),
        first_line,
        ready,
        waiting_for_input,
        preview,
    }))
}

/// `shape` with other preview limits, when asked for.
fn reshaped(shape: Arc<Shape>, limits: Option<Limits>) -> Arc<Shape> {
    match limits {
        Some(limits) => Arc::new(Shape {
            limits,
            direction: shape.direction,
            highlights: shape.highlights.clone(),
            compact: shape.compact,
        }),
        None => shape,
    }
}

/// Waits (bounded) until the spill file holds `bytes` bytes: what the run had read when a
/// preview was taken, handed to the spill writer moments before.
pub(super) async fn wait_for_file(path: &Path, bytes: u64) {
    let deadline = tokio::time::Instant::now() + FILE_CATCH_UP;
    while std::fs::metadata(path).map_or(0, |m| m.len()) < bytes
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The preview of spill bytes `start.offset..to` (then `pending`) as lines `start.lines + 1..`.
pub(super) fn range_of_file(
    path: &Path,
    shape: &Shape,
    start: Cursor,
    to: u64,
    pending: &str,
) -> Result<(Preview, Cursor), String> {
    use std::io::{Seek, SeekFrom};
    let read = || -> io::Result<RangeCapture> {
        let mut file = open_spill(path)?;
        file.seek(SeekFrom::Start(start.offset))?;
        let mut range = RangeCapture::new(shape.limits, start, shape.highlights.clone())
            .with_compact(shape.compact);
        range.feed_from(file, to.saturating_sub(start.offset))?;
        Ok(range)
    };
    let range = read().map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(range.finish(pending, shape.direction, &CliSteps, Some(path)))
}

/// The exit event `caller` gets: the run's own, or with `new` one whose preview covers only
/// what the caller has not been shown.
///
/// With `limits`, the preview is made anew from the spill file with them.
pub(super) async fn exit_for(
    last: Arc<Event>,
    spill_path: Option<PathBuf>,
    cursors: &Cursors,
    (new, caller): (bool, &str),
    shape: Arc<Shape>,
    limits: Option<Limits>,
) -> Event {
    let start = lock(cursors).get(caller).copied().filter(|_| new);
    let start = start.or(limits.map(|_| Cursor::default()));
    let (Event::Exit(exit), Some(start), Some(path)) = (&*last, start, spill_path) else {
        return (*last).clone();
    };
    let shape = reshaped(shape, limits);
    let to = exit.preview.total_bytes;
    let range =
        tokio::task::spawn_blocking(move || range_of_file(&path, &shape, start, to, "")).await;
    match range {
        Ok(Ok((mut preview, next))) => {
            lock(cursors).insert(caller.to_string(), next);
            crate::supervisor::leftovers::annotate(
                &mut preview,
                &exit.stopped,
                &exit.limits_hit,
                None,
            );
            Event::Exit(Box::new(ExitEvent {
                first_line: new.then_some(start.lines + 1),
                preview,
                ..(**exit).clone()
            }))
        }
        // The spill cannot be read: the whole preview is better than none.
        _ => (*last).clone(),
    }
}

/// The exit event of a run the daemon no longer keeps, rebuilt from its record and its spill
/// (previewed with the default limits).
pub(super) async fn recorded_exit(
    id: RunId,
    daemon: &Daemon,
    limits: Option<Limits>,
) -> Result<Event, ErrorEvent> {
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
        Ok((_, path)) => tokio::task::spawn_blocking(move || preview_of_file(&path, limits))
            .await
            .map_err(|e| internal(format!("preview failed: {e}")))?
            .map_err(internal)?,
        Err(_) => gone_preview(&row),
    };
    Ok(exit_of_row(&row, preview))
}

/// The preview of a whole spill file, with the default limits.
pub(super) fn preview_of_file(path: &Path, limits: Option<Limits>) -> Result<Preview, String> {
    let default = Limits::new(DEFAULT_MAX_LINES as u64, DEFAULT_MAX_BYTES as u64)
        .map_err(|e| e.to_string())?;
    let read = || -> io::Result<RangeCapture> {
        let file = open_spill(path)?;
        let limits = limits.unwrap_or(default);
        let mut range = RangeCapture::new(limits, Cursor::default(), Some(Patterns::defaults()));
        range.feed_from(file, u64::MAX)?;
        Ok(range)
    };
    let range = read().map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(range.finish("", Direction::Both, &CliSteps, Some(path)).0)
}

/// The preview of a run whose output is gone: its counts, and a notice that says so.
pub(super) fn gone_preview(row: &RunRow) -> Preview {
    let total_lines = row.total_lines.unwrap_or(0);
    let total_bytes = row.total_bytes.unwrap_or(0);
    let content = format!(
        "[spillway: the output of run {} is gone (its spill file was deleted or lost); its record remains]\n",
        row.id
    );
    Preview {
        truncated: total_bytes > 0,
        spill_path: row.spill_path.clone(),
        total_bytes,
        shown: Vec::new(),
        omitted_lines: total_lines,
        ..Preview::whole(content, total_lines)
    }
}

pub(super) fn exit_of_row(row: &RunRow, preview: Preview) -> Event {
    let ended_at = row.ended_at.unwrap_or(row.started_at);
    let duration_ms = (ended_at - row.started_at).num_milliseconds().max(0) as u64;
    Event::Exit(Box::new(ExitEvent {
        id: row.id.clone(),
        status: row.status,
        exit_code: row.exit_code,
        signal: row.signal,
        duration_ms,
        started_at: wire_time(row.started_at),
        ended_at: wire_time(ended_at),
        first_line: None,
        stopped: Vec::new(),
        limits_hit: Vec::new(),
        preview,
    }))
}
