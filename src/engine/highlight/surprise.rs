//! Needles by surprise: a line whose shape (its words apart from numbers, names and paths, as
//! the template learner reads them) is rare among frequent ones is likely the one that matters,
//! whatever its wording: one `F821 undefined name` among 1,700 routine style findings, the one
//! `not ok 213` among 300 `ok` lines. No pattern names them; their rarity does.
//!
//! It runs in the highlighter's one pass, in bounded memory: every line's shape is counted in
//! a fixed table (a count-min sketch: a collision can only make a line look more frequent, so
//! it can cost a needle, never make one up), and the first line of each new shape is offered to
//! a bounded buffer of candidates, with the shapes of the lines around it and a few of those
//! lines. Whether a candidate is a needle is decided when asked, from the counts by then: a
//! shape that later became frequent (the first of 300 `ok` lines) stops being surprising, and
//! a rare line counts only among frequent neighbours (a prose paragraph is all rare lines).

use std::borrow::Cow;

use crate::engine::template::shape::shape_key;

use super::{CARRY_BYTES, Candidate, MAX_HIGHLIGHT_BYTES};

/// Counters per row of the table; two rows.
const TABLE: usize = 4096;

/// Candidates held at once; when full, the least surprising (then the oldest) makes room.
pub(super) const HELD: usize = 32;

/// A shape seen at most this often is rare.
const RARE: u16 = 2;

/// A candidate's neighbourhood must hold a shape seen at least this often: it is rare among
/// frequent lines.
const FREQUENT: u16 = 8;

/// Lines each side whose shapes make a candidate's neighbourhood.
const AROUND: usize = 3;

/// Lines after a candidate kept with it (those that belong to it: an indented frame or
/// location, or rare lines), and bytes of each line of context kept.
const AFTER_LINES: usize = 3;
const CONTEXT_LINE_BYTES: usize = 512;
/// Output past which shapes are no longer counted: a line's shape costs about 20 instructions
/// a byte, several times the rest of the capture, so surprise covers the outputs agents read
/// whole (a test run, a linter's findings, a build: up to a few MiB) and leaves a huge one at
/// the capture's full speed, its needles then found by the patterns alone.
pub(super) const MAX_BYTES: u64 = 4 << 20;

/// Output past which shapes go on being counted only in a crowd: when fewer than one line in
/// [`CROWD_SHARE`] so far came with a frequent shape (a log of distinct messages, a test run
/// whose lines each name a different test), no line of it has frequent neighbours, so none is
/// a needle by surprise, and an output like that rarely turns into a crowd later: the rest
/// of it goes at the capture's full speed, its needles then found by the patterns alone.
const CROWD_AFTER: u64 = 1 << 20;
const CROWD_SHARE: u64 = 16;

/// The shapes of the lines a piece of output ends, the first as if it began the piece: the
/// part of [`Surprise::write`]'s work that needs nothing but the text, so the capture's thread
/// can do it while the writer's is busy (over an output's first MiBs the shapes cost the
/// writer more than everything else it does).
#[derive(Debug, Default)]
pub struct LineShapes(Vec<u64>);

impl LineShapes {
    /// The shapes of those lines of `text` that start before byte `before` of the output
    /// (`at`: the bytes of output before `text`), or `None` when the first does not: the
    /// shapes a scan would count, as far as [`Highlighter::shapes_before`] knows.
    ///
    /// [`Highlighter::shapes_before`]: super::Highlighter::shapes_before
    pub fn of(text: &str, at: u64, before: u64) -> Option<LineShapes> {
        if at >= before.min(MAX_BYTES) {
            return None;
        }
        let wanted = usize::try_from(before - at).unwrap_or(usize::MAX);
        let mut shapes = Vec::new();
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', text.as_bytes()) {
            if start >= wanted {
                break;
            }
            shapes.push(shape_of(&text[start..end]));
            start = end + 1;
        }
        Some(LineShapes(shapes))
    }
}

/// A line of context, whole (at most [`CONTEXT_LINE_BYTES`]), and its shape.
#[derive(Debug, Clone)]
struct Context {
    text: String,
    shape: u64,
}

