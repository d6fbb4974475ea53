//! The data directory and the spill files in it.
//!
//! A spill file holds the whole normalised output of one command, so that a preview can drop
//! lines without losing them. Spill files live in `<data-dir>/spills/`, are private to the user
//! (0600 files in 0700 directories) and are named so that they sort by creation time and never
//! collide, even between processes: `<UTC time to the microsecond>-<pid>-<counter>.log`, created
//! with `O_EXCL`.
//!
//! Writing a spill never fails the caller: a [`SpillFile`] remembers the first write error (disk
//! full, `EFBIG`), stops writing, and reports how far it got, so the preview can still be given
//! and its notice can say the spill is incomplete and why.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};

mod ahead;
mod aligned;
mod writer;

use writer::{Batch, BatchWriter, Floor, Progress, Spare, write_batches};
pub use writer::{Prepared, Share, TextReader};

/// Environment variable naming the data directory.
pub const DATA_DIR_ENV: &str = "SPILLWAY_DATA_DIR";

/// Errors setting up the data directory or creating a spill file.
#[derive(Debug, thiserror::Error)]
pub enum SpillError {
    #[error("cannot find a data directory: set {DATA_DIR_ENV}, XDG_STATE_HOME or HOME")]
    NoDataDir,
    #[error("cannot create directory {path}: {source}")]
    CreateDir { path: PathBuf, source: io::Error },
    #[error("{path} is not a directory")]
    NotADirectory { path: PathBuf },
    #[error("{path} is a symbolic link; refusing to follow it (use the directory it names)")]
    Symlink { path: PathBuf },
    #[error("{path} is owned by uid {owner}, not by this user (uid {me}); refusing to use it")]
    ForeignOwner { path: PathBuf, owner: u32, me: u32 },
    #[error(
        "{path} is inside {ancestor} (owned by uid {owner}), which another user could rename \
         it out of; refusing to use it: choose a data directory under your own"
    )]
    ForeignAncestor {
        path: PathBuf,
        ancestor: PathBuf,
        owner: u32,
    },
    #[error("cannot make {path} private (mode 0700): {source}")]
    Chmod { path: PathBuf, source: io::Error },
    #[error("cannot create spill file in {dir}: {source}")]
    CreateFile { dir: PathBuf, source: io::Error },
    #[error("the disk was full: no spill file could be created in {dir}")]
    DiskFull { dir: PathBuf },
}

/// The resolved, existing, private data directory.
#[derive(Debug, Clone)]
pub struct DataDir {
    root: PathBuf,
}

impl DataDir {
    /// Picks the data directory: `explicit` (from `--data-dir` or `SPILLWAY_DATA_DIR`), else
    /// `$XDG_STATE_HOME/spillway`, else `~/.local/state/spillway`. Relative paths are made
    /// absolute against the current directory, so spill paths printed to an agent are absolute.
    pub fn locate(explicit: Option<&Path>) -> Result<PathBuf, SpillError> {
        let non_empty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let dir = match explicit {
            Some(dir) => dir.to_path_buf(),
            None => match non_empty("XDG_STATE_HOME") {
                Some(state) => PathBuf::from(state).join("spillway"),
                None => {
                    let home = non_empty("HOME").ok_or(SpillError::NoDataDir)?;
                    PathBuf::from(home).join(".local/state/spillway")
                }
            },
        };
        std::path::absolute(&dir).map_err(|source| SpillError::CreateDir { path: dir, source })
    }

    /// Names a data directory without touching the disk; [`DataDir::create_spill`] creates it
    /// when a spill is first needed, so a bad directory costs the spill, never the preview.
    pub fn at(root: &Path) -> DataDir {
        DataDir {
            root: root.to_path_buf(),
        }
    }

    /// Creates (or checks) `root` and its `spills/` subdirectory, both 0700 and owned by us.
    pub fn open(root: &Path) -> Result<DataDir, SpillError> {
        let dir = DataDir::at(root);
        dir.ensure()?;
        Ok(dir)
    }

