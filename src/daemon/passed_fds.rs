//! Reading a connection's bytes with the file descriptors that come with them (`SCM_RIGHTS`):
//! a `run` with `stdin_fd` hands the daemon the caller's standard input on its request line,
//! so the command reads the caller's pipe or file itself, as a shell would give it.
//!
//! A plain `read` would drop (and close) the descriptors, so the connection is read with
//! `recvmsg`; each descriptor is kept with the position in the stream of the first byte it
//! came with, and a request takes those that came with its own line. A client sending more
//! than a few at once has the rest closed by the kernel (or here), never kept.

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
    /// Descriptors received, with the stream position of the first byte they came with.
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

/// One `recvmsg` on `fd` into `buf`, keeping the descriptors it brings in `fds` at stream
/// position `read`, which it then moves past the bytes.
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
    for cmsg in msg.cmsgs()? {
        let ControlMessageOwned::ScmRights(received) = cmsg else {
            continue;
        };
        for raw in received {
            // SAFETY: the kernel has just installed `raw` in this process for us
            // (SCM_RIGHTS); nothing else owns it, so this `OwnedFd` closes it exactly once.
            let owned = unsafe { OwnedFd::from_raw_fd(raw) };
            fds.push_back((*read, owned));
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
