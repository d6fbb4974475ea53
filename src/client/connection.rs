//! The client side of the socket: connect (starting a daemon when none answers), check that
//! the daemon is our own user's, send one request, read its events.
//!
//! Nothing is sent before the peer's uid (`SO_PEERCRED`) is known to be ours: a socket path in
//! a shared directory (`SPILLWAY_SOCKET=/tmp/...`) may be served by another user, who would
//! otherwise be handed the command, its working directory and the whole environment (cloud
//! keys included), and could answer with any output and exit code it liked.
//!
//! A daemon started here is the same binary, detached into its own process group, with the same
//! socket and data directory and `--idle-exit`, so it goes away by itself after a quiet period.
//! Two clients racing to start one both succeed: the daemons' locks let exactly one serve, and
//! each client waits for the socket to answer. The daemon says on a pipe whether it started
//! (`--report-start`), so a client whose daemon cannot start (a full disk, another daemon on
//! the data directory) prints why at once; and a thread of the client reaps it when it exits,
//! so a client that lives long (`spillway mcp`) never keeps a dead daemon as a zombie.

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::protocol::{Event, PROTOCOL_VERSION, PongEvent, Request};
use crate::storage::spill::DataDir;

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
    /// The socket whose version handshake is under way: its `ping` has been sent and its
    /// `pong` is the next line to read (see [`Connection::check_version`]).
    pong_due: Option<PathBuf>,
}

