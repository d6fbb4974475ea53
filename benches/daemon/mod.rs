//! A private spillway daemon for the benches that talk to one (`run`, `soak`): started as the
//! bench's child on a socket and data directory of its own, stopped with SIGTERM.
//!
//! A module of each such bench (`mod daemon;`), apart from `common` so that benches that start
//! no daemon do not compile it.

use std::fs::{self, File};
use std::io;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::BenchResult;

/// The spillway binary cargo built for the benches.
pub const SPILLWAY: &str = env!("CARGO_BIN_EXE_spillway");

/// A private daemon, started as our child; SIGTERM stops it (also when dropped on an error).
pub struct Daemon {
    child: Option<Child>,
    pub pid: u32,
    pub socket: PathBuf,
    pub data: PathBuf,
    log: PathBuf,
}

impl Daemon {
    /// Starts `spillway daemon` with its socket, data directory and log (`daemon.log`) in
    /// `work`, and waits until it listens.
    pub fn start(work: &Path) -> BenchResult<Self> {
        let socket = work.join("s.sock");
        let data = work.join("data");
        let log = work.join("daemon.log");
        let child = Command::new(SPILLWAY)
            .arg("daemon")
            .arg("--socket")
            .arg(&socket)
            .arg("--data-dir")
            .arg(&data)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log)?)
            .spawn()
            .map_err(|e| format!("cannot start the daemon: {e}"))?;
        let pid = child.id();
        let mut daemon = Daemon {
            child: Some(child),
            pid,
            socket,
            data,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = daemon.child.as_mut().and_then(|c| c.try_wait().transpose()) {
                daemon.child = None;
                return Err(format!(
                    "the daemon exited ({}) before it was ready; its log:\n{}",
                    status?,
                    daemon.log_text()
                )
                .into());
            }
            if UnixStream::connect(&daemon.socket).is_ok() {
                return Ok(daemon);
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the daemon did not listen on {} within 10 s; its log:\n{}",
                    daemon.socket.display(),
                    daemon.log_text()
                )
                .into());
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_else(|e| format!("(unreadable: {e})"))
    }

    /// SIGTERM, then waits (SIGKILL after 20 s); fails unless it exited 0.
    pub fn stop(mut self) -> BenchResult<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let status = terminate(&mut child)?;
        if !status.success() {
            return Err(format!(
                "the daemon ended with {status} on SIGTERM; its log:\n{}",
                self.log_text()
            )
            .into());
        }
        println!("daemon stopped ({status})");
        Ok(())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = terminate(&mut child);
        }
    }
}

fn terminate(child: &mut Child) -> io::Result<std::process::ExitStatus> {
    let pid = libc::pid_t::try_from(child.id()).map_err(io::Error::other)?;
    // SAFETY: kill has no memory effects; pid is our own unreaped child.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if Instant::now() > deadline {
            child.kill()?;
            return child.wait();
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// A `kB` field of `/proc/<pid>/status`, such as `VmRSS:`.
pub fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].split_whitespace().next()?.parse().ok()
}
