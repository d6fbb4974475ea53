//! Typing into a run's terminal (`spillway send`): text written to the PTY's master side as a
//! person at the keyboard would type it, Enter as `\r`, end of input as the terminal's VEOF
//! character.
//!
//! # Lines longer than the terminal's line buffer
//!
//! Under canonical mode (`ICANON`, the terminal's default line editing) the kernel keeps the
//! line being typed in a buffer of 4096 bytes: past 4095 characters it drops what is typed, and
//! a reader gets a cut line. Writing in pieces does not help, because nothing is readable before
//! the line ends. So a line longer than [`LONG_LINE`] is delivered with canonical mode turned
//! off, where bytes reach the reader as they come and the buffer never fills for long:
//!
//! 1. turn `ICANON` off;
//! 2. write everything but the last byte, waiting for room whenever the terminal is full (the
//!    reader drains it meanwhile);
//! 3. wait until the reader has taken all of it (the slave's input queue stays empty);
//! 4. turn `ICANON` back on, unless the command changed the terminal's modes meanwhile;
//! 5. write the last byte (usually the Enter) under canonical mode.
//!
//! Step 5 matters: a reader blocked in `read(2)` since step 3 entered it in non-canonical mode
//! and only returns once it gets at least one byte, so an EOF character sent right after step 4
//! would be swallowed (tested: `wc -c` then never ends). The last byte ends that read. And
//! step 3 matters because bytes still queued when canonical mode comes back are taken as typed
//! then, and cut at 4095 again.
//!
//! Measured on Linux: `head -c 10000 | wc -c`, `read -r x`, `wc -c` and Python's
//! `readline()` get texts of 10 000 and 100 000 bytes whole this way; written straight under
//! canonical mode they got 4095 or 4096 bytes.

use std::io;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::termios::{
    LocalFlags, SetArg, SpecialCharacterIndices, Termios, tcgetattr, tcsetattr,
};

/// A line of more bytes than this goes through with canonical mode off (the kernel's limit is
/// 4095; the margin covers multi-byte characters and terminals that count differently).
pub const LONG_LINE: usize = 4000;

/// How long a send waits for the command to take its input, unless told otherwise.
pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// What Enter sends, as a terminal does; the terminal's `ICRNL` turns it into `\n` for
/// programs that read lines.
const ENTER: u8 = b'\r';

/// Why a send did not go through whole.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The command did not take its input in time.
    #[error(
        "the command is not reading its input: {written} of {total} bytes were delivered before \
         the {}s timeout",
        timeout.as_secs_f64()
    )]
    Blocked {
        written: usize,
        total: usize,
        timeout: Duration,
    },
    /// The terminal has no EOF character (VEOF is disabled).
    #[error("the terminal's EOF character is disabled; cannot send end of input")]
    NoEof,
    /// The command's output ended (and its terminal is going away) while typing.
    #[error("the command's terminal closed while its input was being typed")]
    Closed,
    /// Writing to, or setting up, the terminal failed.
    #[error("cannot write to the command's terminal: {0}")]
    Io(#[from] io::Error),
}

/// What to type.
#[derive(Debug, Clone, Copy)]
pub struct Keys<'a> {
    pub text: &'a [u8],
    /// Press Enter after the text.
    pub enter: bool,
    /// Then end the input (VEOF; twice when a line is left open, as at a keyboard).
    pub eof: bool,
    /// How long the command may take to read what is sent.
    pub timeout: Duration,
    /// Set when the terminal is going away (the command's output has ended): stop waiting.
    pub cancel: Option<&'a AtomicBool>,
}

/// When to stop waiting for the command to read.
#[derive(Debug, Clone, Copy)]
struct Deadline<'a> {
    at: Instant,
    cancel: Option<&'a AtomicBool>,
}

impl Deadline<'_> {
    fn cancelled(&self) -> bool {
        self.cancel.is_some_and(|c| c.load(Ordering::Relaxed))
    }

    /// Time left; `None` once past or cancelled.
    fn left(&self) -> Option<Duration> {
        let left = self.at.saturating_duration_since(Instant::now());
        (!left.is_zero() && !self.cancelled()).then_some(left)
    }

    /// Why waiting stopped.
    fn stop(&self) -> Stop {
        if self.cancelled() {
            Stop::Closed
        } else {
            Stop::TimedOut
        }
    }
}

