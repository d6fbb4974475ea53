//! Where the lines of a fold being opened are read from.
//!
//! The capture keeps the output's first and last `max_bytes` bytes, so a similar run next to
//! either end can be opened from memory. A run in the middle cannot: a log of 31 timed
//! requests followed by a long repeat has its requests' last lines far from the tail buffer.
//! The spill file holds every byte, so what the buffers lack is read back from it — only as
//! much as the room left could show, and only bytes the writer has already put in the file,
//! so a preview taken while the output still comes never reads past them.

use crate::engine::capture::CaptureView;
use crate::engine::outline::LineText;
use crate::storage::spill::SpillBytes;

/// Bytes read from the spill at a time: consecutive lines of one run come from one read.
const WINDOW: u64 = 64 * 1024;

/// The output's lines by byte offset: from the capture's buffers, else from its spill file.
#[derive(Debug)]
pub(super) struct Lines<'v, 'a> {
    view: &'v CaptureView<'a>,
    spill: Option<SpillBytes>,
    /// The bytes last read from the spill, and the output offset of their first.
    window: (u64, Vec<u8>),
}

impl<'v, 'a> Lines<'v, 'a> {
    pub(super) fn new(view: &'v CaptureView<'a>) -> Lines<'v, 'a> {
        // Only output past the buffers needs the file; a short output never opens it.
        let spill = view
            .spill_path
            .filter(|_| view.spill_in_file > view.spill_from)
            .and_then(|path| SpillBytes::open(path, view.spill_in_file).ok());
        Lines {
            view,
            spill,
            window: (0, Vec::new()),
        }
    }

    /// The whole line starting at output byte `at`. A line the buffers do not hold is read
    /// from the spill only if it is at most `max` bytes with its newline (a longer one could
    /// not be shown).
    pub(super) fn at(&mut self, at: u64, max: usize) -> Option<LineText> {
        let [head, tail] = buffers(self.view);
        head.line_at(at).or_else(|| tail.line_at(at)).or_else(|| {
            self.spill(at, at + max as u64, at + WINDOW.max(max as u64))?
                .line_at(at)
        })
    }

    /// The line that ends (with its newline) just before output byte `at`, and where it
    /// starts; from the spill only if it is at most `max` bytes with its newline.
    pub(super) fn before(&mut self, at: u64, max: usize) -> Option<(u64, LineText)> {
        let [head, tail] = buffers(self.view);
        // One byte more than the line may take: the newline that ends the line before it.
        let from = at.saturating_sub(max as u64 + 1);
        let reach = at.saturating_sub(WINDOW.max(max as u64));
        tail.line_before(at)
            .or_else(|| head.line_before(at))
            .or_else(|| self.spill(from, at, reach)?.line_before(at))
    }

    /// Output bytes `start..end` from the spill as a [`Window`] (see [`Lines::read`]).
    fn spill(&mut self, start: u64, end: u64, reach: u64) -> Option<Window<'_>> {
        Some(Window {
            from: start,
            bytes: self.read(start, end, reach)?,
            starts_line: start == 0,
        })
    }

    /// Output bytes `start..end` from the spill file (fewer where the file has not got that
    /// far), reading `start.min(reach)..end.max(reach)` when the last read does not hold them.
    fn read(&mut self, start: u64, end: u64, reach: u64) -> Option<&[u8]> {
        let shift = self.view.spill_from;
        let known = self.spill.as_ref()?.end().checked_sub(shift)?;
        let end = end.min(known);
        if end <= start {
            return None;
        }
        let (have_from, have) = &self.window;
        let holds = *have_from <= start && end <= have_from + have.len() as u64;
        if !holds {
            let (from, to) = (start.min(reach), end.max(reach).min(known));
            let bytes = self.spill.as_ref()?.read(from + shift, to + shift).ok()?;
            self.window = (from, bytes);
        }
        let (from, bytes) = &self.window;
        bytes.get(usize::try_from(start - from).ok()?..usize::try_from(end - from).ok()?)
    }
}

/// Bytes of the output from offset `from` on: a buffer of the capture, or a read of the spill.
#[derive(Debug, Clone, Copy)]
struct Window<'b> {
    from: u64,
    bytes: &'b [u8],
    /// Whether `from` is known to begin a line (a line may then start at the window's start
    /// without a newline before it).
    starts_line: bool,
}

/// The capture's head buffer (the output's start) and its tail buffer.
fn buffers<'b>(view: &'b CaptureView<'_>) -> [Window<'b>; 2] {
    let head = Window {
        from: 0,
        bytes: view.head,
        starts_line: true,
    };
    let tail = Window {
        from: view.total_bytes - view.tail.len() as u64,
        bytes: view.tail,
        starts_line: false,
    };
    [head, tail]
}

