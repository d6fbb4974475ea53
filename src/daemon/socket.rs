//! Claiming the daemon's listening socket: the one systemd passed (`LISTEN_FDS`/`LISTEN_PID`),
//! or our own, bound after an exclusive lock on `<socket>.lock`, so of two daemons started at
//! once on one socket exactly one wins, and only the winner may replace a stale socket file
//! left by a crash (one that refuses connections). Nothing at those paths is followed if it is
//! a symbolic link, and nothing but a socket is ever replaced. Runs before the async runtime
//! exists (no threads yet, so setting the umask for the bind is safe).

use std::fs::{File, OpenOptions};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::net::UnixListener as StdUnixListener;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use nix::fcntl::{Flock, FlockArg};

use crate::daemon::report::AnotherServes;

use crate::storage::spill::ensure_private_dir;

/// How the daemon got its listening socket.
pub(super) enum Listener {
    /// Bound by us: the socket file is ours to remove, and the lock must be held until then.
    Bound {
        listener: StdUnixListener,
        _lock: Flock<File>,
    },
    /// Passed by systemd, which owns the socket file.
    Inherited(StdUnixListener),
}

/// Takes the inherited socket, or locks, cleans up and binds our own.
pub(super) fn claim_socket(socket: &Path) -> Result<Listener> {
    if let Some(listener) = inherited_listener()? {
        tracing::info!("serving the socket passed by the service manager");
        return Ok(Listener::Inherited(listener));
    }
    let dir = socket
        .parent()
        .with_context(|| format!("socket path {} has no directory", socket.display()))?;
    ensure_private_dir(dir)?;
    let lock = lock_socket(socket)?;
    remove_stale_socket(socket)?;
    let listener = bind_private(socket)?;
    tracing::info!(socket = %socket.display(), "listening");
    Ok(Listener::Bound {
        listener,
        _lock: lock,
    })
}

/// The listener systemd passed, if it passed one to this process.
fn inherited_listener() -> Result<Option<StdUnixListener>> {
    let fds: Vec<_> = sd_notify::listen_fds()
        .context("cannot read LISTEN_FDS")?
        .collect();
    let Some(&fd) = fds.first() else {
        return Ok(None);
    };
    // SAFETY: systemd hands us this fd and nothing else in the process owns it.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // Inherited fds lack close-on-exec: without it every command would inherit the socket.
    nix::fcntl::fcntl(
        &owned,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )
    .context("cannot set close-on-exec on the inherited socket")?;
    let listener = StdUnixListener::from(owned);
    listener
        .set_nonblocking(true)
        .context("cannot make the inherited socket non-blocking")?;
    Ok(Some(listener))
}

/// Locks `<socket>.lock` for the daemon's lifetime: the one daemon per socket.
fn lock_socket(socket: &Path) -> Result<Flock<File>> {
    let path = lock_path(socket);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        // A symlink here would have us create or lock whatever it points to.
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(&path)
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ELOOP) => anyhow::anyhow!(
                "lock file {} is a symbolic link; refusing to follow it",
                path.display()
            ),
            _ => anyhow::Error::new(e).context(format!("cannot open lock file {}", path.display())),
        })?;
    Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, errno)| {
        if errno == nix::errno::Errno::EWOULDBLOCK {
            AnotherServes(format!(
                "another spillway daemon is already running on {}",
                socket.display()
            ))
            .into()
        } else {
            anyhow::anyhow!("cannot lock {}: {errno}", path.display())
        }
    })
}

pub(super) fn lock_path(socket: &Path) -> PathBuf {
    let mut name = socket.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// Removes a socket file nobody answers on; refuses when somebody does, and refuses anything
/// that is not a socket (a symlink is never followed, a file never deleted).
fn remove_stale_socket(socket: &Path) -> Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let Ok(meta) = std::fs::symlink_metadata(socket) else {
        return Ok(());
    };
    let kind = meta.file_type();
    if !kind.is_socket() {
        let what = if kind.is_symlink() {
            "a symbolic link"
        } else {
            "not a socket"
        };
        bail!(
            "{} is {what}; refusing to use or replace it: remove it if it is yours, or choose \
             another socket path",
            socket.display()
        );
    }
    if std::os::unix::net::UnixStream::connect(socket).is_ok() {
        return Err(AnotherServes(format!(
            "another spillway daemon is already running on {}",
            socket.display()
        ))
        .into());
    }
    tracing::info!(socket = %socket.display(), "replacing a stale socket");
    std::fs::remove_file(socket)
        .with_context(|| format!("cannot remove stale socket {}", socket.display()))
}

/// Binds the socket with mode 0600 from the start (umask), so no other user can ever connect.
fn bind_private(socket: &Path) -> Result<StdUnixListener> {
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
    let bound = StdUnixListener::bind(socket);
    nix::sys::stat::umask(old);
    let listener = bound.with_context(|| format!("cannot bind {}", socket.display()))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot make {} private", socket.display()))?;
    listener
        .set_nonblocking(true)
        .context("cannot make the socket non-blocking")?;
    Ok(listener)
}

impl Listener {
    /// Gives up a socket we bound, when start-up fails after binding: no stale socket is left.
    pub(super) fn release(self, socket: &Path) {
        if let Listener::Bound { listener, _lock } = self {
            drop(listener);
            let _ = std::fs::remove_file(socket);
            let _ = std::fs::remove_file(lock_path(socket));
        }
    }
}
