//! `follow`: a run's output as `output` events from a line on, then live (as `raw` events with
//! `raw`), then its `exit`.

use std::io;
use std::sync::Arc;

use crate::protocol::{ErrorCode, ErrorEvent, Event, FollowRequest};
use crate::storage::follow::Start;

use crate::daemon::client::{ClientWriter, Session, send};
use crate::daemon::errors::error;
use crate::daemon::output::{follow_finished, follow_live, follow_raw};
use crate::daemon::previews::recorded_exit;
use crate::daemon::runs::Found;
use crate::daemon::spill_file::spill_of;
use crate::daemon::state::Daemon;

/// `follow`: a run's output from a line on, live until it ends, then its exit.
pub(in crate::daemon) async fn apply(
    request: FollowRequest,
    daemon: &Arc<Daemon>,
    write: &mut ClientWriter,
    _session: Session<'_>,
) -> io::Result<()> {
    let from = request.from_line.unwrap_or(1);
    if from == 0 {
        let message = "from_line must be at least 1: lines are numbered from 1";
        return send(write, &Event::error(ErrorCode::BadRequest, message)).await;
    }
    let id = request.id;
    match daemon.runs.find(&id) {
        Found::Running(entry) => {
            let _delivery = daemon.delivery();
            let ended = entry.done.borrow().clone();
            if let Some(last) = ended
                && let Err(e) = check_from(&last, from)
            {
                return send(write, &Event::Error(e)).await;
            }
            let last = if request.raw {
                follow_raw(&entry, from, write).await?
            } else {
                follow_live(&entry, Start::Line(from), write).await?
            };
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