    fn ensure(&self) -> Result<(), SpillError> {
        check_ancestors(&self.root)?;
        ensure_private_dir(&self.root)?;
        ensure_private_dir(&self.spills_dir())
    }

    /// The data directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where spill files live.
    pub fn spills_dir(&self) -> PathBuf {
        self.root.join("spills")
    }

    /// Whether the spills are on the file system that holds the run index, so that filling
    /// them would leave the index no room (see [`crate::storage::space`]); when in doubt, yes.
    fn shares_the_index_disk(&self) -> bool {
        match (fs::metadata(&self.root), fs::metadata(self.spills_dir())) {
            (Ok(root), Ok(spills)) => root.dev() == spills.dev(),
            _ => true,
        }
    }

    /// Creates a new, empty spill file with a unique, time-ordered name.
    pub fn create_spill(&self) -> Result<SpillFile, SpillError> {
        self.ensure()?;
        let dir = self.spills_dir();
        let floor = self.shares_the_index_disk().then(Floor::new);
        loop {
            let path = dir.join(format!("{}.log", new_stem()));
            let opened = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path);
            match opened {
                Ok(file) => return Ok(SpillFile::new(path, file, floor)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) if e.raw_os_error() == Some(nix::libc::ENOSPC) => {
                    return Err(SpillError::DiskFull { dir });
                }
                Err(source) => return Err(SpillError::CreateFile { dir, source }),
            }
        }
    }
}

/// A name stem that sorts by creation time and is unique across processes.
fn new_stem() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = chrono::Utc::now().format("%Y%m%dT%H%M%S%.6fZ");
    let seq = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{now}-{}-{seq:06}", std::process::id())
}

/// Refuses a data directory below a directory another user could rename it out of: one owned
/// by another user (root aside), or one others may write to without the sticky bit (`/tmp`
/// has it). That user could swap `spills/` for their own, and `show` and `grep` would serve
/// their text as a run's output. Ancestors that do not exist yet are made by us.
fn check_ancestors(root: &Path) -> Result<(), SpillError> {
    let me = nix::unistd::geteuid().as_raw();
    for dir in root.ancestors().skip(1) {
        let Ok(meta) = fs::metadata(dir) else {
            continue;
        };
        let owner = meta.uid();
        let open_to_others = meta.mode() & 0o022 != 0 && meta.mode() & 0o1000 == 0;
        if (owner != me && owner != 0) || open_to_others {
            return Err(SpillError::ForeignAncestor {
                path: root.to_path_buf(),
                ancestor: dir.to_path_buf(),
                owner,
            });
        }
    }
    Ok(())
}

/// Makes sure `path` is a real directory owned by us with mode 0700, creating it if needed.
/// A directory someone else owns (or a symlink to one) is refused: spills may hold secrets.
pub(crate) fn ensure_private_dir(path: &Path) -> Result<(), SpillError> {
    // Said plainly; one put there after this check still fails the `is_dir` check below.
    if fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink()) {
        return Err(SpillError::Symlink {
            path: path.to_path_buf(),
        });
    }
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|source| SpillError::CreateDir {
            path: path.to_path_buf(),
            source,
        })?;
    let meta = fs::symlink_metadata(path).map_err(|source| SpillError::CreateDir {
        path: path.to_path_buf(),
        source,
    })?;
    if !meta.is_dir() {
        return Err(SpillError::NotADirectory {
            path: path.to_path_buf(),
        });
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Err(SpillError::ForeignOwner {
            path: path.to_path_buf(),
            owner: meta.uid(),
            me,
        });
    }
    if meta.mode() & 0o777 != 0o700 {
        fs::set_permissions(path, fs::Permissions::from_mode(0o700)).map_err(|source| {
            SpillError::Chmod {
                path: path.to_path_buf(),
                source,
            }
        })?;
    }
    Ok(())
}

