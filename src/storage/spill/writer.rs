//! Writing a spill's batches: each written to the file (as far as the disk's floor admits),
//! handed to the [`TextReader`] that scans it, and the progress reported back; on the
//! caller's thread while output comes a little at a time, on a writer thread of its own once
//! it comes in bulk (see [`super::SpillFile`]).

use std::fs::File;
use std::io::{self, Write};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::ahead::{AHEAD_STEP, Ahead};
use crate::storage::space;

/// What reads a spill's text on the writer thread as it is written (the engine's scanner, which
/// looks for highlights and folds the output): work over every byte of the output happens
/// there, off the capture's path, and storage needs to know nothing of what that work is.
pub trait TextReader: Send + Sync + std::fmt::Debug {
    /// Work on `text` that needs nothing but the text, made ready on the sender's thread before
    /// the batch goes to the writer when `share` says so (a sender that would only wait for
    /// the queue does it), else left for [`read`] on the writer's thread. Either way [`read`]
    /// sees the same, and whichever thread has the time does the work: the writer thread also
    /// copies every byte into the page cache, and a fixed share of the work left one of the
    /// two the slower.
    ///
    /// [`read`]: TextReader::read
    fn prepare(&self, text: &str, share: Share) -> Option<Prepared>;
    /// The next piece of the output, holding `newlines` newlines, with what [`prepare`] made
    /// of it.
    ///
    /// [`prepare`]: TextReader::prepare
    fn read(&self, text: &str, newlines: u64, prepared: Option<Prepared>);
}

/// How much of a batch's text-only work ([`TextReader::prepare`]) its sender does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    /// None: the writer is at the batch before this one at most.
    Nothing,
    /// All: the writer is further behind, and the sender would only wait for the queue (or
    /// there is no writer thread).
    All,
}

/// What a [`TextReader`] prepared of a batch, carried to the writer thread unopened.
pub type Prepared = Box<dyn std::any::Any + Send>;

/// A spill writer's watch on the free space of the disk it shares with the run index: the
/// file stops growing (as if the disk were full) where less than [`space::LOW_SPACE`] would be
/// left, keeping what fits above that. `statvfs` is asked again once as many bytes have been
/// written as half the room there was, and at least every [`Floor::CHECK_EVERY`] bytes, so a
/// disk with room costs a call per 4 MiB and a nearly full one a call per batch.
#[derive(Debug)]
pub(super) struct Floor {
    /// Bytes to write before the next look.
    until_check: u64,
    /// The room above the floor at the last look.
    room: u64,
}

impl Floor {
    const CHECK_EVERY: u64 = 4 << 20;

    pub(super) fn new() -> Floor {
        Floor {
            until_check: 0,
            room: 0,
        }
    }

    /// Whether the disk had room, at the last look, for blocks taken `step` at a time ahead
    /// of the writes without the floor ever seeing them: with four steps of room, what was
    /// taken is written before the room could run out.
    fn roomy(&self, step: u64) -> bool {
        self.room >= 4 * step
    }

    /// Whether `len` more bytes may go to `file`; if not, how many may (the room left above
    /// the floor) and why no more.
    fn admit(&mut self, file: &File, len: usize) -> Result<(), (u64, String)> {
        let len = len as u64;
        if len < self.until_check {
            self.until_check -= len;
            return Ok(());
        }
        // Unknown (an error asking) counts as room: the write itself will tell.
        let Ok(free) = space::free_bytes_of(file) else {
            return Ok(());
        };
        let room = free.saturating_sub(space::LOW_SPACE);
        self.room = room;
        if room < len {
            return Err((room, space::spill_floor_reached(free)));
        }
        self.until_check = ((room - len) / 2).min(Self::CHECK_EVERY);
        Ok(())
    }
}

/// Writes `text` to `file`, or as much of it as `floor` admits (cut at a character, so that
/// what was saved reads back whole) and then says why no more.
fn write_admitted(file: &mut File, floor: Option<&mut Floor>, text: &str) -> Result<(), String> {
    let failed = |e: io::Error| space::spill_write_failed(&e);
    match floor.map_or(Ok(()), |floor| floor.admit(file, text.len())) {
        Ok(()) => file.write_all(text.as_bytes()).map_err(failed),
        Err((room, why)) => {
            let mut keep = usize::try_from(room).unwrap_or(usize::MAX).min(text.len());
            while !text.is_char_boundary(keep) {
                keep -= 1;
            }
            file.write_all(&text.as_bytes()[..keep]).map_err(failed)?;
            Err(why)
        }
    }
}

/// Text on its way to the file (unless `scan_only`), and who scans it there. Text, not bytes:
/// the scanner needs `str`, and checking the UTF-8 again would cost as much as the scan.
pub(super) struct Batch {
    pub(super) text: String,
    /// Newlines in `text`, counted by the capture already: the scanner needs the count.
    pub(super) newlines: u64,
    /// What the reader prepared of `text` on the sender's thread ([`TextReader::prepare`]).
    pub(super) prepared: Option<Prepared>,
    pub(super) scan_only: bool,
    pub(super) scanner: Option<Arc<dyn TextReader>>,
}

