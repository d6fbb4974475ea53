//! A run's terminal: the pseudo-terminal (or pipe) its command writes to, the end the daemon
//! reads from, and how the command is attached to it.
//!
//! This module owns every file descriptor a run's output goes through, and the rules that keep
//! them from leaking into other processes, because one stray copy of a terminal's slave side is
//! enough for its reader never to see the end of the output:
//!
//! - every descriptor is close-on-exec, and the parent's copies of the child's side are closed
//!   as soon as the child has been spawned ([`spawn`] consumes them);
//! - creating a PTY and forking are serialised by one lock: `openpty(3)` opens the PTY without
//!   `O_CLOEXEC` and the flag is set a moment later, and a child forked by a concurrent launch
//!   in that moment would keep the terminal open for as long as it lives.
//!
//! The PTY itself comes from `openpty(3)`, with the kernel's default settings (echo, line
//! discipline, `\n` written as `\r\n`, which the normaliser turns back into `\n`): a command
//! sees the terminal any terminal emulator would give it. The child is spawned by
//! [`std::process::Command`] or, where it starts inside its cgroup, by `clone3`
//! (`super::inside`), which takes the same side ([`ChildSide::stdio`]), the same lock
//! ([`fork_lock`]) and the same set-up ([`become_session_leader`]).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, FdFlag, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::pty::{OpenptyResult, Winsize, openpty};
use nix::sys::signal::{self, SigHandler, Signal};

use crate::supervisor::input::Input;

/// Held while a PTY is created (the moment its descriptors are inheritable) and while a child
/// is forked, so that no child of ours inherits another run's terminal.
static FORK_LOCK: Mutex<()> = Mutex::new(());

/// The soft open-file limit commands get, when the daemon raised its own ([`NO_CHANGE`]: the
/// limit is left as inherited).
static COMMAND_FILE_LIMIT: AtomicU64 = AtomicU64::new(NO_CHANGE);
const NO_CHANGE: u64 = u64::MAX;

/// Has every command spawned from now on start with `soft` as its soft open-file limit: the
/// daemon raises its own for its clients, and commands should see the limit the user set.
pub fn give_commands_file_limit(soft: u64) {
    COMMAND_FILE_LIMIT.store(soft, Ordering::Relaxed);
}

/// In a child between fork and exec, before [`spawn`]'s own set-up: the command was given its
/// own open-file limit (the caller's), which the set-up then keeps. Only this child's copy of
/// the setting changes (an atomic store: async-signal-safe), so never in a child that shares
/// the daemon's memory (`super::inside`, which passes the limit to [`start_session`]).
pub(super) fn keep_file_limit() {
    COMMAND_FILE_LIMIT.store(NO_CHANGE, Ordering::Relaxed);
}

/// The two ends of a run's output channel.
#[derive(Debug)]
pub struct Channel {
    /// The daemon's end.
    pub output: Output,
    /// The command's end, for [`spawn`].
    pub child: ChildSide,
    /// Where to type into a PTY (a duplicate of its master); `None` for a pipe, whose command
    /// reads `/dev/null`.
    pub input: Option<Input>,
}

/// Opens a pseudo-terminal of `cols` x `rows`: the command gets the slave side as its stdin,
/// stdout, stderr and controlling terminal; the daemon reads the master.
///
/// Fails when no PTY can be allocated (for instance `/dev/pts` is full or missing).
pub fn open_pty(cols: u16, rows: u16) -> io::Result<Channel> {
    let size = Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let OpenptyResult { master, slave } = {
        let _forks = crate::sync::lock(&FORK_LOCK);
        // `openpty` opens the slave with O_NOCTTY: it never becomes the daemon's controlling
        // terminal.
        let pair = openpty(&size, None)?;
        for fd in [&pair.master, &pair.slave] {
            fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
        }
        pair
    };
    let output = Output::new(master)?;
    // A duplicate shares the master's open file description, so it is non-blocking too.
    let input = Input::new(output.fd.try_clone()?);
    Ok(Channel {
        output,
        child: ChildSide {
            stdin: Some(slave.try_clone()?),
            stdout: slave.try_clone()?,
            stderr: slave,
            terminal: true,
        },
        input: Some(input),
    })
}

