//! Disk blocks given to a large spill ahead of its writes.
//!
//! A file system that allocates blocks as they are written (ext4's delayed allocation, and
//! most others) reserves space, looks up and inserts extents and charges the quota for every
//! page a `write` adds past a file's allocated end: on this project's machine a quarter of the
//! kernel's time writing 256 MiB in 256 KiB writes (91 ms against 66 ms when the file's blocks
//! were allocated ahead, in 16 MiB steps, by a test program). A spill that has grown past
//! [`AHEAD_FROM`] is given its next [`AHEAD_STEP`] of blocks in one `fallocate` whenever its
//! writes reach the end of those it has, without changing its length (`FALLOC_FL_KEEP_SIZE`:
//! a reader still sees exactly the bytes written). Whatever is left unwritten when the writer
//! closes the file is given back by truncating it to its own length, which frees allocated
//! blocks past the end. A process killed before that leaves at most one step allocated past
//! the end of its spill, freed when the spill is deleted.
//!
//! Short outputs never ask (no system call for the common case), and a file system without
//! `fallocate`, or a disk without room, simply gets the writes as before.

use std::fs::File;

use nix::fcntl::{FallocateFlags, fallocate};

/// A spill is given blocks ahead once it holds this many bytes: most outputs never do.
pub(super) const AHEAD_FROM: u64 = 1 << 20;

/// Blocks given at once: one system call per this many bytes written.
pub(super) const AHEAD_STEP: u64 = 8 << 20;

/// How far a spill's blocks have been allocated ahead of its writes.
#[derive(Debug, Default)]
pub(super) struct Ahead {
    /// The end of the blocks given so far (0: none asked for).
    allocated_to: u64,
    /// Whether an allocation failed: the file system cannot, or the disk is full; not asked
    /// again for this file.
    refused: bool,
}

impl Ahead {
    /// Before `len` more bytes go to `file`, which holds `written`: gives it the next step of
    /// blocks if those writes pass the end of the ones it has and the disk is `roomy` (the
    /// space taken ahead must not count against the free space a spill may use).
    pub(super) fn before_write(&mut self, file: &File, written: u64, len: u64, roomy: bool) {
        let end = written + len;
        if self.refused || end <= self.allocated_to || written < AHEAD_FROM || !roomy {
            return;
        }
        let from = self.allocated_to.max(written);
        let step = AHEAD_STEP.max(end - from);
        let (Ok(offset), Ok(size)) = (i64::try_from(from), i64::try_from(step)) else {
            self.refused = true;
            return;
        };
        match fallocate(file, FallocateFlags::FALLOC_FL_KEEP_SIZE, offset, size) {
            Ok(()) => self.allocated_to = from + step,
            Err(e) => {
                tracing::debug!(error = %e, "spill blocks not allocated ahead");
                self.refused = true;
            }
        }
    }

    /// Frees the blocks allocated past `file`'s end, which holds `written` bytes (truncating a
    /// file to its own length frees them). Nothing to do when none were asked for.
    pub(super) fn release(&mut self, file: &File, written: u64) {
        if self.allocated_to <= written {
            return;
        }
        if let Err(e) = file.set_len(written) {
            tracing::debug!(error = %e, "spill blocks allocated ahead not freed");
        }
        self.allocated_to = 0;
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;

    use super::*;

    /// Bytes of disk `file` holds, by its allocated 512-byte blocks.
    fn allocated(file: &File) -> u64 {
        file.metadata().unwrap().blocks() * 512
    }

    #[test]
    fn a_large_spill_gets_blocks_ahead_and_gives_back_the_unwritten_ones() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = File::create(dir.path().join("spill")).unwrap();
        let mut ahead = Ahead::default();
        let chunk = vec![b'x'; 256 << 10];
        let mut written = 0u64;
        let mut asked = false;
        while written < AHEAD_FROM + (512 << 10) {
            ahead.before_write(&file, written, chunk.len() as u64, true);
            file.write_all(&chunk).unwrap();
            written += chunk.len() as u64;
            // The length is always what was written, blocks ahead or not.
            assert_eq!(file.metadata().unwrap().len(), written);
            asked |= ahead.allocated_to > 0;
        }
        assert!(asked, "no blocks were asked for past {AHEAD_FROM} bytes");
        if ahead.refused || allocated(&file) < written + AHEAD_STEP / 2 {
            eprintln!("SKIPPED: this file system allocates nothing ahead");
            return;
        }
        ahead.release(&file, written);
        assert_eq!(file.metadata().unwrap().len(), written);
        assert!(
            allocated(&file) < written + (64 << 10),
            "{} bytes still allocated for {written}",
            allocated(&file)
        );
        let back = std::fs::read(dir.path().join("spill")).unwrap();
        assert!(back.len() as u64 == written && back.iter().all(|&b| b == b'x'));
    }

    #[test]
    fn a_short_spill_or_a_crowded_disk_asks_for_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join("spill")).unwrap();
        let mut ahead = Ahead::default();
        ahead.before_write(&file, 0, AHEAD_FROM - 1, true);
        assert_eq!(ahead.allocated_to, 0, "a short spill got blocks ahead");
        ahead.before_write(&file, AHEAD_FROM, 4096, false);
        assert_eq!(ahead.allocated_to, 0, "a crowded disk gave blocks ahead");
        assert_eq!(allocated(&file), 0);
    }
}
