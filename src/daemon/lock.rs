//! One daemon per data directory, and how to know that the last one is dead.
//!
//! A daemon holds an exclusive `flock` on `<data-dir>/daemon.lock` for its whole life. The
//! kernel drops the lock when the process dies, however it dies, and a zombie holds none (its
//! files are closed before it becomes one), so the lock says what a pid cannot: whether the
//! daemon that wrote the index's `running` rows still lives. A pid check is fooled by a zombie
//! that its parent never reaps (one looks alive to `kill(pid, 0)` for as long as that parent
//! lives) and by a pid the system gave to another process since.
//!
//! So a daemon that takes the lock knows that every run the index says a daemon is running
//! belongs to a dead one; a daemon that cannot take it refuses to start, naming the pid and
//! socket the holder wrote into the file, whatever socket either was given. (The lock on
//! `<socket>.lock` stays: two data directories may be pointed at one socket path, and only one
//! daemon may serve it.)
//!
//! The holder also touches the file every few seconds ([`DataDirLock::heartbeat`]): its
//! modification time is the last moment that daemon, and so its runs, were known alive, which
//! becomes the end time of the runs the next daemon finds interrupted.
//!
//! The file is never deleted: a daemon that deleted it on the way out could leave a newcomer
//! locking the old inode while a third locks a new file at the same path. (A daemon of a
//! spillway from before this lock takes none: during an upgrade, stop the old daemon first.)

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Result, anyhow};
use chrono::{DateTime, Utc};
use nix::fcntl::{Flock, FlockArg};

use crate::daemon::report::AnotherServes;

/// The lock file's name in the data directory.
pub const LOCK_FILE: &str = "daemon.lock";

/// The data directory's lock, held for the daemon's lifetime.
pub struct DataDirLock {
    file: Flock<File>,
}

/// What the lock file said about the daemon that held it before.
#[derive(Debug, Clone, Default)]
pub struct Predecessor {
    /// Its process id: the spill files it named with it are its runs'.
    pub pid: Option<u32>,
    /// The last time it was known alive (its last heartbeat).
    pub alive_at: Option<DateTime<Utc>>,
}

impl DataDirLock {
    /// Takes the lock on `root`'s lock file, or says which daemon holds it. `socket` is
    /// written into the file for that message.
    pub fn acquire(root: &Path, socket: &Path) -> Result<(DataDirLock, Predecessor)> {
        let path = root.join(LOCK_FILE);
        let file = open(&path)?;
        let mut file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(locked) => locked,
            Err((mut file, nix::errno::Errno::EWOULDBLOCK)) => {
                let (pid, holder_socket) = parse(&holders_text(&mut file));
                // A holder that has not written its pid yet is starting now: on our socket,
                // as far as anyone knows.
                let serves_ours = pid.is_none()
                    || holder_socket.as_deref() == Some(socket.display().to_string().as_str());
                let pid = pid.map_or_else(|| "pid unknown".to_string(), |p| format!("pid {p}"));
                let on = holder_socket
                    .map(|s| format!(", listening on {s}"))
                    .unwrap_or_default();
                let why = format!(
                    "another spillway daemon ({pid}{on}) already serves data directory {}; \
                     use that daemon (its socket), stop it, or give this one another data \
                     directory",
                    root.display()
                );
                return Err(if serves_ours {
                    AnotherServes(why).into()
                } else {
                    anyhow!(why)
                });
            }
            Err((_, errno)) => return Err(anyhow!("cannot lock {}: {errno}", path.display())),
        };
        let before = read_all(&mut file);
        let predecessor = Predecessor {
            pid: parse(&before).0,
            alive_at: (!before.is_empty())
                .then(|| file.metadata().ok()?.modified().ok())
                .flatten()
                .map(DateTime::<Utc>::from),
        };
        if let Ok(meta) = file.metadata()
            && meta.mode() & 0o777 != 0o600
        {
            let _ = file.set_permissions(std::fs::Permissions::from_mode(0o600));
        }
        // Best effort: on a full disk the text may not fit, and the lock is what counts.
        let text = format!("{}\n{}\n", std::process::id(), socket.display());
        let written = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(text.as_bytes()));
        if let Err(e) = written {
            tracing::warn!(error = %e, "cannot write this daemon's pid into {}", path.display());
        }
        Ok((DataDirLock { file }, predecessor))
    }

    /// Records that this daemon is alive now (the file's modification time; no disk space
    /// needed).
    pub fn heartbeat(&self) {
        let _ = self.file.set_modified(SystemTime::now());
    }
}

