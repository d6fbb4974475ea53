//! One typed call per verb: send the request, expect its answer's event, else a typed error.
//! Every front end (the CLI, the live-run commands, the MCP server) asks the daemon through
//! these, so the exchange is written once and each caller handles only what it shows.

use crate::client::{Connection, Endpoint};
use crate::protocol::{
    ErrorEvent, Event, ExitEvent, GrepEvent, GrepRequest, HistoryEvent, HistoryRequest,
    KillRequest, PsEvent, PsRequest, PurgeReport, PurgeRequest, Request, ResizeRequest,
    ResizedEvent, RunRequest, RunningEvent, SendRequest, SentEvent, ShowEvent, ShowRequest,
    StatsEvent, WaitRequest,
};

/// Why a call got no answer of the kind it asked for.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No daemon could be reached (nor started).
    #[error("{0:#}")]
    Unreachable(anyhow::Error),
    /// The request could not be sent (a daemon that hung up first may have said why).
    #[error("{0:#}")]
    Send(anyhow::Error),
    /// The connection ended, or carried garbage, before the answer.
    #[error("lost the daemon: {0:#}")]
    Lost(anyhow::Error),
    /// The daemon answered with an error.
    #[error("{}", .0.message)]
    Refused(ErrorEvent),
    /// The daemon answered with another event than the request's.
    #[error("unexpected answer from the daemon: {0}")]
    Unexpected(String),
}

/// How a run stands when a call about it returns: still going (a preview so far) or ended.
#[derive(Debug, Clone)]
pub enum RunAnswer {
    Running(Box<RunningEvent>),
    Exit(Box<ExitEvent>),
}

/// Sends `request` and returns the first event that is not a run's progress (`started` and
/// streamed output only announce what comes), made a `T` by `pick`.
fn call<T>(
    endpoint: &Endpoint,
    request: &Request,
    pick: impl FnOnce(Event) -> Result<T, Box<Event>>,
) -> Result<T, CallError> {
    let mut connection = Connection::open(endpoint).map_err(CallError::Unreachable)?;
    connection.send(request).map_err(CallError::Send)?;
    loop {
        match connection.next_event().map_err(CallError::Lost)? {
            Event::Started(_) | Event::Output(_) | Event::Raw(_) | Event::Lagged(_) => {}
            Event::Error(error) => return Err(CallError::Refused(error)),
            event => {
                return pick(event)
                    .map_err(|other| CallError::Unexpected(other.to_line().trim_end().into()));
            }
        }
    }
}

/// A `pick` for [`call`] that takes the one event `$variant` and gives back any other.
macro_rules! expect {
    ($variant:ident) => {
        |event| match event {
            Event::$variant(answer) => Ok(answer),
            other => Err(Box::new(other)),
        }
    };
}

fn run_answer(event: Event) -> Result<RunAnswer, Box<Event>> {
    match event {
        Event::Running(running) => Ok(RunAnswer::Running(running)),
        Event::Exit(exit) => Ok(RunAnswer::Exit(exit)),
        other => Err(Box::new(other)),
    }
}

/// `run`, answered once: the exit, or a preview when the request yields first.
pub fn run(endpoint: &Endpoint, request: RunRequest) -> Result<RunAnswer, CallError> {
    call(endpoint, &Request::Run(Box::new(request)), run_answer)
}

/// `wait`: the exit, or a preview when `yield_ms` passes first.
pub fn wait(endpoint: &Endpoint, request: WaitRequest) -> Result<RunAnswer, CallError> {
    call(endpoint, &Request::Wait(request), run_answer)
}

/// `kill`: the run's exit once it has ended.
pub fn kill(endpoint: &Endpoint, request: KillRequest) -> Result<Box<ExitEvent>, CallError> {
    call(endpoint, &Request::Kill(request), expect!(Exit))
}

/// `resize`: the run's terminal's new size.
pub fn resize(endpoint: &Endpoint, request: ResizeRequest) -> Result<ResizedEvent, CallError> {
    call(endpoint, &Request::Resize(request), expect!(Resized))
}

/// `send`: what was typed.
pub fn send(endpoint: &Endpoint, request: SendRequest) -> Result<SentEvent, CallError> {
    call(endpoint, &Request::Send(request), expect!(Sent))
}

/// `ps`: the runs going on.
pub fn ps(endpoint: &Endpoint, request: PsRequest) -> Result<PsEvent, CallError> {
    call(endpoint, &Request::Ps(request), expect!(Ps))
}

/// `history`: runs, newest first.
pub fn history(endpoint: &Endpoint, request: HistoryRequest) -> Result<HistoryEvent, CallError> {
    call(endpoint, &Request::History(request), expect!(History))
}

/// `show`: a page of a run's output.
pub fn show(endpoint: &Endpoint, request: ShowRequest) -> Result<Box<ShowEvent>, CallError> {
    call(endpoint, &Request::Show(request), expect!(Show))
}

/// `grep`: matches in a run's output.
pub fn grep(endpoint: &Endpoint, request: GrepRequest) -> Result<Box<GrepEvent>, CallError> {
    call(endpoint, &Request::Grep(request), expect!(Grep))
}

/// `stats`: counts and disk use.
pub fn stats(endpoint: &Endpoint) -> Result<StatsEvent, CallError> {
    call(endpoint, &Request::Stats, expect!(Stats))
}

/// `purge`: what the purge did, or would do.
pub fn purge(endpoint: &Endpoint, request: PurgeRequest) -> Result<PurgeReport, CallError> {
    call(endpoint, &Request::Purge(request), expect!(Purge))
}
