//! Reading a connection's bytes with the file descriptors that come with them (`SCM_RIGHTS`):
//! a `run` with `stdin_fd` hands the daemon the caller's standard input on its request line,
//! so the command reads the caller's pipe or file itself, as a shell would give it.
//!
//! A plain `read` would drop (and close) the descriptors, so the connection is read with
//! `recvmsg`; each descriptor is kept with the position in the stream of the last byte of the
//! read that brought it, and a request takes those that came with its own line. The kernel
//! ends a read with the message that carries descriptors, so that byte is in the line they were
//! sent with, even when lines sent before it (a `ping` a client did not wait to have answered)
//! came in the same read. A client sending more than a few at once has the rest closed by the
//! kernel (or here), never kept.

use std::collections::VecDeque;
use std::io::{self, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
use tokio::io::{AsyncRead, Interest, ReadBuf};
use tokio::net::unix::OwnedReadHalf;

/// Descriptors taken from one message; more are closed by the kernel (`MSG_CTRUNC`).
const FDS_PER_MESSAGE: usize = 4;

/// Descriptors kept waiting for their request line; older ones are closed past this.
const FDS_KEPT: usize = 8;

/// A connection's read half that keeps the descriptors sent with its bytes.
pub(super) struct FdReader {
    half: OwnedReadHalf,
    /// Bytes read so far.
    read: u64,
    /// Descriptors received, with the stream position of the last byte of the read that
    /// brought them.
    fds: VecDeque<(u64, OwnedFd)>,
}

impl FdReader {
    pub(super) fn new(half: OwnedReadHalf) -> FdReader {
        FdReader {
            half,
            read: 0,
            fds: VecDeque::new(),
        }
    }

    pub(super) fn half(&self) -> &OwnedReadHalf {
        &self.half
    }

    /// Bytes read from the connection so far.
    pub(super) fn position(&self) -> u64 {
        self.read
    }

    /// The descriptors that came with bytes before stream position `end` (a request line's
    /// end), oldest first; they are no longer kept here.
    pub(super) fn take_before(&mut self, end: u64) -> Vec<OwnedFd> {
        let mut taken = Vec::new();
        while self.fds.front().is_some_and(|(at, _)| *at < end) {
            taken.extend(self.fds.pop_front().map(|(_, fd)| fd));
        }
        taken
    }
}

/// One `recvmsg` on `fd` into `buf`, keeping the descriptors it brings in `fds` at the stream
/// position of its last byte, and moving `read` past the bytes.
fn receive(
    fd: RawFd,
    buf: &mut [u8],
    read: &mut u64,
    fds: &mut VecDeque<(u64, OwnedFd)>,
) -> io::Result<usize> {
    let mut space = nix::cmsg_space!([RawFd; FDS_PER_MESSAGE]);
    let mut iov = [IoSliceMut::new(buf)];
    let msg = recvmsg::<()>(
        fd,
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT,
    )?;
    let bytes = msg.bytes;
    let last_byte = *read + (bytes as u64).saturating_sub(1);
    for cmsg in msg.cmsgs()? {
        let ControlMessageOwned::ScmRights(received) = cmsg else {
            continue;
        };
        for raw in received {
            // SAFETY: the kernel has just installed `raw` in this process for us
            // (SCM_RIGHTS); nothing else owns it, so this `OwnedFd` closes it exactly once.
            let owned = unsafe { OwnedFd::from_raw_fd(raw) };
            fds.push_back((last_byte, owned));
        }
    }
    while fds.len() > FDS_KEPT {
        fds.pop_front();
    }
    *read += bytes as u64;
    Ok(bytes)
}

impl AsyncRead for FdReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            ready!(this.half.as_ref().poll_read_ready(cx))?;
            let FdReader { half, read, fds } = &mut *this;
            let stream = half.as_ref();
            let space = buf.initialize_unfilled();
            // `try_io` clears the readiness when the read would block, so the next poll waits.
            let result = stream.try_io(Interest::READABLE, || {
                receive(stream.as_raw_fd(), space, read, fds)
            });
            match result {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{IoSlice, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};

    use super::*;

    /// A line sent without a descriptor and one sent with one, both waiting when the daemon
    /// reads: one read takes both, and the descriptor is the second line's.
    #[test]
    fn a_descriptor_is_the_line_s_it_came_with_when_one_read_takes_two_lines() {
        let (mut client, daemon) = UnixStream::pair().unwrap();
        let first = b"{\"v\":1,\"op\":\"ping\"}\n";
        let second = b"{\"v\":1,\"op\":\"run\",\"stdin_fd\":true}\n";
        client.write_all(first).unwrap();
        let (passed, _keep) = nix::unistd::pipe().unwrap();
        let sent = sendmsg::<()>(
            client.as_raw_fd(),
            &[IoSlice::new(second)],
            &[ControlMessage::ScmRights(&[passed.as_raw_fd()])],
            MsgFlags::empty(),
            None,
        )
        .unwrap();
        assert_eq!(sent, second.len());
        let (mut buf, mut read, mut fds) = ([0u8; 4096], 0u64, VecDeque::new());
        let bytes = receive(daemon.as_raw_fd(), &mut buf, &mut read, &mut fds).unwrap();
        assert_eq!(
            bytes,
            first.len() + second.len(),
            "one read took both lines"
        );
        let first_end = first.len() as u64;
        let second_end = first_end + second.len() as u64;
        let at: Vec<u64> = fds.iter().map(|(at, _)| *at).collect();
        // `take_before(end)` gives a line the descriptors kept before its end.
        assert_eq!(at.len(), 1);
        assert!(
            (first_end..second_end).contains(&at[0]),
            "kept at {at:?}: the run line is {first_end}..{second_end}"
        );
    }
}
