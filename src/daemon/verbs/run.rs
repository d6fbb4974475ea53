//! `run`: resolves the request, launches the command, registers it, and streams its events
//! (`started`, then `running`, `output` or `raw` as asked, then `exit`); a task of its own
//! watches each run to its end.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::sync::watch;

use crate::daemon::readiness::Until;
use crate::engine::capture::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, Limits};
use crate::engine::highlight::Patterns;
use crate::engine::normalise::{DEFAULT_COLS, DEFAULT_ROWS};
use crate::protocol::{ErrorCode, ErrorEvent, Event, RunId, RunRequest, StartedEvent, StreamMode};
use crate::storage::follow::Start;
use crate::storage::index::NewRun;
use crate::supervisor;
use crate::supervisor::limits::Resources;
use crate::supervisor::{LaunchError, RunSpec, StopReason, TtySize, child_env};

use crate::daemon::client::{ClientWriter, Session, client_gone, hung_up, send};
use crate::daemon::ending::watch_run;
use crate::daemon::errors::{PATTERN_ECHO_BYTES, bad_request, cut_message};
use crate::daemon::output::{follow_live_upto, stream_raw};
use crate::daemon::previews::running_event;
use crate::daemon::recorder::Record;
use crate::daemon::runs::{Cursors, RunEntry};
use crate::daemon::state::Daemon;
use crate::protocol::time::wire_time;

