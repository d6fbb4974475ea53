//! Previews of a run that is still going, built with the same engine and rules as the final
//! one ([`Preview::build`]):
//!
//! - [`with_pending`]: everything so far, that is the capture plus the line still being
//!   written (a prompt such as `continue? ` has no newline yet, and the normaliser holds it
//!   back from the capture, but it is exactly what the reader needs to see);
//! - [`range_preview`]: only the output from some line on (`spillway wait --new`), numbered as
//!   the spill file numbers it, with a notice that says which lines are new and where the rest
//!   is.
//!
//! Nothing here reads files or knows about runs: callers hand in a [`CaptureView`].

use std::io::{self, Read};
use std::path::Path;

use crate::engine::capture::{Capture, CaptureView, Limits, SpillPolicy};
use crate::engine::highlight::Patterns;
use crate::engine::preview::Offset;
use crate::protocol::{Direction, NextStep, Preview};
use crate::read_buffer::ReadBuffer;

/// The preview of `view` as if `pending` (a line still being written, without its newline)
/// had been captured too. A `pending` that holds a newline is not a pending line: it is left
/// out. The notice's next steps are named by `steps`; `compact`: whether lines alike fold.
pub fn with_pending(
    view: &CaptureView<'_>,
    pending: &str,
    direction: Direction,
    steps: &dyn NextStep,
    compact: bool,
) -> Preview {
    let build = |view: &CaptureView<'_>| {
        Preview::build_compacting(view, direction, steps, None, Offset::default(), compact)
    };
    if pending.is_empty() || pending.contains('\n') {
        return build(view);
    }
    let max = view.limits.max_bytes();
    let p = pending.as_bytes();
    let mut head = view.head.to_vec();
    // The head takes more only while it still holds the whole output.
    if view.is_whole() {
        let room = max.saturating_sub(head.len());
        head.extend_from_slice(&p[..room.min(p.len())]);
    }
    let mut joined = Vec::with_capacity(view.tail.len() + p.len());
    joined.extend_from_slice(view.tail);
    joined.extend_from_slice(p);
    let (tail, tail_at_line_start) = if joined.len() <= max {
        let whole = view.tail.len() as u64 == view.total_bytes;
        (joined, whole || view.tail_at_line_start)
    } else {
        let start = joined.len() - max;
        let at_line_start = joined[start - 1] == b'\n';
        (joined[start..].to_vec(), at_line_start)
    };
    // A capture ends inside a line only after a very long line was committed in pieces.
    let open = view.total_bytes > 0 && !view.ends_with_newline();
    let first_open = view.total_lines == 0 || (view.total_lines == 1 && open);
    let extended = CaptureView {
        head: &head,
        tail: &tail,
        tail_at_line_start,
        total_bytes: view.total_bytes + p.len() as u64,
        total_lines: view.total_lines + u64::from(!open),
        first_line_bytes: if first_open {
            view.first_line_bytes + p.len() as u64
        } else {
            view.first_line_bytes
        },
        last_line_bytes: if open {
            view.last_line_bytes + p.len() as u64
        } else {
            p.len() as u64
        },
        outline: view.outline.clone().with_pending(
            pending,
            max,
            view.highlights.is_some_and(|h| h.is_match(pending)),
        ),
        ..view.clone()
    };
    build(&extended)
}

/// Where a reader has got to in a spill: the lines it has been shown (or had elided in a
/// preview it was given), and the byte offset just after them. Always at a line start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor {
    /// Lines covered: the next preview starts at line `lines + 1`.
    pub lines: u64,
    pub offset: u64,
}

/// A capture of part of a spill (with no spill of its own), for [`range_preview`]; from the
/// start of the spill, a capture of all of it, previewed as the run's own preview is.
pub struct RangeCapture {
    capture: Capture,
    start: Cursor,
    /// An incomplete UTF-8 character at the end of the last piece, kept for the next.
    carry: Vec<u8>,
    /// Complete lines seen, and the bytes up to the end of the last of them.
    newlines: u64,
    bytes: u64,
    complete_bytes: u64,
    /// Whether the preview folds alike lines (`--compact`, on by default).
    compact: bool,
}