/// The writing end of a run's terminal (a duplicate of the PTY master, non-blocking).
#[derive(Debug)]
pub struct Input {
    master: OwnedFd,
    /// The last byte typed left a line open: an EOF must then be sent twice.
    line_open: bool,
}

impl Input {
    /// `master` must be a non-blocking PTY master.
    pub fn new(master: OwnedFd) -> Input {
        Input {
            master,
            line_open: false,
        }
    }

    /// Sets the terminal's size; the kernel sends SIGWINCH to its foreground process group.
    pub fn resize(&self, cols: u16, rows: u16) -> std::io::Result<()> {
        let size = nix::libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        use std::os::fd::AsRawFd;
        // SAFETY: TIOCSWINSZ reads one `winsize` from the pointer, valid for the call; the
        // descriptor is a PTY master this struct owns.
        let rc = unsafe { nix::libc::ioctl(self.master.as_raw_fd(), nix::libc::TIOCSWINSZ, &size) };
        if rc == -1 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Types `keys`; returns the bytes written to the terminal.
    pub fn send(&mut self, keys: Keys<'_>) -> Result<usize, InputError> {
        let now = Instant::now();
        let deadline = Deadline {
            // A timeout past what an `Instant` can hold is as good as none.
            at: now
                .checked_add(keys.timeout)
                .unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600)),
            cancel: keys.cancel,
        };
        let mut payload = keys.text.to_vec();
        if keys.enter {
            payload.push(ENTER);
        }
        let mut written = 0;
        let result = self.type_keys(&payload, keys.eof, deadline, &mut written);
        result.map_err(|stop| match stop {
            Stop::TimedOut => InputError::Blocked {
                written,
                total: payload.len(),
                timeout: keys.timeout,
            },
            Stop::Closed => InputError::Closed,
            Stop::Failed(e) => InputError::Io(e),
            Stop::NoEof => InputError::NoEof,
        })?;
        Ok(written)
    }

    fn type_keys(
        &mut self,
        payload: &[u8],
        eof: bool,
        deadline: Deadline<'_>,
        written: &mut usize,
    ) -> Result<(), Stop> {
        let attrs = tcgetattr(&self.master)?;
        let canonical = attrs.local_flags.contains(LocalFlags::ICANON);
        if canonical && longest_line(payload) > LONG_LINE {
            self.type_long(payload, &attrs, deadline, written)?;
        } else {
            self.write_all(payload, deadline, written)?;
        }
        if let Some(&last) = payload.last() {
            self.line_open = last != b'\n' && last != ENTER;
        }
        if eof {
            let attrs = tcgetattr(&self.master)?;
            let veof = attrs.control_chars[SpecialCharacterIndices::VEOF as usize];
            if veof == 0 {
                return Err(Stop::NoEof);
            }
            // Under canonical mode the first EOF only hands over an open line; the second ends
            // the input. A program in raw mode reads the character itself: once is enough.
            let twice = attrs.local_flags.contains(LocalFlags::ICANON) && self.line_open;
            let eofs = if twice { vec![veof; 2] } else { vec![veof] };
            self.write_all(&eofs, deadline, written)?;
            self.line_open = false;
        }
        Ok(())
    }

    /// Types a text with a line too long for canonical mode (see the module docs).
    fn type_long(
        &self,
        payload: &[u8],
        attrs: &Termios,
        deadline: Deadline<'_>,
        written: &mut usize,
    ) -> Result<(), Stop> {
        let (body, last) = payload.split_at(payload.len() - 1);
        let mut raw = attrs.clone();
        raw.local_flags.remove(LocalFlags::ICANON);
        tcsetattr(&self.master, SetArg::TCSANOW, &raw)?;
        let peer = slave_of(&self.master);
        let mut result = self.write_all(body, deadline, written);
        if result.is_ok() {
            let drained = match &peer {
                Ok(slave) => wait_drained(slave, deadline),
                // Without the slave's queue to look at, a short pause stands in for the wait.
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(50));
                    true
                }
            };
            if !drained {
                result = Err(deadline.stop());
            }
        }
        drop(peer);
        // Canonical mode comes back only if the command has not set modes of its own.
        if let Ok(now) = tcgetattr(&self.master)
            && now.local_flags == raw.local_flags
        {
            let mut restored = now;
            restored.local_flags.insert(LocalFlags::ICANON);
            tcsetattr(&self.master, SetArg::TCSANOW, &restored)?;
        }
        result?;
        self.write_all(last, deadline, written)
    }

    /// Writes `bytes` whole, waiting for room until `deadline`; counts into `written`.
    fn write_all(
        &self,
        mut bytes: &[u8],
        deadline: Deadline<'_>,
        written: &mut usize,
    ) -> Result<(), Stop> {
        while !bytes.is_empty() {
            match nix::unistd::write(&self.master, bytes) {
                Ok(n) => {
                    bytes = &bytes[n..];
                    *written += n;
                }
                Err(Errno::EINTR) => {}
                Err(Errno::EAGAIN) => {
                    let Some(left) = deadline.left() else {
                        return Err(deadline.stop());
                    };
                    // Short waits, so that a cancel is seen soon.
                    let wait = left.min(Duration::from_millis(50));
                    let mut fds = [PollFd::new(self.master.as_fd(), PollFlags::POLLOUT)];
                    match poll(&mut fds, poll_ms(wait)) {
                        Ok(_) | Err(Errno::EINTR) => {}
                        Err(e) => return Err(Stop::Failed(e.into())),
                    }
                }
                Err(e) => return Err(Stop::Failed(e.into())),
            }
        }
        Ok(())
    }
}

