//! A run's end: its preview annotated with what was stopped and which limits were hit, its
//! record completed in the index (tokens counted), its `exit` event published to everyone
//! waiting on it, and the run retired from the runs in flight.

use std::sync::Arc;

use tokio::sync::oneshot;

use crate::engine::{savings, tokens};
use crate::protocol::{ErrorCode, Event, ExitEvent, Preview, RunId};
use crate::storage::index::{Ending, RunEnd, RunTokens};
use crate::supervisor::Finished;

use super::recorder::{Outcome, Record};
use super::runs::RunEntry;
use super::state::Daemon;
use crate::protocol::time::wire_time;

/// Previews up to this long have their tokens counted on the runtime's thread (tens of
/// microseconds); longer ones on a blocking thread.
const INLINE_COUNT_BYTES: usize = 4096;

/// Waits for a run to end, records it, tells everyone waiting, and retires it.
pub(super) async fn watch_run(
    daemon: Arc<Daemon>,
    entry: Arc<RunEntry>,
    finished: oneshot::Receiver<Finished>,
) {
    let id = entry.id.clone();
    let last = match finished.await {
        Ok(mut finished) => {
            tracing::info!(id = %id, status = finished.status.as_str(), "run ended");
            annotate(&mut finished);
            let outcome = record_end(&daemon, &id, &finished).await;
            note_unrecorded(&mut finished, &id, &outcome);
            exit_event(id.clone(), finished)
        }
        Err(_) => Event::error(ErrorCode::Internal, format!("run {id} was lost")),
    };
    let last = Arc::new(last);
    entry.done.send_replace(Some(Arc::clone(&last)));
    daemon.retire(&entry, last);
}

/// Completes a run's record (see [`Recorder`](super::recorder::Recorder): a busy index delays it, never loses it).
/// `finished.preview` is the one clients are given (annotated), whose tokens are counted
/// here: cheap, as previews are bounded (and measured from a sample past
/// [`tokens::EXACT_MAX_BYTES`], which only a `max_bytes` over it allows), with what its
/// template folds saved ([`savings`]).
async fn record_end(daemon: &Daemon, id: &RunId, finished: &Finished) -> Outcome {
    let preview = &finished.preview;
    let output = finished.output_tokens;
    // A short preview without folds (a short run's) is counted at once: less than a hop to
    // another thread. Folds may need their lines counted, which is a blocking thread's work.
    let counted = if preview.content.len() <= INLINE_COUNT_BYTES && preview.folds.is_empty() {
        Ok(run_tokens(preview, output))
    } else {
        let preview = preview.clone();
        tokio::task::spawn_blocking(move || run_tokens(&preview, output)).await
    };
    let tokens = counted.ok();
    let ending = Ending {
        ended_at: finished.ended_at,
        status: finished.status,
        exit_code: finished.exit_code,
        signal: finished.signal,
    };
    let end = RunEnd::new(ending, &finished.preview, tokens);
    daemon.recorder.record(Record::End(id.clone(), end)).await
}

/// The tokens of a run whose output counted `output` and whose final preview is `preview`.
fn run_tokens(preview: &Preview, output: tokens::Count) -> RunTokens {
    let shown = tokens::measure(&preview.content);
    RunTokens {
        output: output.tokens,
        preview: shown.tokens,
        output_estimated: output.estimated || shown.estimated,
        folded: savings::folded_tokens(preview, output, shown.tokens, || {
            savings::spilled_output(preview)
        }),
    }
}

/// The `exit` event of a run whose preview has been [`annotate`]d.
fn exit_event(id: RunId, f: Finished) -> Event {
    let duration_ms = (f.ended_at - f.started_at).num_milliseconds().max(0) as u64;
    Event::Exit(Box::new(ExitEvent {
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
    }))
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