/// Where the line before the one that ends lies: in an earlier piece (kept as
/// [`Surprise::last`]), or in this one (`None`: too long to keep).
#[derive(Debug, Clone, Copy)]
enum Before<'a> {
    Earlier,
    Here(Option<(&'a str, u64)>),
}

/// A line whose shape was new when it came.
#[derive(Debug, Clone)]
struct Held {
    line: u64,
    text: String,
    shape: u64,
    /// The shapes of the [`AROUND`] lines before it and after it (0: no such line yet).
    around: [u64; 2 * AROUND],
    /// The line just before it, and those after it (up to [`AFTER_LINES`]).
    before: Option<Context>,
    after: Vec<Context>,
    /// A floor under its neighbourhood clamped at [`FREQUENT`], as [`Surprise::least_worth`]
    /// last found it.
    known: u16,
}

/// Counts shapes and holds the lines whose shape was new, for [`Surprise::needles`].
#[derive(Debug)]
pub(super) struct Surprise {
    counts: Box<[[u16; TABLE]; 2]>,
    /// Lines ended so far.
    ended: u64,
    /// The shapes of the last [`AROUND`] lines, oldest first.
    recent: [u64; AROUND],
    /// The line before the next one, when it ended in an earlier piece (`None`: too long to
    /// show whole, or in a key block).
    last: Option<Context>,
    held: Vec<Held>,
    /// How many held lines count in each cell of the table: a line's count can change only
    /// when a cell of its changes.
    watched: Box<[[u8; TABLE]; 2]>,
    /// Whether a held line may have stopped being rare since the last look found none had
    /// (false: none has, so [`Surprise::least_worth`] need not look).
    stale: bool,
    /// Whether the lines now lie in a key block (see [`Surprise::armoured`]).
    in_key_block: bool,
    /// Bytes of output taken, up to [`MAX_BYTES`].
    taken: u64,
    /// Lines whose shape was frequent when they ended: the crowd [`CROWD_AFTER`] looks for.
    routine: u64,
    /// Where the output is read at the check for a crowd: not yet there, there and a crowd
    /// was found, or there and none was (shapes are no longer counted).
    crowd: Crowd,
}

/// The check for a crowd of frequent lines at [`CROWD_AFTER`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Crowd {
    NotYet,
    Found,
    None,
}

impl Surprise {
    pub(super) fn new() -> Surprise {
        Surprise {
            counts: Box::new([[0; TABLE]; 2]),
            ended: 0,
            recent: [0; AROUND],
            last: None,
            held: Vec::with_capacity(HELD),
            watched: Box::new([[0; TABLE]; 2]),
            stale: false,
            in_key_block: false,
            taken: 0,
            routine: 0,
            crowd: Crowd::NotYet,
        }
    }

    /// Whether lines' shapes are still counted: [`LineShapes`] of the pieces to come are
    /// wanted only while this holds.
    pub(super) fn counts_shapes(&self) -> bool {
        self.taken < MAX_BYTES && self.crowd != Crowd::None
    }

    /// The byte of output before which lines' shapes may still be counted, as far as the
    /// output read so far tells: up to the check for a crowd until it is made, then up to
    /// [`MAX_BYTES`] in a crowd, and else nowhere.
    pub(super) fn shapes_before(&self) -> u64 {
        if !self.counts_shapes() {
            0
        } else if self.crowd == Crowd::NotYet {
            CROWD_AFTER
        } else {
            MAX_BYTES
        }
    }

