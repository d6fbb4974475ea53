//! The reader thread: the terminal's output into the engine, chunk by chunk, and after the
//! command's end the output still buffered, drained for a bounded time.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::engine::capture::{Capture, SpillPolicy};
use crate::engine::normalise::{NormaliseOptions, Normaliser};
use crate::storage::spill::DataDir;
use crate::supervisor::input::Input;
use crate::supervisor::live::Live;
use crate::supervisor::pty::{Chunk, Output};

use super::waiter::Finish;
use super::{RunSpec, Shared, TtySize};

/// How long output may go on after the command has exited before its process group is killed.
pub const EXIT_DRAIN: Duration = Duration::from_millis(300);

/// How long the reader goes on after that kill before it stops reading regardless.
pub const KILLED_DRAIN: Duration = Duration::from_millis(200);

/// Size of each read from a run's output.
pub(super) const READ_CHUNK: usize = 64 * 1024;

/// The reader thread: output -> normaliser -> capture (in the run's [`Live`] state), then the
/// preview.
pub(super) struct Reader {
    pub(super) output: Output,
    pub(super) live: Arc<Live>,
    pub(super) drain: Drain,
}

impl Reader {
    /// A reader of `output` for `spec`'s run; creates the spill file.
    pub(super) fn new(
        spec: &RunSpec,
        output: Output,
        input: Option<Input>,
        data_dir: &DataDir,
        drain: Drain,
    ) -> Reader {
        let defaults = NormaliseOptions::default();
        // The screen model draws on a terminal of the PTY's size.
        let size = spec.tty.unwrap_or(TtySize {
            cols: defaults.cols,
            rows: defaults.rows,
        });
        let normaliser = Normaliser::new(NormaliseOptions {
            raw: spec.raw,
            cols: size.cols,
            rows: size.rows,
            ..defaults
        });
        let capture = Capture::new(spec.limits, SpillPolicy::Always(data_dir.clone()))
            .with_spill_cap(spec.max_spill)
            .with_highlights(spec.highlights.clone());
        Reader {
            output,
            live: Arc::new(Live::new(
                normaliser,
                capture,
                spec.direction,
                input,
                spec.raw_stream,
                spec.max_tokens,
                spec.compact,
            )),
            drain,
        }
    }

    /// Reads the output to its end; returns the preview and the output's tokens, and the
    /// output for the waiter to close once the command has exited.
    pub(super) fn run(mut self) -> (Finish, Output) {
        if let Err(e) = self.pump() {
            tracing::warn!(run = %self.drain.shared.id, "reading the output failed: {e}");
        }
        let tokens = self.live.finish();
        ((self.live, tokens), self.output)
    }

    /// Reads until the end of the output, or until the drain runs out of patience.
    fn pump(&mut self) -> io::Result<()> {
        let mut buf = vec![0; READ_CHUNK];
        loop {
            let chunk = self.output.read(&mut buf)?;
            match chunk {
                Chunk::Data(n) => self.live.feed(&buf[..n]),
                Chunk::Eof => return Ok(()),
                Chunk::WouldBlock => {}
            }
            let limit = match self.drain.patience() {
                Patience::Unlimited => None,
                Patience::For(limit) => Some(limit),
                Patience::Exhausted => {
                    tracing::warn!(
                        run = %self.drain.shared.id,
                        "stopped reading: a process outside the group holds the output open"
                    );
                    return Ok(());
                }
            };
            if chunk == Chunk::WouldBlock {
                self.live.pause();
                self.output.wait(self.drain.wake(), limit)?;
            }
        }
    }
}

/// How long the reader may still wait for output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Patience {
    /// The leader is running: as long as it takes.
    Unlimited,
    For(Duration),
    /// Stop reading.
    Exhausted,
}

/// The reader's side of the policy that follows the leader's exit (see the module docs).
pub(super) struct Drain {
    pub(super) shared: Arc<Shared>,
    /// Hung up by the waiter at the leader's exit; dropped once that has been seen.
    pub(super) wake: Option<OwnedFd>,
    exited_at: Option<Instant>,
    killed_at: Option<Instant>,
}

impl Drain {
    pub(super) fn new(shared: Arc<Shared>, wake: OwnedFd) -> Drain {
        Drain {
            shared,
            wake: Some(wake),
            exited_at: None,
            killed_at: None,
        }
    }

    pub(super) fn wake(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.wake.as_ref().map(AsFd::as_fd)
    }

    /// How long the reader may wait now; kills the group when the first grace has run out.
    fn patience(&mut self) -> Patience {
        let exited_at = match self.exited_at {
            Some(at) => at,
            None if !self.shared.leader_exited.load(Ordering::Acquire) => {
                return Patience::Unlimited;
            }
            None => {
                self.wake = None;
                *self.exited_at.insert(Instant::now())
            }
        };
        let now = Instant::now();
        if let Some(killed_at) = self.killed_at {
            return match (killed_at + KILLED_DRAIN).checked_duration_since(now) {
                Some(left) if !left.is_zero() => Patience::For(left),
                _ => Patience::Exhausted,
            };
        }
        match (exited_at + EXIT_DRAIN).checked_duration_since(now) {
            Some(left) if !left.is_zero() => Patience::For(left),
            _ => {
                self.shared.signal(Signal::SIGKILL);
                self.killed_at = Some(now);
                Patience::For(KILLED_DRAIN)
            }
        }
    }
}