/// Opens one pipe for both stdout and stderr (so their order is kept), with stdin `/dev/null`.
pub fn open_pipe() -> io::Result<Channel> {
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    Ok(Channel {
        output: Output::new(read)?,
        child: ChildSide {
            stdin: None,
            stdout: write.try_clone()?,
            stderr: write,
            terminal: false,
        },
        input: None,
    })
}

/// The command's end of a [`Channel`].
#[derive(Debug)]
pub struct ChildSide {
    /// `None`: `/dev/null`.
    stdin: Option<OwnedFd>,
    stdout: OwnedFd,
    stderr: OwnedFd,
    /// Whether the side is a terminal that must become the child's controlling terminal.
    terminal: bool,
}

impl ChildSide {
    /// Gives the command `stdin` as its standard input instead of the terminal or
    /// `/dev/null` (a terminal stays its stdout, stderr and controlling terminal), as a shell
    /// gives a piped command its pipe.
    pub fn read_from(&mut self, stdin: OwnedFd) {
        self.stdin = Some(stdin);
    }

    /// Its stdin (`None`: `/dev/null`), stdout and stderr, for a spawn that puts them in
    /// place itself; the parent's copies are closed when the side is dropped.
    pub(super) fn stdio(&self) -> (Option<BorrowedFd<'_>>, BorrowedFd<'_>, BorrowedFd<'_>) {
        (
            self.stdin.as_ref().map(AsFd::as_fd),
            self.stdout.as_fd(),
            self.stderr.as_fd(),
        )
    }

    /// Whether stdout is a terminal that must become the child's controlling terminal.
    pub(super) fn is_terminal(&self) -> bool {
        self.terminal
    }

    /// Another copy of the same side, for a second spawn if the first fails.
    pub fn try_clone(&self) -> io::Result<ChildSide> {
        Ok(ChildSide {
            stdin: self.stdin.as_ref().map(OwnedFd::try_clone).transpose()?,
            stdout: self.stdout.try_clone()?,
            stderr: self.stderr.try_clone()?,
            terminal: self.terminal,
        })
    }
}

/// Spawns `cmd` as the leader of a new session, so that its pid is also its process group's
/// id, with `side` as its stdio and, for a PTY, as its controlling terminal. Signals the daemon
/// ignores are set back to their defaults in the child (an ignored signal stays ignored across
/// `exec`, and a command deaf to SIGTERM or SIGINT would be no use), and so is the soft limit
/// on open files if the daemon raised its own.
///
/// The parent's copies of `side` are closed before this returns. Errors are `std`'s: a failed
/// `exec` (`ENOENT`, `EACCES`, `ENOEXEC`...) is reported here, not as an exit.
pub fn spawn(mut cmd: Command, side: ChildSide) -> io::Result<Child> {
    let ChildSide {
        stdin,
        stdout,
        stderr,
        terminal,
    } = side;
    cmd.stdin(stdin.map_or_else(Stdio::null, Stdio::from))
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr));
    // SAFETY: the hook runs in the child between fork and exec, where only async-signal-safe
    // calls are allowed: `become_session_leader` only calls sigaction, getrlimit, setrlimit,
    // setsid and ioctl, reads an atomic, and neither allocates nor takes a lock.
    unsafe {
        cmd.pre_exec(move || become_session_leader(terminal));
    }
    let _forks = crate::sync::lock(&FORK_LOCK);
    cmd.spawn()
    // `cmd`, which holds the parent's copies of the child's side, is dropped here.
}

/// Held while forking a child by other means than [`spawn`] (see [`FORK_LOCK`]).
pub(super) fn fork_lock() -> std::sync::MutexGuard<'static, ()> {
    crate::sync::lock(&FORK_LOCK)
}

