//! What spillway's request decoder, normaliser and engine must guarantee for any input, as
//! functions that panic when a guarantee does not hold.
//!
//! One definition serves three callers: the proptests (`engine.rs`), the fuzz targets
//! (`fuzz/fuzz_targets/`, which include this file by path), and `fuzz_corpus.rs`, which
//! replays the committed fuzz corpus in `cargo test`, where there is no nightly compiler.
//!
//! The `*_bytes` functions are the fuzz targets' entry points. Each reads its parameters from
//! the front of an arbitrary input (missing bytes read as zero) and its payload from the rest,
//! so a file of `fuzz/corpus/<target>/` means the same case under libFuzzer and here.

use std::path::Path;

use spillway::engine::capture::{Capture, Limits, Outcome, SpillPolicy};
use spillway::engine::driver::Engine;
use spillway::engine::highlight::Patterns;
use spillway::engine::normalise::{NormaliseOptions, Normaliser, normalise};
use spillway::engine::preview::COMPACT_FROM_TOKENS;
use spillway::program::CliSteps;
use spillway::protocol::{Direction, LimitKind, LineRange, NextStep, Preview};
use spillway::protocol::{Event, Request, parse_request};
use spillway::storage::spill::DataDir;

// ---------------------------------------------------------------------------------------
// Fuzz inputs

/// Reads a fuzz input front to back; past its end every byte reads as zero.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    /// Up to eight positions at which to cut the payload into chunks.
    fn cuts(&mut self) -> Vec<usize> {
        (0..self.byte() % 9)
            .map(|_| usize::from(self.u16()))
            .collect()
    }

    /// A line cap of 1 to 64 bytes when `small`, else the default.
    fn line_cap(&mut self, small: bool) -> usize {
        let cap = 1 + usize::from(self.byte() % 64);
        if small {
            cap
        } else {
            NormaliseOptions::default().max_line_bytes
        }
    }

    fn payload(self) -> &'a [u8] {
        self.0
    }
}

/// Bit `n` of `flags`.
fn bit(flags: u8, n: u32) -> bool {
    flags & (1 << n) != 0
}

/// Every line of `data` (split as the server splits its socket input) through [`request`].
pub fn request_bytes(data: &[u8]) {
    for line in data.split_inclusive(|&b| b == b'\n') {
        request(line);
    }
}

/// `[flags: bit 0 raw, bit 1 small line cap, bit 2 small terminal] [cap] [size] [cuts]
/// payload`, through [`normaliser`].
pub fn normalise_bytes(data: &[u8]) {
    let mut r = Reader(data);
    let flags = r.byte();
    let mut opts = NormaliseOptions {
        raw: bit(flags, 0),
        max_line_bytes: r.line_cap(bit(flags, 1)),
        ..NormaliseOptions::default()
    };
    if bit(flags, 2) {
        // Up to 16 x 8: rows scroll off and wrap often.
        let size = r.byte();
        (opts.cols, opts.rows) = (1 + u16::from(size % 16), 1 + u16::from(size / 16 % 8));
    }
    let cuts = r.cuts();
    normaliser(r.payload(), opts, &cuts);
}

/// `[flags] [max_lines] [max_bytes: u16] [max_tokens] [cap] [cuts] payload`, through [`engine`].
/// Flags: bits 0-1 the direction (head, tail, both, both), bit 2 raw, bit 3 a small line cap,
/// bit 4 highlights off, bits 5 and 6 both set a token budget (a quarter of the inputs: counting
/// tokens is slow).
pub fn preview_bytes(data: &[u8]) {
    let mut r = Reader(data);
    let flags = r.byte();
    let direction = match flags & 3 {
        0 => Direction::Head,
        1 => Direction::Tail,
        _ => Direction::Both,
    };
    let max_lines = 1 + u64::from(r.byte());
    let max_bytes = 1 + u64::from(r.u16() % 4096);
    let max_tokens = 1 + usize::from(r.byte());
    let opts = NormaliseOptions {
        raw: bit(flags, 2),
        max_line_bytes: r.line_cap(bit(flags, 3)),
        ..NormaliseOptions::default()
    };
    let cuts = r.cuts();
    engine(&EngineCase {
        input: r.payload(),
        cuts,
        opts,
        limits: Limits::new(max_lines, max_bytes).expect("limits in range"),
        direction,
        highlights: !bit(flags, 4),
        max_tokens: (bit(flags, 5) && bit(flags, 6)).then_some(max_tokens),
    });
}

/// `input` in the chunks that `cuts` (each taken modulo the input's length + 1) make.
fn pieces<'a>(input: &'a [u8], cuts: &[usize]) -> impl Iterator<Item = &'a [u8]> {
    let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    bounds.sort_unstable();
    bounds.push(input.len());
    let mut start = 0;
    bounds.into_iter().map(move |end| {
        let piece = &input[start..end];
        start = end;
        piece
    })
}

