//! Paging through a spill file: `spillway read`, `spillway show` and the MCP `read_output`
//! tool all show a spill file one page at a time through [`read_page`], so they agree on
//! what a page holds and how to ask for the next one.
//!
//! The rules this module owns:
//! - lines are numbered from 1; `"a\nb\n"` and `"a\nb"` both hold 2 lines, `""` holds none;
//! - a page shows at most `limit` lines and at most `max_bytes` bytes, each line counted
//!   with its `\n` and any marker, but always at least one line, so paging makes progress;
//! - a line longer than [`MAX_LINE_CHARS`] characters is cut there (never inside a
//!   character) and ends with the marker ` [… line cut at 2000 of N characters]`, N being
//!   the line's full length in characters;
//! - bytes that are not UTF-8 are shown as U+FFFD; N is then approximate.
//!
//! Memory stays bounded whatever the file holds (a spill can be gigabytes, or one line of a
//! gigabyte): the file is scanned through a fixed buffer, at most [`MAX_LINE_CHARS`]
//! characters of a line are kept, and everything else is only counted.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufRead, Read};
use std::path::{Path, PathBuf};

use crate::protocol::cut::shown_end;
use crate::read_buffer::AlignedReader;

/// Lines per page when the caller does not say.
pub const DEFAULT_READ_LIMIT: usize = 2000;
/// Bytes per page when the caller does not say (50 KiB).
pub const DEFAULT_READ_MAX_BYTES: usize = 51200;
/// Characters shown of a line before it is cut.
pub const MAX_LINE_CHARS: usize = 2000;

/// Bytes kept of a line: room for [`MAX_LINE_CHARS`] characters of 4 bytes, and a cap on a
/// line of bytes that never start a character.
const MAX_LINE_KEEP_BYTES: usize = MAX_LINE_CHARS * 4;
/// Read buffer; large so that counting newlines runs over long stretches.
const BUF_BYTES: usize = 256 * 1024;

/// Which part of a spill file to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRequest {
    /// First line to show, 1-based (default 1). 0 is an error.
    pub offset: u64,
    /// Most lines to show (default [`DEFAULT_READ_LIMIT`]). 0 is an error.
    pub limit: usize,
    /// Most bytes to show, each line counted with its `\n` (default
    /// [`DEFAULT_READ_MAX_BYTES`]). The first line is shown whatever its size.
    pub max_bytes: usize,
}

impl Default for ReadRequest {
    fn default() -> Self {
        ReadRequest {
            offset: 1,
            limit: DEFAULT_READ_LIMIT,
            max_bytes: DEFAULT_READ_MAX_BYTES,
        }
    }
}

/// One page of a spill file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadPage {
    /// The lines shown, each ending in `\n`, cut lines carrying the marker.
    pub text: String,
    /// First line shown, 1-based: the request's offset.
    pub first: u64,
    /// Last line shown, inclusive; `first - 1` when nothing is shown (an empty file).
    pub last: u64,
    /// Lines in the whole file.
    pub total_lines: u64,
    /// Lines cut at [`MAX_LINE_CHARS`].
    pub cut_lines: usize,
    /// The byte budget, not the line limit or the end of the file, ended the page.
    pub stopped_by_bytes: bool,
    /// The byte budget the page was read with (named in the notice).
    pub max_bytes: usize,
}

impl ReadPage {
    /// True when lines remain after `last`.
    pub fn has_more(&self) -> bool {
        self.last < self.total_lines
    }

    /// The continuation notice, with the caller's wording for the next step: with
    /// `|next| format!("--offset {next}")` it reads
    /// `[lines 1-2000 of 5000; continue with --offset 2001]`, or
    /// `[lines 1-700 of 5000 (51200-byte limit); continue with --offset 701]` when the byte
    /// budget ended the page. None when nothing remains.
    pub fn notice(&self, next_step: impl Fn(u64) -> String) -> Option<String> {
        if !self.has_more() {
            return None;
        }
        let budget = if self.stopped_by_bytes {
            format!(" ({}-byte limit)", self.max_bytes)
        } else {
            String::new()
        };
        Some(format!(
            "[lines {}-{} of {}{budget}; continue with {}]",
            self.first,
            self.last,
            self.total_lines,
            next_step(self.last + 1)
        ))
    }
}

