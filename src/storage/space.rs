//! Disk space: keeping the run index writable when the disk that holds the data directory
//! fills up.
//!
//! SQLite needs free space to write (its write-ahead log grows a page at a time), and a disk
//! that a command or the spills filled used to leave runs `running` for ever, later runs out of
//! the history, a purge that could not free anything and a daemon that could not start. A full
//! disk is spillway's problem, never its user's: a command runs whatever is left, and every
//! read answers. Three measures keep the index usable, whatever filled the disk:
//!
//! - **The floor.** Spill files on the index's file system stop growing once less than
//!   [`LOW_SPACE`] would be left, as if the disk were full: a spill keeps what fits above the
//!   floor and is marked incomplete with its exact byte count, and the preview's notice says in
//!   one line that the disk was full ([`spill_floor_reached`]). Spillway's own output never
//!   takes the last of the disk, so the room under the floor is the run index's. Spills on
//!   another file system (a separate mount on `spills/`) are not held back, since they cannot
//!   starve the index.
//! - **The reserve.** A file of [`RESERVE_BYTES`], `<data-dir>/space-reserve`, is made when
//!   there is room and deleted when an index write fails for want of space, or when a daemon
//!   starts or purges on a disk with less than that free: space nobody else can take while the
//!   disk fills, handed to the index the moment it needs it. It is made again once the disk has
//!   room ([`Space::replenish`]). Only a run whose record finds neither is left out of the
//!   index, and its client is told ([`Space::unrecorded`]).
//! - **Reads need no room.** A daemon that cannot open its index for writing on a full disk
//!   opens it read-only (`crate::storage::index::Index::open_read_only`) and answers reads;
//!   one that cannot open it at all says why in one line ([`Space::full_disk`]), and a client
//!   that started it prints that line (`crate::client::connection`).
//!
//! The purge deletes files before rows, so it frees space even when the index has none.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use bytesize::ByteSize;

/// The reserve file's size: room for thousands of run records and a checkpoint of the
/// write-ahead log (which SQLite checkpoints at about 4 MiB).
pub const RESERVE_BYTES: u64 = 4 << 20;

/// Spills on the index's file system stop growing where less than this would be left free:
/// the room under it is the run index's.
pub const LOW_SPACE: u64 = 8 << 20;

/// The reserve file's name in the data directory.
pub const RESERVE_FILE: &str = "space-reserve";

/// Bytes free for an unprivileged writer on the file system holding `path`.
pub fn free_bytes(path: &Path) -> io::Result<u64> {
    let stat = nix::sys::statvfs::statvfs(path)?;
    Ok(available(&stat))
}

/// Bytes free for an unprivileged writer on the file system holding the open file `fd`.
pub fn free_bytes_of(fd: impl AsFd) -> io::Result<u64> {
    let stat = nix::sys::statvfs::fstatvfs(&fd)?;
    Ok(available(&stat))
}

#[allow(clippy::useless_conversion)] // the field types differ between platforms
fn available(stat: &nix::sys::statvfs::Statvfs) -> u64 {
    u64::from(stat.blocks_available()).saturating_mul(u64::from(stat.fragment_size()))
}

/// Sizes as people read them, precise enough near the floor that "7.99 MiB free, under the
/// 8.00 MiB" does not read "8.0 MiB free, under the 8.0 MiB": `0 B`, `7.99 MiB`, `1.2 GiB`.
fn human(bytes: u64) -> String {
    match bytes {
        0 => "0 B".to_string(),
        b if b < 1 << 30 => format!("{:.2} MiB", b as f64 / (1 << 20) as f64),
        b => ByteSize::b(b).display().iec().to_string(),
    }
}

/// Why a spill on a nearly full disk stops growing (the preview's notice quotes it).
pub fn spill_floor_reached(free: u64) -> String {
    format!(
        "the disk was full ({} free, which spillway keeps for its run index)",
        human(free)
    )
}

/// Why a spill could not be written, as the preview's notice says it: a full disk in the same
/// words as the floor's, anything else as it is.
pub fn spill_write_failed(error: &io::Error) -> String {
    match error.raw_os_error() {
        Some(nix::libc::ENOSPC) => "the disk was full (no space left on it)".to_string(),
        _ => error.to_string(),
    }
}

/// The data directory's disk space and its reserve file.
#[derive(Debug)]
pub struct Space {
    root: PathBuf,
    reserve: PathBuf,
    /// Serialises making and deleting the reserve (the tidy task and the recorder thread).
    busy: Mutex<()>,
}

impl Space {
    /// The space of the data directory `root` (which must exist).
    pub fn new(root: &Path) -> Space {
        Space {
            root: root.to_path_buf(),
            reserve: root.join(RESERVE_FILE),
            busy: Mutex::new(()),
        }
    }

    /// Bytes free on the data directory's file system; None if it cannot be read.
    pub fn free(&self) -> Option<u64> {
        free_bytes(&self.root).ok()
    }

    /// Whether the reserve file is there.
    pub fn has_reserve(&self) -> bool {
        std::fs::symlink_metadata(&self.reserve).is_ok_and(|m| m.is_file())
    }

