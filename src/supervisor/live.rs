//! A run's live state: what its reader thread has made of the output so far, shared with the
//! daemon while the command goes on.
//!
//! The reader thread is the only writer. Per chunk of output it feeds the normaliser and the
//! capture (behind one mutex, uncontended but for the moment a preview is taken), updates the
//! counters (atomics, for `ps`), publishes how many bytes of text it has committed (a
//! [`watch`] that followers wait on) and, once someone asked for it (at launch, or a follower
//! that joined later), passes the raw bytes on through a bounded [`broadcast`] channel that
//! drops what a lagging receiver has not taken (the receiver learns how much, and falls back to
//! the spill file).
//!
//! The daemon reads: the output [`SoFar`] (a preview of everything so far, including the line still
//! being written), the counters and the idle time, and types into the terminal through
//! [`Live::send`]. Nothing the daemon does here can make the reader wait for long: a look at the output
//! so far holds the lock only while it builds one bounded preview, and followers read the spill file,
//! never the reader's memory.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::{broadcast, watch};

use crate::engine::capture::{Capture, Limits, Outcome, OutputSource};
use crate::engine::driver::Engine;
use crate::engine::highlight::Patterns;
use crate::engine::normalise::Normaliser;
use crate::engine::snapshot::{self, Cursor};
use crate::program::CliSteps;
use crate::protocol::cut::shown_end;
use crate::protocol::{Direction, Preview};
use crate::supervisor::input::{Input, InputError, Keys};
use crate::sync::lock;

/// Raw chunks a raw stream may fall behind by before it loses some (at most 4 KiB each from
/// a PTY, so about 4 MiB).
pub const RAW_BACKLOG: usize = 1024;

/// Raw output as the command wrote it, with where the text stood after it.
#[derive(Debug, Clone)]
pub struct RawChunk {
    pub bytes: Arc<[u8]>,
    /// Bytes of normalised text committed once this chunk had been read (a spill offset).
    pub committed: u64,
}

/// The text a raw follower gets from the spill before the raw stream it joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextBefore {
    /// Every byte of text committed before it joined, which the spill file will hold.
    Bytes(u64),
    /// The spill stopped growing (its cap, or a write error): what it holds is all there is.
    WhatTheSpillHas,
}

/// How a run's previews are shaped: what a preview of part of its output (`wait --new`)
/// needs to look like the run's own.
#[derive(Debug, Clone)]
pub struct Shape {
    pub limits: Limits,
    pub direction: Direction,
    /// The highlight patterns, or `None` with highlights off.
    pub highlights: Option<Patterns>,
    /// Whether previews fold lines alike (`compact`, on by default).
    pub compact: bool,
}

/// A run's live state; see the module docs.
pub struct Live {
    engine: Mutex<Engine>,
    shape: Arc<Shape>,
    /// The token budget of the final preview, if the run asked for one.
    max_tokens: Option<usize>,
    spill_path: Option<PathBuf>,
    started: Instant,
    lines: AtomicU64,
    bytes: AtomicU64,
    /// Milliseconds after `started` of the last output read; `u64::MAX` before any.
    last_output_ms: AtomicU64,
    committed: watch::Sender<u64>,
    /// Made at launch for a client that asked for raw output, or when a follower first asks;
    /// never for a run nobody watches raw, which then costs nothing per chunk.
    raw: OnceLock<broadcast::Sender<RawChunk>>,
    /// The receiver made with the channel, which has missed nothing: for the run's own client.
    first_raw: Mutex<Option<broadcast::Receiver<RawChunk>>>,
    /// `None` for a pipe.
    input: Mutex<Option<Input>>,
    /// The output has ended: the terminal takes no more input, and a send in progress stops.
    ended: AtomicBool,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("spill_path", &self.spill_path)
            .field("bytes", &self.bytes)
            .field("lines", &self.lines)
            .finish_non_exhaustive()
    }
}

/// The counters `ps` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveStats {
    pub elapsed: Duration,
    /// Since the last output (or the start, before any).
    pub idle: Duration,
    pub lines: u64,
    pub bytes: u64,
}

/// A preview of a running command's output so far.
#[derive(Debug, Clone)]
pub struct SoFar {
    pub preview: Preview,
    /// Bytes of text committed (in the spill, or on their way to it).
    pub committed: u64,
    /// The line still being written.
    pub pending: String,
    /// The whole lines the preview covers.
    pub cursor: Cursor,
    pub stats: LiveStats,
}

