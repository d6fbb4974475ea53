//! The client side of the socket: connect (starting a daemon when none answers), send one
//! request, read its events.
//!
//! A daemon started here is the same binary, detached into its own process group, with the same
//! socket and data directory and `--idle-exit`, so it goes away by itself after a quiet period.
//! Two clients racing to start one both succeed: the daemons' socket lock lets exactly one
//! serve, and each client waits for the socket to answer.

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::protocol::Event;
use crate::spill::DataDir;

/// How long a daemon started on demand may take to answer.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Quiet period after which a daemon started on demand exits.
pub const AUTOSTART_IDLE_EXIT: &str = "15m";

/// Where to find (or start) the daemon.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub socket: PathBuf,
    pub data_dir: PathBuf,
}

/// A connection to the daemon.
pub struct Connection {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Connection {
    /// Connects to the daemon, starting one if nobody answers on the socket.
    pub fn open(endpoint: &Endpoint) -> Result<Connection> {
        let stream = match UnixStream::connect(&endpoint.socket) {
            Ok(stream) => stream,
            Err(e) if is_absent(&e) => start_daemon(endpoint)?,
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "cannot connect to the daemon at {}",
                        endpoint.socket.display()
                    )
                });
            }
        };
        let writer = stream
            .try_clone()
            .context("cannot clone the daemon connection")?;
        Ok(Connection {
            reader: BufReader::new(stream),
            writer,
        })
    }

    /// Sends one request line. A daemon that hung up first may have said why (a refusal);
    /// either way the error carries no broken pipe, which the CLI would take for a closed
    /// stdout and so for success.
    pub fn send(&mut self, line: &str) -> Result<()> {
        let Err(e) = self.writer.write_all(line.as_bytes()) else {
            return Ok(());
        };
        match self.next_event() {
            Ok(Event::Error(error)) => bail!("{}", error.message),
            _ => bail!("cannot send the request to the daemon: {e}"),
        }
    }

    /// The next event; an error if the daemon closed the connection or sent garbage.
    pub fn next_event(&mut self) -> Result<Event> {
        let mut line = String::new();
        let n = self
            .reader
            .read_line(&mut line)
            .context("cannot read from the daemon")?;
        if n == 0 {
            bail!("the daemon closed the connection");
        }
        serde_json::from_str(&line).with_context(|| format!("bad event from the daemon: {line:?}"))
    }
}

/// Nobody is listening: no socket file, or a stale one.
fn is_absent(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
    )
}

/// Starts a detached daemon and waits for its socket to answer.
fn start_daemon(endpoint: &Endpoint) -> Result<UnixStream> {
    let data_dir = DataDir::open(&endpoint.data_dir)
        .with_context(|| format!("cannot use data directory {}", endpoint.data_dir.display()))?;
    let log_path = data_dir.root().join("daemon.log");
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&log_path)
        .with_context(|| format!("cannot open {}", log_path.display()))?;
    let exe = std::env::current_exe().context("cannot find the spillway executable")?;
    let mut child = Command::new(exe)
        .arg("daemon")
        .arg("--socket")
        .arg(&endpoint.socket)
        .arg("--data-dir")
        .arg(&endpoint.data_dir)
        .args(["--idle-exit", AUTOSTART_IDLE_EXIT])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        // Its own process group: a Ctrl-C meant for the client does not reach the daemon.
        .process_group(0)
        .spawn()
        .context("cannot start the daemon")?;
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        match UnixStream::connect(&endpoint.socket) {
            Ok(stream) => return Ok(stream),
            Err(e) if !is_absent(&e) => {
                return Err(e).context("cannot connect to the daemon just started");
            }
            Err(_) => {}
        }
        // A daemon that lost the race to another exits at once; keep waiting for the winner.
        let _ = child.try_wait();
        if Instant::now() >= deadline {
            bail!(
                "the daemon did not start within {}s; see {}",
                START_TIMEOUT.as_secs(),
                log_path.display()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixListener;

    use super::*;
    use crate::protocol::ErrorCode;

    #[test]
    fn a_daemon_that_refuses_before_the_request_is_heard_not_taken_for_a_broken_pipe() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let endpoint = Endpoint {
            socket,
            data_dir: dir.path().to_path_buf(),
        };
        let mut connection = Connection::open(&endpoint).unwrap();
        let (mut daemon_side, _) = listener.accept().unwrap();
        let refusal = Event::error(ErrorCode::Forbidden, "connection from uid 65534 refused");
        daemon_side.write_all(refusal.to_line().as_bytes()).unwrap();
        drop(daemon_side);

        let error = connection.send("{\"v\": 1, \"op\": \"ps\"}\n").unwrap_err();
        assert_eq!(error.to_string(), "connection from uid 65534 refused");
        assert!(
            error
                .chain()
                .all(|cause| cause.downcast_ref::<std::io::Error>().is_none()),
            "{error:?}"
        );
    }
}
