//! A run's end: its preview annotated with what was stopped and which limits were hit, its
//! end recorded in the index, its `exit` event published to everyone waiting on it, the run
//! retired from the runs in flight, and then its tokens counted and recorded
//! ([`super::token_counts`]).

use std::sync::Arc;

use tokio::sync::oneshot;

use crate::engine::capture::OutputSource;
use crate::engine::savings;
use crate::protocol::{ErrorCode, Event, ExitEvent, Preview, RunId};
use crate::storage::index::{Ending, RunEnd};
use crate::supervisor::Finished;

use super::recorder::{Outcome, Record};
use super::runs::RunEntry;
use super::state::Daemon;
use crate::protocol::time::wire_time;

/// Waits for a run to end, records it, tells everyone waiting, retires it, and counts its
/// tokens.
pub(super) async fn watch_run(
    daemon: Arc<Daemon>,
    entry: Arc<RunEntry>,
    finished: oneshot::Receiver<Finished>,
) {
    let id = entry.id.clone();
    let (last, counted) = match finished.await {
        Ok(mut finished) => {
            tracing::info!(id = %id, status = finished.status.as_str(), "run ended");
            annotate(&mut finished);
            let outcome = record_end(&daemon, &id, &finished).await;
            note_unrecorded(&mut finished, &id, &outcome);
            // The count needs the preview the clients were given, and starts after they have it.
            let preview = finished.preview.clone();
            let (exit, output) = exit_event(id.clone(), finished);
            (exit, Some((preview, output)))
        }
        Err(_) => (
            Event::error(ErrorCode::Internal, format!("run {id} was lost")),
            None,
        ),
    };
    let last = Arc::new(last);
    // Noted before the run is retired: whoever then sees it ended waits for its count.
    let counting = daemon.token_counts.start();
    entry.done.send_replace(Some(Arc::clone(&last)));
    daemon.retire(&entry, Arc::clone(&last));
    if let Some((preview, output)) = counted {
        record_tokens(&daemon, &id, preview, output).await;
    }
    drop(counting);
}

/// Records how a run ended (see [`Recorder`](super::recorder::Recorder): a busy index delays
/// it, never loses it), its tokens left for [`record_tokens`].
async fn record_end(daemon: &Daemon, id: &RunId, finished: &Finished) -> Outcome {
    let ending = Ending {
        ended_at: finished.ended_at,
        status: finished.status,
        exit_code: finished.exit_code,
        signal: finished.signal,
    };
    let end = RunEnd::new(ending, &finished.preview, None);
    daemon.recorder.record(Record::End(id.clone(), end)).await
}

/// Counts the tokens of a run's `output` (read back from its spill when it is there) and of
/// the preview its clients were given in its `exit` (annotated), with what its template folds
/// saved ([`savings`]), on a blocking thread, and records them.
async fn record_tokens(daemon: &Daemon, id: &RunId, preview: Preview, output: OutputSource) {
    let counted =
        tokio::task::spawn_blocking(move || savings::run_tokens(&preview, output.into_text()))
            .await;
    let Ok(tokens) = counted else {
        tracing::warn!(id = %id, "counting the run's tokens failed");
        return;
    };
    // Not bounded by a timer (see `Recorder::written`): `history` and `stats` bound their
    // wait for it (`TokenCounts::settled`).
    let outcome = daemon
        .recorder
        .written(Record::Tokens(id.clone(), tokens))
        .await;
    if let Outcome::Unrecorded(why) | Outcome::EndUnrecorded(why) = outcome {
        tracing::debug!(id = %id, "the run's tokens are not in the index: {why}");
    }
}

/// The `exit` event of a run whose preview has been [`annotate`]d, and what is left to count
/// of its output.
fn exit_event(id: RunId, f: Finished) -> (Event, OutputSource) {
    let duration_ms = (f.ended_at - f.started_at).num_milliseconds().max(0) as u64;
    let exit = Event::Exit(Box::new(ExitEvent {
        id,
        status: f.status,
        exit_code: f.exit_code,
        signal: f.signal,
        duration_ms,
        started_at: wire_time(f.started_at),
        ended_at: wire_time(f.ended_at),
        first_line: None,
        stopped: f.stopped,
        limits_hit: f.limits_hit,
        preview: f.preview,
    }));
    (exit, f.output)
}

/// Tells the model, in the preview's notice, what was stopped and which limits were hit.
fn annotate(f: &mut Finished) {
    crate::supervisor::leftovers::annotate(
        &mut f.preview,
        &f.stopped,
        &f.limits_hit,
        f.limits_note.as_deref(),
    );
}

/// Tells the client, in one line after the preview's notice, that its run is not (wholly) in
/// the run index, why, and what that means: the result it is given is all it will get from
/// `history`. Nothing is said of a run that was recorded.
fn note_unrecorded(f: &mut Finished, id: &RunId, outcome: &Outcome) {
    let line = match outcome {
        Outcome::Written | Outcome::Pending => return,
        Outcome::Unrecorded(why) => format!(
            "[spillway: run {id} was not recorded in the run index, so `spillway history` will \
             not list it: {why}]"
        ),
        Outcome::EndUnrecorded(why) => format!(
            "[spillway: the end of run {id} was not recorded in the run index, so `spillway \
             history` shows it as running until a later daemon marks it interrupted: {why}]"
        ),
    };
    crate::supervisor::leftovers::annotate(&mut f.preview, &[], &[], Some(&line));
}