/// Why typing into a run failed.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("it runs without a terminal (tty false, --no-tty): its input is /dev/null")]
    NoTerminal,
    #[error("its output has ended: it takes no more input")]
    Ended,
    #[error(transparent)]
    Input(#[from] InputError),
}

impl Live {
    /// The live state of a run reading through `normaliser` into `capture`; `raw_stream`
    /// makes the raw channel (and its first receiver).
    pub fn new(
        normaliser: Normaliser,
        capture: Capture,
        direction: Direction,
        input: Option<Input>,
        raw_stream: bool,
        max_tokens: Option<usize>,
        compact: bool,
    ) -> Live {
        let view = capture.view();
        let shape = Arc::new(Shape {
            limits: view.limits,
            direction,
            highlights: view.highlights.cloned(),
            compact,
        });
        let spill_path = view.spill_path.map(Path::to_path_buf);
        let raw = OnceLock::new();
        let first_raw = raw_stream.then(|| {
            let (tx, rx) = broadcast::channel(RAW_BACKLOG);
            let _ = raw.set(tx);
            rx
        });
        Live {
            engine: Mutex::new(Engine::new(normaliser, capture).with_compact(compact)),
            shape,
            max_tokens,
            spill_path,
            started: Instant::now(),
            lines: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            last_output_ms: AtomicU64::new(u64::MAX),
            committed: watch::channel(0).0,
            raw,
            first_raw: Mutex::new(first_raw),
            input: Mutex::new(input),
            ended: AtomicBool::new(false),
        }
    }