// ---------------------------------------------------------------------------------------
// The request decoder

/// One request line as the daemon reads it: not UTF-8, blank, refused with an error event,
/// or decoded into a request that a client's encoding of it decodes back to.
pub fn request(line: &[u8]) {
    let Ok(text) = std::str::from_utf8(line) else {
        return; // answered with a fixed `malformed_json` error
    };
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    match parse_request(text) {
        Err(error) => {
            let event = Event::Error(error);
            let sent = event.to_line();
            assert_one_line(&sent);
            let back: Event = serde_json::from_str(&sent).expect("an error event decodes");
            assert_eq!(back, event, "the error event round-trips");
        }
        Ok(request) => {
            let sent = encode(&request);
            assert_one_line(&sent);
            let again = parse_request(&sent).expect("a client's encoding of a request decodes");
            assert_eq!(again, request, "{text} was sent as {sent}");
            assert_eq!(encode(&again), sent, "encoding is stable");
        }
    }
}

/// A JSON Lines message: one line, ended by its only newline.
fn assert_one_line(line: &str) {
    assert!(line.ends_with('\n'), "{line:?} does not end its line");
    assert_eq!(line.matches('\n').count(), 1, "{line:?} is not one line");
}

/// The line a client sends for `request`.
fn encode(request: &Request) -> String {
    request.to_line()
}

// ---------------------------------------------------------------------------------------
// The normaliser

/// `input` normalised whole and in the chunks `cuts` make: the same text either way, the
/// newlines counted as appended, a pending line without a newline after every chunk and within
/// the cap (or, in screen mode, a row of the screen), no control characters but `\n` and `\t`
/// in the text, and no more lines than the input ended but for those the screen model writes
/// out (each escape sequence can write out a screen's rows at most, twice for a reset, and the
/// end of the output a screen's more); raw mode only repairs UTF-8.
pub fn normaliser(input: &[u8], opts: NormaliseOptions, cuts: &[usize]) {
    let whole = normalise(input, opts);
    let mut n = Normaliser::new(opts);
    let mut out = String::new();
    let mut newlines = 0;
    let row_bytes = 4 * usize::from(opts.cols);
    for piece in pieces(input, cuts) {
        newlines += n.feed(piece, &mut out);
        let pending = n.pending_line();
        assert!(!pending.contains('\n'), "pending line {pending:?}");
        assert!(
            pending.len() <= opts.max_line_bytes.max(4).max(row_bytes),
            "pending line of {} bytes over the cap",
            pending.len()
        );
    }
    newlines += n.finish(&mut out);
    assert_eq!(
        newlines,
        out.matches('\n').count() as u64,
        "newlines counted"
    );
    assert_eq!(out, whole, "chunking changed the output");
    assert!(std::str::from_utf8(whole.as_bytes()).is_ok());
    if opts.raw {
        assert_eq!(
            whole,
            String::from_utf8_lossy(input),
            "raw mode only repairs UTF-8"
        );
        return;
    }
    let control = whole
        .chars()
        .find(|&c| c.is_control() && c != '\n' && c != '\t');
    assert_eq!(control, None, "a control character in {whole:?}");
    let count = |bytes: &[u8], byte: u8| bytes.iter().filter(|&&b| b == byte).count();
    let screens = 2 * count(input, 0x1B) + 1;
    assert!(
        count(whole.as_bytes(), b'\n')
            <= count(input, b'\n') + screens * (usize::from(opts.rows) + 1),
        "more lines out than in: {whole:?}"
    );
}

// ---------------------------------------------------------------------------------------
// The engine: normalise -> capture -> preview

/// One run of the engine over raw terminal bytes.
#[derive(Debug, Clone)]
pub struct EngineCase<'a> {
    pub input: &'a [u8],
    /// Where the input is cut into the chunks fed to the normaliser and the capture.
    pub cuts: Vec<usize>,
    pub opts: NormaliseOptions,
    pub limits: Limits,
    pub direction: Direction,
    /// The default highlight patterns, or none.
    pub highlights: bool,
    pub max_tokens: Option<usize>,
}

pub struct Run {
    pub preview: Preview,
    pub spill: String,
}

/// Runs the engine over the case's input cut at `cuts`, spilling into `root`.
pub fn run(case: &EngineCase<'_>, cuts: &[usize], root: &Path) -> Run {
    let dir = DataDir::open(root).expect("data dir");
    let highlights = case.highlights.then(Patterns::defaults);
    let capture = Capture::with_patterns(case.limits, SpillPolicy::Always(dir), highlights);
    let mut engine = Engine::new(Normaliser::new(case.opts), capture);
    for piece in pieces(case.input, cuts) {
        engine.feed(piece);
    }
    engine.finish();
    // How the command ended ranks needles; it varies with the input, so each invariant is
    // checked under every outcome across a property test's cases.
    let outcomes = [Outcome::Unknown, Outcome::Succeeded, Outcome::Failed];
    let outcome = outcomes[case.input.len() % outcomes.len()];
    let preview = engine.preview(case.direction, &CliSteps, case.max_tokens, outcome);
    let path = preview.spill_path.as_ref().expect("a spill path");
    let spill = std::fs::read_to_string(path).expect("the spill file");
    Run { preview, spill }
}

