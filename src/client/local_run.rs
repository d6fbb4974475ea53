//! Runs a command in this very process, for a client that cannot reach the daemon from where
//! it stands: an agent host's sandbox (Claude Code's bubblewrap with its seccomp filter, Codex's
//! `read-only` and `workspace-write` modes) refuses to create or connect Unix sockets, and a
//! command that would have run there without spillway must still run, inside that sandbox, with
//! the same preview.
//!
//! The command gets a pipe for its standard output and error (in their order) and an empty
//! standard input, as `spillway run --no-tty` gives it; the output goes through the same engine
//! as every run, and its spill goes to the data directory when the sandbox lets us write there,
//! else to a private folder in `$TMPDIR` (which the hosts' sandboxes leave writable). The run is
//! recorded in the index when the index can be written, and not otherwise: what cannot be
//! recorded is still in the spill, whose path the notice gives.

use std::io::{self, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::client::local::READ_CHUNK;
use crate::engine::capture::{Capture, Limits, Outcome, SpillPolicy};
use crate::engine::driver::Engine;
use crate::engine::normalise::{NormaliseOptions, Normaliser};
use crate::engine::redact::Redactor;
use crate::program::CliSteps;
use crate::protocol::{Direction, Preview};
use crate::read_buffer::ReadBuffer;
use crate::storage::spill::DataDir;

/// How long output is still read after the command itself has exited: a background process
/// it left holding the pipe (`server &`) would otherwise keep the call open for ever, where the
/// daemon would have stopped it.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(300);

/// What one in-process run needs.
pub(crate) struct LocalRun<'a> {
    /// The program and its arguments.
    pub argv: &'a [String],
    /// The command's whole environment.
    pub env: Vec<(String, String)>,
    pub limits: Limits,
    pub max_tokens: Option<usize>,
    /// Fold lines alike in the preview (`compact`).
    pub compact: bool,
    /// The data directory the daemon would have used.
    pub data_dir: &'a Path,
    /// Redact credentials from the preview (the daemon's default).
    pub redact: bool,
}

/// How an in-process run ended.
pub(crate) struct LocalOutcome {
    pub preview: Preview,
    /// The exit code a shell gives for it: the command's own, or 128+N for signal N.
    pub exit_code: u8,
}

/// Runs `run.argv` here, feeding its output through the engine, and returns its preview.
pub(crate) fn run(run: &LocalRun<'_>) -> Result<LocalOutcome> {
    let (program, args) = run.argv.split_first().context("no command to run")?;
    let (reader, writer) = io::pipe().context("making the output pipe")?;
    let mut child = Command::new(program)
        .args(args)
        .env_clear()
        .envs(run.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(writer.try_clone().context("sharing the output pipe")?)
        .stderr(writer)
        .spawn()
        .with_context(|| format!("cannot run {program:?}"))?;
    let chunks = read_on_a_thread(reader);
    let spill_root = spill_root(run.data_dir);
    let capture = Capture::new(run.limits, spill_policy(spill_root.as_deref()));
    let mut engine = Engine::new(Normaliser::new(NormaliseOptions::default()), capture)
        .with_compact(run.compact);
    let status = feed_until_exit(&mut engine, &chunks, &mut child)?;
    engine.finish();
    let outcome = Outcome::of_exit(status.code());
    let mut preview = engine.preview(Direction::Both, &CliSteps, run.max_tokens, outcome);
    if run.redact {
        preview.redact(Redactor::builtin());
    }
    Ok(LocalOutcome {
        preview,
        exit_code: shell_exit_code(status),
    })
}

/// Reads the pipe on its own thread (so that waiting for the command never stops the reading,
/// which could deadlock a command writing more than a pipe holds), handing chunks over.
fn read_on_a_thread(mut reader: io::PipeReader) -> mpsc::Receiver<Vec<u8>> {
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = ReadBuffer::new(READ_CHUNK);
        loop {
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if send.send(buf[..n].to_vec()).is_err() {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
    });
    receive
}

/// Feeds output to the engine until the command has exited and its pipe is drained (or stays
/// quiet for [`DRAIN_AFTER_EXIT`]), and returns how the command ended.
fn feed_until_exit(
    engine: &mut Engine,
    chunks: &mpsc::Receiver<Vec<u8>>,
    child: &mut std::process::Child,
) -> Result<ExitStatus> {
    let poll = Duration::from_millis(50);
    let status = loop {
        match chunks.recv_timeout(poll) {
            Ok(chunk) => engine.feed(&chunk),
            Err(mpsc::RecvTimeoutError::Disconnected) => break child.wait()?,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Some(status) = child.try_wait()? {
                    break status;
                }
            }
        }
    };
    while let Ok(chunk) = chunks.recv_timeout(DRAIN_AFTER_EXIT) {
        engine.feed(&chunk);
    }
    Ok(status)
}

/// Where this run's spill can go: the data directory if we may write there, else a private
/// folder under `$TMPDIR`; None when neither can be had (the preview is still given).
fn spill_root(data_dir: &Path) -> Option<PathBuf> {
    if DataDir::open(data_dir).is_ok() && writable(&data_dir.join("spills")) {
        return Some(data_dir.to_path_buf());
    }
    let uid = nix::unistd::getuid();
    let fallback = std::env::temp_dir().join(format!("spillway-{uid}"));
    DataDir::open(&fallback).ok().map(|_| fallback)
}

/// Whether a file can be made in `dir` (a read-only bind mount lets `open` of the directory
/// succeed and refuses only the write).
fn writable(dir: &Path) -> bool {
    let probe = dir.join(format!(".probe-{}", std::process::id()));
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .is_ok();
    if made {
        let _ = std::fs::remove_file(&probe);
    }
    made
}

fn spill_policy(root: Option<&Path>) -> SpillPolicy {
    match root {
        Some(root) => SpillPolicy::WhenTruncated(DataDir::at(root)),
        None => SpillPolicy::Never,
    }
}

/// The code a shell reports for `status`: the exit code, or 128+N for signal N.
fn shell_exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(signal)) => 128u8.saturating_add(u8::try_from(signal).unwrap_or(127)),
        (None, None) => 1,
    }
}