fn open(path: &PathBuf) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        // A symlink here would have us create or lock whatever it points to.
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ELOOP) => anyhow!(
                "lock file {} is a symbolic link; refusing to follow it",
                path.display()
            ),
            _ => anyhow::Error::new(e).context(format!("cannot open lock file {}", path.display())),
        })
}

/// The socket the last daemon of data directory `root` wrote into its lock file, whether or
/// not it still lives (a client checks that it answers). Read without locking: a client must
/// never stand in the way of a daemon taking the lock.
pub fn recorded_socket(root: &Path) -> Option<PathBuf> {
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(root.join(LOCK_FILE))
        .ok()?;
    parse(&read_all(&mut file)).1.map(PathBuf::from)
}

/// What the holder wrote, waiting a little for it: a holder that has just taken the lock
/// writes its pid a moment later (two daemons started at once).
fn holders_text(file: &mut File) -> String {
    for _ in 0..20 {
        let text = read_all(file);
        if parse(&text).0.is_some() {
            return text;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    read_all(file)
}

/// The file's text (at most a few hundred bytes are ever written there).
fn read_all(file: &mut File) -> String {
    let mut text = String::new();
    let _ = file.rewind();
    let _ = file.take(4096).read_to_string(&mut text);
    text
}

/// The pid (first line) and socket (second line) a holder wrote.
fn parse(text: &str) -> (Option<u32>, Option<String>) {
    let mut lines = text.lines();
    let pid = lines.next().and_then(|l| l.trim().parse().ok());
    let socket = lines.next().filter(|s| !s.is_empty()).map(str::to_string);
    (pid, socket)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_told_who_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let socket = Path::new("/run/user/1/spillway/spillway.sock");
        let (first, none) = DataDirLock::acquire(dir.path(), socket).unwrap();
        assert!(none.pid.is_none() && none.alive_at.is_none());
        let error = DataDirLock::acquire(dir.path(), Path::new("/elsewhere.sock"))
            .err()
            .unwrap()
            .to_string();
        let me = std::process::id();
        assert!(
            error.contains(&format!(
                "another spillway daemon (pid {me}, listening on {}) already serves data \
                 directory {}",
                socket.display(),
                dir.path().display()
            )),
            "{error}"
        );
        first.heartbeat();
        drop(first);
        let (_second, predecessor) = DataDirLock::acquire(dir.path(), socket).unwrap();
        assert_eq!(predecessor.pid, Some(me));
        let age = Utc::now() - predecessor.alive_at.unwrap();
        assert!(age.num_seconds() < 60, "{age}");
        let mode = std::fs::metadata(dir.path().join(LOCK_FILE))
            .unwrap()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_holder_serving_our_socket_is_told_apart_from_one_serving_another() {
        let dir = tempfile::tempdir().unwrap();
        let socket = Path::new("/run/user/1/spillway/spillway.sock");
        let (_first, _) = DataDirLock::acquire(dir.path(), socket).unwrap();
        let refused = |on: &Path| DataDirLock::acquire(dir.path(), on).err().unwrap();
        // On our socket: the client that started this daemon waits for the holder.
        assert!(refused(socket).is::<AnotherServes>());
        // On another: nobody will ever answer on ours.
        assert!(!refused(Path::new("/elsewhere.sock")).is::<AnotherServes>());
    }

    #[test]
    fn a_symlinked_lock_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, b"").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join(LOCK_FILE)).unwrap();
        let error = DataDirLock::acquire(dir.path(), Path::new("/s.sock"))
            .err()
            .unwrap();
        assert!(error.to_string().contains("symbolic link"), "{error}");
        assert_eq!(std::fs::read(&target).unwrap(), b"");
    }
}