impl Connection {
    /// Connects to the daemon, starting one if nobody answers on the socket.
    pub fn open(endpoint: &Endpoint) -> Result<Connection> {
        let (stream, started) = match UnixStream::connect(&endpoint.socket) {
            Ok(stream) => (stream, false),
            Err(e) if is_absent(&e) => (start_daemon(endpoint)?, true),
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "cannot connect to the daemon at {}",
                        endpoint.socket.display()
                    )
                });
            }
        };
        let mut connection = Connection::checked(stream, &endpoint.socket)?;
        if !started {
            connection.check_version(&endpoint.socket);
        }
        Ok(connection)
    }

    /// Connects to the daemon if one answers; `None` when nobody listens (nothing is started).
    pub fn existing(endpoint: &Endpoint) -> Result<Option<Connection>> {
        match UnixStream::connect(&endpoint.socket) {
            Ok(stream) => Connection::checked(stream, &endpoint.socket).map(Some),
            Err(e) if is_absent(&e) => Ok(None),
            Err(e) => Err(e).with_context(|| {
                format!(
                    "cannot connect to the daemon at {}",
                    endpoint.socket.display()
                )
            }),
        }
    }

    /// A connection on `stream` once its peer is known to be our own user.
    fn checked(stream: UnixStream, socket: &Path) -> Result<Connection> {
        check_peer(&stream, socket)?;
        let writer = stream
            .try_clone()
            .context("cannot clone the daemon connection")?;
        Ok(Connection {
            reader: BufReader::new(stream),
            writer,
            pong_due: None,
        })
    }

    /// The version handshake: a daemon of another version than this client (one started by
    /// an older build, say) still serves, but the person is told, once, plainly.
    ///
    /// Only the `ping` is sent here: the request follows it at once and the `pong` is read
    /// before the request's first event ([`Connection::next_event`]), so a short run does not
    /// wait a round trip to the daemon before it is asked for. The daemon answers a
    /// connection's requests in order.
    fn check_version(&mut self, socket: &Path) {
        if self.send(&Request::Ping).is_ok() {
            self.pong_due = Some(socket.to_path_buf());
        }
    }

    /// Reads the handshake's `pong` if it is due, and warns of another version. Anything
    /// else in its place (a refusal) is the answer to the request, and is returned.
    fn take_pong(&mut self) -> Result<Option<Event>> {
        let Some(socket) = self.pong_due.take() else {
            return Ok(None);
        };
        match self.read_event()? {
            Event::Pong(pong) => {
                if let Some(warning) = version_warning(&pong, &socket) {
                    let _ = writeln!(std::io::stderr(), "{warning}");
                }
                Ok(None)
            }
            other => Ok(Some(other)),
        }
    }

    /// Sends one request. A daemon that hung up first may have said why (a refusal); either
    /// way the error carries no broken pipe, which the CLI would take for a closed stdout and
    /// so for success.
    pub fn send(&mut self, request: &Request) -> Result<()> {
        self.send_line(&request.to_line())
    }

    /// Sends one request with a file descriptor (`SCM_RIGHTS`) on its line's first byte: the
    /// command's standard input, for a request with `stdin_fd`.
    ///
    /// The handshake's `pong` is read first: a daemon before this client's gave a descriptor
    /// to the line where the read that brought it began, the `ping`'s when one read held both.
    pub fn send_passing(&mut self, request: &Request, fd: BorrowedFd<'_>) -> Result<()> {
        use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
        match self.take_pong()? {
            Some(Event::Error(error)) => bail!("{}", error.message),
            Some(other) => bail!("unexpected answer from the daemon: {other:?}"),
            None => {}
        }
        let line = request.to_line();
        let fds = [fd.as_raw_fd()];
        let sent = sendmsg::<()>(
            self.writer.as_raw_fd(),
            &[std::io::IoSlice::new(line.as_bytes())],
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::empty(),
            None,
        );
        let written = match sent {
            Ok(n) => self.writer.write_all(&line.as_bytes()[n..]),
            Err(e) => Err(std::io::Error::from(e)),
        };
        self.sent(written)
    }

    /// Sends one line as it is (a test's malformed request, say).
    fn send_line(&mut self, line: &str) -> Result<()> {
        let written = self.writer.write_all(line.as_bytes());
        self.sent(written)
    }

    /// What became of a request sent: a daemon that hung up first may have said why.
    fn sent<E: std::fmt::Display>(&mut self, written: Result<(), E>) -> Result<()> {
        let Err(e) = written else {
            return Ok(());
        };
        match self.next_event() {
            Ok(Event::Error(error)) => bail!("{}", error.message),
            _ => bail!("cannot send the request to the daemon: {e}"),
        }
    }

    /// The next event; an error if the daemon closed the connection or sent garbage.
    pub fn next_event(&mut self) -> Result<Event> {
        match self.take_pong()? {
            Some(answer) => Ok(answer),
            None => self.read_event(),
        }
    }

    /// The next line from the daemon, as an event.
    fn read_event(&mut self) -> Result<Event> {
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

/// What to say when the daemon's version is not this client's.
fn version_warning(pong: &PongEvent, socket: &Path) -> Option<String> {
    let mine = env!("CARGO_PKG_VERSION");
    (pong.version != mine || pong.protocol != PROTOCOL_VERSION).then(|| {
        format!(
            "spillway: warning: the daemon at {} (pid {}) is spillway {} (protocol v{}), this \
             client is {mine} (protocol v{PROTOCOL_VERSION}); `{} daemon restart` starts one of \
             this version",
            socket.display(),
            pong.pid,
            pong.version,
            pong.protocol,
            crate::program::program()
        )
    })
}

/// Nobody is listening: no socket file, or a stale one.
fn is_absent(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
    )
}

/// Refuses a daemon that runs as another user, before anything is sent to it.
fn check_peer(stream: &UnixStream, socket: &Path) -> Result<()> {
    let uid = peer_uid(stream)
        .with_context(|| format!("cannot tell which user serves {}", socket.display()))?;
    let me = nix::unistd::geteuid().as_raw();
    if uid != me {
        bail!(
            "refusing the daemon at {}: it runs as uid {uid}, not as this user (uid {me}), so \
             someone else may be listening there; nothing was sent to it. Point --socket (or \
             SPILLWAY_SOCKET) at your own daemon's socket",
            socket.display()
        );
    }
    Ok(())
}

