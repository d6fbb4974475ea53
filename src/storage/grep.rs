//! Searching one spill file: `spillway grep` and, through the daemon, any client.
//!
//! Streaming and bounded: the file is read once through a fixed buffer, a line is matched on
//! at most its first [`MAX_SEARCH_BYTES`] bytes (a spill may hold a gigabyte-long line), and
//! only the lines to report are kept, each cut at [`MAX_LINE_CHARS`] characters. Context works
//! as grep's `-C`: up to N lines before and after each match, overlapping groups merged.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufRead};
use std::path::{Path, PathBuf};

use regex::Regex;

use crate::protocol::cut::{cut_chars, shown_end};
use crate::protocol::{GrepLine, GrepResult};
use crate::read_buffer::AlignedReader;

/// Matches reported when the caller does not say.
pub const DEFAULT_MAX_COUNT: usize = 100;
/// Characters shown of a reported line before it is cut.
pub const MAX_LINE_CHARS: usize = 500;
/// Most context lines on each side of a match.
pub const MAX_CONTEXT: usize = 50;
/// Bytes of one line the pattern is matched against.
pub const MAX_SEARCH_BYTES: usize = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum GrepError {
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// Searches `path` for `regex`, reporting at most `max_count` matches with `context` lines
/// around each.
pub fn grep_file(
    path: &Path,
    regex: &Regex,
    context: usize,
    max_count: usize,
) -> Result<GrepResult, GrepError> {
    let io_err = |source| GrepError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io_err)?;
    let mut lines = Lines::new(AlignedReader::with_capacity(256 * 1024, file));
    let mut search = Search::new(context.min(MAX_CONTEXT), max_count);
    while let Some(line) = lines.next_line().map_err(io_err)? {
        let text = String::from_utf8_lossy(line.kept);
        if !search.take(line.number, &text, line.len, regex.is_match(&text)) {
            break;
        }
    }
    Ok(search.result)
}

/// The state of a search: the context window before the next match, and how many lines after
/// the last match still belong to it.
struct Search {
    context: usize,
    max_count: usize,
    before: VecDeque<GrepLine>,
    after_left: usize,
    result: GrepResult,
}

impl Search {
    fn new(context: usize, max_count: usize) -> Search {
        Search {
            context,
            max_count,
            before: VecDeque::with_capacity(context),
            after_left: 0,
            result: GrepResult {
                lines: Vec::new(),
                matches: 0,
                limit_hit: false,
                lines_cut: false,
            },
        }
    }

    /// Takes line `number`; false once the search is over.
    fn take(&mut self, number: u64, text: &str, len: usize, matched: bool) -> bool {
        let full = self.result.matches >= self.max_count;
        if matched && full {
            self.result.limit_hit = true;
            return false;
        }
        if matched {
            self.result.matches += 1;
            for line in self.before.drain(..) {
                self.result.lines.push(line);
            }
            self.report(number, text, len, true);
            self.after_left = self.context;
        } else if self.after_left > 0 {
            self.after_left -= 1;
            self.report(number, text, len, false);
        } else if full {
            // Past the last match's context: only a further match (for `limit_hit`) matters.
        } else if self.context > 0 {
            if self.before.len() == self.context {
                self.before.pop_front();
            }
            let (text, _) = cut(text, len);
            self.before.push_back(GrepLine {
                line: number,
                text,
                matched: false,
            });
        }
        true
    }

    fn report(&mut self, number: u64, text: &str, len: usize, matched: bool) {
        let (text, was_cut) = cut(text, len);
        self.result.lines_cut |= was_cut;
        self.result.lines.push(GrepLine {
            line: number,
            text,
            matched,
        });
    }
}

/// Cuts a line at [`MAX_LINE_CHARS`] characters, marking the cut with the line's full size.
/// The cut never splits a piece that could be a secret ([`cut_chars`]): what is shown is
/// redacted as the preview would redact the whole line.
fn cut(text: &str, full_bytes: usize) -> (String, bool) {
    match cut_chars(text, MAX_LINE_CHARS) {
        None if full_bytes <= text.len() => (text.to_string(), false),
        None => (
            format!(
                "{} [… line cut: {full_bytes} bytes in all]",
                &text[..shown_end(text)]
            ),
            true,
        ),
        Some(kept) => (
            format!(
                "{kept} [… line cut at {MAX_LINE_CHARS} characters: {full_bytes} bytes in all]"
            ),
            true,
        ),
    }
}