/// Why a page could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Offset 0: lines are numbered from 1.
    #[error("offset 0 is not a line of {}: lines are numbered from 1", path.display())]
    BadOffset { path: PathBuf },
    /// Limit 0: a page would show nothing and never move on.
    #[error("limit 0 would show no line of {}: ask for 1 line or more", path.display())]
    BadLimit { path: PathBuf },
    /// The file does not exist.
    #[error("spill file {} does not exist", path.display())]
    NotFound { path: PathBuf },
    /// The offset is beyond the last line.
    #[error(
        "offset {offset} is past the end of {}: it has {}",
        path.display(),
        count_lines_text(*total_lines)
    )]
    OffsetPastEnd {
        offset: u64,
        total_lines: u64,
        path: PathBuf,
    },
    /// Opening or reading the file failed.
    #[error("cannot read spill file {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn count_lines_text(n: u64) -> String {
    match n {
        0 => "no lines (it is empty)".to_owned(),
        1 => "1 line".to_owned(),
        n => format!("{n} lines"),
    }
}

/// Reads the page `req` asks for from the spill file at `path`, with the lines around it that
/// redaction must see it with ([`PageContext`]).
///
/// Scans the whole file once (to count its lines) with bounded memory. An empty file read
/// from offset 1 gives an empty page. Fails on offset or limit 0, a missing file, an
/// offset past the last line, or an I/O error.
pub fn read_page(path: &Path, req: &ReadRequest) -> Result<(ReadPage, PageContext), ReadError> {
    let path_buf = || path.to_path_buf();
    if req.offset == 0 {
        return Err(ReadError::BadOffset { path: path_buf() });
    }
    if req.limit == 0 {
        return Err(ReadError::BadLimit { path: path_buf() });
    }
    let file = File::open(path).map_err(|source| match source.kind() {
        io::ErrorKind::NotFound => ReadError::NotFound { path: path_buf() },
        _ => ReadError::Io {
            path: path_buf(),
            source,
        },
    })?;
    let (page, context) = scan_page(file, req).map_err(|source| ReadError::Io {
        path: path_buf(),
        source,
    })?;
    // Offset 1 of an empty file is a valid (empty) page; any other offset must be a line.
    if page.first > page.total_lines.max(1) {
        return Err(ReadError::OffsetPastEnd {
            offset: page.first,
            total_lines: page.total_lines,
            path: path_buf(),
        });
    }
    Ok((page, context))
}

/// Builds the page for `req` (offset and limit at least 1) from `src` and the lines around it,
/// counting every line.
fn scan_page(src: impl Read, req: &ReadRequest) -> io::Result<(ReadPage, PageContext)> {
    let mut lines = LineScanner::new(src);
    lines.skip(req.offset.saturating_sub(CONTEXT_LINES).max(1) - 1)?;
    let mut before = String::new();
    lines.render_through(req.offset - 1, &mut before)?;
    let mut after = String::new();
    let mut page = ReadPage {
        text: String::new(),
        first: req.offset,
        last: req.offset - 1,
        total_lines: 0,
        cut_lines: 0,
        stopped_by_bytes: false,
        max_bytes: req.max_bytes,
    };
    let mut shown = 0;
    while shown < req.limit {
        let Some(line) = lines.next_line()? else {
            break;
        };
        let shown_bytes = page.text.len();
        line.render_into(&mut page.text);
        if shown > 0 && page.text.len() > req.max_bytes {
            // Read, but not shown: the first line after the page.
            after = page.text.split_off(shown_bytes);
            page.stopped_by_bytes = true;
            break;
        }
        shown += 1;
        page.last += 1;
        page.cut_lines += usize::from(line.is_cut());
    }
    // Read so far: the page's last line, or the line after it (in `after`). A page that is
    // empty ended the file, and has no lines around it (offset 1) or is refused (past the end).
    lines.render_through(page.last + CONTEXT_LINES, &mut after)?;
    lines.skip(u64::MAX)?;
    page.total_lines = lines.lines;
    let context = PageContext {
        before: keep_bytes(before, CONTEXT_BYTES, true),
        after: keep_bytes(after, CONTEXT_BYTES, false),
    };
    Ok((page, context))
}

