//! Capture: one pass over normalised text that keeps what a preview needs and spills the rest.
//!
//! [`Capture::write`] appends every byte to the spill file, keeps the first `max_bytes` bytes
//! (the head) and the last `max_bytes + 1` bytes (the tail window, one extra byte to tell whether
//! the window starts at a line start), and counts lines and bytes. Nothing else is kept, so peak
//! memory is O(limits) however much a command prints. [`Capture::view`] lends all of it to
//! [`crate::engine::preview`], at the end of a run or while it is still going.
//!
//! For the run's token accounting it also keeps a bounded [`Sampler`] of the output, evenly
//! spread over it, and [`Capture::take_output_source`] gives what counting the whole output's model
//! tokens takes at the end: the output itself while counting it exactly is cheap, the sample
//! beyond.
//!
//! Line counting follows one rule everywhere in spillway: `"a\nb\n"` and `"a\nb"` are both two
//! lines, `""` is none.

use crate::engine::highlight::{KindMemo, Patterns};
use crate::engine::normalise::count_newlines;
use crate::engine::scanner::SharedScanner;
use crate::engine::tokens::{self, Sampler};
use crate::protocol::SpillCap;
use crate::storage::spill::{DataDir, SpillFile};

mod limits;
mod output;
mod view;

pub use limits::{
    BadLimit, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, DEFAULT_MAX_SPILL, Limits, MAX_MAX_BYTES,
    MAX_MAX_LINES,
};
pub use output::OutputSource;
pub use view::{CaptureView, Outcome, SpillProblem};

/// When a spill file is created.
#[derive(Debug)]
pub enum SpillPolicy {
    /// No spill file (tests, or callers that only want a preview).
    Never,
    /// Only once the output exceeds the limits, as `spillway truncate` does.
    WhenTruncated(DataDir),
    /// From the first byte, as daemon runs do: history reads every run's spill.
    Always(DataDir),
}

/// What became of the spill file.
#[derive(Debug)]
enum Spill {
    Off,
    Pending(DataDir),
    /// Boxed: an open file's state is several times the size of the others'.
    Open(Box<SpillFile>),
    Failed(String),
}

/// The streaming capture of one command's normalised output.
#[derive(Debug)]
pub struct Capture {
    limits: Limits,
    head: Vec<u8>,
    tail: Vec<u8>,
    total_bytes: u64,
    newlines: u64,
    /// Bytes of line 1 without its newline, once it has ended.
    first_line_bytes: Option<u64>,
    /// The last bytes of line 1 (up to half the byte limit), once it has ended: the head
    /// keeps its start, and a preview that cannot show it whole shows both ends.
    first_line_end: Vec<u8>,
    /// Bytes of the line still being written (after the last newline).
    open_line_bytes: u64,
    /// Bytes of the last line that ended, without its newline.
    last_ended_line_bytes: u64,
    spill: Spill,
    /// Most bytes the spill file takes; past them only the preview's part goes on.
    spill_cap: u64,
    /// Bytes given to the spill file.
    spilled: u64,
    /// Set when the spill reached its cap: the first line not wholly in it.
    capped_at_line: Option<u64>,
    /// The patterns of the highlights (None: turned off).
    patterns: Option<Patterns>,
    /// Finds lines that look like errors and folds the output, for the preview. While a
    /// spill file is open its writer thread feeds it; until then, this one does.
    scanner: SharedScanner,
    /// Samples of the output, for its token count when it is too long to count whole.
    sampler: Sampler,
}

impl Capture {
    /// Starts a capture that looks for the default highlights; with [`SpillPolicy::Always`]
    /// the spill file is created now, and a failure to create it is kept for the notice
    /// rather than returned.
    pub fn new(limits: Limits, policy: SpillPolicy) -> Capture {
        Capture::with_patterns(limits, policy, Some(Patterns::defaults()))
    }

    /// Like [`Capture::new`], but looks for highlights with `patterns` instead of the
    /// defaults, or not at all with `None`. A run's capture is made on its launch's path, so
    /// its scanner is built once, here.
    pub fn with_patterns(
        limits: Limits,
        policy: SpillPolicy,
        patterns: Option<Patterns>,
    ) -> Capture {
        let spill = match policy {
            SpillPolicy::Never => Spill::Off,
            SpillPolicy::WhenTruncated(dir) => Spill::Pending(dir),
            SpillPolicy::Always(dir) => open_spill(&dir),
        };
        let mut capture = Capture {
            limits,
            head: Vec::new(),
            tail: Vec::new(),
            total_bytes: 0,
            newlines: 0,
            first_line_bytes: None,
            first_line_end: Vec::new(),
            open_line_bytes: 0,
            last_ended_line_bytes: 0,
            spill,
            spill_cap: DEFAULT_MAX_SPILL,
            spilled: 0,
            capped_at_line: None,
            scanner: SharedScanner::new(patterns.clone(), limits.max_lines, limits.max_bytes),
            patterns,
            sampler: Sampler::new(),
        };
        capture.hand_scanning_to_the_spill();
        capture
    }