/// Lines `first..=last` (1-based) of `spill`, with their newlines.
fn line_range(spill: &str, range: LineRange) -> String {
    spill
        .split_inclusive('\n')
        .skip(range.first as usize - 1)
        .take((range.last - range.first + 1) as usize)
        .collect()
}

/// The engine's promises: the spill is exactly the normalised output; output within the limits
/// is the preview; otherwise the preview shows whole spill lines (or part of one line when no
/// whole line fits), in order, within every limit, and its notice names the limit that was
/// exceeded, what is shown, where the rest is and the first line not seen; and none of it
/// depends on how the input was chunked.
pub fn engine(case: &EngineCase<'_>) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let r = run(case, &case.cuts, tmp.path());
    let p = &r.preview;
    let (max_lines, max_bytes) = (
        case.limits.max_lines() as u64,
        case.limits.max_bytes() as u64,
    );

    assert_eq!(r.spill, normalise(case.input, case.opts), "spill != output");
    assert_eq!(p.total_bytes, r.spill.len() as u64);
    assert_eq!(p.total_lines, r.spill.split_inclusive('\n').count() as u64);

    let fits = p.total_bytes <= max_bytes
        && p.total_lines <= max_lines
        && case
            .max_tokens
            .is_none_or(|n| spillway::engine::tokens::count(&r.spill) <= n);
    // Template folds: never in a small output within the limits (one over them is counted by
    // estimate, and cut anyway), and within every limit they alone make the preview differ
    // from the output (no limit cut it then).
    let folded = has_template_fold(p);
    assert_eq!(folded, !p.folds.is_empty(), "{:?}", p.folds);
    if folded {
        let tokens = spillway::engine::tokens::count(&r.spill);
        assert!(
            !fits || tokens >= COMPACT_FROM_TOKENS,
            "{tokens} tokens folded"
        );
        assert!(p.truncated);
        assert_eq!(p.truncated_by.is_none(), fits, "{:?}", p.truncated_by);
    } else {
        assert_eq!(p.truncated, !fits);
    }
    if fits && !folded {
        assert_eq!(p.content, r.spill);
        assert_eq!(p.omitted_lines, 0);
        return;
    }
    let shown = truncated_preview(p, &r.spill, case.direction, case.limits, case.max_tokens);
    if let Some(n) = case.max_tokens {
        let tokens = spillway::engine::tokens::count(&shown);
        assert!(tokens <= n, "{tokens} tokens shown, over the budget of {n}");
    }
    check_notice(case, p);
    if case.cuts.is_empty() {
        return;
    }
    // Chunking never changes the preview (but for the spill's own name).
    let whole = run(case, &[], tmp.path());
    let same_path = whole.preview.content.replace(
        whole.preview.spill_path.as_deref().expect("a spill path"),
        p.spill_path.as_deref().expect("a spill path"),
    );
    assert_eq!(same_path, p.content, "chunking changed the preview");
    assert_eq!(whole.preview.shown, p.shown);
}

/// Rules 1-3 of a truncated preview, checked against its spill: markers say only what is so,
/// the ends are the output's own, and lines are cut only when the budget is spent. Returns
/// the output text shown.
pub fn truncated_preview(
    p: &Preview,
    spill: &str,
    direction: Direction,
    limits: Limits,
    max_tokens: Option<usize>,
) -> String {
    let (max_lines, max_bytes) = (limits.max_lines() as u64, limits.max_bytes() as u64);
    let shown = check_shown(p, spill, direction, (max_lines, max_bytes));
    let cut = check_markers(p, spill);
    assert!(cut <= p.omitted_lines);
    // A token budget small enough to leave no whole line may leave no room for both ends.
    if !(p.truncated_by == Some(LimitKind::Tokens) && p.shown.is_empty()) {
        check_ends(p, spill, direction, (max_lines, max_bytes));
    }
    check_whole_text(p, &shown, (max_lines, max_bytes), max_tokens);
    // A similar run is folded to two lines only while the budget has no room to open it.
    let similar_fold = p.content.contains(" similar lines, lines ");
    if cut > 0 || similar_fold {
        check_fill(p, spill, (max_lines, max_bytes), max_tokens);
    }
    shown
}

