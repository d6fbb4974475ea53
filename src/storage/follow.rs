//! Following a spill file as it grows: its text from some line on, cut into `output` events of
//! whole lines.
//!
//! Followers read the spill file itself, never the run's memory: a follower that falls behind
//! only reads further back in the file, so it can neither slow the command nor lose anything,
//! and a thousand followers cost the run nothing. The file trails what the run has read by the
//! spill writer's queue (it is handed over whenever the command pauses); the caller waits for
//! news of more bytes and reads again.
//!
//! The file is read with blocking calls: use [`Tail`] from a blocking thread.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use crate::protocol::OutputEvent;
use crate::protocol::cut::byte_ends_piece;
use crate::read_buffer::ReadBuffer;

/// Most text in one `output` event (a longer line comes in pieces).
pub const EVENT_BYTES: usize = 256 * 1024;

/// Most bytes read from the file at once.
const READ_BYTES: usize = 256 * 1024;

/// Where a follower starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// At the start of this line (1-based); lines not written yet are waited for.
    Line(u64),
    /// At the start of the line that holds this byte offset (or the end of what the file has).
    Byte(u64),
}

/// A reader of a growing spill file.
#[derive(Debug)]
pub struct Tail {
    file: File,
    /// The next byte to read.
    pos: u64,
    /// The line the byte at `pos` belongs to.
    line: u64,
    /// Lines before this one are read but not sent.
    skip_until: u64,
    /// Read and not yet sent: from the start of line `pending_line` (or a piece of it).
    pending: Vec<u8>,
    pending_line: u64,
    buf: ReadBuffer,
}

/// Opens a spill file for reading, refusing a symbolic link (`ELOOP`) and a file another user
/// owns: the daemon reads the file it created, never whatever a link or another user put in
/// its place (text that would reach a model as this run's output).
pub fn open_spill(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)?;
    let owner = file.metadata()?.uid();
    let me = nix::unistd::geteuid().as_raw();
    if owner != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is owned by uid {owner}, not by this user (uid {me}): not a spill of ours",
                path.display()
            ),
        ));
    }
    Ok(file)
}

impl Tail {
    /// Opens `path` (not a symlink) to follow it from `start`.
    pub fn open(path: &Path, start: Start) -> io::Result<Tail> {
        let file = open_spill(path)?;
        let mut tail = Tail {
            file,
            pos: 0,
            line: 1,
            skip_until: 1,
            pending: Vec::new(),
            pending_line: 1,
            buf: ReadBuffer::new(READ_BYTES),
        };
        match start {
            Start::Line(line) => tail.skip_until = line.max(1),
            Start::Byte(offset) => tail.seek_line_of(offset)?,
        }
        tail.pending_line = tail.line;
        Ok(tail)
    }