    /// Caps the spill file at `bytes` instead of [`DEFAULT_MAX_SPILL`]. Call before the first
    /// write.
    pub fn with_spill_cap(mut self, bytes: u64) -> Capture {
        self.spill_cap = bytes;
        self
    }

    /// Lets the open spill file's writer thread scan for highlights from here on.
    fn hand_scanning_to_the_spill(&mut self) {
        if let Spill::Open(file) = &mut self.spill {
            file.scan_with(Some(std::sync::Arc::new(self.scanner.clone())));
        }
    }

    /// Takes the next piece of normalised output.
    pub fn write(&mut self, text: &str) {
        if let Some((file, keep, newlines)) = self.record(text, count_newlines(text)) {
            spill_part(file, text, keep, newlines);
        }
    }

    /// Like [`Capture::write`], but takes `text`'s newline count from the caller (a
    /// normaliser has it), moves its buffer to the spill writer instead of copying it, and
    /// leaves `text` empty for reuse: the hot loop's way in.
    pub fn write_owned(&mut self, text: &mut String, newlines: u64) {
        debug_assert_eq!(
            newlines,
            count_newlines(text),
            "the caller's count is wrong"
        );
        let owned = std::mem::take(text);
        let mut spare = match self.record(&owned, newlines) {
            Some((file, keep, newlines)) if keep == owned.len() => {
                file.write_owned(owned, newlines)
            }
            Some((file, keep, newlines)) => {
                spill_part(file, &owned, keep, newlines);
                owned
            }
            None => owned,
        };
        spare.clear();
        *text = spare;
    }

    /// Counts and keeps what the preview needs of `text`, which holds `newlines` newlines;
    /// returns the spill file it must go to, if one is open, with how many of its bytes the
    /// file takes, and the newlines in it.
    fn record(&mut self, text: &str, newlines: u64) -> Option<(&mut SpillFile, usize, u64)> {
        let bytes = text.as_bytes();
        if bytes.is_empty() {
            return None;
        }
        let lines_before = self.newlines;
        self.keep_first_line_end(bytes);
        self.count_lines(bytes, newlines);
        self.total_bytes += bytes.len() as u64;
        self.sampler.feed(bytes);
        self.open_pending_spill();
        self.keep_head(bytes);
        self.keep_tail(bytes);
        if !matches!(self.spill, Spill::Open(_)) {
            self.scanner.write(text, newlines);
            return None;
        }
        let keep = self.spill_share(bytes, lines_before);
        match &mut self.spill {
            Spill::Open(file) => Some((&mut **file, keep, newlines)),
            _ => None,
        }
    }

    /// How many bytes of `bytes` (which follow `lines_before` ended lines) the spill file
    /// takes: all of them below the cap, then what fits, cut at a char boundary, then none.
    fn spill_share(&mut self, bytes: &[u8], lines_before: u64) -> usize {
        if self.capped_at_line.is_some() {
            return 0;
        }
        let room = self.spill_cap.saturating_sub(self.spilled);
        let mut keep = usize::try_from(room).unwrap_or(usize::MAX).min(bytes.len());
        if keep < bytes.len() {
            while keep > 0 && (bytes[keep] as i8) < -0x40 {
                keep -= 1; // a UTF-8 continuation byte: back to the char's start
            }
            let ended = memchr::memchr_iter(b'\n', &bytes[..keep]).count() as u64;
            self.capped_at_line = Some(lines_before + ended + 1);
        }
        self.spilled += keep as u64;
        keep
    }

    /// Passes what the spill file has gathered to its writer; call when no more output is
    /// waiting, so the file keeps up with a slow command.
    pub fn hand_off(&mut self) {
        if let Spill::Open(file) = &mut self.spill {
            file.hand_off();
        }
    }

    /// Flushes the spill file; call once the output has ended.
    pub fn finish(&mut self) {
        // The writer thread scans what it writes: let it finish first.
        if let Spill::Open(file) = &mut self.spill {
            file.flush();
        }
        self.scanner.finish();
    }