/// Bytes gathered before a batch goes to the writer thread: large enough that bulk output
/// costs few syscalls. A batch grows to it by need, so a run that prints little holds little.
const BATCH_BYTES: usize = 128 * 1024;
/// A batch this large is output in bulk: from the first such batch on, a thread of its own
/// writes the spill. Smaller ones, before it, are written on the caller's thread.
const BULK_BATCH: usize = BATCH_BYTES / 4;
/// Batches queued for the writer at most (besides the one it writes); beyond that `write`
/// waits, so memory stays bounded. One is enough for the writer never to wait on a busy
/// capture: the capture fills the next batch while the writer writes one and one waits.
const BATCHES_IN_FLIGHT: usize = 1;

/// An open spill file that records, rather than returns, its first write error.
///
/// Output in bulk is written by a thread of its own, in batches: copying into the page cache
/// costs as much as everything else capture does, so on two cores overlapping the two nearly
/// halves the time, and a slow disk never stalls the caller for more than the queue's depth.
/// That thread starts with the first batch of [`BULK_BATCH`] bytes or more. Until then each
/// batch is written as it is sent, on the caller's thread: most commands print a few
/// kilobytes, and for them a thread's start, a hand-off and a wait for the writer at the end
/// (each a wake-up of a sleeping thread, 10-250 µs on a virtual machine) cost more than the
/// write itself.
#[derive(Debug)]
pub struct SpillFile {
    path: PathBuf,
    batch: String,
    /// Newlines in `batch`.
    batch_newlines: u64,
    sink: Sink,
    /// Emptied buffers the writer thread gave back, for the next batches.
    spare: Spare,
    shared: Arc<(Mutex<Progress>, Condvar)>,
    /// Bytes handed to `write` so far.
    accepted: u64,
    /// Where the batch last sent to the writer started (in `accepted` bytes).
    previous_start: u64,
    /// The writer's progress as of the last `flush`.
    seen: Progress,
    /// Scans what is written from now on for highlights, where the batches are written.
    scanner: Option<Arc<dyn TextReader>>,
    /// Set once the file has reached its cap: later text goes to the scanner only.
    closed: bool,
}

/// Where a spill's batches are written.
#[derive(Debug)]
enum Sink {
    /// On the caller's thread, as each is sent.
    Here(BatchWriter),
    /// On the writer thread, through its queue.
    Thread {
        queue: SyncSender<Batch>,
        writer: JoinHandle<()>,
    },
    /// Nowhere: the spill is being dropped.
    Gone,
}

impl SpillFile {
    fn new(path: PathBuf, file: File, floor: Option<Floor>) -> SpillFile {
        SpillFile {
            path,
            batch: String::new(),
            batch_newlines: 0,
            sink: Sink::Here(BatchWriter::new(file, floor)),
            spare: Spare::default(),
            shared: Arc::new((Mutex::new(Progress::default()), Condvar::new())),
            accepted: 0,
            previous_start: 0,
            seen: Progress::default(),
            scanner: None,
            closed: false,
        }
    }

    /// Hands the writing to a thread of its own, from now on. If the thread cannot start,
    /// the batches go on being written here.
    fn start_writer_thread(&mut self) {
        let writer = match std::mem::replace(&mut self.sink, Sink::Gone) {
            Sink::Here(writer) => writer,
            elsewhere => {
                self.sink = elsewhere;
                return;
            }
        };
        // The thread takes the writer from here as it starts: a thread that cannot start
        // leaves it for this one.
        let handed = Arc::new(Mutex::new(Some(writer)));
        let (queue, batches) = mpsc::sync_channel::<Batch>(BATCHES_IN_FLIGHT);
        let (taken, spare, shared) = (
            Arc::clone(&handed),
            Arc::clone(&self.spare),
            Arc::clone(&self.shared),
        );
        let spawned = thread::Builder::new()
            .name("spill-writer".into())
            .spawn(move || {
                if let Some(writer) = crate::sync::lock(&taken).take() {
                    write_batches(writer, &batches, &spare, &shared);
                }
            });
        self.sink = match spawned {
            Ok(writer) => Sink::Thread { queue, writer },
            Err(e) => {
                tracing::warn!("cannot start a spill writer thread ({e}): writing on this one");
                let writer = crate::sync::lock(&handed).take();
                Sink::Here(writer.expect("a thread that did not start took nothing"))
            }
        };
    }

