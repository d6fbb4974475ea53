//! One file per verb of the protocol, each answering its request with the same handler:
//!
//! ```text
//! async fn apply(request, &Arc<Daemon>, &mut ClientWriter, Session) -> io::Result<()>
//! ```
//!
//! (`request` is `()` for a verb whose request carries nothing). A one-answer verb writes one
//! event, its answer or the error that stood in its way; a streaming verb (`run`, `follow`)
//! writes several. Every event goes through the writer, which redacts it and drops a client
//! that stops reading; the `Err` a handler returns means only that the client can no longer
//! be written to. The verbs reach the daemon through its state
//! ([`Daemon`](super::state::Daemon)) and small helpers beside it, never through the dispatch
//! or the connection that called them.

pub(super) mod follow;
pub(super) mod grep;
pub(super) mod history;
pub(super) mod kill;
pub(super) mod ping;
pub(super) mod ps;
pub(super) mod purge;
pub(super) mod resize;
pub(super) mod run;
pub(super) mod send;
pub(super) mod show;
pub(super) mod shutdown;
pub(super) mod stats;
pub(super) mod status;
pub(super) mod wait;