impl RangeCapture {
    /// A capture of the spill from `start` on, looking for `highlights` (`None`: none).
    pub fn new(limits: Limits, start: Cursor, highlights: Option<Patterns>) -> RangeCapture {
        RangeCapture {
            capture: Capture::with_patterns(limits, SpillPolicy::Never, highlights),
            start,
            carry: Vec::new(),
            newlines: 0,
            bytes: 0,
            complete_bytes: 0,
            compact: true,
        }
    }

    /// Folds alike lines in the preview (the default) or not (`--compact off`).
    pub fn with_compact(mut self, compact: bool) -> RangeCapture {
        self.compact = compact;
        self
    }

    /// Takes the next bytes of the range (cut anywhere, even inside a character).
    pub fn feed(&mut self, bytes: &[u8]) {
        let joined;
        let bytes = if self.carry.is_empty() {
            bytes
        } else {
            let mut carried = std::mem::take(&mut self.carry);
            carried.extend_from_slice(bytes);
            joined = carried;
            &joined[..]
        };
        let valid = match std::str::from_utf8(bytes) {
            Ok(_) => bytes.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => bytes.len(),
        };
        let (text, rest) = bytes.split_at(valid);
        if let Some(last) = memchr::memrchr(b'\n', text) {
            self.newlines += memchr::memchr_iter(b'\n', text).count() as u64;
            self.complete_bytes = self.bytes + last as u64 + 1;
        }
        self.bytes += text.len() as u64;
        self.capture.write(&String::from_utf8_lossy(text));
        self.carry = rest.to_vec();
    }

