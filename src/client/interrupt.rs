//! Ctrl-C at `spillway run` stops the command, as `timeout(1)`, `ssh -t` or `docker run` do.
//!
//! The command runs in the daemon, in a session of its own, so the terminal's SIGINT reaches
//! only this client. The client catches SIGINT, SIGTERM and SIGHUP and forwards each, once
//! the run's id is known (its `started` event), as a `kill` request with the same signal: the
//! daemon sends it to the run's process group and SIGKILL after its kill grace if the command
//! has not exited. The client goes on reading its run and ends as the run ends, with its exit
//! code (130 for SIGINT). A second signal kills the run at once (SIGKILL); a third leaves
//! without waiting, exit code 130.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};

use nix::sys::signal::Signal;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGWINCH};
use signal_hook::iterator::{Handle, Signals};

use crate::client::calls;
use crate::client::exit::EXIT_INTERRUPTED;
use crate::client::{Connection, Endpoint};
use crate::protocol::{Event, KillRequest, KillSignal, ResizeRequest, RunId};
use crate::sync::lock;

/// Forwards the signals this client gets to its run, for as long as it lives.
pub(crate) struct Forwarder {
    state: Arc<Mutex<State>>,
    endpoint: Endpoint,
    handle: Option<Handle>,
    /// The signals caught, and whether to follow the terminal's size, until
    /// [`Forwarder::watch`] hands them to the thread that reads them.
    waiting: Option<(Signals, bool)>,
}

#[derive(Default)]
struct State {
    /// The run's id, once `started` has come.
    id: Option<RunId>,
    /// Signals caught so far.
    caught: Vec<Signal>,
    /// How many of them were forwarded.
    forwarded: usize,
}

impl Forwarder {
    /// Starts catching SIGINT, SIGTERM and SIGHUP for the run about to be requested; if they
    /// cannot be caught, the client keeps their default action (as before). What is caught is
    /// acted on once [`Forwarder::watch`] has started the thread that reads it.
    ///
    /// With `follow_size`, the run's terminal is given this one's size each time it changes
    /// (SIGWINCH).
    pub(crate) fn start(endpoint: &Endpoint, follow_size: bool) -> Forwarder {
        let signals = Signals::new([SIGINT, SIGTERM, SIGHUP, SIGWINCH]).ok();
        Forwarder {
            state: Arc::new(Mutex::new(State::default())),
            endpoint: endpoint.clone(),
            handle: signals.as_ref().map(Signals::handle),
            waiting: signals.map(|signals| (signals, follow_size)),
        }
    }

    /// Starts the thread that acts on the signals caught (those caught before wait for it).
    /// Called once the run is requested: a short run's request goes out without waiting for a
    /// thread to start.
    fn watch(&mut self) {
        let Some((mut signals, follow_size)) = self.waiting.take() else {
            return;
        };
        let (state, endpoint) = (Arc::clone(&self.state), self.endpoint.clone());
        let watch = move || {
            for number in signals.forever() {
                if number == SIGWINCH {
                    resize(&lock(&state), &endpoint, follow_size);
                    continue;
                }
                let signal = Signal::try_from(number).unwrap_or(Signal::SIGINT);
                let mut state = lock(&state);
                state.caught.push(signal);
                if state.caught.len() >= 3 {
                    // The daemon may be gone: leave without waiting for the run.
                    std::process::exit(i32::from(EXIT_INTERRUPTED));
                }
                forward_pending(&mut state, &endpoint);
            }
        };
        let started = std::thread::Builder::new()
            .name("spillway-signals".into())
            .spawn(watch);
        if started.is_err() {
            // Without the thread nothing would read the signals: give them back their default.
            if let Some(handle) = self.handle.take() {
                handle.close();
            }
        }
    }

    /// Notes an event of the run: its `started` gives the id that caught signals go to.
    pub(crate) fn saw(&self, event: &Event) {
        if let Event::Started(started) = event {
            let mut state = lock(&self.state);
            state.id = Some(started.id.clone());
            forward_pending(&mut state, &self.endpoint);
        }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            handle.close();
        }
    }
}

/// Sends the run each signal caught and not forwarded yet: the first as it came, any later
/// one as SIGKILL. Each `kill` waits for the run to end, so each goes on a thread of its own.
fn forward_pending(state: &mut State, endpoint: &Endpoint) {
    let Some(id) = state.id.clone() else {
        return;
    };
    while state.forwarded < state.caught.len() {
        let signal = if state.forwarded == 0 {
            state.caught[0]
        } else {
            Signal::SIGKILL
        };
        state.forwarded += 1;
        if std::io::stderr().is_terminal() {
            let next = if signal == Signal::SIGKILL {
                "Ctrl-C again leaves without waiting".to_string()
            } else {
                "Ctrl-C again kills it now".to_string()
            };
            eprintln!("\r\n[spillway: sent {signal} to run {id}; {next}]");
        }
        let request = KillRequest {
            id: id.clone(),
            signal: Some(KillSignal(signal)),
            no_redact: false,
        };
        let endpoint = endpoint.clone();
        // The run's own connection brings its end, or says why not: this answer adds nothing.
        let _ = std::thread::Builder::new()
            .name("spillway-forward".into())
            .spawn(move || calls::kill(&endpoint, request));
    }
}

/// The size of the terminal standard output is, if it is one.
pub(crate) fn terminal_size() -> Option<(u16, u16)> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let (cols, rows) = terminal_size::terminal_size_of(std::io::stdout())?;
    (cols.0 > 0 && rows.0 > 0).then_some((cols.0, rows.0))
}

/// Gives the run's terminal this one's new size, on a thread of its own.
fn resize(state: &State, endpoint: &Endpoint, follow_size: bool) {
    let (Some(id), true, Some((cols, rows))) = (state.id.clone(), follow_size, terminal_size())
    else {
        return;
    };
    let endpoint = endpoint.clone();
    let request = ResizeRequest { id, cols, rows };
    let _ = std::thread::Builder::new()
        .name("spillway-resize".into())
        .spawn(move || calls::resize(&endpoint, request));
}

/// A run's connection, read with its signals forwarded: every front end of `run` reads its
/// events through this, so none can miss the `started` that gives the id.
pub(crate) struct RunEvents {
    connection: Connection,
    forwarder: Forwarder,
}

impl RunEvents {
    /// The run's events, once its request has gone: from now on the signals caught (since
    /// [`Forwarder::start`]) are acted on.
    pub(crate) fn new(connection: Connection, mut forwarder: Forwarder) -> RunEvents {
        forwarder.watch();
        RunEvents {
            connection,
            forwarder,
        }
    }

    pub(crate) fn next_event(&mut self) -> anyhow::Result<Event> {
        let event = self.connection.next_event()?;
        self.forwarder.saw(&event);
        Ok(event)
    }
}