    fn engine(&self) -> MutexGuard<'_, Engine> {
        lock(&self.engine)
    }

    /// The reader's way in: one chunk of output as read.
    pub fn feed(&self, chunk: &[u8]) {
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
        self.last_output_ms.store(ms, Ordering::Relaxed);
        let (bytes, lines) = {
            let mut engine = self.engine();
            engine.feed(chunk);
            let (bytes, lines) = engine.capture().totals();
            // Sent under the engine's lock, so a follower that subscribes under it (see
            // [`Live::subscribe_raw`]) gets every chunk its text so far does not hold, once.
            if let Some(raw) = self.raw.get()
                && raw.receiver_count() > 0
            {
                let _ = raw.send(RawChunk {
                    bytes: Arc::from(chunk),
                    committed: bytes,
                });
            }
            (bytes, lines)
        };
        self.publish(bytes, lines);
    }

    fn publish(&self, bytes: u64, lines: u64) {
        self.bytes.store(bytes, Ordering::Relaxed);
        self.lines.store(lines, Ordering::Relaxed);
        self.committed.send_if_modified(|b| {
            let changed = *b != bytes;
            *b = bytes;
            changed
        });
    }

    /// The reader is about to wait for output: the spill gets what has been gathered.
    pub fn pause(&self) {
        self.engine().capture_mut().hand_off();
    }

    /// The output has ended: commits the last line, flushes the spill, closes the input, and
    /// returns where the token accounting finds the whole output's text, unread (see
    /// [`Capture::take_output_source`]): reading it back and counting it take longer than
    /// everything else a run's end does, and nothing the run's client is told needs them. The final
    /// preview is built once the command's end is known ([`Live::final_preview`]). The raw
    /// channel closes when `self` is dropped.
    pub fn finish(&self) -> OutputSource {
        self.ended.store(true, Ordering::SeqCst);
        // A send in progress holds the input: it sees `ended` and lets go; the descriptor is
        // closed with `self` then.
        if let Ok(mut input) = self.input.try_lock() {
            input.take();
        }
        let (bytes, lines) = {
            let mut engine = self.engine();
            engine.finish();
            engine.capture().totals()
        };
        self.publish(bytes, lines);
        self.engine().capture_mut().take_output_source()
    }

    /// The preview of the whole output, after [`Live::finish`], its needles ranked knowing how
    /// the command ended.
    pub fn final_preview(&self, outcome: Outcome) -> Preview {
        self.engine()
            .preview(self.shape.direction, &CliSteps, self.max_tokens, outcome)
    }

    /// A preview of everything so far, the line being written included. Blocks while the
    /// reader holds the capture (for one chunk), so call it off the async runtime.
    pub fn so_far(&self) -> SoFar {
        let mut engine = self.engine();
        engine.capture_mut().hand_off();
        let view = engine.capture().view();
        let pending = engine.normaliser().pending_line();
        // A piece at the end of the unfinished line could be a secret being written: it is
        // shown once the line is complete, when redaction can see it whole.
        let pending = &pending[..shown_end(pending)];
        let preview = snapshot::with_pending(
            &view,
            pending,
            self.shape.direction,
            &CliSteps,
            self.shape.compact,
        );
        let cursor = if view.total_bytes == 0 || view.ends_with_newline() {
            Cursor {
                lines: view.total_lines,
                offset: view.total_bytes,
            }
        } else {
            Cursor {
                lines: view.total_lines - 1,
                offset: view.total_bytes - view.last_line_bytes,
            }
        };
        let so_far = SoFar {
            preview,
            committed: view.total_bytes,
            pending: pending.to_string(),
            cursor,
            stats: self.stats(),
        };
        drop(engine);
        so_far
    }

    /// Elapsed and idle time, lines and bytes so far.
    pub fn stats(&self) -> LiveStats {
        let elapsed = self.started.elapsed();
        let last = self.last_output_ms.load(Ordering::Relaxed);
        let idle = if last == u64::MAX {
            elapsed
        } else {
            elapsed.saturating_sub(Duration::from_millis(last))
        };
        LiveStats {
            elapsed,
            idle,
            lines: self.lines.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
        }
    }

    /// Bytes of text committed so far, changing as output comes.
    pub fn committed(&self) -> watch::Receiver<u64> {
        self.committed.subscribe()
    }

    /// The raw stream's first receiver (it has missed nothing), if the run was started with
    /// one and nobody has taken it yet.
    pub fn take_raw(&self) -> Option<broadcast::Receiver<RawChunk>> {
        lock(&self.first_raw).take()
    }

    /// A raw stream for a follower joining now, and where the text before it ends: the
    /// follower sends the spill's text up to there, then every chunk read since, neither twice
    /// nor with a gap (chunks are sent under the same lock this takes).
    pub fn subscribe_raw(&self) -> (broadcast::Receiver<RawChunk>, TextBefore) {
        let engine = self.engine();
        let raw = self
            .raw
            .get_or_init(|| broadcast::channel(RAW_BACKLOG).0)
            .subscribe();
        let capture = engine.capture();
        let view = capture.view();
        let before = if view.spill_capped.is_some() || view.spill_problem.is_some() {
            TextBefore::WhatTheSpillHas
        } else {
            TextBefore::Bytes(capture.totals().0)
        };
        (raw, before)
    }

    pub fn shape(&self) -> Arc<Shape> {
        Arc::clone(&self.shape)
    }

    pub fn spill_path(&self) -> Option<&Path> {
        self.spill_path.as_deref()
    }

    /// Gives the run's terminal a new size (a client's terminal was resized). Waits for a
    /// send in progress: call it off the async runtime.
    pub fn resize(&self, cols: u16, rows: u16, tty: bool) -> Result<(), SendError> {
        if !tty {
            return Err(SendError::NoTerminal);
        }
        let input = lock(&self.input);
        let input = input.as_ref().ok_or(SendError::Ended)?;
        input
            .resize(cols, rows)
            .map_err(|e| SendError::Input(InputError::from(e)))
    }

    /// Types `keys` into the run's terminal; returns the bytes written. Blocks until the
    /// command has taken them (or `keys.timeout`): call it off the async runtime. Sends to
    /// one run are delivered one after the other, never interleaved.
    pub fn send(&self, keys: Keys<'_>, tty: bool) -> Result<usize, SendError> {
        if !tty {
            return Err(SendError::NoTerminal);
        }
        let mut input = lock(&self.input);
        let input = input.as_mut().ok_or(SendError::Ended)?;
        if self.ended.load(Ordering::SeqCst) {
            return Err(SendError::Ended);
        }
        let keys = Keys {
            cancel: Some(&self.ended),
            ..keys
        };
        match input.send(keys) {
            Err(InputError::Closed) => Err(SendError::Ended),
            sent => Ok(sent?),
        }
    }
}