/// Checks the shown ranges and the partial line of a truncated preview against the spill
/// and the limits; returns the output text shown.
fn check_shown(
    p: &Preview,
    spill: &str,
    direction: Direction,
    (max_lines, max_bytes): (u64, u64),
) -> String {
    let mut shown = String::new();
    let mut lines = 0;
    let mut prev_last = 0;
    for &range in &p.shown {
        assert!(
            range.first > prev_last && range.first <= range.last,
            "{:?}",
            p.shown
        );
        assert!(range.last <= p.total_lines);
        prev_last = range.last;
        let text = line_range(spill, range);
        assert!(
            p.content.contains(&text),
            "lines {range:?} not in the preview"
        );
        lines += range.last - range.first + 1;
        shown.push_str(&text);
    }
    assert_eq!(p.omitted_lines, p.total_lines - lines);
    let Some(part) = p.partial_line else {
        assert!(!p.shown.is_empty(), "nothing shown");
        assert!(lines <= max_lines, "{lines} lines shown");
        assert!(
            shown.len() as u64 <= max_bytes,
            "{} bytes shown",
            shown.len()
        );
        return shown;
    };
    assert!(
        lines < max_lines.max(1) || p.shown.is_empty(),
        "{lines} lines and a partial one"
    );
    let line = spill
        .split_inclusive('\n')
        .nth(part.line as usize - 1)
        .expect("the partial line exists");
    let body = line.strip_suffix('\n').unwrap_or(line);
    assert_eq!(part.line_bytes, body.len() as u64, "partial line's size");
    assert!(part.shown_bytes <= part.line_bytes);
    assert!(
        shown.len() as u64 + part.shown_bytes <= max_bytes,
        "{} bytes of lines and {} of a partial line shown",
        shown.len(),
        part.shown_bytes
    );
    if let Some(ends) = part.ends {
        assert_ne!(
            direction,
            Direction::Head,
            "a head shows a line's start only"
        );
        return check_both_ends(p, spill, part, ends, body);
    }
    // A head starts with the start of line 1; a tail ends with the end of the last line.
    let from_head = direction == Direction::Head || (part.line == 1 && p.total_lines > 1);
    if !from_head {
        assert_eq!(part.line, p.total_lines, "the partial line is the last");
    }
    let n = part.shown_bytes as usize;
    let cut = if from_head {
        body.get(..n)
    } else {
        body.get(body.len() - n..)
    };
    let cut = cut.expect("the partial line is cut at a char boundary");
    if from_head && part.line == 1 {
        assert!(
            p.content.starts_with(cut),
            "the partial line starts the preview"
        );
    } else if from_head {
        // After a head's whole lines (or its fold): a line none of them shows.
        assert!(
            p.shown
                .iter()
                .all(|r| r.last < part.line || r.first > part.line)
        );
        assert!(
            p.content.contains(cut),
            "the partial line is in the preview"
        );
    } else {
        assert!(
            p.content.contains(cut),
            "the partial line is in the preview"
        );
    }
    if from_head {
        // In the preview's order (what a token budget counts): the head's lines, the partial
        // line, then what is after it.
        let (before, after): (Vec<LineRange>, Vec<LineRange>) =
            p.shown.iter().partition(|r| r.last < part.line);
        let text = |ranges: &[LineRange]| -> String {
            ranges.iter().map(|&r| line_range(spill, r)).collect()
        };
        return format!("{}{cut}{}", text(&before), text(&after));
    }
    shown.push_str(cut);
    shown
}

/// A partial line shown by both ends (issue 27 rule 6), checked against its spill line `body`:
/// the start shown is a prefix of the line and the end a suffix, each cut at a character
/// boundary, together less than the line, with the marker between them giving the line's number,
/// the bytes left out and the end's size; the line is the output's last, or the one just
/// before the tail's lines, and no range says it is shown whole. Returns the output text shown,
/// in the preview's order.
fn check_both_ends(
    p: &Preview,
    spill: &str,
    part: spillway::protocol::PartialLine,
    ends: spillway::protocol::LineEnds,
    body: &str,
) -> String {
    assert_eq!(
        ends.start_bytes + ends.end_bytes,
        part.shown_bytes,
        "{part:?}"
    );
    assert!(ends.start_bytes > 0 && ends.end_bytes > 0, "{part:?}");
    assert!(
        part.shown_bytes < part.line_bytes,
        "a line shown whole in part: {part:?}"
    );
    let start = body
        .get(..ends.start_bytes as usize)
        .expect("the start is cut at a char boundary");
    let end = body
        .get(body.len() - ends.end_bytes as usize..)
        .expect("the end is cut at a char boundary");
    let shown = format!(
        "{start}\n[... line {} goes on: {} bytes omitted; its last {} follow ...]\n{end}\n",
        part.line,
        part.line_bytes - part.shown_bytes,
        ends.end_bytes
    );
    let at = p
        .content
        .find(&shown)
        .unwrap_or_else(|| panic!("line {}'s ends are not in the preview", part.line));
    if part.line < p.total_lines {
        // Just before the tail: the next line, or a marker (a fold's that starts with it, or
        // the omission after line 1 in part); or line 1 alone, where the line limit leaves no
        // room for a tail.
        let rest = &p.content[at + shown.len()..];
        let next = format!("{}\n", spill_line(spill, part.line + 1));
        assert!(
            rest.starts_with(&next)
                || rest.starts_with("[... ")
                || (part.line == 1 && rest.starts_with("\n[spillway: ")),
            "line {} is not followed by the tail's lines: {rest:?}",
            part.line
        );
    }
    assert!(
        p.shown
            .iter()
            .all(|r| r.last < part.line || r.first > part.line),
        "the partial line {} is said to be shown whole",
        part.line
    );
    let (before, after): (Vec<LineRange>, Vec<LineRange>) =
        p.shown.iter().partition(|r| r.last < part.line);
    let text =
        |ranges: &[LineRange]| -> String { ranges.iter().map(|&r| line_range(spill, r)).collect() };
    format!("{}{start}{end}{}", text(&before), text(&after))
}