    /// Takes the next piece of output. `carry` is the start of the line in progress before
    /// this piece (as the highlighter keeps it, `cut` when it was too long to keep whole);
    /// `shapes`, when given, are the [`LineShapes`] of `text`, worked out on another thread.
    pub(super) fn write(
        &mut self,
        text: &str,
        carry: &str,
        cut: bool,
        shapes: Option<&LineShapes>,
    ) {
        if !self.counts_shapes() {
            return;
        }
        let at = self.taken;
        self.taken += text.len() as u64;
        let bytes = text.as_bytes();
        let mut start = 0;
        let mut before = Before::Earlier;
        for (k, end) in memchr::memchr_iter(b'\n', bytes).enumerate() {
            let own = start > 0 || (carry.is_empty() && !cut);
            let line: Option<Cow<'_, str>> = if own {
                Some(Cow::Borrowed(&text[start..end]))
            } else if cut {
                None
            } else {
                Some(Cow::Owned(format!("{carry}{}", &text[..end])))
            };
            let given = shapes.and_then(|s| s.0.get(k)).filter(|_| own);
            let shape = match (given, line.as_deref()) {
                (Some(&shape), _) => shape,
                (None, line) => line.map_or(LONG, shape_of),
            };
            let offered = self.line_ended(line.as_deref(), shape, before);
            if self.crowd == Crowd::NotYet && at + end as u64 >= CROWD_AFTER {
                self.check_crowd();
                if self.crowd == Crowd::None {
                    return;
                }
            }
            before = match line.filter(|_| offered) {
                Some(Cow::Borrowed(line)) => Before::Here(Some((line, shape))),
                // Begun in an earlier piece: kept now, as the line before the next.
                Some(Cow::Owned(line)) => {
                    self.last = context(&line, shape);
                    Before::Earlier
                }
                None => Before::Here(None),
            };
            start = end + 1;
        }
        if let Before::Here(line) = before {
            self.last = line.and_then(|(text, shape)| context(text, shape));
        }
    }

    /// Ends the output: a last line without a newline is a line.
    pub(super) fn finish(&mut self, carry: &str, cut: bool) {
        if self.counts_shapes() && (!carry.is_empty() || cut) {
            let shape = if cut { LONG } else { shape_of(carry) };
            let _ = self.line_ended((!cut).then_some(carry), shape, Before::Earlier);
        }
    }

    /// Counts a line that ended (`None`: too long to keep) and holds it if its shape is new.
    /// Returns whether it was offered as a line (not too long, not in a key block).
    fn line_ended(&mut self, line: Option<&str>, shape: u64, before: Before<'_>) -> bool {
        self.ended += 1;
        let number = self.ended;
        let seen = self.count(shape);
        let new = seen == 0;
        if seen >= FREQUENT - 1 {
            self.routine += 1;
        }
        self.bump(shape);
        // A key block's lines are rare by nature; none is offered, as a needle or its context.
        let line = line.filter(|line| !self.armoured(line));
        self.give_context(number, line, shape);
        let worth_holding =
            |t: &&str| new && t.len() <= MAX_HIGHLIGHT_BYTES && !t.trim().is_empty();
        if let Some(text) = line.filter(worth_holding) {
            let before = match before {
                Before::Here(line) => line.and_then(|(text, shape)| context(text, shape)),
                Before::Earlier => self.last.take(),
            };
            self.hold(number, text, shape, before);
        }
        self.recent.rotate_left(1);
        self.recent[AROUND - 1] = shape;
        line.is_some()
    }

    /// Looks for a crowd at [`CROWD_AFTER`]: found, shapes go on being counted to
    /// [`MAX_BYTES`]; else no longer. The lines held so far stay, judged by the counts so far.
    fn check_crowd(&mut self) {
        self.crowd = if self.routine * CROWD_SHARE >= self.ended {
            Crowd::Found
        } else {
            Crowd::None
        };
    }

    /// Whether `line` belongs to a PEM key block (`-----BEGIN ...` to `-----END ...`),
    /// following the block as lines end. Its lines are each rare, and shown one by one, away
    /// from the rest of their block, the redaction of previews could not tell them for what
    /// they are (it redacts a block it sees begin).
    fn armoured(&mut self, line: &str) -> bool {
        let line = line.trim_start();
        if line.starts_with("-----BEGIN ") {
            self.in_key_block = true;
            return true;
        }
        if line.starts_with("-----END ") {
            self.in_key_block = false;
            return true;
        }
        self.in_key_block
    }

    /// Gives the line just ended to the held lines it follows closely: its shape to their
    /// neighbourhood, and its text to their context while it is next.
    fn give_context(&mut self, number: u64, line: Option<&str>, shape: u64) {
        for h in self.held.iter_mut().rev() {
            let Some(k) = number.checked_sub(h.line + 1).map(|k| k as usize) else {
                continue;
            };
            if k >= AROUND {
                break;
            }
            h.around[AROUND + k] = shape;
            let next = line.filter(|_| k == h.after.len() && k < AFTER_LINES);
            if let Some(context) = next.and_then(|text| context(text, shape)) {
                h.after.push(context);
            }
        }
    }

    fn hold(&mut self, line: u64, text: &str, shape: u64, before: Option<Context>) {
        // The line that makes room lends its buffer: in an output of distinct lines (a log of
        // random words) every line is held for a while, so this runs on most lines.
        let mut buffer = String::new();
        if self.held.len() == HELD {
            let room = self.least_worth();
            let gone = self.held.remove(room);
            self.watch(gone.shape, false);
            buffer = gone.text;
            buffer.clear();
        }
        buffer.push_str(text);
        let mut around = [0; 2 * AROUND];
        around[..AROUND].copy_from_slice(&self.recent);
        let mut held = Held {
            line,
            text: buffer,
            shape,
            around,
            before: before.filter(|_| line > 1),
            after: Vec::new(),
            known: 0,
        };
        held.known = self.neighbourhood(&held).min(FREQUENT);
        // Held when its shape was new: seen once, so rare.
        self.watch(shape, true);
        self.held.push(held);
    }

    /// Counts a held line's cells in [`Surprise::watched`] (`held`), or no longer.
    fn watch(&mut self, shape: u64, held: bool) {
        let (a, b) = slots(shape);
        for (row, cell) in [(0, a), (1, b)] {
            let n = &mut self.watched[row][cell];
            *n = if held { *n + 1 } else { *n - 1 };
        }
    }

    /// Which held line makes room: the first no longer rare, else the one least worth keeping
    /// (among the fewest frequent lines around it, then the earliest: nearer the end of the
    /// output is nearer the failure). In an output of distinct lines this runs on most lines,
    /// and counting every held line's neighbourhood each time cost more than the line's shape:
    /// each held line keeps what its neighbourhood was last found to be, a floor under what it
    /// is (counts only grow, and its neighbours only arrive), and only the least by those
    /// floors is counted again, until its count is its floor (a property test holds this to
    /// the plain choice). The look for a line no longer rare is made only when a count of a
    /// held line's may have grown since the last look found none.
    fn least_worth(&mut self) -> usize {
        if self.stale {
            if let Some(i) = self.held.iter().position(|h| self.count(h.shape) > RARE) {
                return i;
            }
            self.stale = false;
        }
        // The least by the floors, the earliest of equals (`min_by_key` keeps the first).
        while let Some(i) = (0..self.held.len()).min_by_key(|&i| self.held[i].known) {
            let now = self.neighbourhood(&self.held[i]).min(FREQUENT);
            if now == self.held[i].known {
                return i;
            }
            self.held[i].known = now;
        }
        0
    }

    /// The count of the most frequent shape around a held line.
    fn neighbourhood(&self, h: &Held) -> u16 {
        h.around
            .iter()
            .filter(|&&s| s != 0)
            .map(|&s| self.count(s))
            .max()
            .unwrap_or(0)
    }

    /// The needles by the counts so far: the held lines still rare among frequent ones, in
    /// output order, each with the lines around it that belong to it: the line before when
    /// it is rare too, and those after it while they are rare or indented (a report's first
    /// frames, an error's location line).
    pub(super) fn needles(&self) -> Vec<Candidate> {
        let rare = |c: &Context| self.count(c.shape) <= RARE && !c.text.trim().is_empty();
        self.held
            .iter()
            .filter(|h| self.count(h.shape) <= RARE && self.neighbourhood(h) >= FREQUENT)
            .map(|h| Candidate {
                line: h.line,
                text: h.text.clone(),
                before: h
                    .before
                    .iter()
                    .filter(|c| rare(c))
                    .map(|c| c.text.clone())
                    .collect(),
                after: h
                    .after
                    .iter()
                    .take_while(|c| {
                        rare(c) || (c.text.starts_with([' ', '\t']) && !c.text.trim().is_empty())
                    })
                    .map(|c| c.text.clone())
                    .collect(),
                strong: false,
                surprising: true,
                named: false,
            })
            .collect()
    }

    /// How often `shape` was seen (at least).
    fn count(&self, shape: u64) -> u16 {
        let (a, b) = slots(shape);
        self.counts[0][a].min(self.counts[1][b])
    }

    fn bump(&mut self, shape: u64) {
        let (a, b) = slots(shape);
        self.counts[0][a] = self.counts[0][a].saturating_add(1);
        self.counts[1][b] = self.counts[1][b].saturating_add(1);
        self.stale |= self.watched[0][a] > 0 || self.watched[1][b] > 0;
    }
}

