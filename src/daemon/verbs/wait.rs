//! `wait`: the next preview of a running command, or its `exit`, also for a run that ended a
//! while ago (from the recent runs, else the index and the spill).

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::daemon::readiness::Until;
use crate::engine::capture::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, Limits};
use crate::protocol::{ErrorCode, ErrorEvent, Event, WaitRequest};
use crate::sync::lock;

use crate::daemon::client::{ClientWriter, Session, reply};
use crate::daemon::errors::error;
use crate::daemon::previews::{exit_for, recorded_exit, running_event};
use crate::daemon::runs::Found;
use crate::daemon::state::Daemon;

/// Answers `wait` with [`wait`]'s event, or the error that stood in its way.
pub(in crate::daemon) async fn apply(
    request: WaitRequest,
    daemon: &Arc<Daemon>,
    write: &mut ClientWriter,
    _session: Session<'_>,
) -> io::Result<()> {
    reply(write, wait(request, daemon).await).await
}

/// `wait`: the next preview of a running command, or its exit.
async fn wait(request: WaitRequest, daemon: &Daemon) -> Result<Event, ErrorEvent> {
    if request.yield_ms == Some(0) {
        return Err(error(
            ErrorCode::BadRequest,
            "yield_ms must be at least 1".into(),
        ));
    }
    let limits = match (request.max_lines, request.max_bytes) {
        (None, None) => None,
        (lines, bytes) => Some(
            Limits::new(
                lines.unwrap_or(DEFAULT_MAX_LINES as u64),
                bytes.unwrap_or(DEFAULT_MAX_BYTES as u64),
            )
            .map_err(|e| error(ErrorCode::BadRequest, e.to_string()))?,
        ),
    };
    let caller = request.caller.unwrap_or_default();
    let until = Until::new(request.until.as_deref(), request.until_port)
        .map_err(|message| error(ErrorCode::BadPattern, message))?;
    match daemon.runs.find(&request.id) {
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
                        let run = entry.control.clone();
                        until
                            .ready(entry.spill_path(), from_line, committed, move |port| {
                                run.listens_on(port)
                            })
                            .await
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
                    let asked = (request.new, caller.as_str());
                    exit_for(last, spill, &entry.cursors, asked, shape, limits).await
                }
                None => running_event(&entry, request.new, &caller, ready, limits).await,
            })
        }
        Found::Recent {
            spill_path,
            shape,
            last,
            cursors,
        } => {
            let asked = (request.new, caller.as_str());
            Ok(exit_for(last, spill_path, &cursors, asked, shape, limits).await)
        }
        Found::Recorded => recorded_exit(request.id, daemon, limits).await,
    }
}