/// The child's set-up before `exec`: default signal dispositions, the user's open-file limit,
/// a new session, and stdout (the PTY's slave, when `terminal`) as the controlling terminal.
/// Only async-signal-safe calls (see [`spawn`]).
pub(super) fn become_session_leader(terminal: bool) -> io::Result<()> {
    start_session(terminal, commands_file_limit())
}

/// The soft open-file limit commands get, if the daemon raised its own (read in the parent,
/// for a child that shares the daemon's memory and so may not change the setting).
pub(super) fn commands_file_limit() -> Option<u64> {
    let soft = COMMAND_FILE_LIMIT.load(Ordering::Relaxed);
    (soft != NO_CHANGE).then_some(soft)
}

/// [`become_session_leader`] with the open-file limit given: `None` leaves it as inherited.
/// System calls only, and it writes no memory but its own stack's (a child that shares the
/// daemon's memory runs it).
pub(super) fn start_session(terminal: bool, file_limit: Option<u64>) -> io::Result<()> {
    for sig in Signal::iterator() {
        if sig != Signal::SIGKILL && sig != Signal::SIGSTOP {
            // SAFETY: installing the default disposition runs no code of ours on delivery.
            // Failure leaves the disposition as it was, which is no reason not to run.
            let _ = unsafe { signal::signal(sig, SigHandler::SigDfl) };
        }
    }
    if let Some(soft) = file_limit {
        use nix::sys::resource::{Resource, getrlimit, setrlimit};
        // Failure leaves the daemon's higher limit, which is no reason not to run either.
        if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, soft, hard);
        }
    }
    nix::unistd::setsid()?;
    if terminal {
        // SAFETY: TIOCSCTTY takes an integer argument (0: do not steal the terminal from
        // another session), not a pointer; fd 1 is the slave, set up by `std` before this hook
        // (fd 0 too, unless the command reads a descriptor its client passed).
        let res = unsafe { nix::libc::ioctl(1, nix::libc::TIOCSCTTY, 0) };
        if res == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The daemon's end of a [`Channel`]: a PTY master or a pipe's read end, in non-blocking mode.
#[derive(Debug)]
pub struct Output {
    fd: OwnedFd,
}

/// What one non-blocking read gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunk {
    /// This many bytes were read.
    Data(usize),
    /// Nothing to read now; [`Output::wait`] before reading again.
    WouldBlock,
    /// The output has ended: every writer has closed its end and everything written was read.
    Eof,
}

impl Output {
    fn new(fd: OwnedFd) -> io::Result<Output> {
        fcntl(&fd, FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
        Ok(Output { fd })
    }

    /// Reads what is there, without blocking.
    ///
    /// A PTY master fails with `EIO` once every slave descriptor is closed and its buffer has
    /// been drained, which is its end of file: it is reported as [`Chunk::Eof`], never as an
    /// error, and comes only after the last bytes written.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<Chunk> {
        loop {
            return match nix::unistd::read(&self.fd, buf) {
                Ok(0) | Err(Errno::EIO) => Ok(Chunk::Eof),
                Ok(n) => Ok(Chunk::Data(n)),
                Err(Errno::EAGAIN) => Ok(Chunk::WouldBlock),
                Err(Errno::EINTR) => continue,
                Err(e) => Err(e.into()),
            };
        }
    }