    /// What counting the whole output's tokens takes ([`tokens::OutputText`]); call once, after
    /// the output has ended. Reads the spill back when the output is there
    /// ([`Capture::take_output_source`]).
    pub fn take_output_text(&mut self) -> tokens::OutputText {
        self.take_output_source().into_text()
    }

    /// Where the text [`Capture::take_output_text`] gives is to be had, found without reading
    /// anything: a run's end hands this on, and the spill is read back (up to
    /// [`tokens::EXACT_MAX_BYTES`]) where its tokens are counted, after its `exit`. Call once,
    /// after the output has ended: the sampler's samples are moved out, not copied.
    ///
    /// The whole output up to the bound, to be counted exactly: the head when it holds all of
    /// it, else the spill file (which holds every byte once flushed, unless it was capped or
    /// failed). Past the bound, or when the spill cannot give the output back, the sampler's
    /// samples, to estimate from: counting hundreds of MB would take longer than producing
    /// them.
    pub fn take_output_source(&mut self) -> OutputSource {
        let total_bytes = self.total_bytes;
        let exact = total_bytes <= tokens::EXACT_MAX_BYTES as u64;
        if exact && self.head.len() as u64 == total_bytes {
            return OutputSource::Head(self.head.clone());
        }
        let samples = self.sampler.take_samples();
        match &self.spill {
            Spill::Open(file) if exact && self.spill_holds_output() => OutputSource::Spill {
                path: file.path().to_path_buf(),
                total_bytes,
                samples,
            },
            _ => OutputSource::Sampled {
                samples,
                total_bytes,
            },
        }
    }

    /// The spill file's path, once it is open.
    pub fn spill_path(&self) -> Option<&std::path::Path> {
        match &self.spill {
            Spill::Open(file) => Some(file.path()),
            _ => None,
        }
    }

    /// Whether the spill file holds the whole output and it is at most
    /// [`tokens::EXACT_MAX_BYTES`]: then whoever counts its tokens can read it there.
    pub fn spill_holds_output(&self) -> bool {
        self.total_bytes <= tokens::EXACT_MAX_BYTES as u64
            && self.capped_at_line.is_none()
            && matches!(&self.spill, Spill::Open(file) if file.error().is_none())
    }