    /// Reads `len` bytes of `file` (or to its end) into the capture.
    pub fn feed_from(&mut self, file: impl Read, len: u64) -> io::Result<()> {
        let mut file = file.take(len);
        let mut buf = ReadBuffer::new(256 * 1024);
        loop {
            match file.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => self.feed(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Ends the range with `pending` (the line still being written); returns the preview of
    /// the range, numbered as the spill at `spill` numbers its lines, and how far it covers
    /// whole lines (for the reader's next [`Cursor`]). The notice's next steps are named by
    /// `steps`.
    pub fn finish(
        mut self,
        pending: &str,
        direction: Direction,
        steps: &dyn NextStep,
        spill: Option<&Path>,
    ) -> (Preview, Cursor) {
        let start = self.start;
        if !self.carry.is_empty() {
            let carry = std::mem::take(&mut self.carry);
            self.capture.write(&String::from_utf8_lossy(&carry));
        }
        if !pending.contains('\n') {
            self.capture.write(pending);
        }
        self.capture.finish();
        let view = CaptureView {
            spill_path: spill,
            // The range was read from the spill: a preview may read it back there.
            spill_from: start.offset,
            spill_in_file: if spill.is_some() {
                start.offset + self.bytes
            } else {
                0
            },
            ..self.capture.view()
        };
        let preview = range_preview(
            &view,
            direction,
            steps,
            start.lines + 1,
            start.offset,
            self.compact,
        );
        let next = Cursor {
            lines: start.lines + self.newlines,
            offset: start.offset + self.complete_bytes,
        };
        (preview, next)
    }
}

/// The preview of `view`, which holds the output from spill line `first_line` on (that line
/// starting `bytes_before` bytes into the spill), with line numbers, markers and notice in the
/// spill's own numbering. `total_lines` and `total_bytes` count the whole output up to the end
/// of the range; `shown`, `partial_line` and `omitted_lines` describe the range. From line 1
/// on, it is the preview of the whole output. `compact`: whether alike lines fold.
pub fn range_preview(
    view: &CaptureView<'_>,
    direction: Direction,
    steps: &dyn NextStep,
    first_line: u64,
    bytes_before: u64,
    compact: bool,
) -> Preview {
    let offset = Offset {
        lines: first_line.saturating_sub(1),
        bytes: bytes_before,
    };
    Preview::build_compacting(view, direction, steps, None, offset, compact)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::CliSteps;
    use crate::protocol::LineRange;
    use proptest::prelude::*;

    fn capture_of(limits: Limits, text: &str) -> Capture {
        let mut c = Capture::new(limits, SpillPolicy::Never);
        c.write(text);
        c.finish();
        c
    }

    fn numbered(from: usize, to: usize) -> String {
        (from..=to).map(|i| format!("line {i}\n")).collect()
    }

    #[test]
    fn a_pending_prompt_shows_at_the_end() {
        let limits = Limits::new(100, 10_000).unwrap();
        let c = capture_of(limits, "a\nb\n");
        let p = with_pending(&c.view(), "continue? ", Direction::Both, &CliSteps, true);
        assert_eq!(p.content, "a\nb\ncontinue? ");
        assert_eq!(p.total_lines, 3);
        let none = with_pending(&c.view(), "", Direction::Both, &CliSteps, true);
        assert_eq!(none.content, "a\nb\n");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// The preview of a capture plus its pending line is the preview of a capture that
        /// was given both.
        #[test]
        fn pending_is_as_if_captured(
            lines in prop::collection::vec("[a-zé]{0,12}", 0..30),
            open in "[a-z]{0,40}",
            pending in "[a-zé ?]{1,40}",
            max_lines in 1u64..12,
            max_bytes in 1u64..80,
            direction in prop::sample::select(vec![Direction::Head, Direction::Tail, Direction::Both]),
        ) {
            let limits = Limits::new(max_lines, max_bytes).unwrap();
            let mut committed: String = lines.iter().map(|l| format!("{l}\n")).collect();
            committed.push_str(&open);
            let c = capture_of(limits, &committed);
            let got = with_pending(&c.view(), &pending, direction, &CliSteps, true);
            let whole = capture_of(limits, &format!("{committed}{pending}"));
            let want = Preview::build(&whole.view(), direction, &CliSteps);
            prop_assert_eq!(got, want);
        }

        /// A range preview shows the same lines as a preview of the whole output would if the
        /// range were all of it, renumbered, and covers up to its last whole line.
        #[test]
        fn ranges_are_numbered_as_in_the_spill(
            before in 0usize..40,
            count in 0usize..60,
            max_lines in 1u64..12,
            max_bytes in 5u64..200,
            direction in prop::sample::select(vec![Direction::Head, Direction::Tail, Direction::Both]),
            chunk in 1usize..17,
        ) {
            let limits = Limits::new(max_lines, max_bytes).unwrap();
            let prefix = numbered(1, before);
            let range = numbered(before + 1, before + count);
            let start = Cursor { lines: before as u64, offset: prefix.len() as u64 };
            let mut rc = RangeCapture::new(limits, start, Some(Patterns::defaults()));
            for piece in range.as_bytes().chunks(chunk) {
                rc.feed(piece);
            }
            let spill = Path::new("/spill.log");
            let (p, next) = rc.finish("", direction, &CliSteps, Some(spill));
            prop_assert_eq!(next, Cursor {
                lines: (before + count) as u64,
                offset: (prefix.len() + range.len()) as u64,
            });
            prop_assert_eq!(p.total_lines, (before + count) as u64);
            let all_text = format!("{prefix}{range}");
            let all: Vec<&str> = all_text.split_inclusive('\n').collect();
            for r in &p.shown {
                prop_assert!(r.first > before as u64);
                for n in r.first..=r.last {
                    prop_assert!(p.content.contains(all[n as usize - 1]));
                }
            }
            if p.truncated {
                let wording = if before == 0 { "output truncated" } else { "new output truncated" };
                prop_assert!(p.content.contains(wording));
                let first_unseen = p.shown.first()
                    .filter(|r| r.first == before as u64 + 1)
                    .map_or(before as u64 + 1, |r| r.last + 1);
                let expected = format!("--offset {first_unseen}");
                prop_assert!(p.content.contains(&expected), "{}", p.content);
            } else {
                prop_assert_eq!(&p.content, &range);
            }
        }
    }

    /// A similar run in the middle of a range, far from both ends of its buffers, is opened
    /// from the spill at the range's own offset in it.
    #[test]
    fn a_range_opens_its_folds_from_the_spill_at_its_offset() {
        let prefix = "an older line that the reader has seen\n".repeat(50);
        let mut range: String = (0..31)
            .map(|i| format!("request {i} took {}ms\n", i * 7))
            .collect();
        range.push_str(&"waiting for work\n".repeat(31));
        let tmp = tempfile::tempdir().unwrap();
        let spill = tmp.path().join("s.log");
        std::fs::write(&spill, format!("{prefix}{range}")).unwrap();
        let start = Cursor {
            lines: 50,
            offset: prefix.len() as u64,
        };
        let mut rc = RangeCapture::new(Limits::new(38, 216).unwrap(), start, None);
        let mut file = std::fs::File::open(&spill).unwrap();
        std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(start.offset)).unwrap();
        rc.feed_from(file, range.len() as u64).unwrap();
        let (p, _) = rc.finish("", Direction::Tail, &CliSteps, Some(&spill));
        assert!(
            p.content
                .contains("request 29 took 203ms\nrequest 30 took 210ms\n"),
            "{}",
            p.content
        );
        assert_eq!(p.shown.last().unwrap().last, 50 + 32, "{:?}", p.shown);
    }

    #[test]
    fn a_range_preview_names_its_lines() {
        let limits = Limits::new(4, 10_000).unwrap();
        let prefix = numbered(1, 100);
        let start = Cursor {
            lines: 100,
            offset: prefix.len() as u64,
        };
        let mut rc = RangeCapture::new(limits, start, Some(Patterns::defaults()));
        rc.feed(numbered(101, 120).as_bytes());
        let (p, next) = rc.finish("", Direction::Both, &CliSteps, Some(Path::new("/s.log")));
        assert_eq!(next.lines, 120);
        assert_eq!(
            p.shown,
            vec![
                LineRange {
                    first: 101,
                    last: 102
                },
                LineRange {
                    first: 119,
                    last: 120
                }
            ]
        );
        assert!(
            p.content.starts_with(
                "line 101\nline 102\n[... 16 lines omitted (lines 103-118) ...]\nline 119\nline 120\n\n"
            ),
            "{}",
            p.content
        );
        assert!(
            p.content
                .contains("showing lines 101-102 and 119-120 of the new lines 101-120")
        );
        assert!(p.content.contains("spillway read /s.log --offset 103"));
    }

    #[test]
    fn a_range_preview_carries_highlights_numbered_as_in_the_spill() {
        let limits = Limits::new(10, 10_000).unwrap();
        let prefix = numbered(1, 100);
        let start = Cursor {
            lines: 100,
            offset: prefix.len() as u64,
        };
        // Numbered lines fold as templates (`line <*>`): this is about the highlight's number.
        let mut rc =
            RangeCapture::new(limits, start, Some(Patterns::defaults())).with_compact(false);
        let range = format!(
            "{}error[E0308]: mismatched types\n{}",
            numbered(101, 249),
            numbered(251, 400)
        );
        rc.feed(range.as_bytes());
        let (p, _) = rc.finish("", Direction::Both, &CliSteps, Some(Path::new("/s.log")));
        assert!(
            p.content
                .contains("(lines 106-396); 1 of them looks like an error: here it is, after its line number ...]\n[at line 250]\nerror[E0308]: mismatched types\n"),
            "{}",
            p.content
        );
        assert!(p.shown.contains(&LineRange {
            first: 250,
            last: 250
        }));
    }

    #[test]
    fn a_range_keeps_an_unfinished_line_for_next_time() {
        let limits = Limits::new(100, 10_000).unwrap();
        let mut rc = RangeCapture::new(limits, Cursor::default(), Some(Patterns::defaults()));
        rc.feed("one\ntw".as_bytes());
        let (p, next) = rc.finish("", Direction::Both, &CliSteps, None);
        assert_eq!(p.content, "one\ntw");
        assert_eq!(
            next,
            Cursor {
                lines: 1,
                offset: 4
            }
        );
        // A character cut between two pieces is put back together.
        let mut rc = RangeCapture::new(limits, Cursor::default(), Some(Patterns::defaults()));
        let text = "é\n".as_bytes();
        rc.feed(&text[..1]);
        rc.feed(&text[1..]);
        let (p, _) = rc.finish("?", Direction::Both, &CliSteps, None);
        assert_eq!(p.content, "é\n?");
    }
}