    /// Has `scanner` look for highlights in the bytes written from now on (the writer thread
    /// scans each batch once it is in the file); `None` stops that.
    pub fn scan_with(&mut self, scanner: Option<Arc<dyn TextReader>>) {
        self.send_batch();
        self.scanner = scanner;
    }

    /// Appends `text`, which holds `newlines` newlines (the scanner needs the count, and the
    /// capture has it); after the first failure, or once closed, the text is dropped (but
    /// still scanned).
    pub fn write(&mut self, text: &str, newlines: u64) {
        if self.unwanted() {
            return;
        }
        self.accepted += text.len() as u64;
        self.batch.push_str(text);
        self.batch_newlines += newlines;
        if self.batch.len() >= BATCH_BYTES {
            self.send_batch();
        }
    }

    /// Appends the first `keep` bytes of `text` (a char boundary) and closes the file: it has
    /// reached its cap, and it takes no more (the rest of `text`, and what comes later, is
    /// only scanned).
    pub fn write_and_close(&mut self, text: &str, keep: usize, newlines: u64) {
        if self.closed {
            return self.write(text, newlines);
        }
        let (kept, rest) = text.split_at(keep);
        let kept_newlines = memchr::memchr_iter(b'\n', kept.as_bytes()).count() as u64;
        self.write(kept, kept_newlines);
        self.send_batch();
        self.closed = true;
        self.write(rest, newlines - kept_newlines);
    }

    /// Appends `text`, which holds `newlines` newlines, handing the buffer itself to the
    /// writer when it is big enough to be a batch on its own (no copy), and returns an empty
    /// buffer for the caller to reuse: the caller's own, or, where it went to the writer, the
    /// one the writer gave back, or else a new one that the caller's next fill sizes by what
    /// it needs.
    pub fn write_owned(&mut self, mut text: String, newlines: u64) -> String {
        if self.unwanted() || !self.batch.is_empty() || text.len() < BULK_BATCH {
            self.write(&text, newlines);
            text.clear();
            return text;
        }
        self.accepted += text.len() as u64;
        self.dispatch(text, newlines);
        self.take_spare()
    }

    /// A buffer the writer gave back, if it has one, else an empty one.
    fn take_spare(&self) -> String {
        crate::sync::lock(&self.spare).pop().unwrap_or_default()
    }

    /// Whether text written now goes nowhere: the file is closed and nobody scans.
    fn unwanted(&self) -> bool {
        self.closed && self.scanner.is_none()
    }

    /// Hands the bytes gathered so far to the writer without waiting for a full batch: a
    /// reader about to block calls this, so the file trails the command by moments, not by a
    /// batch (a daemon killed with -9 then loses nothing it had read).
    pub fn hand_off(&mut self) {
        self.send_batch();
    }

    fn send_batch(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let next = self.take_spare();
        let full = std::mem::replace(&mut self.batch, next);
        let newlines = std::mem::take(&mut self.batch_newlines);
        self.dispatch(full, newlines);
    }