/// The body of spill line `n` (1-based), without its newline.
fn spill_line(spill: &str, n: u64) -> &str {
    let line = spill
        .split_inclusive('\n')
        .nth(n as usize - 1)
        .expect("the marker's lines exist");
    line.strip_suffix('\n').unwrap_or(line)
}

/// Whether two lines differ only in their numbers (a run of digits counting as one digit).
fn same_but_numbers(a: &str, b: &str) -> bool {
    let skeleton = |s: &str| {
        let mut out = String::new();
        for c in s.chars() {
            if !(c.is_ascii_digit() && out.ends_with('#')) {
                out.push(if c.is_ascii_digit() { '#' } else { c });
            }
        }
        out
    };
    skeleton(a) == skeleton(b)
}

/// Every marker in the preview says only what is so, checked against the spill: a repeat
/// covers byte-identical lines and follows the first of them; a similar run lies between its
/// first and last line, all equal but for numbers; an omission counts its lines right and
/// none of them is shown. Returns how many lines the markers say were left out by a cut.
fn check_markers(p: &Preview, spill: &str) -> u64 {
    let body = &p.content[..p.content.rfind("\n\n[spillway: ").expect("a notice")];
    let lines: Vec<&str> = body.split('\n').collect();
    let mut cut = 0;
    for (i, line) in lines.iter().enumerate() {
        let numbers = |text: &str| -> Vec<u64> {
            text.split(|c: char| !c.is_ascii_digit())
                .filter(|t| !t.is_empty())
                .map(|t| t.parse().expect("a number"))
                .collect()
        };
        if let Some(rest) = line.strip_prefix("[... repeated ") {
            let n = numbers(rest.split(" ...]").next().unwrap());
            let [count, a, b] = n[..] else {
                panic!("{line}")
            };
            assert_eq!(count, b - a + 1, "{line}");
            let first = spill_line(spill, a);
            for k in a..=b {
                assert_eq!(spill_line(spill, k), first, "{line}: line {k} differs");
            }
            assert_eq!(lines[i - 1], first, "{line} follows its line");
        } else if line.starts_with("[... ") && line.contains(" similar lines, lines ") {
            let n = numbers(line);
            let [count, a, b] = n[..] else {
                panic!("{line}")
            };
            assert_eq!(count, b - a + 1, "{line}");
            assert!(count > 0);
            let first = spill_line(spill, a - 1);
            for k in a - 1..=b + 1 {
                assert!(
                    same_but_numbers(spill_line(spill, k), first),
                    "{line}: line {k}"
                );
            }
            assert_eq!(lines[i - 1], first, "{line} follows the run's first line");
            assert_eq!(
                lines[i + 1],
                spill_line(spill, b + 1),
                "{line}: the run's last line"
            );
        } else if is_template_marker(line) {
            check_template_fold(p, spill, line, &lines[..i]);
        } else if line.starts_with("[... ") && line.contains(" omitted (lines ") {
            let head = line.split(';').next().unwrap();
            let n = numbers(head);
            let [count, a, b] = n[..] else {
                panic!("{line}")
            };
            assert_eq!(count, b - a + 1, "{line}");
            assert!(
                p.shown
                    .iter()
                    .all(|r| r.last < a || r.first > b || line.contains("here ")),
                "{line}: a shown line is said to be omitted"
            );
            let shown_inside: u64 = p
                .shown
                .iter()
                .map(|r| (r.last.min(b) + 1).saturating_sub(r.first.max(a)))
                .sum();
            cut += count - shown_inside;
        }
    }
    cut
}