    /// Lends what the preview needs.
    pub fn view(&self) -> CaptureView<'_> {
        let (findings, outline) = self.scanner.snapshot();
        let window = self.tail.len().min(self.limits.max_bytes);
        let start = self.tail.len() - window;
        let tail_at_line_start =
            window as u64 == self.total_bytes || (start > 0 && self.tail[start - 1] == b'\n');
        let (spill_path, spill_in_file, spill_problem) = match &self.spill {
            Spill::Off | Spill::Pending(_) => (None, 0, None),
            Spill::Open(file) => (
                Some(file.path()),
                file.in_file(),
                file.error().map(|e| SpillProblem::Incomplete {
                    written: file.written(),
                    error: e,
                }),
            ),
            Spill::Failed(e) => (None, 0, Some(SpillProblem::NotCreated { error: e })),
        };
        CaptureView {
            limits: self.limits,
            head: &self.head,
            tail: &self.tail[start..],
            tail_at_line_start,
            total_bytes: self.total_bytes,
            total_lines: self.total_lines(),
            first_line_bytes: self.first_line_bytes.unwrap_or(self.open_line_bytes),
            first_line_end: &self.first_line_end,
            last_line_bytes: if self.open_line_bytes > 0 {
                self.open_line_bytes
            } else {
                self.last_ended_line_bytes
            },
            spill_path,
            spill_from: 0,
            spill_in_file,
            spill_problem,
            spill_capped: self.capped_at_line.map(|line| SpillCap {
                bytes: self.spill_cap,
                line,
            }),
            highlights: self.patterns.as_ref(),
            findings,
            outline,
            outcome: Outcome::Unknown,
            kinds: KindMemo::default(),
        }
    }

    /// True once the output no longer fits the limits.
    fn is_over_limits(&self) -> bool {
        self.total_bytes > self.limits.max_bytes as u64
            || self.total_lines() > self.limits.max_lines as u64
    }

    /// Bytes and lines captured so far: the counters alone, for callers that poll them with
    /// every chunk ([`Capture::view`] also copies the highlights, under their lock).
    pub fn totals(&self) -> (u64, u64) {
        (self.total_bytes, self.total_lines())
    }

    fn total_lines(&self) -> u64 {
        self.newlines + u64::from(self.open_line_bytes > 0)
    }

    fn count_lines(&mut self, bytes: &[u8], newlines: u64) {
        let Some(last) = memchr::memrchr(b'\n', bytes) else {
            self.open_line_bytes += bytes.len() as u64;
            return;
        };
        if self.first_line_bytes.is_none()
            && let Some(first) = memchr::memchr(b'\n', bytes)
        {
            self.first_line_bytes = Some(self.open_line_bytes + first as u64);
        }
        self.newlines += newlines;
        self.last_ended_line_bytes = match memchr::memrchr(b'\n', &bytes[..last]) {
            Some(prev) => (last - prev - 1) as u64,
            None => self.open_line_bytes + last as u64,
        };
        self.open_line_bytes = (bytes.len() - last - 1) as u64;
    }

    /// Opens a [`SpillPolicy::WhenTruncated`] spill once the output no longer fits.
    fn open_pending_spill(&mut self) {
        if let Spill::Pending(dir) = &self.spill
            && self.is_over_limits()
        {
            // Until this piece the output fitted the limits, so the head holds all of it (whole
            // chars: the lossy conversion only borrows), and it has been scanned for
            // highlights already.
            self.spill = open_spill(dir);
            let head = std::mem::take(&mut self.head);
            let text = String::from_utf8_lossy(&head);
            let keep = self.spill_share(text.as_bytes(), 0);
            if let Spill::Open(file) = &mut self.spill {
                spill_part(file, &text, keep, count_newlines(&text));
            }
            self.head = head;
            self.hand_scanning_to_the_spill();
        }
    }

    /// Keeps the last bytes of line 1 when it ends in `bytes`: until then the tail buffer
    /// holds only line 1, so its end is the tail's last bytes and the piece's up to the
    /// newline. One copy of at most half the byte limit, once per output.
    fn keep_first_line_end(&mut self, bytes: &[u8]) {
        if self.first_line_bytes.is_some() {
            return;
        }
        let Some(newline) = memchr::memchr(b'\n', bytes) else {
            return;
        };
        let keep = self.limits.max_bytes.div_ceil(2);
        let ending = &bytes[..newline];
        let from_tail = keep.saturating_sub(ending.len()).min(self.tail.len());
        self.first_line_end.clear();
        self.first_line_end
            .extend_from_slice(&self.tail[self.tail.len() - from_tail..]);
        self.first_line_end
            .extend_from_slice(&ending[ending.len().saturating_sub(keep)..]);
    }

    fn keep_head(&mut self, bytes: &[u8]) {
        let room = self.limits.max_bytes.saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..room.min(bytes.len())]);
    }

    /// Keeps the last `max_bytes + 1` bytes, compacting only when the buffer doubles so each
    /// byte is moved at most once on average.
    fn keep_tail(&mut self, bytes: &[u8]) {
        let keep = self.limits.max_bytes + 1;
        if bytes.len() >= keep {
            self.tail.clear();
            self.tail.extend_from_slice(&bytes[bytes.len() - keep..]);
            return;
        }
        self.tail.extend_from_slice(bytes);
        if self.tail.len() > 2 * keep {
            self.tail.drain(..self.tail.len() - keep);
        }
    }
}

/// Gives `text` to `file`, which takes only the first `keep` bytes when they reach its cap;
/// `newlines` counts the newlines in `text`.
fn spill_part(file: &mut SpillFile, text: &str, keep: usize, newlines: u64) {
    if keep == text.len() {
        file.write(text, newlines);
    } else {
        file.write_and_close(text, keep, newlines);
    }
}