    /// Writes `text` here, or queues it for the writer thread, which it starts if `text` is
    /// output in bulk ([`BULK_BATCH`]).
    fn dispatch(&mut self, text: String, newlines: u64) {
        let len = text.len() as u64;
        if text.len() >= BULK_BATCH {
            self.start_writer_thread();
        }
        let scan_only = self.closed;
        let scanner = self.scanner.clone();
        let shared = &*self.shared;
        match &mut self.sink {
            Sink::Here(writer) => {
                // The scanner's work is all done here: this thread is the writer.
                let prepared = scanner.as_ref().and_then(|s| s.prepare(&text, Share::All));
                let batch = Batch {
                    text,
                    newlines,
                    prepared,
                    scan_only,
                    scanner,
                };
                writer.write(batch, None, shared);
            }
            Sink::Thread { queue, .. } => {
                let share = sender_share(shared, self.previous_start);
                let prepared = scanner.as_ref().and_then(|s| s.prepare(&text, share));
                let _ = queue.send(Batch {
                    text,
                    newlines,
                    prepared,
                    scan_only,
                    scanner,
                });
            }
            Sink::Gone => {}
        }
        self.previous_start = self.accepted - len;
    }

    /// Waits until everything written so far is in the file (or has failed), and updates
    /// [`SpillFile::written`] and [`SpillFile::error`]. Written here, it is there already.
    pub fn flush(&mut self) {
        self.send_batch();
        let (lock, wake) = &*self.shared;
        let mut progress = crate::sync::lock(lock);
        while (progress.handled < self.accepted || progress.held > 0)
            && matches!(self.sink, Sink::Thread { .. })
        {
            progress = crate::sync::wait(wake, progress);
        }
        self.seen = progress.clone();
    }

    /// The spill file's absolute path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes in the file as of the last [`SpillFile::flush`].
    pub fn written(&self) -> u64 {
        self.seen.written
    }

    /// Why the spill stopped being written, as of the last [`SpillFile::flush`].
    pub fn error(&self) -> Option<&str> {
        self.seen.error.as_deref()
    }

    /// Bytes in the file now, as the writer last counted them (not as of the last flush):
    /// how far a preview taken while the output still comes may read the file back.
    pub fn in_file(&self) -> u64 {
        crate::sync::lock(&self.shared.0).written
    }
}

/// A spill file opened to read back, at any offset, what is already in it: a preview opens
/// the folds it has room for with lines that neither end of the capture holds any more.
#[derive(Debug)]
pub struct SpillBytes {
    file: File,
    /// Bytes known to be in the file; nothing past them is read.
    end: u64,
}

impl SpillBytes {
    /// Opens `path`, of which the first `end` bytes are known to be written.
    pub fn open(path: &Path, end: u64) -> io::Result<SpillBytes> {
        Ok(SpillBytes {
            file: File::open(path)?,
            end,
        })
    }

    /// Bytes `start..end` of the file, clipped to what is known to be written.
    pub fn read(&self, start: u64, end: u64) -> io::Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let end = end.min(self.end);
        let len = usize::try_from(end.saturating_sub(start))
            .map_err(|_| io::Error::other("a span too long to read"))?;
        let mut bytes = vec![0; len];
        self.file.read_exact_at(&mut bytes, start)?;
        Ok(bytes)
    }

    /// Where the known bytes end.
    pub fn end(&self) -> u64 {
        self.end
    }
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        self.send_batch();
        if let Sink::Thread { queue, writer } = std::mem::replace(&mut self.sink, Sink::Gone) {
            drop(queue);
            let _ = writer.join();
        }
    }
}

/// How much of the scanner's work that needs only the text the sender does for the batch
/// about to go to the writer thread, the batch before it having started at `previous_start`
/// (in bytes accepted): all of it while the writer has not finished an earlier batch than
/// that one (the sender would only wait for the queue), none otherwise.
///
/// Half of it, while the writer is at the batch just before, cost more than it saved once
/// the search got cheaper: the sender searched before handing the batch over, and the
/// writer, done with the one before, waited for it (256 MiB, medians of the same rounds:
/// `run --no-tty` 314 -> 274 ms, `truncate` 220 and 226 ms, within the noise).
fn sender_share(shared: &(Mutex<Progress>, Condvar), previous_start: u64) -> Share {
    let handled = crate::sync::lock(&shared.0).handled;
    if handled < previous_start {
        Share::All
    } else {
        Share::Nothing
    }
}