/// The lines before and after a page that redaction sees it with ([`CONTEXT_LINES`] each side
/// at most, each side at most [`CONTEXT_BYTES`], its lines nearest the page kept), read in
/// the same scan as the page. Empty around an empty page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageContext {
    pub before: String,
    pub after: String,
}

/// Lines read around a page or a search's matches so that redaction sees what they belong to:
/// a page inside a private key's body is redacted only if the key's BEGIN line is seen with
/// it. 64 lines cover a 4096-bit RSA key's body.
pub const CONTEXT_LINES: u64 = 64;
/// Most bytes of context read on one side of a page or a block of matches.
pub const CONTEXT_BYTES: usize = 32 << 10;

/// The lines of each of `ranges` (1-based, inclusive, in file order), rendered as a page
/// renders them, each range at most [`CONTEXT_BYTES`] (its lines nearest `near_end` kept when
/// cut: the end for a range before a page, the start for one after). One scan of the file.
pub fn read_ranges(path: &Path, ranges: &[(u64, u64, bool)]) -> io::Result<Vec<String>> {
    // Opened as `read_page` opens it: the daemon has checked the spill is its own, and
    // `spillway read` reads the file its user named.
    let mut lines = LineScanner::new(File::open(path)?);
    let mut out = Vec::with_capacity(ranges.len());
    for &(first, last, near_end) in ranges {
        let mut text = String::new();
        lines.skip(first.saturating_sub(1).saturating_sub(lines.lines))?;
        lines.render_through(last, &mut text)?;
        out.push(keep_bytes(text, CONTEXT_BYTES, near_end));
    }
    Ok(out)
}

/// `text` (whole lines) cut to at most `max` bytes at a line boundary, keeping its end or its
/// start.
fn keep_bytes(text: String, max: usize, keep_end: bool) -> String {
    if text.len() <= max {
        return text;
    }
    if keep_end {
        let from = text.len() - max;
        let start = text[from..].find('\n').map_or(text.len(), |i| from + i + 1);
        text[start..].to_string()
    } else {
        let end = text[..max].rfind('\n').map_or(0, |i| i + 1);
        text[..end].to_string()
    }
}

/// Walks a byte stream line by line through a fixed buffer, counting the lines it passes.
struct LineScanner<R> {
    src: AlignedReader<R>,
    /// Lines consumed so far, an unterminated last line included once the end is reached.
    lines: u64,
    /// Bytes of an unfinished line have been consumed.
    mid_line: bool,
}

impl<R: Read> LineScanner<R> {
    fn new(src: R) -> Self {
        LineScanner {
            src: AlignedReader::with_capacity(BUF_BYTES, src),
            lines: 0,
            mid_line: false,
        }
    }

    /// Consumes `n` lines, or up to the end of the stream if it holds fewer.
    fn skip(&mut self, n: u64) -> io::Result<()> {
        let mut left = n;
        while left > 0 {
            let buf = self.src.fill_buf()?;
            if buf.is_empty() {
                self.lines += u64::from(self.mid_line);
                self.mid_line = false;
                return Ok(());
            }
            // Look for the `left`-th newline only where the buffer could hold it.
            let target = usize::try_from(left - 1).ok().filter(|&i| i < buf.len());
            let found = target.and_then(|i| memchr::memchr_iter(b'\n', buf).nth(i));
            let (consumed, newlines, mid_line) = match found {
                Some(pos) => (pos + 1, left, false),
                None => {
                    let newlines = memchr::memchr_iter(b'\n', buf).count() as u64;
                    (buf.len(), newlines, buf.last() != Some(&b'\n'))
                }
            };
            self.src.consume(consumed);
            self.lines += newlines;
            self.mid_line = mid_line;
            left -= newlines;
        }
        Ok(())
    }