/// One line as read: its number, its first bytes (at most [`MAX_SEARCH_BYTES`]) and its full
/// length.
struct Line<'a> {
    number: u64,
    kept: &'a [u8],
    len: usize,
}

/// Reads lines keeping at most [`MAX_SEARCH_BYTES`] of each, so memory stays bounded.
struct Lines<R> {
    reader: R,
    buf: Vec<u8>,
    number: u64,
}

impl<R: BufRead> Lines<R> {
    fn new(reader: R) -> Lines<R> {
        Lines {
            reader,
            buf: Vec::new(),
            number: 0,
        }
    }

    fn next_line(&mut self) -> io::Result<Option<Line<'_>>> {
        self.buf.clear();
        let mut len = 0;
        loop {
            let chunk = match self.reader.fill_buf() {
                Ok(chunk) => chunk,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                if len == 0 {
                    return Ok(None);
                }
                break;
            }
            let (take, ended) = match memchr::memchr(b'\n', chunk) {
                Some(i) => (i, true),
                None => (chunk.len(), false),
            };
            let room = MAX_SEARCH_BYTES.saturating_sub(self.buf.len());
            self.buf.extend_from_slice(&chunk[..take.min(room)]);
            len += take;
            self.reader.consume(take + usize::from(ended));
            if ended {
                break;
            }
        }
        self.number += 1;
        Ok(Some(Line {
            number: self.number,
            kept: &self.buf,
            len,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grep(text: &str, pattern: &str, context: usize, max: usize) -> GrepResult {
        let tmp = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(tmp.path(), text).unwrap();
        grep_file(tmp.path(), &Regex::new(pattern).unwrap(), context, max).unwrap()
    }

    fn numbers(r: &GrepResult) -> Vec<(u64, bool)> {
        r.lines.iter().map(|l| (l.line, l.matched)).collect()
    }

    #[test]
    fn reports_matches_with_line_numbers() {
        let r = grep("ok\nerror: one\nok\nerror: two", "^error", 0, 100);
        assert_eq!(numbers(&r), [(2, true), (4, true)]);
        assert_eq!(r.lines[1].text, "error: two");
        assert_eq!(r.matches, 2);
        assert!(!r.limit_hit);
    }

    #[test]
    fn context_is_merged_like_grep() {
        let text: String = (1..=20)
            .map(|i| format!("{}\n", if i == 5 || i == 8 { "hit" } else { "x" }))
            .collect();
        let r = grep(&text, "hit", 2, 100);
        let expected: Vec<(u64, bool)> = (3..=10).map(|i| (i, i == 5 || i == 8)).collect();
        assert_eq!(numbers(&r), expected);
    }

    #[test]
    fn the_limit_is_reported_only_when_more_matches_exist() {
        let text = "a\na\na\n";
        let exact = grep(text, "a", 0, 3);
        assert_eq!((exact.matches, exact.limit_hit), (3, false));
        let over = grep(text, "a", 0, 2);
        assert_eq!((over.matches, over.limit_hit), (2, true));
        assert_eq!(numbers(&over), [(1, true), (2, true)]);
    }

    #[test]
    fn long_lines_are_cut_with_a_marker() {
        let long = format!("needle {}\n", "é".repeat(1000));
        let r = grep(&long, "needle", 0, 10);
        assert!(r.lines_cut);
        let text = &r.lines[0].text;
        assert!(text.starts_with("needle éé"));
        assert!(text.ends_with(&format!(
            "[… line cut at 500 characters: {} bytes in all]",
            long.len() - 1
        )));
        assert_eq!(text.chars().take_while(|c| *c != '[').count(), 501);
    }

    #[test]
    fn a_huge_line_is_searched_in_bounded_memory() {
        let huge = format!("{}needle\nafter needle\n", "z".repeat(3 * MAX_SEARCH_BYTES));
        let r = grep(&huge, "needle", 0, 10);
        // The needle past the searched prefix of line 1 is not seen; line 2's is.
        assert_eq!(numbers(&r), [(2, true)]);
    }
}