/// Starts a run and answers for it: `started`, then its `exit`, a `running` preview after
/// `yield_ms`, or its output streamed and then its `exit`.
pub(in crate::daemon) async fn apply(
    request: RunRequest,
    daemon: &Arc<Daemon>,
    write: &mut ClientWriter,
    session: Session<'_>,
) -> io::Result<()> {
    let Session { read, owned, fds } = session;
    if daemon.stopping.load(Ordering::SeqCst) {
        let message = "the daemon is shutting down and takes no new runs";
        return send(write, &Event::error(ErrorCode::ShuttingDown, message)).await;
    }
    let id = match daemon.fresh_run_id().await {
        Ok(id) => id,
        Err(error) => return send(write, &Event::Error(error)).await,
    };
    let yield_after = request.yield_ms.map(Duration::from_millis);
    let until = match Until::new(request.until.as_deref(), request.until_port) {
        Ok(until) => until,
        Err(message) => return send(write, &Event::error(ErrorCode::BadPattern, message)).await,
    };
    let kill_on_disconnect = request.kill_on_disconnect.unwrap_or(false);
    let stream = request.stream;
    let stream_max_bytes = request.stream_max_bytes;
    let (argv, shell, tags) = (
        request.argv.clone(),
        request.shell.clone(),
        request.tags.clone(),
    );
    let stdin = match passed_stdin(request.stdin_fd, fds) {
        Ok(stdin) => stdin,
        Err(error) => return send(write, &Event::Error(error)).await,
    };
    let spec = match run_spec(id.clone(), request, daemon) {
        Ok(spec) => RunSpec { stdin, ..spec },
        Err(error) => return send(write, &Event::Error(error)).await,
    };
    let cwd = spec.cwd.to_string_lossy().into_owned();
    let tty = spec.tty.is_some();
    let launched = match supervisor::launch(spec, &daemon.data_dir).await {
        Ok(launched) => launched,
        Err(e) => return send(write, &launch_error(&e)).await,
    };
    let spill_path = launched
        .spill_path
        .as_ref()
        .map(|p| p.to_string_lossy().into_owned());
    let entry = Arc::new(RunEntry {
        id: id.clone(),
        pid: launched.pid,
        started_at: launched.started_at,
        argv: argv.clone(),
        shell: shell.clone(),
        cwd: cwd.clone(),
        tags: tags.clone(),
        tty,
        control: launched.control.clone(),
        live: Arc::clone(&launched.live),
        done: watch::channel(None).0,
        cursors: Cursors::default(),
    });
    daemon.register(Arc::clone(&entry));
    let record = NewRun {
        id: id.clone(),
        argv,
        shell,
        cwd,
        tags,
        started_at: launched.started_at,
        spill_path: spill_path.clone(),
        pid: Some(launched.pid),
        owner_pid: std::process::id(),
    };
    daemon.recorder.record(Record::Start(record)).await;
    tracing::info!(id = %id, pid = launched.pid, "run started");
    tokio::spawn(watch_run(
        Arc::clone(daemon),
        Arc::clone(&entry),
        launched.finished,
    ));
    let _delivery = daemon.delivery();
    let started = Event::Started(StartedEvent {
        id: id.clone(),
        pid: launched.pid,
        spill_path,
        started_at: wire_time(launched.started_at),
    });
    let gone = async {
        if kill_on_disconnect {
            client_gone(read).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    let answer = async {
        send(write, &started).await?;
        // The request was checked when parsed: it asks for an early answer or a stream, not
        // both.
        match (yield_after.is_some() || until.is_some(), stream) {
            (true, None) => {
                let ready = async {
                    match &until {
                        Some(until) => Some(
                            until
                                .ready(entry.spill_path(), 1, entry.live.committed(), {
                                    let run = entry.control.clone();
                                    move |port| run.listens_on(port)
                                })
                                .await,
                        ),
                        None => std::future::pending().await,
                    }
                };
                let after = async {
                    match yield_after {
                        Some(after) => tokio::time::sleep(after).await,
                        None => std::future::pending().await,
                    }
                };
                let ready = tokio::select! {
                    last = entry.finished() => return send(write, &last).await,
                    () = after => None,
                    ready = ready => ready,
                };
                let event = running_event(&entry, false, "", ready, None).await;
                send(write, &event).await?;
                if kill_on_disconnect {
                    owned.push(Arc::downgrade(&entry));
                }
                Ok(())
            }
            (_, Some(StreamMode::Text)) => {
                let most = stream_max_bytes.unwrap_or(u64::MAX);
                let last = follow_live_upto(&entry, Start::Line(1), most, write).await?;
                send(write, &last).await
            }
            (_, Some(StreamMode::Raw)) => {
                let last = stream_raw(&entry, write).await?;
                send(write, &last).await
            }
            (false, None) => {
                let last = entry.finished().await;
                send(write, &last).await
            }
        }
    };
    let result = tokio::select! {
        result = answer => result,
        () = gone => Err(hung_up()),
    };
    if result.is_err() && kill_on_disconnect && !entry.is_done() {
        tracing::info!(id = %entry.id, "client gone: stopping its run (kill_on_disconnect)");
        entry.stop(StopReason::Kill(Signal::SIGHUP));
    }
    result
}

/// The command's standard input when the request asks for the descriptor sent with it
/// (`stdin_fd`): the first one that came; any other is closed. `None` when not asked for.
fn passed_stdin(
    asked: bool,
    fds: Vec<std::os::fd::OwnedFd>,
) -> Result<Option<std::os::fd::OwnedFd>, ErrorEvent> {
    let first = fds.into_iter().next();
    match (asked, first) {
        (false, _) => Ok(None),
        (true, Some(fd)) => Ok(Some(fd)),
        (true, None) => Err(bad_request(
            "stdin_fd is set but no file descriptor came with the request line (send it with \
             SCM_RIGHTS on the line's first byte)"
                .into(),
        )),
    }
}

/// Terminal type a run gets unless it asks otherwise (its size: the normaliser's defaults,
/// [`DEFAULT_COLS`] x [`DEFAULT_ROWS`], which its screen model assumes when told nothing).
const DEFAULT_TERM: &str = "xterm-256color";

fn launch_error(e: &LaunchError) -> Event {
    let code = match e {
        LaunchError::BadCwd { .. } => ErrorCode::BadCwd,
        LaunchError::Spawn { .. } => ErrorCode::SpawnFailed,
        LaunchError::Terminal { .. } | LaunchError::Internal { .. } => ErrorCode::Internal,
    };
    Event::error(code, e.to_string())
}

/// Resolves a request (checked when parsed: `RunRequest::check`) into a run specification,
/// with the daemon's defaults, held to the daemon's cap and to the engine's own bounds.
fn run_spec(id: RunId, r: RunRequest, daemon: &Daemon) -> Result<RunSpec, ErrorEvent> {
    let bad = bad_request;
    let limits = Limits::new(
        r.max_lines.unwrap_or(DEFAULT_MAX_LINES as u64),
        r.max_bytes.unwrap_or(DEFAULT_MAX_BYTES as u64),
    )
    .map_err(|e| bad(e.to_string()))?;
    let timeout = match r.timeout_ms {
        // As `timeout(1)`'s 0: no timeout at all, not even the daemon's default.
        Some(0) => None,
        Some(ms) => Some(Duration::from_millis(ms)),
        None => daemon.default_timeout,
    };
    let cwd = match &r.cwd {
        Some(cwd) => PathBuf::from(cwd),
        None => std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from),
    };
    let tty = r.tty.unwrap_or(true).then(|| TtySize {
        cols: r.cols.unwrap_or(DEFAULT_COLS),
        rows: r.rows.unwrap_or(DEFAULT_ROWS),
    });
    let term = tty
        .as_ref()
        .map(|_| r.term.as_deref().unwrap_or(DEFAULT_TERM));
    let argv = r.program().map_err(bad)?;
    let base: BTreeMap<String, String> = r.base_env.unwrap_or_else(|| std::env::vars().collect());
    let max_spill = match r.max_spill {
        Some(n) if n > daemon.max_spill => {
            return Err(bad(format!(
                "max_spill {n} is over this daemon's cap of {} bytes (its --max-spill)",
                daemon.max_spill
            )));
        }
        Some(n) => n,
        None => daemon.max_spill,
    };
    let max_tokens = r
        .max_tokens
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    let resources = Resources {
        memory: r.memory,
        pids: r.pids,
        cpu: r.cpu,
    };
    resources.check().map_err(bad)?;
    let highlights = if r.no_highlights.unwrap_or(false) {
        None
    } else {
        Some(Patterns::with_extra(&r.highlight).map_err(|e| ErrorEvent {
            code: ErrorCode::BadPattern,
            message: cut_message(&e.to_string(), 4 * PATTERN_ECHO_BYTES),
        })?)
    };
    Ok(RunSpec {
        id,
        argv,
        cwd,
        env: child_env(base, r.pager_safe.unwrap_or(true), term, &r.env),
        tty,
        timeout,
        kill_grace: daemon.kill_grace,
        limits,
        direction: r.direction.unwrap_or_default(),
        raw: r.raw.unwrap_or(false),
        raw_stream: r.stream == Some(StreamMode::Raw),
        highlights,
        max_tokens,
        compact: r.compact.unwrap_or(true),
        max_spill,
        cgroups: daemon.cgroups.clone(),
        resources: resources.or(daemon.default_resources),
        stdin: None,
        caller: r.caller.clone(),
    })
}