    /// Consumes the next line, keeping at most [`MAX_LINE_CHARS`] characters of it.
    /// None at the end of the stream. Must be called at the start of a line.
    fn next_line(&mut self) -> io::Result<Option<Line>> {
        let mut line = LineBuilder::default();
        let mut started = false;
        loop {
            let buf = self.src.fill_buf()?;
            if buf.is_empty() {
                if !started {
                    return Ok(None);
                }
                break;
            }
            started = true;
            if let Some(end) = memchr::memchr(b'\n', buf) {
                line.feed(&buf[..end]);
                self.src.consume(end + 1);
                break;
            }
            let len = buf.len();
            line.feed(buf);
            self.src.consume(len);
        }
        self.lines += 1;
        Ok(Some(line.finish()))
    }

    /// Renders the lines up to line `last` (1-based, inclusive) into `out`, as a page renders
    /// them, or those up to the end of the stream if it ends first. Must be called at the
    /// start of a line.
    fn render_through(&mut self, last: u64, out: &mut String) -> io::Result<()> {
        while self.lines < last {
            let Some(line) = self.next_line()? else {
                break;
            };
            line.render_into(out);
        }
        Ok(())
    }
}

/// A line as shown: its first [`MAX_LINE_CHARS`] characters and its full length.
struct Line {
    text: String,
    chars: u64,
}

impl Line {
    fn is_cut(&self) -> bool {
        self.chars > MAX_LINE_CHARS as u64
    }

    /// Appends the line, with the cut marker if it was cut, and its `\n`.
    fn render_into(&self, out: &mut String) {
        out.push_str(&self.text);
        if self.is_cut() {
            // Writing to a String cannot fail.
            let _ = write!(
                out,
                " [… line cut at {MAX_LINE_CHARS} of {} characters]",
                self.chars
            );
        }
        out.push('\n');
    }
}

/// Collects a line fed in pieces: keeps the bytes of its first [`MAX_LINE_CHARS`]
/// characters (at most [`MAX_LINE_KEEP_BYTES`]) and only counts the characters after them.
#[derive(Default)]
struct LineBuilder {
    kept: Vec<u8>,
    kept_chars: usize,
    full: bool,
    rest_chars: u64,
}

impl LineBuilder {
    fn feed(&mut self, mut bytes: &[u8]) {
        if !self.full {
            let taken = self.keep_prefix(bytes);
            bytes = &bytes[taken..];
        }
        self.rest_chars += bytes.iter().filter(|&&b| is_char_start(b)).count() as u64;
    }

    /// Keeps bytes from the start of `bytes` until the line's kept part is full, stopping
    /// before the first byte of a character that does not fit. Returns how many were kept.
    fn keep_prefix(&mut self, bytes: &[u8]) -> usize {
        for (i, &b) in bytes.iter().enumerate() {
            let char_full = is_char_start(b) && self.kept_chars == MAX_LINE_CHARS;
            if char_full || self.kept.len() == MAX_LINE_KEEP_BYTES {
                self.full = true;
                return i;
            }
            self.kept_chars += usize::from(is_char_start(b));
            self.kept.push(b);
        }
        bytes.len()
    }

