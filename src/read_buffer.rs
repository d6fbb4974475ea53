//! A buffer for large reads from the kernel, its start aligned to a cache line.
//!
//! The kernel copies what `read` returns with `rep movsb`, and on the AMD EPYC this project
//! is measured on, that copy runs several times slower when its destination lies 1 to 31 bytes
//! past its source, counted within a 4 KiB page (the user-space `memcpy` of glibc, which
//! uses the same instruction from 2 KiB on, does too). What a read copies from, the page cache
//! or a pipe's pages, mostly starts on a page, and a large block from the C allocator starts
//! 16 bytes past one, after its header: 256 MiB read from the page cache in 256 KiB reads took
//! 36-76 ms into a buffer at a page's start or 32 or more bytes past it, and 165-185 ms at 1,
//! 16 or 31 bytes past it. A start aligned to 64 bytes is never 1 to 31 bytes past a page's.
//! Writes, whose destination is the page, do not care where their source starts. Every read
//! of a command's output, of standard input and of a spill goes into one of these.

use std::io::{self, BufRead, Read};
use std::ops::{Deref, DerefMut};

/// The alignment of a [`ReadBuffer`]'s start: a cache line, a multiple of the 32 bytes a
/// page-aligned source must not be just short of.
const ALIGN: usize = 64;

/// Zeroed bytes whose first one is [`ALIGN`]-aligned.
pub struct ReadBuffer {
    /// The buffer's bytes, after the `start` bytes skipped to reach the alignment and before
    /// the `ALIGN - 1 - start` left over.
    storage: Vec<u8>,
    start: usize,
}

impl ReadBuffer {
    /// A buffer of `len` bytes.
    pub fn new(len: usize) -> ReadBuffer {
        let storage = vec![0u8; len + ALIGN - 1];
        let start = (ALIGN - storage.as_ptr() as usize % ALIGN) % ALIGN;
        ReadBuffer { storage, start }
    }

    fn span(&self) -> std::ops::Range<usize> {
        self.start..self.start + self.storage.len() + 1 - ALIGN
    }
}

impl Deref for ReadBuffer {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.storage[self.span()]
    }
}

impl DerefMut for ReadBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        let span = self.span();
        &mut self.storage[span]
    }
}

impl std::fmt::Debug for ReadBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadBuffer")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

/// `std::io::BufReader` over a [`ReadBuffer`]: the standard one allocates its buffer where
/// the allocator puts it, 16 bytes past a page's start for the sizes spills are read in.
#[derive(Debug)]
pub struct AlignedReader<R> {
    inner: R,
    buf: ReadBuffer,
    /// The buffered bytes not consumed yet are `buf[pos..filled]`.
    pos: usize,
    filled: usize,
}

impl<R: Read> AlignedReader<R> {
    pub fn with_capacity(capacity: usize, inner: R) -> AlignedReader<R> {
        AlignedReader {
            inner,
            buf: ReadBuffer::new(capacity),
            pos: 0,
            filled: 0,
        }
    }
}

impl<R: Read> Read for AlignedReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.filled && out.len() >= self.buf.len() {
            return self.inner.read(out); // nothing buffered: no need to pass through
        }
        let n = self.fill_buf()?.read(out)?;
        self.consume(n);
        Ok(n)
    }
}

impl<R: Read> BufRead for AlignedReader<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.pos == self.filled {
            self.filled = loop {
                match self.inner.read(&mut self.buf) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    read => break read?,
                }
            };
            self.pos = 0;
        }
        Ok(&self.buf[self.pos..self.filled])
    }

    fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.filled);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_buffer_starts_on_a_cache_line_and_has_the_length_asked() {
        for len in [0, 1, 63, 64, 65, 4096, 64 << 10, 256 << 10] {
            let mut buf = ReadBuffer::new(len);
            assert_eq!(buf.len(), len);
            assert_eq!(buf.as_ptr() as usize % ALIGN, 0, "length {len}");
            assert!(buf.iter().all(|&b| b == 0));
            buf.fill(7);
            assert!(buf.iter().all(|&b| b == 7));
        }
    }

    /// A source that hands out at most `most` bytes a read and is interrupted before each.
    struct Trickle<'a> {
        data: &'a [u8],
        most: usize,
        interrupt: bool,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            self.interrupt = !self.interrupt;
            if self.interrupt {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let n = out.len().min(self.most).min(self.data.len());
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    proptest::proptest! {
        /// Lines and reads through the reader give back the source's bytes as they were,
        /// whatever the buffer's size, the source's read sizes and the callers' mix of calls.
        #[test]
        fn the_reader_gives_back_every_byte_in_order(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..4000),
            capacity in 1usize..300,
            most in 1usize..500,
            reads in proptest::collection::vec(0usize..700, 1..50),
        ) {
            let source = Trickle { data: &data, most, interrupt: false };
            let mut reader = AlignedReader::with_capacity(capacity, source);
            let mut got = Vec::new();
            for (i, &want) in reads.iter().cycle().enumerate() {
                let before = got.len();
                if i % 2 == 0 {
                    reader.read_until(b'\n', &mut got).unwrap();
                } else {
                    let mut out = vec![0; want];
                    let n = loop {
                        match reader.read(&mut out) {
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            n => break n.unwrap(),
                        }
                    };
                    got.extend_from_slice(&out[..n]);
                }
                if got.len() == before && (i % 2 == 0 || want > 0) {
                    break; // the end
                }
            }
            proptest::prop_assert_eq!(got, data);
        }
    }
}