    /// Moves to the start of the line holding byte `offset`.
    fn seek_line_of(&mut self, offset: u64) -> io::Result<()> {
        let (mut read, mut newlines, mut line_start) = (0u64, 0u64, 0u64);
        let mut file = (&self.file).take(offset);
        loop {
            let n = match file.read(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let chunk = &self.buf[..n];
            newlines += memchr::memchr_iter(b'\n', chunk).count() as u64;
            if let Some(last) = memchr::memrchr(b'\n', chunk) {
                line_start = read + last as u64 + 1;
            }
            read += n as u64;
        }
        self.file.seek(SeekFrom::Start(line_start))?;
        self.pos = line_start;
        self.line = newlines + 1;
        self.skip_until = self.line;
        Ok(())
    }

    /// The line the next byte read belongs to.
    pub fn next_line(&self) -> u64 {
        self.line
    }

    /// Bytes of the file read so far.
    pub fn pos(&self) -> u64 {
        self.pos
    }

    /// Reads what the file has beyond `pos` (up to a buffer's worth); returns the bytes read,
    /// 0 at its current end.
    pub fn read_more(&mut self) -> io::Result<usize> {
        self.read_within(u64::MAX)
    }

    /// As [`Tail::read_more`], but reads no byte at or past offset `end`: a follower that
    /// switches to another source at `end` gets the text before it and nothing of what follows.
    pub fn read_within(&mut self, end: u64) -> io::Result<usize> {
        let room = usize::try_from(end.saturating_sub(self.pos)).unwrap_or(usize::MAX);
        let want = room.min(self.buf.len());
        let n = loop {
            match self.file.read(&mut self.buf[..want]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        };
        self.pos += n as u64;
        let mut rest = &self.buf[..n];
        while self.line < self.skip_until && !rest.is_empty() {
            match memchr::memchr(b'\n', rest) {
                Some(i) => {
                    rest = &rest[i + 1..];
                    self.line += 1;
                }
                None => rest = &[],
            }
        }
        if !rest.is_empty() {
            if self.pending.is_empty() {
                self.pending_line = self.line;
            }
            self.line += memchr::memchr_iter(b'\n', rest).count() as u64;
            self.pending.extend_from_slice(rest);
        }
        Ok(n)
    }

    /// The events for what has been read: whole lines, in events of at most [`EVENT_BYTES`];
    /// a line longer than that in pieces. With `last` (the file is complete), also the last
    /// line without a newline.
    pub fn events(&mut self, last: bool) -> Vec<OutputEvent> {
        let mut events = Vec::new();
        let mut start = 0;
        while start < self.pending.len() {
            let rest = &self.pending[start..];
            let window = &rest[..rest.len().min(EVENT_BYTES)];
            let cut = match memchr::memrchr(b'\n', window) {
                Some(i) => i + 1,
                None if rest.len() >= EVENT_BYTES => piece_floor(rest, EVENT_BYTES),
                None if last => rest.len(),
                None => break,
            };
            let piece = &rest[..cut];
            events.push(OutputEvent {
                line: self.pending_line,
                text: String::from_utf8_lossy(piece).into_owned(),
            });
            self.pending_line += memchr::memchr_iter(b'\n', piece).count() as u64;
            start += cut;
        }
        self.pending.drain(..start);
        events
    }
}

/// Most bytes a piece of a long line is shortened by so that it does not end inside a piece
/// that could be a secret; a run of that many bytes without a separator is cut anyway.
const MAX_HOLD_BACK: usize = 64 << 10;

/// Where a piece of a long line ends: at or below `at`, after the last separator (so the
/// next piece starts with a whole piece of text, and redaction sees it whole), or at a
/// character boundary when there is none within [`MAX_HOLD_BACK`] bytes.
fn piece_floor(bytes: &[u8], at: usize) -> usize {
    let floor = char_floor(bytes, at);
    let from = floor.saturating_sub(MAX_HOLD_BACK);
    match bytes[from..floor].iter().rposition(|&b| byte_ends_piece(b)) {
        Some(i) => from + i + 1,
        None => floor,
    }
}

/// The largest character boundary of `bytes` at or below `at`, but at least 1 (a piece must
/// make progress even through bytes that are not UTF-8).
fn char_floor(bytes: &[u8], at: usize) -> usize {
    let mut i = at.min(bytes.len());
    while i > 1 && i < bytes.len() && bytes[i] & 0xC0 == 0x80 {
        i -= 1;
    }
    i.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn joined(events: &[OutputEvent]) -> String {
        events.iter().map(|e| e.text.as_str()).collect()
    }

    #[test]
    fn follows_whole_lines_as_the_file_grows() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        let mut tail = Tail::open(file.path(), Start::Line(1)).unwrap();
        file.write_all(b"one\ntw").unwrap();
        tail.read_more().unwrap();
        let first = tail.events(false);
        assert_eq!(first.len(), 1);
        assert_eq!((first[0].line, first[0].text.as_str()), (1, "one\n"));
        assert_eq!(tail.read_more().unwrap(), 0);
        file.write_all(b"o\nthree").unwrap();
        tail.read_more().unwrap();
        let second = tail.events(false);
        assert_eq!((second[0].line, second[0].text.as_str()), (2, "two\n"));
        let last = tail.events(true);
        assert_eq!((last[0].line, last[0].text.as_str()), (3, "three"));
        assert!(tail.events(true).is_empty());
    }

    #[test]
    fn starts_at_a_line_or_at_the_line_of_a_byte() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(b"a\nbb\nccc\n").unwrap();
        let mut tail = Tail::open(file.path(), Start::Line(3)).unwrap();
        tail.read_more().unwrap();
        let events = tail.events(true);
        assert_eq!((events[0].line, events[0].text.as_str()), (3, "ccc\n"));
        let mut tail = Tail::open(file.path(), Start::Byte(3)).unwrap();
        tail.read_more().unwrap();
        let events = tail.events(true);
        assert_eq!((events[0].line, joined(&events).as_str()), (2, "bb\nccc\n"));
        // Past the end: the line is waited for.
        let mut tail = Tail::open(file.path(), Start::Line(5)).unwrap();
        tail.read_more().unwrap();
        assert!(tail.events(true).is_empty());
        file.write_all(b"d\ne\n").unwrap();
        tail.read_more().unwrap();
        let events = tail.events(true);
        assert_eq!((events[0].line, events[0].text.as_str()), (5, "e\n"));
    }

