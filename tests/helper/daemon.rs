//! A real daemon in a temp dir, stopped on drop, and a raw JSON-Lines client for it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use super::Sandbox;

/// How long any wait in these tests may take before it counts as a failure.
pub const PATIENCE: Duration = Duration::from_secs(60);

pub struct TestDaemon {
    pub sandbox: Sandbox,
    pub socket: PathBuf,
    child: Option<Child>,
}

impl TestDaemon {
    /// Starts `spillway daemon` on a private socket and waits until it answers.
    pub fn start() -> TestDaemon {
        Self::start_with(&[])
    }

    pub fn start_with(extra: &[&str]) -> TestDaemon {
        Self::start_customised(|cmd, _| {
            cmd.args(extra);
        })
    }

    /// Starts a daemon whose log goes to `daemon.log` in its sandbox, for
    /// [`TestDaemon::assert_no_panic`].
    pub fn start_logged() -> TestDaemon {
        Self::start_customised(|cmd, sandbox| {
            let log = std::fs::File::create(sandbox.dir.path().join("daemon.log")).unwrap();
            cmd.stderr(log);
        })
    }

    /// Fails if the log of a daemon from [`TestDaemon::start_logged`] shows a panic.
    pub fn assert_no_panic(&self) {
        let log = std::fs::read_to_string(self.sandbox.dir.path().join("daemon.log")).unwrap();
        assert!(!log.contains("panicked"), "the daemon panicked:\n{log}");
    }

    /// Starts a daemon whose command `configure` adjusts first (flags, limits, its log).
    pub fn start_customised(configure: impl FnOnce(&mut Command, &Sandbox)) -> TestDaemon {
        let sandbox = Sandbox::new();
        let socket = sandbox.dir.path().join("run/spillway.sock");
        let mut cmd = daemon_command(&sandbox, &socket);
        configure(&mut cmd, &sandbox);
        let child = cmd.spawn().expect("spawn daemon");
        let daemon = TestDaemon {
            sandbox,
            socket,
            child: Some(child),
        };
        wait_for(
            || UnixStream::connect(&daemon.socket).is_ok(),
            "daemon socket",
        );
        daemon
    }

    /// `spillway <args>` pointed at this daemon.
    pub fn spillway(&self) -> Command {
        let mut cmd = self.sandbox.spillway();
        cmd.env("SPILLWAY_SOCKET", &self.socket);
        cmd
    }

    /// `spillway run <args>`, waited for.
    pub fn run(&self, args: &[&str]) -> Output {
        self.spillway()
            .arg("run")
            .args(args)
            .output()
            .expect("spillway run")
    }

    pub fn client(&self) -> RawClient {
        RawClient::connect(&self.socket)
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("daemon running").id()
    }

    /// Sends SIGTERM and waits for the daemon to exit.
    pub fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("daemon running");
        signal(child.id(), "TERM");
        wait_child(&mut child)
    }

    /// Kills the daemon with SIGKILL, as a crash would, and reaps it.
    pub fn kill9(&mut self) {
        let mut child = self.child.take().expect("daemon running");
        child.kill().expect("kill -9");
        child.wait().expect("reap");
    }

    /// Starts a new daemon on the same data directory and socket.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "the old daemon is still running");
        let child = daemon_command(&self.sandbox, &self.socket)
            .spawn()
            .expect("spawn daemon");
        self.child = Some(child);
        wait_for(
            || UnixStream::connect(&self.socket).is_ok(),
            "daemon socket",
        );
    }

    /// Waits for the daemon to exit by itself.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("daemon running");
        wait_child(&mut child)
    }
}

impl Drop for TestDaemon {
    /// Asks the daemon to shut down (so it removes its runs' cgroups), and kills it if it
    /// has not gone within a few seconds.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Ok(pid) = i32::try_from(child.id()) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The command that starts a daemon for `sandbox` on `socket` (logs go to the test's stderr).
pub fn daemon_command(sandbox: &Sandbox, socket: &Path) -> Command {
    let mut cmd = sandbox.spillway();
    cmd.arg("daemon")
        .arg("--socket")
        .arg(socket)
        .args(["--kill-grace", "1s"])
        .env("SPILLWAY_LOG", daemon_log_level())
        .stdin(Stdio::null());
    cmd
}

/// The log level of the tests' daemons: `error`, so that the warnings the hostile tests
/// provoke on purpose do not read as failures in `cargo test`'s output; `SPILLWAY_TEST_LOG`
/// (e.g. `warn`, `debug`) shows more when a test needs looking into.
pub fn daemon_log_level() -> String {
    std::env::var("SPILLWAY_TEST_LOG").unwrap_or_else(|_| "error".into())
}

/// Sends signal `name` (`TERM`, `KILL`, ...) to process `pid`, never to a group.
pub fn signal(pid: u32, name: &str) {
    let signal: nix::sys::signal::Signal = format!("SIG{name}").parse().expect("a signal name");
    let pid = i32::try_from(pid).expect("a pid");
    assert!(pid > 0, "refusing to signal pid {pid}");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).expect("kill");
}

