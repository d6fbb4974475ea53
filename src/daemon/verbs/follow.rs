//! `follow`: a run's output as `output` events from a line on, then live, then its `exit`.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::protocol::{ErrorCode, ErrorEvent, Event, FollowRequest, OutputEvent};
use crate::storage::follow::{Start, Tail};

use super::previews::recorded_exit;
use super::runs::{Found, RunEntry, error};
use super::{ClientWriter, Daemon, send, spill_of};

/// How often a follower that is ahead of the spill file (the writer has not caught up yet)
/// looks again.
const FILE_LAG_POLL: Duration = Duration::from_millis(15);

/// `follow`: a run's output from a line on, live until it ends, then its exit.
pub(super) async fn follow(
    request: FollowRequest,
    daemon: &Daemon,
    write: &mut ClientWriter,
) -> io::Result<()> {
    let from = request.from_line.unwrap_or(1);
    if from == 0 {
        let message = "from_line must be at least 1: lines are numbered from 1";
        return send(write, &Event::error(ErrorCode::BadRequest, message)).await;
    }
    let id = request.id;
    match daemon.find(&id) {
        Found::Running(entry) => {
            let _delivery = daemon.delivery();
            let ended = entry.done.borrow().clone();
            if let Some(last) = ended
                && let Err(e) = check_from(&last, from)
            {
                return send(write, &Event::Error(e)).await;
            }
            let last = follow_live(&entry, Start::Line(from), write).await?;
            send(write, &last).await
        }
        Found::Recent {
            spill_path, last, ..
        } => {
            if let Err(e) = check_from(&last, from) {
                return send(write, &Event::Error(e)).await;
            }
            if let Some(path) = spill_path {
                follow_finished(&path, from, write).await?;
            }
            send(write, &last).await
        }
        Found::Recorded => {
            let last = match recorded_exit(id.clone(), daemon, None).await {
                Ok(last) => last,
                Err(e) => return send(write, &Event::Error(e)).await,
            };
            if let Err(e) = check_from(&last, from) {
                return send(write, &Event::Error(e)).await;
            }
            match spill_of(id, daemon).await {
                Ok((_, path)) => follow_finished(&path, from, write).await?,
                Err(e) => return send(write, &Event::Error(e)).await,
            }
            send(write, &last).await
        }
    }
}

/// A finished run's output has `total_lines`: a follower may start at most just past them.
fn check_from(last: &Event, from: u64) -> Result<(), ErrorEvent> {
    match last {
        Event::Exit(exit) if from > exit.preview.total_lines + 1 => Err(error(
            ErrorCode::BadRequest,
            format!(
                "from_line {from} is past the end of run {}: it has {} lines",
                exit.id, exit.preview.total_lines
            ),
        )),
        _ => Ok(()),
    }
}

/// Opens a tail of `path` off the runtime.
pub(super) async fn open_tail(path: PathBuf, start: Start) -> io::Result<Tail> {
    tokio::task::spawn_blocking(move || Tail::open(&path, start))
        .await
        .map_err(io::Error::other)?
}

/// Reads what the file has next, off the runtime; returns the tail and the bytes read.
async fn read_tail(mut tail: Tail, last: bool) -> io::Result<(Tail, usize, Vec<OutputEvent>)> {
    tokio::task::spawn_blocking(move || {
        let n = tail.read_more()?;
        let events = tail.events(last && n == 0);
        Ok((tail, n, events))
    })
    .await
    .map_err(io::Error::other)?
}

/// Sends a finished spill file from line `from` to its end.
async fn follow_finished(path: &Path, from: u64, write: &mut ClientWriter) -> io::Result<()> {
    let Ok(mut tail) = open_tail(path.to_path_buf(), Start::Line(from)).await else {
        return Ok(()); // The exit event's notice says what became of the output.
    };
    loop {
        let (next, n, events) = read_tail(tail, true).await?;
        tail = next;
        for event in events {
            send(write, &Event::Output(event)).await?;
        }
        if n == 0 {
            return Ok(());
        }
    }
}

/// Sends a run's output from `start` as it is written, until the run has ended and the spill
/// has been read to its end; returns the run's last event.
pub(super) async fn follow_live(
    entry: &RunEntry,
    start: Start,
    write: &mut ClientWriter,
) -> io::Result<Arc<Event>> {
    let Some(path) = entry.spill_path().map(Path::to_path_buf) else {
        // No spill file: there is nothing to follow, only the end to wait for.
        return Ok(entry.finished().await);
    };
    let mut committed = entry.live.committed();
    let mut done = entry.done.subscribe();
    let mut tail = match open_tail(path, start).await {
        Ok(tail) => tail,
        Err(_) => return Ok(entry.finished().await),
    };
    loop {
        // Looked at before reading: once the run has ended the file is complete, so a read
        // that then finds its end has seen everything.
        let ended = done.borrow_and_update().clone();
        let (next, n, events) = read_tail(tail, ended.is_some()).await?;
        tail = next;
        for event in events {
            send(write, &Event::Output(event)).await?;
        }
        if n > 0 {
            continue;
        }
        if let Some(last) = ended {
            return Ok(last);
        }
        let written = *committed.borrow_and_update();
        if tail.pos() < written {
            // The spill writer has the bytes and is about to write them.
            tokio::select! {
                () = tokio::time::sleep(FILE_LAG_POLL) => {}
                _ = done.changed() => {}
            }
        } else {
            tokio::select! {
                _ = committed.changed() => {}
                _ = done.changed() => {}
            }
        }
    }
}