    #[test]
    fn a_piece_of_a_long_line_never_ends_inside_a_token() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        let token = format!("ghp_{}", "aB3".repeat(12));
        let filler = "w ".repeat((EVENT_BYTES - 10) / 2);
        file.write_all(format!("{filler}{token} end\n").as_bytes())
            .unwrap();
        let mut tail = Tail::open(file.path(), Start::Line(1)).unwrap();
        let mut events = Vec::new();
        while tail.read_more().unwrap() > 0 {
            events.extend(tail.events(false));
        }
        events.extend(tail.events(true));
        assert!(events.len() > 1);
        assert!(
            events.iter().any(|e| e.text.contains(&token)),
            "whole in one piece"
        );
    }

    #[test]
    fn long_lines_come_in_pieces_cut_between_characters() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        let line = "é".repeat(EVENT_BYTES); // twice EVENT_BYTES bytes
        file.write_all(format!("{line}\nend\n").as_bytes()).unwrap();
        let mut tail = Tail::open(file.path(), Start::Line(1)).unwrap();
        let mut events = Vec::new();
        while tail.read_more().unwrap() > 0 {
            events.extend(tail.events(false));
        }
        events.extend(tail.events(true));
        assert!(events.iter().all(|e| e.text.len() <= EVENT_BYTES));
        assert_eq!(joined(&events), format!("{line}\nend\n"));
        assert_eq!(
            events.last().unwrap().line,
            1,
            "the line's last piece ends it"
        );
        assert!(events.iter().filter(|e| e.line == 2).count() <= 1);
    }

    proptest::proptest! {
        /// Read up to any offset, then on to the end, a file comes out whole, each byte once:
        /// what a raw follower sends before the raw bytes and a text follower after it join.
        #[test]
        fn reading_within_an_offset_then_on_loses_and_repeats_nothing(
            text in "[a-c\n]{0,3000}",
            cut in 0usize..3100,
        ) {
            let mut file = tempfile::NamedTempFile::new().unwrap();
            file.write_all(text.as_bytes()).unwrap();
            let end = cut.min(text.len()) as u64;
            let mut tail = Tail::open(file.path(), Start::Line(1)).unwrap();
            let mut before = Vec::new();
            while tail.read_within(end).unwrap() > 0 {
                before.extend(tail.events(false));
            }
            before.extend(tail.events(true));
            proptest::prop_assert_eq!(tail.pos(), end);
            proptest::prop_assert_eq!(joined(&before), &text[..end as usize]);
            let mut after = Vec::new();
            while tail.read_more().unwrap() > 0 {}
            after.extend(tail.events(true));
            proptest::prop_assert_eq!(joined(&after), &text[end as usize..]);
        }
    }
}