/// The text of the spill file at `path` when it holds exactly `bytes` bytes (no more than one
/// byte past them is read): a run's whole output, read back to count its tokens.
pub fn read_whole(path: &Path, bytes: u64) -> Option<String> {
    let mut read = Vec::new();
    File::open(path)
        .ok()?
        .take(bytes.saturating_add(1))
        .read_to_end(&mut read)
        .ok()?;
    (read.len() as u64 == bytes).then(|| String::from_utf8_lossy(&read).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_dir_another_user_could_rename_away_is_refused() {
        let base = tempfile::tempdir().unwrap();
        // Others may write to it, without the sticky bit.
        let open = base.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let refused = DataDir::open(&open.join("a/data")).unwrap_err();
        assert!(
            matches!(&refused, SpillError::ForeignAncestor { ancestor, .. } if *ancestor == open),
            "{refused}"
        );
        assert!(!open.join("a").exists(), "nothing is made under it");
        // With the sticky bit, as /tmp: accepted.
        fs::set_permissions(&open, fs::Permissions::from_mode(0o1777)).unwrap();
        DataDir::open(&open.join("a/data")).unwrap();
        // Owned by another user (when this test may give a directory away).
        let theirs = base.path().join("theirs");
        fs::create_dir(&theirs).unwrap();
        let nobody = nix::unistd::Uid::from_raw(65534);
        if nix::unistd::chown(&theirs, Some(nobody), None).is_ok() {
            let refused = DataDir::open(&theirs.join("data")).unwrap_err();
            assert!(
                refused.to_string().contains("owned by uid 65534"),
                "{refused}"
            );
        }
    }

    /// A new spill in a data directory of its own, which lives as long as the guard.
    fn new_spill() -> (tempfile::TempDir, SpillFile) {
        let tmp = tempfile::tempdir().unwrap();
        let spill = DataDir::open(tmp.path()).unwrap().create_spill().unwrap();
        (tmp, spill)
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().mode() & 0o777
    }

    #[test]
    fn creates_private_dirs_and_files() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("a/b");
        let dir = DataDir::open(&root).unwrap();
        assert_eq!(mode(&root), 0o700);
        assert_eq!(mode(&dir.spills_dir()), 0o700);
        let mut spill = dir.create_spill().unwrap();
        spill.write("hello\n", 1);
        spill.flush();
        assert_eq!(mode(spill.path()), 0o600);
        assert_eq!(fs::read(spill.path()).unwrap(), b"hello\n");
        assert_eq!(spill.written(), 6);
        assert!(spill.path().is_absolute());
    }

    #[test]
    fn mixed_small_and_handed_over_writes_keep_their_order() {
        let (_tmp, mut spill) = new_spill();
        let mut expected = String::new();
        let mut buf = String::new();
        for i in 0..40u8 {
            let small = char::from(b'a' + i % 26)
                .to_string()
                .repeat(1000 + usize::from(i));
            spill.write(&small, 0);
            expected.push_str(&small);
            buf.extend(std::iter::repeat_n(
                char::from(b'0' + i % 10),
                BATCH_BYTES / 2 + usize::from(i),
            ));
            expected.push_str(&buf);
            buf = spill.write_owned(buf, 0);
            assert!(buf.is_empty(), "the returned buffer is empty, for reuse");
        }
        spill.flush();
        assert_eq!(spill.written(), expected.len() as u64);
        assert_eq!(spill.error(), None);
        assert_eq!(fs::read_to_string(spill.path()).unwrap(), expected);
    }

    #[test]
    fn a_large_spill_closed_holds_no_blocks_past_its_end() {
        use std::os::unix::fs::MetadataExt;
        let (_tmp, mut spill) = new_spill();
        let chunk = "a line of a large output\n".repeat(BATCH_BYTES / 25);
        let mut written = 0;
        while written < 3 << 20 {
            let _ = spill.write_owned(chunk.clone(), 0);
            written += chunk.len();
        }
        spill.flush();
        assert!(matches!(spill.sink, Sink::Thread { .. }), "a writer thread");
        let path = spill.path().to_path_buf();
        let allocated = |path: &Path| fs::metadata(path).unwrap().blocks() * 512;
        let while_open = allocated(&path);
        drop(spill);
        let len = fs::metadata(&path).unwrap().len();
        assert_eq!(len, written as u64);
        assert!(
            allocated(&path) < len + (64 << 10),
            "{} bytes allocated for {len} once closed ({while_open} while open)",
            allocated(&path)
        );
    }

    #[test]
    fn output_a_little_at_a_time_is_written_without_a_thread() {
        let (_tmp, mut spill) = new_spill();
        let mut expected = String::new();
        for i in 0..200 {
            let line = format!("line {i}\n");
            spill.write(&line, 1);
            expected.push_str(&line);
            if i % 7 == 0 {
                // A reader about to wait for more output hands what it has on.
                spill.hand_off();
                assert_eq!(
                    spill.in_file(),
                    expected.len() as u64,
                    "in the file at once"
                );
            }
        }
        spill.flush();
        assert!(matches!(spill.sink, Sink::Here(_)), "no writer thread");
        assert_eq!(spill.written(), expected.len() as u64);
        assert_eq!(fs::read_to_string(spill.path()).unwrap(), expected);
        // The first batch of bulk output starts the thread, which writes on after the rest.
        let bulk = "b".repeat(BULK_BATCH);
        let back = spill.write_owned(bulk.clone(), 0);
        assert!(back.is_empty());
        assert!(matches!(spill.sink, Sink::Thread { .. }), "a writer thread");
        spill.write("after\n", 1);
        spill.flush();
        expected.push_str(&bulk);
        expected.push_str("after\n");
        assert_eq!(spill.written(), expected.len() as u64);
        assert_eq!(fs::read_to_string(spill.path()).unwrap(), expected);
    }

    /// A scanner that numbers the pieces it prepares and keeps what it reads with them.
    #[derive(Debug, Default)]
    struct Numbering {
        prepared: std::sync::atomic::AtomicUsize,
        read: Mutex<Vec<(String, Option<usize>)>>,
    }

    impl TextReader for Numbering {
        fn prepare(&self, _: &str, _: Share) -> Option<Prepared> {
            let n = self
                .prepared
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Some(Box::new(n))
        }

        fn read(&self, text: &str, _: u64, prepared: Option<Prepared>) {
            let n = prepared
                .and_then(|p| p.downcast::<usize>().ok())
                .map(|n| *n);
            crate::sync::lock(&self.read).push((text.to_string(), n));
        }
    }

    #[test]
    fn every_batch_reaches_the_scanner_prepared_and_in_order_wherever_it_is_written() {
        let (_tmp, mut spill) = new_spill();
        let numbering = Arc::new(Numbering::default());
        spill.scan_with(Some(Arc::clone(&numbering) as Arc<dyn TextReader>));
        let mut sent = Vec::new();
        for (i, len) in [10, 20, BULK_BATCH, 30, BATCH_BYTES, 5]
            .into_iter()
            .enumerate()
        {
            let text = char::from(b'a' + i as u8).to_string().repeat(len);
            sent.push(text.clone());
            let _ = spill.write_owned(text, 0);
            spill.hand_off();
        }
        spill.flush();
        let read = crate::sync::lock(&numbering.read).clone();
        let numbered: Vec<(String, Option<usize>)> = sent
            .into_iter()
            .enumerate()
            .map(|(n, t)| (t, Some(n)))
            .collect();
        assert!(
            read == numbered,
            "each piece once, in order, prepared in order"
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        /// Whatever the mix of small writes, buffers handed over whole, hand-offs and flushes,
        /// and so wherever the writing moves to a thread, the file holds every byte in order.
        #[test]
        fn every_mix_of_writes_lands_whole_and_in_order(
            ops in proptest::collection::vec((0usize..4, 0usize..(2 * BATCH_BYTES)), 1..24)
        ) {
            let (_tmp, mut spill) = new_spill();
            let mut expected = String::new();
            let mut owned = String::new();
            for (n, (op, len)) in ops.into_iter().enumerate() {
                let byte = char::from(b'a' + (n % 26) as u8);
                match op {
                    0 => {
                        let text = byte.to_string().repeat(len % 5000);
                        spill.write(&text, 0);
                        expected.push_str(&text);
                    }
                    1 => {
                        owned.extend(std::iter::repeat_n(byte, len));
                        expected.push_str(&owned);
                        owned = spill.write_owned(owned, 0);
                        proptest::prop_assert!(owned.is_empty());
                    }
                    2 => spill.hand_off(),
                    _ => {
                        spill.flush();
                        proptest::prop_assert_eq!(spill.written(), expected.len() as u64);
                        // In the file already, nothing held back by the writer thread.
                        let on_disk = fs::metadata(spill.path()).unwrap().len();
                        proptest::prop_assert_eq!(on_disk, expected.len() as u64);
                    }
                }
            }
            spill.flush();
            proptest::prop_assert_eq!(spill.written(), expected.len() as u64);
            proptest::prop_assert_eq!(spill.error(), None);
            let path = spill.path().to_path_buf();
            drop(spill);
            proptest::prop_assert!(fs::read_to_string(path).unwrap() == expected);
        }
    }

    /// Polls (at most 10 s) until `done` holds of the writer's spare buffers.
    fn spare_becomes(spill: &SpillFile, done: impl Fn(&[String]) -> bool) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if done(&crate::sync::lock(&spill.spare)) {
                return true;
            }
            thread::sleep(std::time::Duration::from_millis(5));
        }
        false
    }

    #[test]
    fn the_writers_spare_buffer_is_freed_once_output_pauses() {
        let (_tmp, mut spill) = new_spill();
        let text = "x".repeat(BATCH_BYTES);
        let back = spill.write_owned(text, 0);
        assert!(back.is_empty());
        spill.flush();
        // Given back once written, for the next batch, and freed when none follows: a quiet
        // run holds no batch. (Whether it was seen in between depends on this thread's luck.)
        assert!(spare_becomes(&spill, |s| s.is_empty()));
        // Output after the pause is written as before. (What `write_owned` returns now may be
        // this very batch's buffer, if the writer was quicker than this thread.)
        let _ = spill.write_owned("y".repeat(BATCH_BYTES), 0);
        spill.flush();
        assert_eq!(spill.written(), 2 * BATCH_BYTES as u64);
    }

    #[test]
    fn tightens_an_existing_open_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("d");
        fs::create_dir(&root).unwrap();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
        DataDir::open(&root).unwrap();
        assert_eq!(mode(&root), 0o700);
    }

    #[test]
    fn refuses_a_file_where_the_directory_should_be() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("f");
        fs::write(&root, "x").unwrap();
        assert!(DataDir::open(&root).is_err());
    }

    #[test]
    fn names_are_unique_and_sort_by_creation() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = DataDir::open(tmp.path()).unwrap();
        let paths: Vec<PathBuf> = (0..50)
            .map(|_| dir.create_spill().unwrap().path().to_path_buf())
            .collect();
        let mut sorted = paths.clone();
        sorted.sort();
        sorted.dedup();
        // Unique, and already in creation order: time first, then the counter.
        assert_eq!(sorted, paths);
    }

    #[test]
    fn relative_data_dir_becomes_absolute() {
        let p = DataDir::locate(Some(Path::new("rel/dir"))).unwrap();
        assert!(p.is_absolute());
        assert!(p.ends_with("rel/dir"));
    }
}
