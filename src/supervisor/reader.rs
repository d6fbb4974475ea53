//! The reader thread: the terminal's output into the engine, chunk by chunk, and after the
//! command's end the output still buffered: read to its end once every writer has closed it,
//! or for a bounded time while some process still holds it open.
//!
//! A run that writes a lot is given a wider pipe and larger reads while their budgets allow
//! ([`super::heavy_output`]). What a wide pipe holds when its command exits can take longer
//! than the drain's grace to go through the engine on a slow machine, which is why a pipe
//! whose writers are all gone is read to its end, however long that takes: nothing can add to
//! it any more, so the end is bounded by what it holds.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::engine::capture::{Capture, SpillPolicy};
use crate::engine::normalise::{NormaliseOptions, Normaliser};
use crate::read_buffer::ReadBuffer;
use crate::storage::spill::DataDir;
use crate::supervisor::input::Input;
use crate::supervisor::live::Live;
use crate::supervisor::pty::{Chunk, Output};

use super::heavy_output::{self, LARGE_READ, READ_CHUNK, Slot};
use super::waiter::Finish;
use super::{RunSpec, Shared, TtySize};

/// How long output may go on after the command has exited before its process group is killed.
pub const EXIT_DRAIN: Duration = Duration::from_millis(300);

/// How long the reader goes on after that kill before it stops reading regardless.
pub const KILLED_DRAIN: Duration = Duration::from_millis(200);

/// The reader thread: output -> normaliser -> capture (in the run's [`Live`] state), then the
/// preview.
pub(super) struct Reader {
    pub(super) output: Output,
    pub(super) live: Arc<Live>,
    pub(super) drain: Drain,
    /// Held while the reader runs, for a run whose pipe was widened.
    wide: Option<Slot>,
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
        let capture = Capture::with_patterns(
            spec.limits,
            SpillPolicy::Always(data_dir.clone()),
            spec.highlights.clone(),
        )
        .with_spill_cap(spec.max_spill);
        let wide = spec
            .tty
            .is_none()
            .then(|| heavy_output::widen_pipe(&output))
            .flatten();
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
            wide,
        }
    }

    /// Reads the output to its end; returns the run's live state and what the token
    /// accounting counts of its output, and the output for the waiter to close once the
    /// command has exited.
    pub(super) fn run(mut self) -> (Finish, Output) {
        if let Err(e) = self.pump() {
            tracing::warn!(run = %self.drain.shared.id, "reading the output failed: {e}");
        }
        self.wide = None;
        let output = self.live.finish();
        ((self.live, output), self.output)
    }

    /// Reads until the end of the output, or until the drain runs out of patience.
    fn pump(&mut self) -> io::Result<()> {
        let mut buf = ReadBuffer::new(READ_CHUNK);
        let mut large: Option<Slot> = None;
        loop {
            let chunk = self.output.read(&mut buf)?;
            match chunk {
                Chunk::Data(n) => {
                    self.live.feed(&buf[..n]);
                    if n == buf.len() && large.is_none() {
                        large = heavy_output::large_reader();
                        if large.is_some() {
                            buf = ReadBuffer::new(LARGE_READ);
                        }
                    }
                }
                Chunk::Eof => return Ok(()),
                Chunk::WouldBlock => {}
            }
            let limit = match self.drain.patience(&self.output) {
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
    /// The leader is running, or every writer has closed the output: as long as it takes.
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
    /// Past a grace, `output` is asked, read after read, whether its writers are all gone: if
    /// so, what it holds is read on to its end with no deadline (asked again each time, since
    /// a terminal's slave side can be opened anew by its path).
    fn patience(&mut self, output: &Output) -> Patience {
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
        let deadline = match self.killed_at {
            Some(killed_at) => killed_at + KILLED_DRAIN,
            None => exited_at + EXIT_DRAIN,
        };
        if let Some(left) = deadline.checked_duration_since(now)
            && !left.is_zero()
        {
            return Patience::For(left);
        }
        if output.writers_gone() {
            return Patience::Unlimited;
        }
        match self.killed_at {
            Some(_) => Patience::Exhausted,
            None => {
                self.shared.signal(Signal::SIGKILL);
                self.killed_at = Some(now);
                Patience::For(KILLED_DRAIN)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::process::{Child, Command};

    use super::*;
    use crate::protocol::RunId;
    use crate::supervisor::descendants::Tracker;
    use crate::supervisor::pty::{Channel, open_pipe};

    /// A drain of a run whose leader (`sleep`, which is never signalled: both graces are
    /// made to have run out already, the kill among them) exited a second ago.
    fn drain_past_its_graces() -> (Drain, Child) {
        let leader = Command::new("sleep").arg("60").spawn().unwrap();
        let id = RunId::generate();
        let tracker = Tracker::new(id.clone(), leader.id(), None);
        let shared = Arc::new(Shared::new(id, leader.id(), Duration::ZERO, tracker, None));
        shared.leader_exited.store(true, Ordering::Release);
        let (wake, _) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let mut drain = Drain::new(shared, wake);
        let long_ago = Instant::now() - Duration::from_secs(1);
        drain.exited_at = Some(long_ago);
        drain.killed_at = Some(long_ago);
        (drain, leader)
    }

    #[test]
    fn past_its_graces_a_drain_reads_on_only_while_every_writer_is_gone() {
        let (mut drain, mut leader) = drain_past_its_graces();
        let Channel { output, child, .. } = open_pipe().unwrap();
        nix::unistd::write(child.stdio().1, b"left in the pipe").unwrap();
        // A stray holds the pipe: the drain gives up.
        assert_eq!(drain.patience(&output), Patience::Exhausted);
        drop(child);
        // Nobody can write any more: what the pipe holds is read to its end.
        assert_eq!(drain.patience(&output), Patience::Unlimited);
        leader.kill().unwrap();
        leader.wait().unwrap();
    }
}