/// Why [`Input::write_all`] stopped short.
enum Stop {
    TimedOut,
    Closed,
    NoEof,
    Failed(io::Error),
}

impl From<Errno> for Stop {
    fn from(e: Errno) -> Self {
        Stop::Failed(e.into())
    }
}

/// Length of the longest line in `bytes`, lines ending at `\n` or `\r`.
fn longest_line(bytes: &[u8]) -> usize {
    bytes
        .split(|&b| b == b'\n' || b == ENTER)
        .map(<[u8]>::len)
        .max()
        .unwrap_or(0)
}

/// Opens the slave side of `master` (without making it anyone's controlling terminal), to look
/// at its input queue.
fn slave_of(master: &OwnedFd) -> io::Result<OwnedFd> {
    use std::os::fd::AsRawFd;
    let flags = nix::libc::O_RDWR | nix::libc::O_NOCTTY | nix::libc::O_CLOEXEC;
    // SAFETY: TIOCGPTPEER takes open flags as its integer argument and returns a new
    // descriptor, which we own from here on.
    let fd = unsafe { nix::libc::ioctl(master.as_raw_fd(), nix::libc::TIOCGPTPEER, flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Bytes waiting in the slave's input queue.
fn queued(slave: &OwnedFd) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    let mut n: nix::libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer, which points at `n`.
    let res = unsafe { nix::libc::ioctl(slave.as_raw_fd(), nix::libc::FIONREAD, &mut n) };
    if res < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(usize::try_from(n).unwrap_or(0))
}

/// Waits until the reader has taken everything: the queue found empty three times in a row,
/// 5 ms apart (bytes written a moment ago may still be on their way into the queue). False if
/// `deadline` came first (or was cancelled).
fn wait_drained(slave: &OwnedFd, deadline: Deadline<'_>) -> bool {
    let mut empty = 0;
    loop {
        match queued(slave) {
            Ok(0) | Err(_) => empty += 1,
            Ok(_) => empty = 0,
        }
        if empty >= 3 {
            return true;
        }
        if deadline.left().is_none() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn poll_ms(d: Duration) -> PollTimeout {
    let ms = d.as_millis().clamp(1, i32::MAX as u128);
    PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_at_either_end_of_line() {
        assert_eq!(longest_line(b""), 0);
        assert_eq!(longest_line(b"abc"), 3);
        assert_eq!(longest_line(b"ab\rcdef\nx"), 4);
    }
}