    /// Whether every writer has closed its end (a pipe's or a terminal's other side): what is
    /// still buffered is all there will be, and reading on reaches the end of file.
    pub fn writers_gone(&self) -> bool {
        let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::empty())];
        poll(&mut fds, PollTimeout::ZERO).is_ok()
            && fds[0]
                .revents()
                .is_some_and(|r| r.contains(PollFlags::POLLHUP))
    }

    /// Asks for a pipe of `bytes` (`F_SETPIPE_SZ`); returns the size it has, or `None` where
    /// that cannot be asked (a terminal) or was refused (the user's pipe pages are spent).
    pub fn grow_pipe(&self, bytes: usize) -> Option<usize> {
        let bytes = i32::try_from(bytes).ok()?;
        let size = fcntl(&self.fd, FcntlArg::F_SETPIPE_SZ(bytes)).ok()?;
        usize::try_from(size).ok()
    }

    /// Waits until there is something to read (or the output has ended), `wake` is readable
    /// or hung up, or `timeout` has passed (`None`: no limit). Which of these happened is not
    /// said: the caller reads again and looks.
    pub fn wait(&self, wake: Option<BorrowedFd<'_>>, timeout: Option<Duration>) -> io::Result<()> {
        let own = self.fd.as_fd();
        let mut fds = [
            PollFd::new(own, PollFlags::POLLIN),
            PollFd::new(wake.unwrap_or(own), PollFlags::POLLIN),
        ];
        let watched = if wake.is_some() { 2 } else { 1 };
        match poll(&mut fds[..watched], poll_timeout(timeout)) {
            Ok(_) | Err(Errno::EINTR) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// `timeout` in whole milliseconds, rounded up so that a wait never ends before it is due.
fn poll_timeout(timeout: Option<Duration>) -> PollTimeout {
    match timeout {
        None => PollTimeout::NONE,
        Some(t) => {
            let ms = t.as_nanos().div_ceil(1_000_000);
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_timeouts_round_up() {
        assert_eq!(poll_timeout(None), PollTimeout::NONE);
        assert_eq!(poll_timeout(Some(Duration::ZERO)), PollTimeout::ZERO);
        assert_eq!(
            poll_timeout(Some(Duration::from_micros(1))),
            PollTimeout::from(1u8)
        );
        assert_eq!(
            poll_timeout(Some(Duration::from_secs(u64::MAX))),
            PollTimeout::MAX
        );
    }

    #[test]
    fn a_pipe_reads_then_ends() {
        let Channel { output, child, .. } = open_pipe().unwrap();
        nix::unistd::write(&child.stdout, b"hi").unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(output.read(&mut buf).unwrap(), Chunk::Data(2));
        assert_eq!(output.read(&mut buf).unwrap(), Chunk::WouldBlock);
        drop(child);
        output.wait(None, Some(Duration::from_secs(5))).unwrap();
        assert_eq!(output.read(&mut buf).unwrap(), Chunk::Eof);
    }

    #[test]
    fn a_pipe_says_its_writers_are_gone_while_it_still_holds_bytes() {
        let Channel { output, child, .. } = open_pipe().unwrap();
        // Refused where the user's pipe pages are spent: the test is about the end, not the size.
        assert!(output.grow_pipe(1 << 20).is_none_or(|size| size >= 1 << 20));
        nix::unistd::write(&child.stdout, b"left").unwrap();
        assert!(!output.writers_gone(), "the child's side is open");
        let stray = child.try_clone().unwrap();
        drop(child);
        assert!(!output.writers_gone(), "a copy still holds it");
        drop(stray);
        assert!(output.writers_gone());
        let mut buf = [0u8; 8];
        assert_eq!(output.read(&mut buf).unwrap(), Chunk::Data(4));
        assert_eq!(output.read(&mut buf).unwrap(), Chunk::Eof);
    }

    #[test]
    fn a_pty_master_ends_with_eof_after_the_last_bytes() {
        let Channel { output, child, .. } = open_pty(80, 24).unwrap();
        nix::unistd::write(&child.stdout, b"last").unwrap();
        drop(child);
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        loop {
            match output.read(&mut buf).unwrap() {
                Chunk::Data(n) => got.extend_from_slice(&buf[..n]),
                Chunk::WouldBlock => output.wait(None, Some(Duration::from_secs(5))).unwrap(),
                Chunk::Eof => break,
            }
        }
        assert_eq!(got, b"last");
    }
}