/// The ends: a head or both preview starts with line 1, a tail or both one ends with the
/// last line (whole, in part, or as the end of a fold).
fn check_ends(p: &Preview, spill: &str, direction: Direction, (max_lines, max_bytes): (u64, u64)) {
    if direction == Direction::Both && (max_lines < 2 || max_bytes < 2) {
        return; // one line or byte cannot hold both ends
    }
    // The JSON names one partial line (the tail's); a head's shows at the very start.
    let first_line = spill.split('\n').next().unwrap_or_default();
    let first_char = first_line
        .chars()
        .next()
        .map(String::from)
        .unwrap_or_default();
    let starts = p.shown.first().is_some_and(|r| r.first == 1)
        || p.partial_line.is_some_and(|l| l.line == 1)
        || (p.content.starts_with(&first_char) && p.content.contains("[... line 1 goes on: "));
    if direction == Direction::Head || (direction == Direction::Both && p.total_lines > 1) {
        assert!(
            starts,
            "the preview does not start with line 1: {:?}",
            p.shown
        );
    }
    if direction != Direction::Head {
        let last = p.total_lines;
        let body = &p.content[..p.content.rfind("\n\n[spillway: ").expect("a notice")];
        let ends = p.shown.last().is_some_and(|r| r.last == last)
            || p.partial_line.is_some_and(|l| l.line == last)
            || body.trim_end().ends_with(&format!("-{last} ...]"));
        assert!(
            ends,
            "the preview does not end with line {last}: {:?}",
            p.shown
        );
    }
}

/// The limits hold for the whole text, markers and notice included, unless the preview's
/// own lines are too many for them (then the output's lines take the limits and the notice
/// comes on top): a third of a limit or more is the preview's own where the text is over.
fn check_whole_text(
    p: &Preview,
    shown: &str,
    (max_lines, max_bytes): (u64, u64),
    max_tokens: Option<usize>,
) {
    let count = spillway::engine::tokens::count;
    // `shown` holds the partial line's part too, in the preview's order.
    let lines = p.content.lines().count() as u64;
    let own_lines = lines.saturating_sub(shown.lines().count() as u64);
    let own_bytes = (p.content.len() as u64).saturating_sub(shown.len() as u64);
    let tokens = max_tokens.map(|n| (count(&p.content) as u64, n as u64));
    let within = lines <= max_lines
        && p.content.len() as u64 <= max_bytes
        && tokens.is_none_or(|(t, n)| t <= n);
    let own_tokens = tokens.map(|(t, _)| t.saturating_sub(count(shown) as u64));
    assert!(
        within
            || own_lines * 3 >= max_lines
            || own_bytes * 3 >= max_bytes
            || own_tokens
                .zip(max_tokens)
                .is_some_and(|(o, n)| o * 3 >= n as u64),
        "over the limits ({lines}/{max_lines} lines, {}/{max_bytes} bytes, tokens {tokens:?}) \
         with only {own_lines} lines and {own_bytes} bytes of its own",
        p.content.len()
    );
}

/// Never cut while there is room: when lines are cut and every line is small beside the
/// budget, the shown lines fill at least 80 % of the limit that binds.
fn check_fill(
    p: &Preview,
    spill: &str,
    (max_lines, max_bytes): (u64, u64),
    max_tokens: Option<usize>,
) {
    let longest = spill.split_inclusive('\n').map(str::len).max().unwrap_or(0) as u64;
    if longest * 8 > max_bytes || max_lines < 8 || p.partial_line.is_some() {
        return;
    }
    // The same for tokens: a line of over an eighth of the budget may leave a fifth unused.
    let count = spillway::engine::tokens::count;
    if max_tokens.is_some_and(|n| spill.split_inclusive('\n').any(|l| count(l) * 8 > n)) {
        return;
    }
    // The lines a template fold stands for count as given: the capture keeps as many lines
    // at each end as the budget could show unfolded, so folding them leaves room that only
    // the spill could fill.
    let folded: Vec<LineRange> = p
        .content
        .lines()
        .filter(|l| is_template_marker(l))
        .map(|l| {
            let fold = parse_template_marker(l);
            LineRange {
                first: fold.first,
                last: fold.last,
            }
        })
        .collect();
    // The whole text counts, markers and notice included: the limits hold for all of it.
    let lines =
        p.content.lines().count() as u64 + folded.iter().map(|r| r.last - r.first + 1).sum::<u64>();
    let bytes = p.content.len() as u64
        + folded
            .iter()
            .map(|&r| line_range(spill, r).len() as u64)
            .sum::<u64>();
    let tokens = max_tokens.map(|n| (count(&p.content), n));
    assert!(
        lines * 10 >= max_lines * 8
            || bytes * 10 >= max_bytes * 8
            || tokens.is_some_and(|(t, n)| t * 10 >= n * 8),
        "cut with room: {lines}/{max_lines} lines, {bytes}/{max_bytes} bytes, tokens {tokens:?}"
    );
}