fn open_spill(dir: &DataDir) -> Spill {
    match dir.create_spill() {
        Ok(file) => Spill::Open(Box::new(file)),
        Err(e) => Spill::Failed(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(lines: u64, bytes: u64, chunks: &[&str]) -> Capture {
        let mut c = Capture::new(Limits::new(lines, bytes).unwrap(), SpillPolicy::Never);
        for chunk in chunks {
            c.write(chunk);
        }
        c.finish();
        c
    }

    #[test]
    fn counts_lines_by_the_project_rule() {
        for (text, lines) in [
            ("", 0),
            ("a", 1),
            ("a\n", 1),
            ("a\nb", 2),
            ("a\nb\n", 2),
            ("\n\n", 2),
        ] {
            let c = capture(10, 100, &[text]);
            assert_eq!(c.view().total_lines, lines, "{text:?}");
        }
    }

    #[test]
    fn tracks_first_and_last_line_lengths_across_chunks() {
        let c = capture(10, 4, &["ab", "cd\nxy", "z\nlast", "line"]);
        let v = c.view();
        assert_eq!(v.first_line_bytes, 4);
        assert_eq!(v.last_line_bytes, 8);
        assert_eq!(v.total_lines, 3);
        let c = capture(10, 4, &["ab", "cd\nxy", "z\nlast", "line\n"]);
        assert_eq!(c.view().last_line_bytes, 8);
    }

    #[test]
    fn keeps_the_end_of_a_long_first_line_once_it_ends() {
        let line = format!("start{}end", "é".repeat(300));
        for chunk in [1, 7, 64, 10_000] {
            let text = format!("{line}\nsecond\nthird\n");
            let mut c = Capture::new(Limits::new(10, 100).unwrap(), SpillPolicy::Never);
            assert!(c.view().first_line_end.is_empty());
            let chars: Vec<char> = text.chars().collect();
            for piece in chars.chunks(chunk) {
                c.write(&piece.iter().collect::<String>());
            }
            c.finish();
            let v = c.view();
            // The last 50 bytes of line 1 (the first may be half a character).
            assert_eq!(
                v.first_line_end,
                &line.as_bytes()[line.len() - 50..],
                "{chunk}"
            );
        }
        let c = capture(10, 100, &["short\n", "x".repeat(500).as_str()]);
        assert_eq!(c.view().first_line_end, b"short");
    }

    #[test]
    fn keeps_bounded_head_and_tail() {
        let text: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        let mut c = Capture::new(Limits::new(10, 64).unwrap(), SpillPolicy::Never);
        for piece in text.as_bytes().chunks(7) {
            c.write(std::str::from_utf8(piece).unwrap());
            assert!(c.tail.len() <= 2 * 65 && c.head.len() <= 64);
        }
        let v = c.view();
        assert_eq!(v.head, &text.as_bytes()[..64]);
        assert_eq!(v.tail, &text.as_bytes()[text.len() - 64..]);
        assert_eq!(
            v.tail_at_line_start,
            text.as_bytes()[text.len() - 65] == b'\n'
        );
    }

    #[test]
    fn rejects_zero_and_absurd_limits() {
        assert!(Limits::new(0, 10).is_err());
        assert!(Limits::new(10, 0).is_err());
        assert!(Limits::new(10, u64::MAX).is_err());
        assert!(Limits::new(MAX_MAX_LINES as u64 + 1, 10).is_err());
        assert!(Limits::new(1, 1).is_ok());
    }

    #[test]
    fn spills_only_once_over_the_limits_and_then_everything() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = DataDir::open(tmp.path()).unwrap();
        let limits = Limits::new(3, 100).unwrap();
        let mut c = Capture::new(limits, SpillPolicy::WhenTruncated(dir.clone()));
        c.write("a\nb\n");
        assert!(c.view().spill_path.is_none());
        c.write("c\nd\n");
        c.finish();
        let path = c.view().spill_path.unwrap().to_path_buf();
        assert_eq!(std::fs::read_to_string(path).unwrap(), "a\nb\nc\nd\n");

        let mut small = Capture::new(limits, SpillPolicy::WhenTruncated(dir));
        small.write("a\nb\nc\n");
        small.finish();
        assert!(small.view().spill_path.is_none());
    }

    #[test]
    fn a_spill_that_cannot_be_created_is_reported_not_fatal() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = DataDir::open(tmp.path()).unwrap();
        std::fs::remove_dir(dir.spills_dir()).unwrap();
        std::fs::write(dir.spills_dir(), "not a dir").unwrap();
        let mut c = Capture::new(Limits::default(), SpillPolicy::Always(dir));
        c.write("hello\n");
        c.finish();
        let v = c.view();
        assert!(v.spill_path.is_none());
        assert!(matches!(
            v.spill_problem,
            Some(SpillProblem::NotCreated { .. })
        ));
        assert_eq!(v.total_lines, 1);
    }
    /// Writes `chunks` to a capture whose spill is capped at `cap` bytes; returns it finished,
    /// with the spill file's content.
    fn capped(policy: fn(DataDir) -> SpillPolicy, cap: u64, chunks: &[&str]) -> (Capture, String) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = DataDir::open(tmp.path()).unwrap();
        let mut c = Capture::new(Limits::new(2, 100).unwrap(), policy(dir)).with_spill_cap(cap);
        for chunk in chunks {
            let mut owned = chunk.to_string();
            c.write_owned(&mut owned, count_newlines(chunk));
        }
        c.finish();
        let spill = std::fs::read_to_string(c.view().spill_path.unwrap()).unwrap();
        (c, spill)
    }

    #[test]
    fn a_capped_spill_stops_growing_while_counters_tail_and_highlights_go_on() {
        let big = "x".repeat(300 * 1024); // handed over whole, as a batch of its own
        let chunks = [
            "one\ntwo\n",
            "three\n",
            &big,
            "\nerror: after the cap\nlast\n",
        ];
        for policy in [SpillPolicy::Always, SpillPolicy::WhenTruncated] {
            let (c, spill) = capped(policy, 10, &chunks);
            assert_eq!(spill, "one\ntwo\nth");
            let v = c.view();
            assert_eq!(v.spill_capped, Some(SpillCap { bytes: 10, line: 3 }));
            assert_eq!(v.total_lines, 6);
            assert_eq!(v.total_bytes, chunks.concat().len() as u64);
            assert!(v.tail.ends_with(b"cap\nlast\n"));
            let lines: Vec<u64> = v.findings.candidates.iter().map(|c| c.line).collect();
            assert_eq!(lines, [5], "highlights keep going past the cap");
        }
    }

    #[test]
    fn output_tokens_are_exact_up_to_the_bound_and_estimated_past_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = DataDir::open(tmp.path()).unwrap();
        let line = |i: usize| format!("test module_{i}::case ... ok\n");
        let output = |bytes: usize| {
            let mut text = String::new();
            for i in 0.. {
                if text.len() >= bytes {
                    break;
                }
                text.push_str(&line(i));
            }
            text
        };
        let captured = |policy: SpillPolicy, text: &str, cap: u64| {
            let mut c = Capture::new(Limits::default(), policy).with_spill_cap(cap);
            for piece in text.as_bytes().chunks(4096) {
                c.write(std::str::from_utf8(piece).unwrap());
            }
            c.finish();
            c.take_output_text().count()
        };
        let exact = |text: &str| tokens::Count {
            tokens: tokens::count(text) as u64,
            estimated: false,
        };
        // Whole in the head; read back from the spill; from a spill opened late.
        let small = output(10_000);
        assert_eq!(
            captured(SpillPolicy::Never, &small, u64::MAX),
            exact(&small)
        );
        let medium = output(600_000);
        let always = SpillPolicy::Always(dir.clone());
        assert_eq!(captured(always, &medium, u64::MAX), exact(&medium));
        let late = SpillPolicy::WhenTruncated(dir.clone());
        assert_eq!(captured(late, &medium, u64::MAX), exact(&medium));
        // No spill to read back, or a capped one: estimated, and close.
        for (policy, cap) in [
            (SpillPolicy::Never, u64::MAX),
            (SpillPolicy::Always(dir.clone()), 1000),
        ] {
            let count = captured(policy, &medium, cap);
            assert!(count.estimated);
            let error = count.tokens.abs_diff(exact(&medium).tokens) as f64;
            assert!(error < exact(&medium).tokens as f64 * 0.03, "{count:?}");
        }
        // Past the bound, even with the whole spill there.
        let large = output(tokens::EXACT_MAX_BYTES + 1);
        let count = captured(SpillPolicy::Always(dir), &large, u64::MAX);
        assert!(count.estimated);
        let error = count.tokens.abs_diff(exact(&large).tokens) as f64;
        assert!(error < exact(&large).tokens as f64 * 0.03, "{count:?}");
    }

    #[test]
    fn a_cap_on_a_line_boundary_names_the_next_line_and_never_splits_a_char() {
        let (c, spill) = capped(SpillPolicy::Always, 8, &["one\ntwo\n", "three\n"]);
        assert_eq!(spill, "one\ntwo\n");
        assert_eq!(c.view().spill_capped.unwrap().line, 3);
        // "é" is two bytes: a cap in its middle stops before it.
        let (c, spill) = capped(SpillPolicy::Always, 4, &["abcé", "\nmore\n"]);
        assert_eq!(spill, "abc");
        assert_eq!(c.view().spill_capped.unwrap().line, 1);
        let (c, spill) = capped(SpillPolicy::Always, 100, &["abc\n"]);
        assert_eq!((spill.as_str(), c.view().spill_capped), ("abc\n", None));
    }
}
