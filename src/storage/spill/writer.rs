//! Writing a spill's batches: each written to the file (as far as the disk's floor admits),
//! handed to the [`TextReader`] that scans it, and the progress reported back; on the
//! caller's thread while output comes a little at a time, on a writer thread of its own once
//! it comes in bulk (see [`super::SpillFile`]).

use std::fs::File;
use std::io;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::ahead::{AHEAD_STEP, Ahead};
use super::aligned::{Held, aligned_cut, first_bytes, write_all_parts};
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

/// Writes `parts` to `file`, one after the other, or as much of them as `floor` admits (cut at
/// a character, so that what was saved reads back whole) and then says why no more.
fn write_admitted(
    file: &mut File,
    floor: Option<&mut Floor>,
    parts: [&str; 2],
) -> Result<(), String> {
    let failed = |e: io::Error| space::spill_write_failed(&e);
    let len = parts[0].len() + parts[1].len();
    match floor.map_or(Ok(()), |floor| floor.admit(file, len)) {
        Ok(()) => write_all_parts(file, parts).map_err(failed),
        Err((room, why)) => {
            let room = usize::try_from(room).unwrap_or(usize::MAX);
            write_all_parts(file, first_bytes(parts, room)).map_err(failed)?;
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

/// Emptied buffers the writer gives back for the next batches (at most [`SPARES`]), so that
/// output in bulk does not cost an allocation (and the first touch of its pages) per batch;
/// freed once the output has paused for [`QUIET`], so that a quiet run holds no batch at all.
pub(super) type Spare = Arc<Mutex<Vec<String>>>;

/// Buffers kept for reuse at most. One was too few: where the sender did not wait for the
/// queue, the writer had not yet given back the buffer the sender then needed, and one batch
/// in eight of a 256 MiB `truncate` was sent in a new buffer, grown as it filled (the more so
/// as the writer now keeps a batch's buffer until its held-back end is written, see
/// [`super::aligned`]).
const SPARES: usize = 2;

/// How long the writer waits for a batch before it frees the spare buffers.
const QUIET: Duration = Duration::from_millis(100);

/// What the writer thread has done.
#[derive(Debug, Clone, Default)]
pub(super) struct Progress {
    /// Bytes the writer has dealt with: written, only scanned (past the cap), or dropped
    /// after a failure.
    pub(super) handled: u64,
    /// Bytes really in the file.
    pub(super) written: u64,
    /// Bytes handled but held back from the file for a moment (see [`super::aligned`]).
    pub(super) held: u64,
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
    /// Whether each batch is written up to an aligned boundary only, the rest held back for
    /// the next write (a writer thread's way; see [`super::aligned`]).
    aligns: bool,
    /// The rest of the last batch, held back.
    held: Option<Held>,
}

impl BatchWriter {
    pub(super) fn new(file: File, floor: Option<Floor>) -> BatchWriter {
        BatchWriter {
            file: Some(file),
            floor,
            in_file: 0,
            ahead: Ahead::default(),
            aligns: false,
            held: None,
        }
    }

    /// Writes what is held back, then `text`, to the file, its blocks allocated ahead for a
    /// large spill; returns how many bytes went in (`None`: the file failed before).
    fn write_after_held(&mut self, text: &str) -> Option<Result<u64, String>> {
        let file = self.file.as_mut()?;
        let rest = self.held.as_ref().map_or("", Held::rest);
        let len = (rest.len() + text.len()) as u64;
        if len == 0 {
            return Some(Ok(0));
        }
        let roomy = self.floor.as_ref().is_none_or(|f| f.roomy(AHEAD_STEP));
        self.ahead.before_write(file, self.in_file, len, roomy);
        let result = write_admitted(file, self.floor.as_mut(), [rest, text]);
        if result.is_ok() {
            self.in_file += len;
        }
        Some(result.map(|()| len))
    }

    /// Where to stop writing `text` so that the write ends on an aligned boundary, when this
    /// writer aligns its writes and one falls within `text`.
    fn cut(&self, text: &str) -> Option<usize> {
        if !self.aligns {
            return None;
        }
        let before = self.held.as_ref().map_or(0, |held| held.rest().len());
        aligned_cut(self.in_file, before, text).filter(|&cut| cut < text.len())
    }

    /// Writes what is held back, if anything, gives its buffer to `spare`, and tells `shared`.
    fn write_held(&mut self, spare: &Spare, shared: &(Mutex<Progress>, Condvar)) {
        if self.held.is_none() {
            return;
        }
        let result = self.write_after_held("");
        if let Some(held) = self.held.take() {
            give_back(spare, held.into_buffer());
        }
        self.report(shared, 0, result);
    }

    /// Tells `shared` that `handled` more bytes were dealt with, and what writing them did.
    fn report(
        &mut self,
        shared: &(Mutex<Progress>, Condvar),
        handled: u64,
        result: Option<Result<u64, String>>,
    ) {
        let (lock, wake) = shared;
        let mut progress = crate::sync::lock(lock);
        progress.handled += handled;
        match result {
            Some(Ok(written)) => progress.written += written,
            Some(Err(e)) => {
                // Part of the batch may have landed: report what is really on disk. What was
                // held back is lost with the rest.
                self.held = None;
                if let Some(len) = self.close_failed() {
                    progress.written = len;
                }
                progress.error = Some(e);
            }
            None => {}
        }
        progress.held = self
            .held
            .as_ref()
            .map_or(0, |held| held.rest().len() as u64);
        drop(progress);
        wake.notify_all();
    }

    /// Closes the file after a failed write, its blocks allocated ahead given back; returns
    /// how many bytes it really holds.
    fn close_failed(&mut self) -> Option<u64> {
        let file = self.file.take()?;
        let len = file.metadata().ok()?.len();
        self.ahead.release(&file, len);
        Some(len)
    }

    /// Writes and scans `batch` (after what is held back), gives an emptied buffer back to
    /// `spare` if given, and tells `shared` how far it got. A writer that aligns its writes
    /// stops at the last aligned boundary in the batch and holds the rest, in the batch's own
    /// buffer, for the next write.
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
        let cut = if scan_only { None } else { self.cut(&text) };
        // Past the cap the file takes no more of the text, but what is held goes in.
        let now = if scan_only {
            ""
        } else {
            &text[..cut.unwrap_or(text.len())]
        };
        let result = self.write_after_held(now);
        let written_held = self.held.take().map(Held::into_buffer);
        if let Some(scanner) = scanner {
            scanner.read(&text, newlines, prepared);
        }
        let len = text.len() as u64;
        let free = match cut {
            Some(cut) if matches!(result, Some(Ok(_))) => {
                self.held = Some(Held::new(text, cut));
                None
            }
            _ => Some(text),
        };
        // Given back before the progress is told: a flush that returns finds them there.
        if let Some(spare) = spare {
            for buffer in [written_held, free].into_iter().flatten() {
                give_back(spare, buffer);
            }
        }
        self.report(shared, len, result);
    }
}

impl Drop for BatchWriter {
    fn drop(&mut self) {
        // The writer thread writes what it holds before it waits or ends; this is for a
        // writer that ends some other way.
        let _ = self.write_after_held("");
        if let Some(file) = &self.file {
            self.ahead.release(file, self.in_file);
        }
    }
}

/// The writer thread: writes batches until the queue closes, giving each emptied buffer back
/// as the spare for the next. Each write ends on an aligned boundary while more batches are
/// queued; what is held back goes to the file whenever the queue is empty, before the writer
/// waits for the next batch or ends.
pub(super) fn write_batches(
    mut writer: BatchWriter,
    batches: &Receiver<Batch>,
    spare: &Spare,
    shared: &(Mutex<Progress>, Condvar),
) {
    writer.aligns = true;
    loop {
        let batch = match batches.try_recv() {
            Ok(batch) => batch,
            Err(_) => {
                writer.write_held(spare, shared);
                match next_batch(batches, spare) {
                    Some(batch) => batch,
                    None => break,
                }
            }
        };
        writer.write(batch, Some(spare), shared);
    }
}

/// Keeps `text`, emptied, as a spare buffer, unless there are enough already.
fn give_back(spare: &Spare, mut text: String) {
    text.clear();
    let mut spares = crate::sync::lock(spare);
    if spares.len() < SPARES {
        spares.push(text);
    }
}

/// The next batch, or `None` once the queue has closed; frees the spare buffers when none
/// came for [`QUIET`].
fn next_batch(batches: &Receiver<Batch>, spare: &Spare) -> Option<Batch> {
    match batches.recv_timeout(QUIET) {
        Ok(batch) => Some(batch),
        Err(RecvTimeoutError::Disconnected) => None,
        Err(RecvTimeoutError::Timeout) => {
            drop(std::mem::take(&mut *crate::sync::lock(spare)));
            batches.recv().ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::super::aligned::ALIGN;
    use super::*;

    fn batch(text: String, scan_only: bool) -> Batch {
        Batch {
            text,
            newlines: 0,
            prepared: None,
            scan_only,
            scanner: None,
        }
    }

    fn progress(shared: &(Mutex<Progress>, Condvar)) -> Progress {
        crate::sync::lock(&shared.0).clone()
    }

    /// A writer as the writer thread runs it, on `spill` in a new temporary directory.
    fn thread_writer() -> (tempfile::TempDir, BatchWriter) {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = BatchWriter::new(File::create(dir.path().join("spill")).unwrap(), None);
        writer.aligns = true;
        (dir, writer)
    }

    /// A writer thread's batches of odd sizes, some of two-byte chars whose bytes an aligned
    /// boundary can split: each write ends on a boundary (or a char before it), the rest is
    /// held, the progress says exactly what is in the file and what is held, and once the
    /// writer would wait the file holds every byte in order.
    #[test]
    fn a_writer_thread_writes_up_to_aligned_boundaries_and_holds_the_rest() {
        let (dir, mut writer) = thread_writer();
        let path = dir.path().join("spill");
        let (spare, shared) = (Spare::default(), (Mutex::default(), Condvar::new()));
        let mut expected = String::new();
        let mut held_some = false;
        for (i, len) in [100_001, 200_003, 50, 150_000, 131_072, 70_001]
            .into_iter()
            .enumerate()
        {
            let text = if i % 2 == 0 {
                char::from(b'a' + i as u8).to_string().repeat(len)
            } else {
                "é".repeat(len / 2)
            };
            expected.push_str(&text);
            writer.write(batch(text, false), Some(&spare), &shared);
            let now = progress(&shared);
            assert_eq!(fs::metadata(&path).unwrap().len(), now.written);
            assert_eq!(now.written + now.held, expected.len() as u64);
            if now.held > 0 {
                held_some = true;
                // On a boundary, or a byte before it where a char straddles it.
                let short = (ALIGN - now.written % ALIGN) % ALIGN;
                assert!(short < 2, "{now:?}");
            }
        }
        assert!(held_some, "nothing was ever held back");
        writer.write_held(&spare, &shared);
        let now = progress(&shared);
        assert_eq!((now.written, now.held), (expected.len() as u64, 0));
        assert_eq!(fs::read_to_string(&path).unwrap(), expected);
        assert!(
            !crate::sync::lock(&spare).is_empty(),
            "the held buffer was given back"
        );
    }

    /// Past the spill's cap the file takes no more text, but what was held goes in first.
    #[test]
    fn what_is_held_goes_in_before_a_batch_only_scanned() {
        let (dir, mut writer) = thread_writer();
        let path = dir.path().join("spill");
        let (spare, shared) = (Spare::default(), (Mutex::default(), Condvar::new()));
        let kept = "k".repeat(ALIGN as usize + 10);
        writer.write(batch(kept.clone(), false), Some(&spare), &shared);
        assert_eq!(progress(&shared).held, 10);
        writer.write(batch("dropped".into(), true), Some(&spare), &shared);
        let now = progress(&shared);
        assert_eq!((now.written, now.held), (kept.len() as u64, 0));
        assert_eq!(fs::read_to_string(&path).unwrap(), kept);
    }

    /// Emptied buffers are kept for the next batches, up to [`SPARES`] of them.
    #[test]
    fn a_few_emptied_buffers_are_kept_for_reuse_and_no_more() {
        let spare = Spare::default();
        for len in [10, 20, 30] {
            give_back(&spare, "x".repeat(len));
        }
        let kept = crate::sync::lock(&spare);
        assert_eq!(kept.len(), SPARES);
        assert!(kept.iter().all(|b| b.is_empty() && b.capacity() >= 10));
    }

    /// A writer on the caller's thread writes each batch whole, as it comes.
    #[test]
    fn a_writer_on_the_callers_thread_holds_nothing_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spill");
        let mut writer = BatchWriter::new(File::create(&path).unwrap(), None);
        let shared = (Mutex::default(), Condvar::new());
        let text = "x".repeat(ALIGN as usize + 10);
        writer.write(batch(text.clone(), false), None, &shared);
        assert_eq!(progress(&shared).written, text.len() as u64);
        assert_eq!(fs::metadata(&path).unwrap().len(), text.len() as u64);
    }
}