    /// Why a run could not be recorded, for its client: which disk, how full, and what frees
    /// room.
    pub fn unrecorded(&self) -> String {
        let free = self.free().map_or_else(|| "unknown".to_string(), human);
        format!(
            "the disk holding spillway's data directory {} is full ({free} free, and the \
             reserve kept for the run index is used up); `spillway purge --older-than 1d` \
             frees room",
            self.root.display()
        )
    }

    /// What a daemon says when the index cannot be opened or written at start-up and the disk
    /// is nearly full (None when it is not: the error is something else).
    pub fn full_disk(&self) -> Option<String> {
        let free = self.free()?;
        (free < LOW_SPACE).then(|| {
            format!(
                "the disk holding spillway's data directory {} is full ({} free): the run \
                 index cannot be written. Free space on that disk (old runs' output in {} can \
                 go) and start spillway again",
                self.root.display(),
                human(free),
                self.root.join("spills").display()
            )
        })
    }

    /// Deletes the reserve file, handing its space to whoever writes next (the index, we
    /// hope: call this just before retrying an index write). Returns whether there was one.
    pub fn release(&self) -> bool {
        let _busy = crate::sync::lock(&self.busy);
        match std::fs::remove_file(&self.reserve) {
            Ok(()) => {
                tracing::warn!(
                    reserve = %self.reserve.display(),
                    free = self.free(),
                    "the disk is full: released the space reserve so the run index can be written"
                );
                true
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => {
                tracing::error!(reserve = %self.reserve.display(), error = %e, "cannot release the space reserve");
                false
            }
        }
    }

    /// Releases the reserve if less than its size is free: the index may need the room (at
    /// start-up, and before a purge).
    pub fn make_room(&self) {
        if self.free().is_some_and(|free| free < RESERVE_BYTES) {
            self.release();
        }
    }

    /// Makes the reserve file if it is missing and the disk has room for it and the floor.
    pub fn replenish(&self) {
        if self.has_reserve()
            || self
                .free()
                .is_none_or(|free| free < LOW_SPACE + RESERVE_BYTES)
        {
            return;
        }
        let _busy = crate::sync::lock(&self.busy);
        let created = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            // Whatever is there already (a symlink above all) is left alone.
            .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
            .open(&self.reserve);
        let file: File = match created {
            Ok(file) => file,
            Err(e) => {
                tracing::debug!(error = %e, "cannot make the space reserve");
                return;
            }
        };
        if let Err(e) = fill(&file) {
            // Ours, made just now: a reserve that holds no space is worse than none.
            let _ = std::fs::remove_file(&self.reserve);
            tracing::debug!(error = %e, "cannot make the space reserve");
            return;
        }
        tracing::info!(reserve = %self.reserve.display(), "made the space reserve");
    }
}

/// Gives the reserve file its blocks: real ones, not a sparse file (glibc writes zeros where
/// the file system has no fallocate).
fn fill(file: &File) -> io::Result<()> {
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    let len = i64::try_from(RESERVE_BYTES).unwrap_or(i64::MAX);
    nix::fcntl::posix_fallocate(file, 0, len)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    #[test]
    fn the_reserve_is_made_private_and_released() {
        let dir = tempfile::tempdir().unwrap();
        let space = Space::new(dir.path());
        assert!(space.free().unwrap() > 0);
        space.replenish();
        if space.free().unwrap() < LOW_SPACE + RESERVE_BYTES {
            return; // this machine's disk is too full to make one
        }
        let meta = std::fs::metadata(dir.path().join(RESERVE_FILE)).unwrap();
        assert_eq!(meta.len(), RESERVE_BYTES);
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert!(space.has_reserve());
        assert!(space.release());
        assert!(!space.has_reserve());
        assert!(!space.release(), "nothing left to release");
    }

    #[test]
    fn a_symlink_at_the_reserve_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, b"mine").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join(RESERVE_FILE)).unwrap();
        let space = Space::new(dir.path());
        space.replenish();
        assert_eq!(std::fs::read(&target).unwrap(), b"mine");
        assert!(!space.has_reserve(), "a symlink is not a reserve");
    }

    #[test]
    fn the_messages_say_what_is_wrong_and_what_to_do() {
        let message = spill_floor_reached(1 << 20);
        assert!(
            message.contains("the disk was full (1.00 MiB free"),
            "{message}"
        );
        let enospc = io::Error::from_raw_os_error(nix::libc::ENOSPC);
        assert!(spill_write_failed(&enospc).starts_with("the disk was full"));
        let efbig = io::Error::from_raw_os_error(nix::libc::EFBIG);
        assert!(spill_write_failed(&efbig).contains("too large"));
        assert_eq!(human(0), "0 B");
        assert_eq!(human((8 << 20) - 10_000), "7.99 MiB");
        assert_eq!(human(3 << 30), "3.0 GiB");
        let unrecorded = Space::new(Path::new("/")).unrecorded();
        assert!(unrecorded.contains("is full ("), "{unrecorded}");
    }
}