    fn finish(self) -> Line {
        let mut text = String::from_utf8_lossy(&self.kept).into_owned();
        let kept_chars = text.chars().count() as u64;
        // Only bytes that are not UTF-8 can make more characters than were counted.
        if let Some((cut, _)) = text.char_indices().nth(MAX_LINE_CHARS) {
            text.truncate(cut);
        }
        let chars = kept_chars + self.rest_chars;
        // A cut line ends before a piece it would split (see `crate::protocol::cut`).
        if chars > MAX_LINE_CHARS as u64 {
            text.truncate(shown_end(&text));
        }
        Line { text, chars }
    }
}

/// True for a byte that starts a UTF-8 character (anything but a continuation byte).
fn is_char_start(b: u8) -> bool {
    (b as i8) >= -0x40
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Write as _;
    use tempfile::NamedTempFile;

    fn spill(content: &[u8]) -> NamedTempFile {
        let mut file = NamedTempFile::new().expect("temp file");
        file.write_all(content).expect("write temp file");
        file.flush().expect("flush temp file");
        file
    }

    fn req(offset: u64, limit: usize, max_bytes: usize) -> ReadRequest {
        ReadRequest {
            offset,
            limit,
            max_bytes,
        }
    }

    fn page(content: &[u8], r: ReadRequest) -> ReadPage {
        let file = spill(content);
        read_page(file.path(), &r).expect("read page").0
    }

    fn err(content: &[u8], r: ReadRequest) -> ReadError {
        let file = spill(content);
        read_page(file.path(), &r).expect_err("read should fail")
    }

    fn offset_notice(p: &ReadPage) -> Option<String> {
        p.notice(|next| format!("--offset {next}"))
    }

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    #[test]
    fn defaults() {
        let r = ReadRequest::default();
        assert_eq!((r.offset, r.limit, r.max_bytes), (1, 2000, 51200));
    }

    #[test]
    fn whole_small_file() {
        let p = page(b"a\nb\n", ReadRequest::default());
        assert_eq!(p.text, "a\nb\n");
        assert_eq!((p.first, p.last, p.total_lines), (1, 2, 2));
        assert_eq!(p.cut_lines, 0);
        assert!(!p.stopped_by_bytes);
        assert!(!p.has_more());
        assert_eq!(offset_notice(&p), None);
    }

    #[test]
    fn trailing_newline_or_not_counts_the_same() {
        let with = page(b"a\nb\n", ReadRequest::default());
        let without = page(b"a\nb", ReadRequest::default());
        assert_eq!(with.total_lines, 2);
        assert_eq!(without.total_lines, 2);
        assert_eq!(
            without.text, "a\nb\n",
            "the last line is shown with a newline"
        );
    }

    #[test]
    fn empty_lines_count() {
        let p = page(b"\n\n\n", ReadRequest::default());
        assert_eq!((p.text.as_str(), p.total_lines), ("\n\n\n", 3));
        let p = page(b"a\n\nb", req(2, 1, 100));
        assert_eq!(
            (p.text.as_str(), p.first, p.last, p.total_lines),
            ("\n", 2, 2, 3)
        );
    }

    #[test]
    fn empty_file_gives_an_empty_page() {
        let p = page(b"", ReadRequest::default());
        assert_eq!(p.text, "");
        assert_eq!((p.first, p.last, p.total_lines), (1, 0, 0));
        assert!(!p.has_more());
        assert_eq!(offset_notice(&p), None);
    }

    #[test]
    fn empty_file_past_offset_1_is_an_error() {
        let e = err(b"", req(2, 10, 100));
        assert!(matches!(
            e,
            ReadError::OffsetPastEnd {
                offset: 2,
                total_lines: 0,
                ..
            }
        ));
        assert!(e.to_string().contains("no lines (it is empty)"), "{e}");
    }

    #[test]
    fn limit_gives_notice() {
        let content = numbered(5000);
        let p = page(content.as_bytes(), ReadRequest::default());
        assert_eq!((p.first, p.last, p.total_lines), (1, 2000, 5000));
        assert!(p.has_more());
        assert!(!p.stopped_by_bytes);
        assert_eq!(
            offset_notice(&p).as_deref(),
            Some("[lines 1-2000 of 5000; continue with --offset 2001]")
        );
        assert_eq!(p.text, numbered(2000));
    }

    #[test]
    fn offset_in_the_middle() {
        let content = numbered(10);
        let p = page(content.as_bytes(), req(4, 3, 1000));
        assert_eq!(p.text, "line 4\nline 5\nline 6\n");
        assert_eq!((p.first, p.last, p.total_lines), (4, 6, 10));
        assert_eq!(
            p.notice(|n| format!("offset={n}")).as_deref(),
            Some("[lines 4-6 of 10; continue with offset=7]")
        );
    }

    #[test]
    fn offset_at_the_last_line() {
        let p = page(b"a\nb\nc", req(3, 10, 1000));
        assert_eq!(p.text, "c\n");
        assert_eq!((p.first, p.last, p.total_lines), (3, 3, 3));
        assert!(!p.has_more());
    }

    #[test]
    fn limit_ending_exactly_at_the_end_has_no_notice() {
        let p = page(b"a\nb\nc\n", req(2, 2, 1000));
        assert_eq!((p.first, p.last, p.total_lines), (2, 3, 3));
        assert_eq!(offset_notice(&p), None);
    }

    #[test]
    fn offset_past_the_end_is_an_error() {
        for (content, offset) in [(&b"a\nb\nc\n"[..], 4), (b"a\nb\nc", 4), (b"a\nb\nc", 100)] {
            let e = err(content, req(offset, 10, 1000));
            assert!(
                matches!(e, ReadError::OffsetPastEnd { total_lines: 3, .. }),
                "{offset}: {e:?}"
            );
            let msg = e.to_string();
            assert!(msg.contains(&format!("offset {offset}")), "{msg}");
            assert!(msg.contains("it has 3 lines"), "{msg}");
        }
        let e = err(b"only\n", req(2, 10, 1000));
        assert!(e.to_string().contains("it has 1 line"), "{e}");
    }

    #[test]
    fn offset_zero_and_limit_zero_are_errors() {
        let file = spill(b"a\n");
        let e = read_page(file.path(), &req(0, 10, 100)).expect_err("offset 0");
        assert!(matches!(e, ReadError::BadOffset { .. }));
        assert!(
            e.to_string().contains(&file.path().display().to_string()),
            "{e}"
        );
        let e = read_page(file.path(), &req(1, 0, 100)).expect_err("limit 0");
        assert!(matches!(e, ReadError::BadLimit { .. }));
    }

    #[test]
    fn missing_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("nope.txt");
        let e = read_page(&path, &ReadRequest::default()).expect_err("missing");
        assert!(matches!(e, ReadError::NotFound { .. }));
        assert!(e.to_string().contains("nope.txt"), "{e}");
    }

    #[test]
    fn unreadable_path_is_an_io_error_naming_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let e = read_page(dir.path(), &ReadRequest::default()).expect_err("a directory");
        assert!(matches!(e, ReadError::Io { .. }), "{e:?}");
        assert!(
            e.to_string().contains(&dir.path().display().to_string()),
            "{e}"
        );
    }

    #[test]
    fn byte_budget_stops_the_page() {
        // Each line "line N\n" is 7 bytes for N < 10.
        let content = numbered(9);
        let p = page(content.as_bytes(), req(1, 100, 20));
        assert_eq!(p.text, "line 1\nline 2\n");
        assert!(p.stopped_by_bytes);
        assert_eq!(p.last, 2);
        assert_eq!(
            offset_notice(&p).as_deref(),
            Some("[lines 1-2 of 9 (20-byte limit); continue with --offset 3]")
        );
        // A budget met exactly still fits the line.
        let p = page(content.as_bytes(), req(1, 100, 21));
        assert_eq!(p.last, 3);
        assert!(p.stopped_by_bytes);
    }

    #[test]
    fn byte_budget_reaching_the_end_is_not_stopped_by_bytes() {
        let p = page(b"ab\ncd\n", req(1, 100, 6));
        assert_eq!((p.last, p.total_lines), (2, 2));
        assert!(!p.stopped_by_bytes);
        assert_eq!(offset_notice(&p), None);
    }

    #[test]
    fn line_limit_wins_over_a_roomy_budget() {
        let p = page(b"a\nb\nc\n", req(1, 2, 1000));
        assert!(!p.stopped_by_bytes);
        assert_eq!(
            offset_notice(&p).as_deref(),
            Some("[lines 1-2 of 3; continue with --offset 3]")
        );
    }

    #[test]
    fn a_line_bigger_than_the_budget_is_still_shown() {
        let long = "x".repeat(300);
        let content = format!("{long}\nnext\n");
        let p = page(content.as_bytes(), req(1, 10, 10));
        assert_eq!(p.text, format!("{long}\n"));
        assert_eq!(p.last, 1);
        assert!(p.stopped_by_bytes);
        let p = page(content.as_bytes(), req(2, 10, 1));
        assert_eq!(p.text, "next\n");
    }

    #[test]
    fn line_of_exactly_max_chars_is_not_cut() {
        let line = "é".repeat(MAX_LINE_CHARS);
        let p = page(format!("{line}\n").as_bytes(), ReadRequest::default());
        assert_eq!(p.text, format!("{line}\n"));
        assert_eq!(p.cut_lines, 0);
    }

    #[test]
    fn long_line_is_cut_with_marker() {
        let line = "a".repeat(MAX_LINE_CHARS + 1);
        let p = page(format!("{line}\nb\n").as_bytes(), ReadRequest::default());
        let expected = format!(
            "{} [… line cut at 2000 of 2001 characters]\nb\n",
            "a".repeat(MAX_LINE_CHARS)
        );
        assert_eq!(p.text, expected);
        assert_eq!(p.cut_lines, 1);
        assert_eq!(p.total_lines, 2);
    }

    #[test]
    fn cut_never_splits_a_multibyte_char() {
        // ASCII then wide chars, so that the cut lands right after 1, 2 or all wide chars.
        for (prefix, wide) in [(1999, "😀"), (1998, "€"), (0, "😀"), (1, "é")] {
            let line = format!("{}{}", "a".repeat(prefix), wide.repeat(MAX_LINE_CHARS + 5));
            let full = prefix + MAX_LINE_CHARS + 5;
            let p = page(line.as_bytes(), ReadRequest::default());
            let shown: String = line.chars().take(MAX_LINE_CHARS).collect();
            assert_eq!(
                p.text,
                format!("{shown} [… line cut at 2000 of {full} characters]\n"),
                "prefix {prefix} wide {wide}"
            );
        }
    }

    #[test]
    fn five_megabyte_single_line_is_cut_and_bounded() {
        let mut content = "ß".repeat(5 * 1024 * 1024 / 2);
        content.push_str("\nafter\n");
        let chars = 5 * 1024 * 1024 / 2;
        let p = page(content.as_bytes(), ReadRequest::default());
        assert_eq!(p.total_lines, 2);
        assert_eq!(p.cut_lines, 1);
        let first = p.text.lines().next().expect("a first line");
        assert!(first.starts_with(&"ß".repeat(MAX_LINE_CHARS)));
        assert!(first.ends_with(&format!(" [… line cut at 2000 of {chars} characters]")));
        assert!(
            p.text.len() < 5000,
            "page text is bounded: {} bytes",
            p.text.len()
        );
        assert!(p.text.ends_with("\nafter\n"));
    }

    #[test]
    fn line_spanning_many_buffers_without_newline() {
        let content = "y".repeat(BUF_BYTES * 3 + 17);
        let p = page(content.as_bytes(), ReadRequest::default());
        assert_eq!(p.total_lines, 1);
        assert!(
            p.text
                .contains(&format!("of {} characters]", BUF_BYTES * 3 + 17))
        );
    }

    #[test]
    fn counting_and_skipping_across_buffers() {
        let content = numbered(200_000); // several read buffers
        let p = page(content.as_bytes(), req(150_000, 2, 1000));
        assert_eq!(p.text, "line 150000\nline 150001\n");
        assert_eq!(p.total_lines, 200_000);
    }

    #[test]
    fn invalid_utf8_is_shown_lossily() {
        let p = page(b"ok\xff\xfe\nnext", ReadRequest::default());
        assert_eq!(p.text, "ok\u{fffd}\u{fffd}\nnext\n");
        // A long run of continuation bytes is capped, not kept whole.
        let mut junk = vec![0x80u8; 100_000];
        junk.push(b'\n');
        let p = page(&junk, ReadRequest::default());
        assert_eq!(p.cut_lines, 1);
        assert!(p.text.starts_with(&"\u{fffd}".repeat(MAX_LINE_CHARS)));
        assert!(p.text.len() < MAX_LINE_CHARS * 3 + 100);
    }

    #[test]
    fn error_messages_name_the_path() {
        let file = spill(b"a\n");
        let e = read_page(file.path(), &req(5, 1, 1)).expect_err("past end");
        assert!(
            e.to_string().contains(&file.path().display().to_string()),
            "{e}"
        );
    }

    /// The `N` of `--offset N` in a notice.
    fn next_offset(notice: &str) -> u64 {
        let rest = notice
            .split("--offset ")
            .nth(1)
            .expect("notice names the next offset");
        rest.trim_end_matches(']')
            .parse()
            .expect("next offset is a number")
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// Paging on as the notices say gives back the file; each page comes with the lines
        /// around it that a second scan for just those lines finds.
        #[test]
        fn paging_with_the_notice_reproduces_the_file(
            lines in prop::collection::vec("[a-z é€😀]{0,40}", 0..150),
            trailing_newline: bool,
            limit in 1usize..20,
            max_bytes in 0usize..300,
        ) {
            let mut content = lines.join("\n");
            if trailing_newline && !lines.is_empty() {
                content.push('\n');
            }
            let mut expected = content.clone();
            if !expected.is_empty() && !expected.ends_with('\n') {
                expected.push('\n');
            }
            let total = expected.matches('\n').count() as u64;
            let file = spill(content.as_bytes());
            let mut shown = String::new();
            let mut offset = 1;
            for _ in 0..=total {
                let (p, around) =
                    read_page(file.path(), &req(offset, limit, max_bytes)).expect("page");
                let ranges = [
                    (p.first.saturating_sub(CONTEXT_LINES).max(1), p.first - 1, true),
                    (p.last + 1, p.last + CONTEXT_LINES, false),
                ];
                let scanned = read_ranges(file.path(), &ranges).expect("ranges");
                let expected_around = match p.last < p.first {
                    true => PageContext::default(),
                    false => PageContext { before: scanned[0].clone(), after: scanned[1].clone() },
                };
                prop_assert_eq!(around, expected_around);
                prop_assert_eq!(p.first, offset);
                prop_assert_eq!(p.total_lines, total);
                prop_assert_eq!(p.cut_lines, 0);
                let page_lines = p.text.matches('\n').count() as u64;
                prop_assert_eq!(page_lines, p.last + 1 - p.first);
                prop_assert!(page_lines as usize <= limit);
                prop_assert!(page_lines <= 1 || p.text.len() <= max_bytes);
                shown.push_str(&p.text);
                match offset_notice(&p) {
                    Some(notice) => {
                        prop_assert!(page_lines >= 1, "progress on every page");
                        offset = next_offset(&notice);
                        prop_assert_eq!(offset, p.last + 1);
                    }
                    None => {
                        prop_assert_eq!(p.last, total);
                        break;
                    }
                }
            }
            prop_assert_eq!(shown, expected);
        }
    }
}