/// One emptied buffer the writer gives back for the next batch, so that output in bulk does
/// not cost an allocation (and the first touch of its pages) per batch; freed once the output
/// has paused for [`QUIET`], so that a quiet run holds no batch at all.
pub(super) type Spare = Arc<Mutex<Option<String>>>;

/// How long the writer waits for a batch before it frees the spare buffer.
const QUIET: Duration = Duration::from_millis(100);

/// What the writer thread has done.
#[derive(Debug, Clone, Default)]
pub(super) struct Progress {
    /// Bytes the writer has dealt with: written, only scanned (past the cap), or dropped
    /// after a failure.
    pub(super) handled: u64,
    /// Bytes really in the file.
    pub(super) written: u64,
    pub(super) error: Option<String>,
}

/// Writes batches to the file, stops writing at the first error or at the disk's floor (but
/// goes on scanning, so that no highlight is lost), and reports progress after each batch,
/// once it is scanned. The same on whichever thread it runs.
#[derive(Debug)]
pub(super) struct BatchWriter {
    /// `None` once a write has failed.
    file: Option<File>,
    floor: Option<Floor>,
    /// Bytes in the file.
    in_file: u64,
    /// The file's blocks allocated ahead of its writes, given back as the writer closes it.
    ahead: Ahead,
}

impl BatchWriter {
    pub(super) fn new(file: File, floor: Option<Floor>) -> BatchWriter {
        BatchWriter {
            file: Some(file),
            floor,
            in_file: 0,
            ahead: Ahead::default(),
        }
    }

    /// Writes `text` to the file, its blocks allocated ahead for a large spill.
    fn write_text(&mut self, text: &str) -> Option<Result<(), String>> {
        let file = self.file.as_mut()?;
        let roomy = self.floor.as_ref().is_none_or(|f| f.roomy(AHEAD_STEP));
        self.ahead
            .before_write(file, self.in_file, text.len() as u64, roomy);
        let result = write_admitted(file, self.floor.as_mut(), text);
        if result.is_ok() {
            self.in_file += text.len() as u64;
        }
        Some(result)
    }

    /// Closes the file after a failed write, its blocks allocated ahead given back; returns
    /// how many bytes it really holds.
    fn close_failed(&mut self) -> Option<u64> {
        let file = self.file.take()?;
        let len = file.metadata().ok()?.len();
        self.ahead.release(&file, len);
        Some(len)
    }

    /// Writes and scans `batch`, gives its emptied buffer back to `spare` if given, and tells
    /// `shared` how far it got.
    pub(super) fn write(
        &mut self,
        batch: Batch,
        spare: Option<&Spare>,
        shared: &(Mutex<Progress>, Condvar),
    ) {
        let Batch {
            text,
            newlines,
            prepared,
            scan_only,
            scanner,
        } = batch;
        let result = if scan_only {
            None
        } else {
            self.write_text(&text)
        };
        if let Some(scanner) = scanner {
            scanner.read(&text, newlines, prepared);
        }
        let len = text.len() as u64;
        // Given back before the progress is told: a flush that returns finds it there.
        if let Some(spare) = spare {
            give_back(spare, text);
        }
        let (lock, wake) = shared;
        let mut progress = crate::sync::lock(lock);
        progress.handled += len;
        match result {
            Some(Ok(())) => progress.written += len,
            Some(Err(e)) => {
                // Part of the batch may have landed: report what is really on disk.
                if let Some(len) = self.close_failed() {
                    progress.written = len;
                }
                progress.error = Some(e);
            }
            None => {}
        }
        drop(progress);
        wake.notify_all();
    }
}

impl Drop for BatchWriter {
    fn drop(&mut self) {
        if let Some(file) = &self.file {
            self.ahead.release(file, self.in_file);
        }
    }
}

/// The writer thread: writes batches until the queue closes, giving each emptied buffer back
/// as the spare for the next.
pub(super) fn write_batches(
    mut writer: BatchWriter,
    batches: &Receiver<Batch>,
    spare: &Spare,
    shared: &(Mutex<Progress>, Condvar),
) {
    while let Some(batch) = next_batch(batches, spare) {
        writer.write(batch, Some(spare), shared);
    }
}

/// Keeps `text`, emptied, as the spare buffer, unless there is one already.
fn give_back(spare: &Spare, mut text: String) {
    text.clear();
    let mut slot = crate::sync::lock(spare);
    if slot.is_none() {
        *slot = Some(text);
    }
}

/// The next batch, or `None` once the queue has closed; frees the spare buffer when none
/// came for [`QUIET`].
fn next_batch(batches: &Receiver<Batch>, spare: &Spare) -> Option<Batch> {
    match batches.recv_timeout(QUIET) {
        Ok(batch) => Some(batch),
        Err(RecvTimeoutError::Disconnected) => None,
        Err(RecvTimeoutError::Timeout) => {
            drop(crate::sync::lock(spare).take());
            batches.recv().ok()
        }
    }
}