/// The shape of every line too long for the highlighter to carry whole between pieces: such a
/// line is never a needle nor shown as context, and one shape for all keeps a line's shape
/// independent of where the output's pieces split it.
const LONG: u64 = u64::MAX;

/// The shape of a line, [`LONG`] past [`CARRY_BYTES`].
fn shape_of(line: &str) -> u64 {
    if line.len() > CARRY_BYTES {
        LONG
    } else {
        shape_key(line)
    }
}

/// Where a shape counts in each row of the table.
fn slots(shape: u64) -> (usize, usize) {
    (shape as usize % TABLE, (shape >> 32) as usize % TABLE)
}

/// A line of context, unless it is too long to show whole (a cut line shown as a line would
/// say what is not so).
fn context(text: &str, shape: u64) -> Option<Context> {
    (text.len() <= CONTEXT_LINE_BYTES).then(|| Context {
        text: text.to_string(),
        shape,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{Highlighter, Patterns};
    use super::*;
    use crate::engine::normalise::count_newlines;
    use crate::engine::test_text::{letters, pieces};

    /// The needles of `text` fed in pieces of `size` bytes (at char boundaries).
    fn needles(text: &str, size: usize) -> Vec<Candidate> {
        needles_given(text, size, 0)
    }

    /// [`needles`], with each piece's [`LineShapes`] worked out apart and given for the lines
    /// that start before byte `before` of the output.
    fn needles_given(text: &str, size: usize, before: u64) -> Vec<Candidate> {
        let patterns = Patterns::defaults();
        let mut h = Highlighter::new(patterns.clone());
        for (at, end) in pieces(text, &[size]) {
            let piece = &text[at..end];
            let shapes = LineShapes::of(piece, at as u64, before);
            let lines = patterns.candidate_lines(piece);
            h.write_lines(piece, count_newlines(piece), &lines, shapes.as_ref());
        }
        h.finish();
        h.surprise.needles()
    }

    #[test]
    fn a_piece_is_shaped_for_the_lines_that_start_before_the_byte_given() {
        let text = "one\ntwo\nthree\n";
        let shapes = |at, before| LineShapes::of(text, at, before).map(|s| s.0.len());
        assert_eq!(shapes(0, u64::MAX), Some(3));
        assert_eq!(shapes(0, 4), Some(1));
        assert_eq!(shapes(0, 5), Some(2));
        assert_eq!(shapes(100, 105), Some(2));
        assert_eq!(shapes(100, 100), None);
        assert_eq!(shapes(MAX_BYTES, u64::MAX), None, "past the cap, none");
    }

    fn tap(failing: usize, total: usize) -> String {
        let mut text = String::from("TAP version 13\n");
        for i in 1..=total {
            if i == failing {
                text.push_str(&format!(
                    "not ok {i} - rounds price {}\n  ---\n  location: 'price.test.js:{i}:1'\n  ...\n",
                    i - 1
                ));
            } else {
                text.push_str(&format!(
                    "# Subtest: rounds price {i}\nok {i} - rounds price {i}\n"
                ));
            }
        }
        text.push_str(&format!("1..{total}\n# pass {}\n# fail 1\n", total - 1));
        text
    }

    #[test]
    fn a_rare_line_in_the_middle_of_a_crowd_is_a_needle_with_what_belongs_to_it() {
        let text = tap(1500, 3000);
        let number = 1 + 2 * 1499 + 1;
        for size in [7, 4096, text.len()] {
            let found = needles(&text, size);
            let needle = found
                .iter()
                .find(|c| c.line == number)
                .expect("the failing test");
            assert_eq!(needle.text, "not ok 1500 - rounds price 1499");
            assert!(needle.surprising && !needle.strong);
            assert_eq!(
                needle.after,
                ["  ---", "  location: 'price.test.js:1500:1'", "  ..."],
                "piece size {size}"
            );
            // The routine lines are not needles, however rare their first instance was.
            assert!(
                found.iter().all(|c| !c.text.starts_with("ok ")),
                "{found:?}"
            );
        }
    }

    /// `n` routine lines from `from` on, all of one shape.
    fn crowd(from: usize, n: usize) -> String {
        (from..from + n)
            .map(|i| format!("ok {i} - routine step done\n"))
            .collect()
    }

    #[test]
    fn shapes_are_counted_over_the_output_s_first_mib_only() {
        let per_line = crowd(0, 1).len();
        let early = format!(
            "{}strange thing happened\n{}",
            crowd(0, 500),
            crowd(500, 500)
        );
        assert!(
            needles(&early, 4096)
                .iter()
                .any(|c| c.text == "strange thing happened")
        );
        let past = MAX_BYTES as usize / per_line + 1;
        let late = format!(
            "{}strange thing happened\n{}",
            crowd(0, past),
            crowd(past, 500)
        );
        assert!(
            needles(&late, 1 << 16).is_empty(),
            "past the cap, patterns only"
        );
    }

    /// `n` lines from `from` on, each of a shape of its own (no digits: one word differs),
    /// long enough that a MiB of them does not fill the table's cells (as many short lines
    /// of distinct shapes would, making every shape look frequent).
    fn distinct(from: usize, n: usize) -> String {
        (from..from + n)
            .map(|i| {
                format!(
                    "message {} arrived{}\n",
                    letters(i),
                    " and was read".repeat(12)
                )
            })
            .collect()
    }

    /// Lines of `lines(from, n)`, `n` at a time, until there are more than `bytes` bytes.
    fn past(bytes: u64, lines: impl Fn(usize, usize) -> String) -> String {
        let mut text = String::new();
        while text.len() as u64 <= bytes {
            text.push_str(&lines(text.lines().count(), 1000));
        }
        text
    }

    #[test]
    fn past_the_first_mib_shapes_are_counted_only_in_a_crowd() {
        let needle = "strange thing happened";
        let then = format!("{}{needle}\n{}", crowd(0, 500), crowd(500, 500));
        // A first MiB of distinct lines: no crowd, so the rest is left to the patterns.
        let text = past(CROWD_AFTER, distinct) + &then;
        for size in [4093, 1 << 16] {
            assert!(
                needles(&text, size).iter().all(|c| c.text != needle),
                "piece size {size}"
            );
        }
        // A crowd by then: shapes are counted on, and the needle found.
        let text = past(CROWD_AFTER, crowd) + &then;
        assert!(needles(&text, 1 << 16).iter().any(|c| c.text == needle));
        // A crowd need not be most of the lines: one in `CROWD_SHARE` is enough.
        let mixed = |from: usize, n: usize| -> String {
            let routine = n / CROWD_SHARE as usize + 1;
            crowd(from, routine) + &distinct(from, n - routine)
        };
        let text = past(CROWD_AFTER, mixed) + &then;
        assert!(needles(&text, 1 << 16).iter().any(|c| c.text == needle));
    }

    #[test]
    fn a_shape_that_became_frequent_is_not_surprising() {
        let mut text: String = (0..200).map(|i| format!("ok {i} - fine\n")).collect();
        text.push_str("odd line 7\n");
        text.extend((0..100).map(|i| format!("ok {i} - fine\n")));
        text.push_str("strange thing happened\n");
        text.extend((0..100).map(|i| format!("ok {i} - fine\n")));
        text.extend((0..50).map(|i| format!("odd line {i}\n")));
        let found = needles(&text, 1000);
        let lines: Vec<&str> = found.iter().map(|c| c.text.as_str()).collect();
        assert!(lines.contains(&"strange thing happened"), "{lines:?}");
        assert!(
            !lines.iter().any(|l| l.starts_with("odd line")),
            "{lines:?}"
        );
    }

    #[test]
    fn no_line_of_a_key_block_is_a_needle_or_its_context() {
        let mut text: String = (0..100).map(|i| format!("ok {i} - fine\n")).collect();
        text.push_str(
            "$ cat legacy.key\n-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n",
        );
        text.push_str("MIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n");
        text.extend((0..100).map(|i| format!("ok {i} - fine\n")));
        let found = needles(&text, 9);
        let shown: Vec<&String> = found
            .iter()
            .flat_map(|c| c.before.iter().chain([&c.text]).chain(&c.after))
            .collect();
        assert!(
            shown.iter().any(|l| l.as_str() == "$ cat legacy.key"),
            "{shown:?}"
        );
        for line in ["-----BEGIN", "Proc-Type", "MIIE", "-----END"] {
            assert!(!shown.iter().any(|l| l.starts_with(line)), "{shown:?}");
        }
    }

    #[test]
    fn prose_has_no_needles() {
        let text: String = (0..500)
            .map(|i| format!("{} said something else here\n", letters(i)))
            .collect();
        assert!(needles(&text, 100).is_empty());
    }

    fn line() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            8 => (0u32..1000).prop_map(|n| format!("ok {n} - routine step")),
            2 => "[a-z]{1,6}( [a-z]{1,6}){0,3}",
            1 => (0u32..9).prop_map(|n| format!("  at frame {n} /src/a.rs")),
            1 => Just(String::new()),
            1 => (2100usize..2300).prop_map(|n| "w ".repeat(n)),
        ]
    }

    /// The held line that makes room, worked out plainly: the first no longer rare, else the
    /// least by (rare, neighbourhood up to [`FREQUENT`], line).
    fn plain_least_worth(s: &Surprise) -> usize {
        let worth = |h: &Held| {
            (
                s.count(h.shape) <= RARE,
                s.neighbourhood(h).min(FREQUENT),
                h.line,
            )
        };
        s.held
            .iter()
            .position(|h| s.count(h.shape) > RARE)
            .or_else(|| (0..s.held.len()).min_by_key(|&i| worth(&s.held[i])))
            .unwrap_or(0)
    }

    proptest::proptest! {
        /// The choice of the line that makes room, from each held line's floor, is the plain
        /// one's, whatever the counts.
        #[test]
        fn the_line_that_makes_room_is_the_plain_choice(
            lines in proptest::collection::vec(line(), 0..400),
        ) {
            let mut s = Surprise::new();
            for line in &lines {
                let text = format!("{line}\n");
                s.write(&text, "", false, None);
                if !s.held.is_empty() {
                    proptest::prop_assert_eq!(s.least_worth(), plain_least_worth(&s));
                }
            }
        }
    }

    proptest::proptest! {
        /// Memory stays bounded whatever the output, every needle is a real line of it at
        /// the line number it gives (and so is its context), and neither how the output is cut
        /// into pieces nor which thread worked out its lines' shapes changes anything.
        #[test]
        fn needles_are_real_lines_bounded_and_the_same_however_cut(
            lines in proptest::collection::vec(line(), 0..600),
            size in 1usize..5000,
            newline_at_end in proptest::bool::ANY,
            given_before in 0u64..20_000,
        ) {
            let mut text = lines.join("\n");
            if newline_at_end && !text.is_empty() {
                text.push('\n');
            }
            let mut h = Highlighter::new(Patterns::defaults());
            h.write(&text, count_newlines(&text));
            h.finish();
            proptest::prop_assert!(h.surprise.held.len() <= HELD);
            let whole = h.surprise.needles();
            let spill: Vec<&str> = text.split('\n').collect();
            for c in &whole {
                let at = c.line as usize - 1;
                proptest::prop_assert_eq!(spill[at], c.text.as_str());
                for (k, b) in c.before.iter().enumerate() {
                    proptest::prop_assert_eq!(spill[at - c.before.len() + k], b.as_str());
                }
                for (k, a) in c.after.iter().enumerate() {
                    proptest::prop_assert_eq!(spill[at + 1 + k], a.as_str());
                }
            }
            let facts = |found: &[Candidate]| -> Vec<(u64, String, Vec<String>, Vec<String>)> {
                found.iter().map(|c| (c.line, c.text.clone(), c.before.clone(), c.after.clone())).collect()
            };
            // Cut anywhere, with the lines' shapes worked out apart (as the capture's thread
            // does) up to any byte, the rest by the highlighter itself.
            for before in [0, given_before, u64::MAX] {
                let cut = needles_given(&text, size, before);
                proptest::prop_assert_eq!(facts(&cut), facts(&whole), "given before {}", before);
            }
        }
    }
}
