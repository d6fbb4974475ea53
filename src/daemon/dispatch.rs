//! Hands each request to its verb: one `match` over [`Request`] with no catch-all arm, so a new
//! request does not compile until it has a handler.
//!
//! Every verb has the same handler, `apply(request, &Arc<Daemon>, &mut ClientWriter, Session)
//! -> io::Result<()>` (a verb whose request carries nothing takes `()`): it writes its answer
//! through the writer, one event or a stream of them, and fails only when the client can no
//! longer be written to.

use std::io;
use std::sync::Arc;

use crate::protocol::Request;

use super::client::{ClientWriter, Session};
use super::state::Daemon;
use super::verbs::{
    follow, grep, history, kill, ping, ps, purge, resize, run, send, show, shutdown, stats, status,
    wait,
};

/// Answers `request` with its verb.
pub(super) async fn dispatch(
    request: Request,
    daemon: &Arc<Daemon>,
    write: &mut ClientWriter,
    session: Session<'_>,
) -> io::Result<()> {
    match request {
        Request::Run(request) => run::apply(*request, daemon, write, session).await,
        Request::Ping => ping::apply((), daemon, write, session).await,
        Request::History(request) => history::apply(request, daemon, write, session).await,
        Request::Show(request) => show::apply(request, daemon, write, session).await,
        Request::Grep(request) => grep::apply(request, daemon, write, session).await,
        Request::Stats => stats::apply((), daemon, write, session).await,
        Request::Purge(request) => purge::apply(request, daemon, write, session).await,
        Request::Wait(request) => wait::apply(request, daemon, write, session).await,
        Request::Send(request) => send::apply(request, daemon, write, session).await,
        Request::Follow(request) => follow::apply(request, daemon, write, session).await,
        Request::Ps(request) => ps::apply(request, daemon, write, session).await,
        Request::Kill(request) => kill::apply(request, daemon, write, session).await,
        Request::Resize(request) => resize::apply(request, daemon, write, session).await,
        Request::Status => status::apply((), daemon, write, session).await,
        Request::Shutdown => shutdown::apply((), daemon, write, session).await,
    }
}