/// Checks a truncated preview's notice: the limit, what is shown, the totals, the spill and the
/// next line to read; and that it is short.
fn check_notice(case: &EngineCase<'_>, p: &Preview) {
    let at = p.content.rfind("\n\n[spillway: output ").expect("a notice");
    let notice = &p.content[at + 2..];
    assert!(notice.ends_with("]\n"), "{notice:?}");
    let path = p.spill_path.as_deref().expect("a spill path");
    // At most 600 bytes with a spill path as long as the default data dir's under /home/NAME
    // (76 bytes); the path, named three times, is the data dir's to set.
    assert!(
        notice.len() <= 600 + 3 * path.len().saturating_sub(76),
        "a notice of {} bytes: {notice}",
        notice.len()
    );
    assert!(
        notice.starts_with("[spillway: output truncated by ")
            || notice.starts_with("[spillway: output folded to fit ")
            || notice.starts_with("[spillway: output compacted "),
        "{notice:?}"
    );
    if p.truncated_by.is_none() {
        // Folded within every limit: nothing but template folds left out.
        assert!(
            notice.starts_with("[spillway: output compacted (lines alike folded"),
            "{notice:?}"
        );
        return;
    }
    let limit = match p.truncated_by {
        Some(LimitKind::Lines) => {
            assert!(p.total_lines > case.limits.max_lines() as u64);
            format!("the {}-line limit", case.limits.max_lines())
        }
        Some(LimitKind::Bytes) => {
            assert!(p.total_bytes > case.limits.max_bytes() as u64);
            format!("the {}-byte limit", case.limits.max_bytes())
        }
        Some(LimitKind::Tokens) => {
            let n = case.max_tokens.expect("a token budget");
            format!("the {n}-token budget")
        }
        None => panic!("truncated by no limit"),
    };
    assert!(notice.contains(&limit), "{limit} not in {notice:?}");
    let totals = format!(
        "of {} line{} ({} bytes in all).",
        p.total_lines,
        if p.total_lines == 1 { "" } else { "s" },
        p.total_bytes
    );
    assert!(notice.contains(&totals), "{totals} not in {notice:?}");
    assert!(
        notice.contains(&format!("Full output: {path}")),
        "{notice:?}"
    );
    let first_unseen = match p.shown.first() {
        Some(r) if r.first == 1 => r.last + 1,
        _ => 1,
    };
    let next = format!(
        "from line {first_unseen}: {}",
        CliSteps.read_from(Path::new(path), first_unseen)
    );
    assert!(notice.contains(&next), "{next} not in {notice:?}");
    let word = |r: &LineRange| match r.last - r.first {
        0 => r.first.to_string(),
        _ => format!("{}-{}", r.first, r.last),
    };
    let listed: Vec<String> = p.shown.iter().map(word).collect();
    let listed = match listed.as_slice() {
        [] => return,
        [one] => one.clone(),
        all if all.len() > 6 => format!(
            "{} and {}, with {} more ranges in between",
            all[0],
            all[all.len() - 1],
            all.len() - 2
        ),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    };
    let lines = match p.shown.as_slice() {
        [one] if one.first == one.last => "line",
        _ => "lines",
    };
    assert!(
        notice.contains(&format!("showing {lines} {listed}")),
        "{listed} not in {notice:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Template folds

/// Whether a preview line is a template fold's marker: `[... 298 more lines like "T", lines
/// 7-304 ...]`, or `[... 180 lines: 150 like "T", 30 like "U", lines 7-186 ...]`.
fn is_template_marker(line: &str) -> bool {
    line.starts_with("[... ") && line.ends_with(" ...]") && line.contains(" like \"")
}

/// Whether the preview folds lines by templates.
fn has_template_fold(p: &Preview) -> bool {
    let body = match p.content.rfind("\n\n[spillway: ") {
        Some(at) => &p.content[..at],
        None => &p.content,
    };
    body.lines().any(is_template_marker)
}

/// A template marker's parts: each template with its count, and the range it names.
struct TemplateFold {
    groups: Vec<(u64, String)>,
    first: u64,
    last: u64,
}

/// Reads a template marker (see [`is_template_marker`]).
fn parse_template_marker(line: &str) -> TemplateFold {
    let inner = line
        .strip_prefix("[... ")
        .and_then(|l| l.strip_suffix(" ...]"))
        .unwrap_or_else(|| panic!("{line}"));
    let (groups_text, range) = inner
        .rsplit_once(", line")
        .unwrap_or_else(|| panic!("{line}"));
    let range = range.trim_start_matches('s').trim();
    let (first, last) = match range.split_once('-') {
        Some((a, b)) => (a.parse().expect("a line"), b.parse().expect("a line")),
        None => {
            let n = range.parse().expect("a line");
            (n, n)
        }
    };
    let mut groups = Vec::new();
    if let Some((count, rest)) = groups_text.split_once(" more line") {
        let template = rest
            .trim_start_matches('s')
            .strip_prefix(" like \"")
            .and_then(|t| t.strip_suffix('"'))
            .unwrap_or_else(|| panic!("{line}"));
        groups.push((count.parse().expect("a count"), template.to_owned()));
    } else {
        let (_, mut rest) = groups_text
            .split_once(" lines: ")
            .unwrap_or_else(|| panic!("{line}"));
        // `N like "T", M like "U"`: a template ends at the quote before `, M like "` or the end.
        loop {
            let (count, after) = rest
                .split_once(" like \"")
                .unwrap_or_else(|| panic!("{line}"));
            let end = next_group(after).unwrap_or(after.len() - 1);
            groups.push((count.parse().expect("a count"), after[..end].to_owned()));
            if end + 1 >= after.len() {
                break;
            }
            rest = &after[end + 3..];
        }
    }
    TemplateFold {
        groups,
        first,
        last,
    }
}

/// Where in `text` (after a group's opening quote) the group's template ends when another
/// group follows: at `", N like "`.
fn next_group(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = text[from..].find("\", ") {
        let at = from + at;
        let rest = &text[at + 3..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && rest[digits..].starts_with(" like \"") {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// Whether `line` is an instance of `template`: as many words, each fixed word the same
/// (`<*>` stands for any one word). A template quoted cut (ending in `…`) is checked on the
/// words it quotes whole.
fn matches_template(template: &str, line: &str) -> bool {
    let (template, cut) = match template.strip_suffix('…') {
        Some(t) => (t, true),
        None => (template, false),
    };
    let fixed: Vec<&str> = template.split(' ').collect();
    let words: Vec<&str> = line.split_ascii_whitespace().collect();
    if cut {
        // The last quoted word may itself be cut.
        let whole = fixed.len().saturating_sub(1);
        return words.len() >= whole
            && fixed[..whole]
                .iter()
                .zip(&words)
                .all(|(f, w)| *f == "<*>" || f == w);
    }
    fixed.len() == words.len() && fixed.iter().zip(&words).all(|(f, w)| *f == "<*>" || f == w)
}

/// A template fold's marker says only what is so, checked against the spill (issue 27 rule
/// 4): reading its range returns lines that each match one of its templates, the counts add
/// up to the range and each is the number of lines of its template there, none of the range
/// is shown, and each template has a line shown before the marker (the first line of a folded
/// group is shown as it is) when no limit cut the preview.
fn check_template_fold(p: &Preview, spill: &str, line: &str, before: &[&str]) {
    let fold = parse_template_marker(line);
    // The JSON says what the marker says (its templates quoted whole there).
    let json = p
        .folds
        .iter()
        .find(|f| f.first == fold.first)
        .unwrap_or_else(|| panic!("{line}: not in the JSON's folds {:?}", p.folds));
    assert_eq!(json.last, fold.last, "{line}");
    let counts: Vec<u64> = json.templates.iter().map(|t| t.count).collect();
    let said: Vec<u64> = fold.groups.iter().map(|(n, _)| *n).collect();
    assert_eq!(counts, said, "{line}");
    for (t, (_, quoted)) in json.templates.iter().zip(&fold.groups) {
        let quoted = quoted.strip_suffix('…').unwrap_or(quoted);
        assert!(t.text.starts_with(quoted), "{line}: {:?}", t.text);
    }
    assert!(
        fold.first <= fold.last && fold.last < p.total_lines,
        "{line}"
    );
    assert!(fold.first > 1, "{line}: line 1 is never folded");
    let total: u64 = fold.groups.iter().map(|(n, _)| n).sum();
    assert_eq!(total, fold.last - fold.first + 1, "{line}: counts");
    let mut counted = vec![0u64; fold.groups.len()];
    for n in fold.first..=fold.last {
        let text = spill_line(spill, n);
        let of = fold
            .groups
            .iter()
            .position(|(_, t)| matches_template(t, text))
            .unwrap_or_else(|| panic!("{line}: line {n} {text:?} matches none of its templates"));
        counted[of] += 1;
    }
    if fold.groups.len() == 1 {
        assert_eq!(counted[0], fold.groups[0].0, "{line}");
    }
    assert!(
        p.shown
            .iter()
            .all(|r| r.last < fold.first || r.first > fold.last),
        "{line}: a shown line is said to be folded"
    );
    // A budget may cut between a fold and the lines it follows (a tail that starts at the
    // marker); folded within every limit, nothing is cut, and each template's line is shown
    // before its marker.
    let cut = p.truncated_by.is_some();
    for (_, template) in fold.groups.iter().filter(|_| !cut) {
        assert!(
            before.iter().any(|l| matches_template(template, l)),
            "{line}: no line of {template:?} is shown before it"
        );
    }
}