impl Window<'_> {
    /// The whole line starting at output byte `at`, when the window holds it with its newline.
    fn line_at(self, at: u64) -> Option<LineText> {
        let start = usize::try_from(at.checked_sub(self.from)?).ok()?;
        if start > 0 && self.bytes.get(start - 1) != Some(&b'\n') {
            return None;
        }
        let rest = self.bytes.get(start..)?;
        let len = memchr::memchr(b'\n', rest)?;
        whole(&rest[..len])
    }

    /// The line that ends (with its newline) just before output byte `at`, and where it
    /// starts, when the window holds all of it.
    fn line_before(self, at: u64) -> Option<(u64, LineText)> {
        let end = usize::try_from(at.checked_sub(self.from)?).ok()?;
        if end == 0 || self.bytes.get(end - 1) != Some(&b'\n') {
            return None;
        }
        let body = &self.bytes[..end - 1];
        let start = match memchr::memrchr(b'\n', body) {
            Some(newline) => newline + 1,
            // No line break before it in the window: the line starts at the window's start
            // if that starts a line; else it is longer than the window.
            None if self.starts_line => 0,
            None => return None,
        };
        Some((self.from + start as u64, whole(&body[start..])?))
    }
}

fn whole(bytes: &[u8]) -> Option<LineText> {
    let text = std::str::from_utf8(bytes).ok()?;
    Some(LineText {
        text: text.to_string(),
        len: text.len() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::capture::{Capture, Limits, SpillPolicy};
    use crate::program::CliSteps;
    use crate::protocol::{Direction, LineRange, Preview};
    use crate::storage::spill::DataDir;

    /// 31 timed requests, then 31 copies of one line: the requests' last lines are far from
    /// the tail buffer of a 216-byte budget.
    fn requests_then_a_repeat() -> String {
        let mut text: String = (0..31)
            .map(|i| format!("request {i} took {}ms\n", i * 7))
            .collect();
        text.push_str(&"waiting for work\n".repeat(31));
        text
    }

    fn capture(text: &str, policy: SpillPolicy) -> Capture {
        let mut c = Capture::new(Limits::new(38, 216).unwrap(), policy);
        c.write(text);
        c.finish();
        c
    }

    fn spill_in(root: &std::path::Path) -> SpillPolicy {
        SpillPolicy::Always(DataDir::open(root).unwrap())
    }

    #[test]
    fn a_run_far_from_both_ends_is_opened_from_the_spill() {
        let tmp = tempfile::tempdir().unwrap();
        let text = requests_then_a_repeat();
        let c = capture(&text, spill_in(tmp.path()));
        let p = Preview::build(&c.view(), Direction::Tail, &CliSteps);
        // The requests' last lines (26-31) fill the room the repeat leaves.
        let shown: u64 = p.shown.iter().map(|r| r.last - r.first + 1).sum();
        assert!(shown >= 7, "{:?}\n{}", p.shown, p.content);
        assert!(
            p.content
                .contains("request 29 took 203ms\nrequest 30 took 210ms\n")
        );
        assert!(p.content.contains(" similar lines, lines 2-"));
        // Without a spill nothing past the buffers can be read: the run stays folded.
        let bare = capture(&text, SpillPolicy::Never);
        let p = Preview::build(&bare.view(), Direction::Tail, &CliSteps);
        assert_eq!(
            p.shown[..2],
            [
                LineRange { first: 1, last: 1 },
                LineRange {
                    first: 31,
                    last: 32
                }
            ]
        );
    }

    #[test]
    fn a_spill_changed_under_the_capture_opens_nothing_unlike_the_run() {
        let tmp = tempfile::tempdir().unwrap();
        let text = requests_then_a_repeat();
        let c = capture(&text, spill_in(tmp.path()));
        let view = c.view();
        // Someone rewrites the requests in the file, keeping its size.
        let path = view.spill_path.unwrap();
        let changed = text.replace("request", "REPLACED");
        std::fs::write(path, &changed).unwrap();
        let p = Preview::build(&view, Direction::Tail, &CliSteps);
        assert!(!p.content.contains("REPLACED"), "{}", p.content);
        assert!(
            p.content.contains(" similar lines, lines 2-30"),
            "{}",
            p.content
        );
    }

    #[test]
    fn nothing_past_what_is_in_the_file_is_read() {
        let tmp = tempfile::tempdir().unwrap();
        let text = requests_then_a_repeat();
        let c = capture(&text, spill_in(tmp.path()));
        let line_20 = text.find("request 20 ").unwrap() as u64;
        let line_21 = text.find("request 21 ").unwrap() as u64;
        let mut view = c.view();
        let mut lines = Lines::new(&view);
        assert_eq!(
            lines.at(line_20, 100).unwrap().text,
            "request 20 took 140ms"
        );
        let (start, before) = lines.before(line_21, 100).unwrap();
        assert_eq!(
            (start, before.text.as_str()),
            (line_20, "request 20 took 140ms")
        );
        // A line longer than the room is not read.
        assert!(Lines::new(&view).at(line_20, 10).is_none());
        assert!(Lines::new(&view).before(line_21, 10).is_none());
        // The writer has got only as far as the middle of line 20.
        view.spill_in_file = line_20 + 5;
        let mut lines = Lines::new(&view);
        assert!(lines.at(line_20, 100).is_none());
        assert!(lines.before(line_21, 100).is_none());
    }
}