/// The uid of the process that listens at the other end (`SO_PEERCRED`, which the kernel
/// fills in at `connect`; the peer cannot forge it).
fn peer_uid(stream: &UnixStream) -> std::io::Result<u32> {
    let mut credentials = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `credentials` is a `ucred` and `len` its size, as SO_PEERCRED expects; the
    // kernel writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut credentials).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(credentials.uid)
}

/// Starts a detached daemon and waits for its socket to answer, or for it to say why it
/// cannot start.
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
    let last_fd = open_file_limit();
    let mut command = Command::new(exe);
    // SAFETY: the hook runs in the child between fork and exec and makes only system calls
    // (close_range, fcntl), which are async-signal-safe; it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            inherit_no_descriptors(last_fd);
            Ok(())
        });
    }
    let child = command
        .arg("daemon")
        .arg("--socket")
        .arg(&endpoint.socket)
        .arg("--data-dir")
        .arg(&endpoint.data_dir)
        .args(["--idle-exit", AUTOSTART_IDLE_EXIT, "--report-start"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        // Its own process group: a Ctrl-C meant for the client does not reach the daemon.
        .process_group(0)
        .spawn()
        .context("cannot start the daemon")?;
    let report = watch_daemon(child);
    let deadline = Instant::now() + START_TIMEOUT;
    // Why the daemon we started will not serve, if it said.
    let mut refused: Option<String> = None;
    loop {
        match UnixStream::connect(&endpoint.socket) {
            Ok(stream) => return Ok(stream),
            Err(e) if !is_absent(&e) => {
                return Err(e).context("cannot connect to the daemon just started");
            }
            Err(_) => {}
        }
        if let Ok(said) = report.try_recv() {
            match StartWord::of(&said) {
                // It lost a race to another daemon on our socket: wait for it to answer.
                StartWord::Busy(why) => refused = Some(why.to_string()),
                StartWord::Error(why) => bail!("the daemon could not start: {why}"),
                StartWord::Nothing => bail!(
                    "the daemon exited as it started, without saying why; see {}",
                    log_path.display()
                ),
                StartWord::Ready => {} // the socket answers any moment now
            }
        }
        if Instant::now() >= deadline {
            match refused {
                Some(why) => bail!("no daemon answered on {}: {why}", endpoint.socket.display()),
                None => bail!(
                    "the daemon did not start within {}s; see {}",
                    START_TIMEOUT.as_secs(),
                    log_path.display()
                ),
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The highest descriptor number this process can have, plus one (its open-file limit,
/// bounded so a huge limit costs no long loop).
fn open_file_limit() -> i32 {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(1024, |(soft, _)| soft.min(1 << 16) as i32)
}

/// In the child that becomes the daemon: every descriptor but 0, 1 and 2 is closed at `exec`.
/// The client's own caller may have left some open without close-on-exec (`3>&1` in a
/// shell): a daemon that kept them would hold a pipe open for its whole life (the caller's
/// `| cat` never ending) and hand it to every command it runs.
fn inherit_no_descriptors(last_fd: i32) {
    // SAFETY: close_range takes numbers and flags only; CLOSE_RANGE_CLOEXEC marks instead of
    // closing, so std's own exec-error pipe (already close-on-exec) still works.
    let marked = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_close_range,
            3u32,
            u32::MAX,
            nix::libc::CLOSE_RANGE_CLOEXEC,
        )
    } == 0;
    if !marked {
        // Before Linux 5.11: one descriptor at a time.
        for fd in 3..last_fd {
            // SAFETY: fcntl on a number that may not be open fails with EBADF, harmlessly.
            unsafe {
                nix::libc::fcntl(fd, nix::libc::F_SETFD, nix::libc::FD_CLOEXEC);
            }
        }
    }
}

/// What a starting daemon reported (`crate::daemon::report`), by its first word.
#[derive(Debug, PartialEq, Eq)]
enum StartWord<'a> {
    /// It serves, or will in a moment.
    Ready,
    /// Another daemon serves our socket, or is about to: this one will not start, and why.
    Busy(&'a str),
    /// It could not start, and why.
    Error(&'a str),
    /// It died without a word.
    Nothing,
}

impl StartWord<'_> {
    fn of(said: &str) -> StartWord<'_> {
        let said = said.trim();
        if let Some(why) = said.strip_prefix("busy: ") {
            StartWord::Busy(why)
        } else if let Some(why) = said.strip_prefix("error: ") {
            StartWord::Error(why)
        } else if said.is_empty() {
            StartWord::Nothing
        } else {
            StartWord::Ready
        }
    }
}

/// Reads, on a thread of its own, what the daemon reports about its start-up (the text is
/// sent on the channel when its pipe closes: empty if it died without a word), then reaps the
/// daemon when it exits: a client that lives long must not keep it as a zombie.
fn watch_daemon(mut child: Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let watcher = std::thread::Builder::new()
        .name("spillway-daemon-watch".into())
        .spawn(move || {
            let mut said = Vec::new();
            if let Some(pipe) = child.stdout.take() {
                let _ = pipe.take(64 << 10).read_to_end(&mut said);
            }
            let _ = tx.send(String::from_utf8_lossy(&said).into_owned());
            let _ = child.wait();
        });
    if let Err(e) = watcher {
        // The daemon runs on; only its report and its reaping are lost.
        tracing::warn!(error = %e, "cannot watch the daemon just started");
    }
    rx
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixListener;

    use super::*;
    use crate::protocol::ErrorCode;

    #[test]
    fn a_starting_daemon_s_report_is_read_by_its_first_word() {
        assert_eq!(StartWord::of("ready\n"), StartWord::Ready);
        assert_eq!(StartWord::of(""), StartWord::Nothing);
        assert_eq!(
            StartWord::of("busy: another spillway daemon is already running on /s\n"),
            StartWord::Busy("another spillway daemon is already running on /s")
        );
        assert_eq!(
            StartWord::of("error: no space left on device\n"),
            StartWord::Error("no space left on device")
        );
    }

    #[test]
    fn a_daemon_of_another_version_is_named_with_the_way_out() {
        let pong = |version: &str| PongEvent {
            protocol: PROTOCOL_VERSION,
            version: version.into(),
            pid: 4242,
        };
        let socket = Path::new("/run/user/1000/spillway/spillway.sock");
        assert_eq!(
            version_warning(&pong(env!("CARGO_PKG_VERSION")), socket),
            None
        );
        let warning = version_warning(&pong("0.0.1"), socket).unwrap();
        assert!(
            warning.contains("(pid 4242) is spillway 0.0.1"),
            "{warning}"
        );
        assert!(warning.contains(socket.to_str().unwrap()), "{warning}");
        assert!(warning.contains("spillway daemon restart"), "{warning}");
    }

    #[test]
    fn a_daemon_that_refuses_before_the_request_is_heard_not_taken_for_a_broken_pipe() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let endpoint = Endpoint {
            socket,
            data_dir: dir.path().to_path_buf(),
        };
        // `existing`: the handshake of `open` would wait for this fake daemon's answer.
        let mut connection = Connection::existing(&endpoint).unwrap().unwrap();
        let (mut daemon_side, _) = listener.accept().unwrap();
        let refusal = Event::error(ErrorCode::Forbidden, "connection from uid 65534 refused");
        daemon_side.write_all(refusal.to_line().as_bytes()).unwrap();
        drop(daemon_side);

        let error = connection
            .send_line("{\"v\": 1, \"op\": \"ps\"}\n")
            .unwrap_err();
        assert_eq!(error.to_string(), "connection from uid 65534 refused");
        assert!(
            error
                .chain()
                .all(|cause| cause.downcast_ref::<std::io::Error>().is_none()),
            "{error:?}"
        );
    }
}