pub fn wait_child(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        assert!(Instant::now() < deadline, "process did not exit in time");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Polls `ready` until it holds, failing the test after [`PATIENCE`].
pub fn wait_for(mut ready: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + PATIENCE;
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Speaks JSON Lines to the daemon directly, as any client may.
pub struct RawClient {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl RawClient {
    pub fn connect(socket: &Path) -> RawClient {
        Self::from_stream(UnixStream::connect(socket).expect("connect"))
    }

    /// A client on a connection already open.
    pub fn from_stream(stream: UnixStream) -> RawClient {
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        RawClient {
            writer: stream.try_clone().unwrap(),
            reader: BufReader::new(stream),
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("send");
    }

    pub fn send(&mut self, request: &serde_json::Value) {
        let mut line = request.to_string();
        line.push('\n');
        self.send_raw(line.as_bytes());
    }

    /// The next event, or None when the daemon closed the connection.
    pub fn event(&mut self) -> Option<serde_json::Value> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => None,
            Ok(_) => Some(serde_json::from_str(&line).expect("event is JSON")),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => None,
            Err(e) => panic!("reading an event: {e}"),
        }
    }

    /// Sends `request` and returns the first event of its answer.
    pub fn ask(&mut self, request: &serde_json::Value) -> serde_json::Value {
        self.send(request);
        self.event().expect("an answer")
    }

    /// Runs `request` (a run) to its end and returns the exit event.
    pub fn run_to_exit(&mut self, request: &serde_json::Value) -> serde_json::Value {
        self.send(request);
        loop {
            let event = self.event().expect("an event");
            match event["type"].as_str() {
                Some("started") => continue,
                _ => return event,
            }
        }
    }
}

/// A process's resident set size in KiB (`VmRSS`).
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// A `kB` figure from /proc/PID/status (`VmHWM:` is the peak resident set).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// How many file descriptors a process has open.
pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fd dir")
        .count()
}

/// The fields of /proc/PID/stat these tests read.
pub struct ProcStat {
    pub state: String,
    pub parent: u32,
    pub pgid: u32,
}

impl ProcStat {
    /// The stat of `pid`, while it exists (a zombie still has one).
    pub fn of(pid: u32) -> Option<ProcStat> {
        ProcStat::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    /// The fields after the command name, which is in parentheses and may hold anything.
    fn parse(stat: &str) -> Option<ProcStat> {
        let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
        Some(ProcStat {
            state: fields.next()?.to_string(),
            parent: fields.next()?.parse().ok()?,
            pgid: fields.next()?.parse().ok()?,
        })
    }
}

/// Pids of live processes whose process group is `pgid` (from /proc/*/stat).
pub fn processes_in_group(pgid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Zombies are already dead.
        if let Some(stat) = ProcStat::parse(&stat)
            && stat.pgid == pgid
            && stat.state != "Z"
        {
            found.push(pid);
        }
    }
    found
}

/// Process groups of commands that may outlive their daemon: killed on drop, so that a failing
/// test leaves none behind either.
#[derive(Default)]
pub struct Groups(pub Vec<u32>);

impl Drop for Groups {
    fn drop(&mut self) {
        self.0.iter().for_each(|&pgid| killpg(pgid));
    }
}

/// SIGKILL to process group `pgid` (never 0, 1 or a negative id).
pub fn killpg(pgid: u32) {
    let pgid = i32::try_from(pgid).expect("a pgid");
    assert!(pgid > 1, "refusing to signal group {pgid}");
    // Straight to killpg: `kill -KILL -PGID` is read by procps as `kill -1`.
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pgid),
        nix::sys::signal::Signal::SIGKILL,
    );
}
