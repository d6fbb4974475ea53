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
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

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
    #[error("{path} is owned by uid {owner}, not by this user (uid {me}); refusing to use it")]
    ForeignOwner { path: PathBuf, owner: u32, me: u32 },
    #[error("cannot make {path} private (mode 0700): {source}")]
    Chmod { path: PathBuf, source: io::Error },
    #[error("cannot create spill file in {dir}: {source}")]
    CreateFile { dir: PathBuf, source: io::Error },
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

    /// Creates a new, empty spill file with a unique, time-ordered name.
    pub fn create_spill(&self) -> Result<SpillFile, SpillError> {
        self.ensure()?;
        let dir = self.spills_dir();
        loop {
            let path = dir.join(format!("{}.log", new_stem()));
            let opened = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path);
            match opened {
                Ok(file) => return Ok(SpillFile::new(path, file)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
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

/// Makes sure `path` is a real directory owned by us with mode 0700, creating it if needed.
/// A directory someone else owns (or a symlink to one) is refused: spills may hold secrets.
fn ensure_private_dir(path: &Path) -> Result<(), SpillError> {
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

/// An open spill file that records, rather than returns, its first write error.
#[derive(Debug)]
pub struct SpillFile {
    path: PathBuf,
    writer: Option<BufWriter<File>>,
    written: u64,
    error: Option<String>,
}

impl SpillFile {
    fn new(path: PathBuf, file: File) -> SpillFile {
        SpillFile {
            path,
            writer: Some(BufWriter::with_capacity(64 * 1024, file)),
            written: 0,
            error: None,
        }
    }

    /// Appends `bytes`; after the first failure this does nothing.
    pub fn write(&mut self, bytes: &[u8]) {
        let Some(writer) = self.writer.as_mut() else {
            return;
        };
        match writer.write_all(bytes) {
            Ok(()) => self.written += bytes.len() as u64,
            Err(e) => self.fail(e),
        }
    }

    /// Flushes buffered bytes to the file; a failure is recorded like a write failure.
    pub fn flush(&mut self) {
        if let Some(Err(e)) = self.writer.as_mut().map(|w| w.flush()) {
            self.fail(e);
        }
    }

    fn fail(&mut self, error: io::Error) {
        // Bytes still in the buffer are lost with the writer; `written` counts only what the
        // writer accepted, so report what is really on disk.
        if let Some(writer) = self.writer.take() {
            let (file, _) = writer.into_parts();
            if let Ok(meta) = file.metadata() {
                self.written = meta.len();
            }
        }
        self.error = Some(error.to_string());
    }

    /// The spill file's absolute path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Why the spill stopped being written, if it did.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        spill.write(b"hello\n");
        spill.flush();
        assert_eq!(mode(spill.path()), 0o600);
        assert_eq!(fs::read(spill.path()).unwrap(), b"hello\n");
        assert_eq!(spill.written(), 6);
        assert!(spill.path().is_absolute());
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
