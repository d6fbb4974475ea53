//! Terminal bytes -> clean text: what a person would have seen in a *scrolling* terminal.
//!
//! This module owns the whole conversion of the bytes a program wrote to a pseudo-terminal into
//! plain text, streaming, with memory bounded by the line cap and the screen's size plus the
//! chunk being fed. It runs in three stages:
//!
//! 1. **UTF-8 repair** (`Utf8Repair`, `utf8.rs`). Invalid bytes become U+FFFD exactly as
//!    [`String::from_utf8_lossy`] would; an incomplete char at the end of a chunk is held back
//!    until the next one. This happens *before* escape parsing because `vte` executes a stray
//!    byte 0x80..=0x9F as a C1 control instead of printing U+FFFD, and because the fast path
//!    and vte must see the same chars. Raw mode stops here.
//! 2. **Ground text fast path** (`Terminal::ground`, `terminal.rs`). Outside escape sequences,
//!    runs of plain text are found a block of bytes at a time and written to the line in one go;
//!    complete lines of plain text met at the start of a line go straight to the output. Complete
//!    CSI sequences that change nothing on the line (colours, private modes) are skipped here.
//! 3. **Escape sequences through `vte`** (`Terminal::sequence`). From an ESC on, bytes go to
//!    [`vte::Parser::advance_until_terminated`] until the sequence has ended. `vte` does not say
//!    which state it is in, so `Seq` shadows the little the loop needs: whether vte is back in
//!    ground (the fast path may take over), in its escape state, or collecting an OSC string
//!    (which vte buffers without limit, so a long one restarts the parser).
//!
//! Both paths write through one set of cell operations (`Display`), so text behaves the same
//! whichever path it takes.
//!
//! # Two models: the line and the screen
//!
//! Most output is drawn by the **line model** (`line.rs`): `\n` ends a line, `\r` and cursor
//! moves within the line change the column, writes overwrite, erases truncate or blank, and
//! nothing wraps. It knows one line, so a progress bar redrawn with `\r` collapses to its last
//! state, and plain lines go from the fast path straight to the output.
//!
//! A program that draws with cursor addressing (a dashboard, `top`, a pager, docker's or
//! cargo-style multi-line progress, apt's progress row under a scroll region) puts text where a
//! line cannot hold it. So `Display` (`display.rs`) hands over to the **screen model**
//! (`screen.rs`), a grid of the terminal's size ([`NormaliseOptions::cols`] x
//! [`NormaliseOptions::rows`], the daemon's PTY's: 200 x 50 by default), as soon as the program
//! does what the line model cannot represent:
//! - a move to another row: CUP (`H`, `f`) and VPA (`d`) to another row, cursor up (`A`, `F`)
//!   from a row below the top, cursor down (`B`, `E`) from a row above the bottom, reverse index
//!   (`ESC M`), restoring a cursor saved on another row; inserting, deleting or scrolling rows
//!   (`L`, `M`, `S`, `T`);
//! - a scroll region (DECSTBM, `r`) other than the whole screen;
//! - the alternate screen (`?1049h`, `?1047h`, `?47h`).
//!
//! To know which row the line is on, the line model counts the lines it ended since it last
//! knew (the start of the output, a cleared screen): a fresh terminal starts at the top, and
//! the screen scrolls at the bottom. Moves within the line (`G`, `C`, `D`, `\r`, CUP to the
//! same row) stay in the line model. When the screen takes over, the rows above the cursor
//! hold lines already written out: the grid marks them *stale* (not kept, not written again
//! unless drawn on), and the cursor's row gets the pending line.
//!
//! What the screen model writes out:
//! - each row that scrolls off the top of the screen or of a scroll region, as it goes, as a
//!   terminal's scrollback would keep it (a row autowrap continued is joined to the next, so a
//!   long line stays one line);
//! - a **frame** (the rows that hold text, top to bottom, trailing spaces and leading and
//!   trailing blank rows left out) when the program clears the screen (ED 2, or a full reset
//!   `ESC c`), leaves the alternate screen, or the output ends ([`Normaliser::finish`]).
//!
//! Redrawing rows in place writes nothing: a dashboard refreshed in place for ten minutes, or
//! a multi-line progress redrawn with cursor-up, leaves its final state, once (after the first
//! frame, which the line model wrote out as plain lines before the first cursor-up). A program
//! that clears the screen before each frame would write a frame each time, so a frame is
//! written out only when it differs from the last frame written out or something was written
//! out since: a status screen redrawn every 100 ms gives one frame while it says the same,
//! and one per change when it changes. In the line model ED 2 does the same with the pending
//! line (the only row not yet written out): it becomes a one-line frame, and the cursor stays
//! where it was on a blank row.
//!
//! Clearing the main screen (no scroll region) hands back to the line model, at a fresh line
//! with the cursor where it was: plain text after a `clear` is on the fast path again. Leaving
//! the alternate screen hands back to whatever drew the main screen, the line model with its
//! pending line (say, a prompt) as it was, or the grid. And once a whole screen of rows has
//! scrolled off the main screen (no scroll region) by line feeds, with the program moving the
//! cursor to no other row meanwhile, every row shown was written line after line: the rows
//! above the cursor are written out and its row becomes the line model's pending line, so a
//! build that drew a progress display once and then prints a million lines is back on the fast
//! path after a screenful. (Should it move up again later, the screen model takes over again,
//! the rows above stale.) Scrolling moves row indices, not cells, and a row is written out up
//! to its last drawn cell, so the screen model costs per line, not per screen.
//!
//! The screen model holds `rows x cols` chars (twice while the alternate screen keeps the
//! main one), the last frame and the cursor's row, whatever is printed; the grid is allocated
//! only when a program draws on it. [`Normaliser::pending_line`] is then the cursor's row.
//!
//! Choices and limits. The grid is this crate's own (~500 lines on the `vte::Perform` this
//! module already has) rather than the `vt100` crate: `vt100` runs its own parser, so bytes
//! would have to be handed over between two parsers mid-stream without breaking chunking
//! independence; it wraps every line and keeps no record of what scrolled off (only a
//! scrollback to diff); and most of its state (attributes, colours, modes) is thrown away here.
//! A cell holds one char, as the line model counts columns: a wide (CJK) char takes one
//! cell, so text after it on the row lands one column left of where a terminal shows it. Tabs
//! move to the next multiple of 8 on the screen (they stay `\t` in the line model). Origin
//! mode, insert mode, tab stops other than every 8, and the rows a reverse scroll pushes off
//! the bottom of a region (dropped, as on a terminal: a pager scrolling back would otherwise
//! write out every row it passes) are not modelled. A row drawn on after it went stale holds
//! only what was drawn on it: the rest of what it showed is in the output already.

mod blocks;
mod display;
mod line;
mod scan;
mod screen;
mod simd;
mod terminal;
mod utf8;

use display::Display;
pub(crate) use simd::Level;
use terminal::Terminal;
use utf8::{Utf8Repair, utf8_width};

/// Default terminal width the screen model assumes: the daemon's PTY's.
pub const DEFAULT_COLS: u16 = 200;
/// Default terminal height the screen model assumes: the daemon's PTY's.
pub const DEFAULT_ROWS: u16 = 50;
/// Largest width the screen model takes (a wider terminal is taken as this wide).
const MAX_COLS: u16 = 1000;
/// Largest height the screen model takes.
const MAX_ROWS: u16 = 500;

/// Default cap on a pending line before it is committed in pieces (1 MiB).
pub const DEFAULT_MAX_LINE_BYTES: usize = 1 << 20;

/// Smallest effective line cap: any char (up to 4 bytes) must fit in a pending line.
const MIN_LINE_BYTES: usize = 4;

/// How raw terminal bytes are turned into text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NormaliseOptions {
    /// Keep the bytes as they are but for UTF-8 repair (default `false`).
    pub raw: bool,
    /// A pending line longer than this (in UTF-8 bytes) is committed in pieces, so memory stays
    /// bounded however long a line is; values below 4 act as 4. Default
    /// [`DEFAULT_MAX_LINE_BYTES`].
    pub max_line_bytes: usize,
    /// The terminal's width, for the screen model (default [`DEFAULT_COLS`]; 1 to 1000).
    pub cols: u16,
    /// The terminal's height, for the screen model (default [`DEFAULT_ROWS`]; 1 to 500).
    pub rows: u16,
}

impl Default for NormaliseOptions {
    fn default() -> Self {
        NormaliseOptions {
            raw: false,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            cols: DEFAULT_COLS,
            rows: DEFAULT_ROWS,
        }
    }
}

/// Streaming normaliser: feed it chunks cut anywhere, then call [`Normaliser::finish`] once.
///
/// The output does not depend on how the input was chunked.
pub struct Normaliser {
    raw: bool,
    utf8: Utf8Repair,
    term: Terminal,
}

impl Normaliser {
    /// A normaliser at the start of a stream.
    pub fn new(opts: NormaliseOptions) -> Self {
        Normaliser::at_level(opts, Level::get())
    }

    /// A normaliser whose scan uses the vector instructions of `level`: every level gives
    /// the same text, which the tests hold them to.
    fn at_level(opts: NormaliseOptions, level: Level) -> Self {
        let display = Display::new(
            opts.max_line_bytes.max(MIN_LINE_BYTES),
            usize::from(opts.cols.clamp(1, MAX_COLS)),
            usize::from(opts.rows.clamp(1, MAX_ROWS)),
        );
        Normaliser {
            raw: opts.raw,
            utf8: Utf8Repair::default(),
            term: Terminal::new(display, level),
        }
    }

    /// Feeds raw bytes; appends committed text to `out`. Returns the newlines appended: a
    /// capture needs the count, and the normaliser knows each line it ends (counting them in
    /// `out` again would cost a pass over it).
    pub fn feed(&mut self, input: &[u8], out: &mut String) -> u64 {
        let Normaliser { raw, utf8, term } = self;
        let before = term.display.line.ended;
        utf8.feed(input, |text| emit(*raw, term, text, out));
        term.display.settle();
        term.display.line.ended - before
    }

    /// Ends the stream: flushes held bytes, then what the screen shows (in screen mode) and the
    /// pending line (no newline added to it). Returns the newlines appended: those of the
    /// screen's rows (none in line mode).
    pub fn finish(&mut self, out: &mut String) -> u64 {
        let before = self.term.display.line.ended;
        if self.utf8.take_incomplete() {
            emit(self.raw, &mut self.term, "\u{FFFD}", out);
        }
        if !self.raw {
            self.term.display.finish(out);
        }
        self.term.display.line.ended - before
    }

    /// The line still being written, as it looks now (say, a prompt waiting for an answer, or
    /// a progress bar's current state): text [`Normaliser::feed`] has not committed because
    /// the line has not ended. It never holds a newline. Empty in raw mode, which holds
    /// nothing back but an incomplete character. In screen mode, the cursor's row as it looks
    /// now (trailing spaces left out); [`Normaliser::finish`] writes it out with the rest of the
    /// screen.
    pub fn pending_line(&self) -> &str {
        if self.raw {
            ""
        } else {
            self.term.display.pending_line()
        }
    }

    /// Bytes held in the pending line.
    #[cfg(test)]
    fn pending_len(&self) -> usize {
        self.term.display.line.text.len()
    }
}

/// Normalises a whole input at once.
pub fn normalise(input: &[u8], opts: NormaliseOptions) -> String {
    let mut n = Normaliser::new(opts);
    let mut out = String::new();
    n.feed(input, &mut out);
    n.finish(&mut out);
    out
}

/// How many `\n` `text` holds: the lines it ends, by the rule every stage counts with.
pub fn count_newlines(text: &str) -> u64 {
    memchr::memchr_iter(b'\n', text.as_bytes()).count() as u64
}

/// Hands repaired text to the next stage.
fn emit(raw: bool, term: &mut Terminal, text: &str, out: &mut String) {
    if raw {
        out.push_str(text);
        term.display.line.ended += count_newlines(text);
    } else {
        term.process(text, out);
    }
}

#[cfg(test)]
mod tests {
    use super::terminal::inert_csi_len;
    use super::*;
    use proptest::prelude::*;

    fn norm(input: &[u8]) -> String {
        normalise(input, NormaliseOptions::default())
    }

    fn with_cap(input: &[u8], cap: usize) -> String {
        let opts = NormaliseOptions {
            max_line_bytes: cap,
            ..NormaliseOptions::default()
        };
        normalise(input, opts)
    }

    fn raw(input: &[u8]) -> String {
        let opts = NormaliseOptions {
            raw: true,
            ..NormaliseOptions::default()
        };
        normalise(input, opts)
    }

    /// Normalises `input` fed in pieces cut at `cuts`; checks the newline counts returned.
    fn chunked(input: &[u8], cuts: &[usize], opts: NormaliseOptions) -> String {
        let (out, newlines) = fed_in_pieces(Normaliser::new(opts), input, cuts);
        assert_eq!(
            newlines,
            out.matches('\n').count() as u64,
            "newlines counted"
        );
        out
    }

    /// What `n` makes of `input` fed in pieces cut at `cuts`, and the newlines it counted.
    fn fed_in_pieces(mut n: Normaliser, input: &[u8], cuts: &[usize]) -> (String, u64) {
        let mut out = String::new();
        let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
        bounds.sort_unstable();
        bounds.push(input.len());
        let (mut start, mut newlines) = (0, 0);
        for end in bounds {
            newlines += n.feed(&input[start..end], &mut out);
            start = end;
        }
        newlines += n.finish(&mut out);
        (out, newlines)
    }

    #[test]
    fn plain_text_and_line_ends() {
        assert_eq!(norm(b""), "");
        assert_eq!(norm(b"a\nb\n"), "a\nb\n");
        assert_eq!(norm(b"a\r\nb\r\n"), "a\nb\n");
        assert_eq!(norm(b"a\nb"), "a\nb");
        assert_eq!(norm(b"\n\n"), "\n\n");
        assert_eq!(norm(b"trailing   \n"), "trailing   \n");
    }

    #[test]
    fn carriage_return_overwrites() {
        assert_eq!(norm(b"abcdef\rxy\n"), "xycdef\n");
        assert_eq!(norm(b"abc\r\r\n"), "abc\n");
        assert_eq!(norm(b"abc\r"), "abc");
        let mut bar = Vec::new();
        for i in 0..=25_000 {
            bar.extend_from_slice(format!("\r[{i:>5}/25000]").as_bytes());
        }
        bar.extend_from_slice(b"\r\n");
        assert_eq!(norm(&bar), "[25000/25000]\n");
    }

    #[test]
    fn erase_line_after_carriage_return() {
        assert_eq!(norm(b"progress 50%\r\x1b[Kdone\n"), "done\n");
        assert_eq!(norm(b"abcdef\r\x1b[0Kxy\n"), "xy\n");
        assert_eq!(norm(b"abcdef\x1b[3D\x1b[K\n"), "abc\n");
        assert_eq!(norm(b"abcdef\x1b[3D\x1b[1K\n"), "    ef\n");
        assert_eq!(norm(b"abc\x1b[5C\x1b[1K\n"), "   \n");
        assert_eq!(norm(b"abcdef\x1b[3D\x1b[2Kx\n"), "   x\n");
        assert_eq!(norm(b"abcdef\x1b[3D\x1b[J\n"), "abc\n");
        // Clearing the screen writes out what it showed; the cursor stays, on a blank row.
        assert_eq!(norm(b"abcdef\x1b[3D\x1b[2J\n"), "abcdef\n\n");
        assert_eq!(norm("h\u{e9}llo\x1b[4D\x1b[1K!\n".as_bytes()), " !llo\n");
    }

    #[test]
    fn backspace() {
        assert_eq!(norm(b"abc\x08\x08X\n"), "aXc\n");
        assert_eq!(norm(b"a\x08\x08\x08b\n"), "b\n");
        assert_eq!(norm("\u{e9}\u{e8}\x08x\n".as_bytes()), "\u{e9}x\n");
    }

    #[test]
    fn tab_is_a_literal_char() {
        assert_eq!(norm(b"a\tb\n"), "a\tb\n");
        assert_eq!(norm(b"a\tb\rxyz\n"), "xyz\n");
    }

    #[test]
    fn colours_and_modes_are_dropped() {
        assert_eq!(norm(b"\x1b[1;31merror\x1b[0m: x\n"), "error: x\n");
        assert_eq!(norm(b"\x1b[38:5:196mred\x1b[m\n"), "red\n");
        assert_eq!(norm(b"\x1b[?25lhidden\x1b[?25h\n"), "hidden\n");
        assert_eq!(norm(b"ab\x1b[?1G\n"), "ab\n");
        assert_eq!(norm(b"ab\x1b[ Gc\n"), "abc\n");
        assert_eq!(norm(b"ab\x1b[1;2?Kc\n"), "abc\n");
    }

    #[test]
    fn cursor_moves() {
        assert_eq!(norm(b"abcdef\x1b[3GX\n"), "abXdef\n");
        assert_eq!(norm(b"abcdef\x1b[GX\n"), "Xbcdef\n");
        assert_eq!(norm(b"abcdef\x1b[0GX\n"), "Xbcdef\n");
        assert_eq!(norm(b"ab\x1b[3Cc\n"), "ab   c\n");
        assert_eq!(norm(b"ab\x1b[Cc\x1b[0Cd\n"), "ab c d\n");
        assert_eq!(norm(b"abcdef\x1b[2DX\n"), "abcdXf\n");
        assert_eq!(norm(b"ab\x1b[9DX\n"), "Xb\n");
        // Moves to the row the cursor is on stay in the line model (the first row here; moves
        // to other rows are in `cursor_addressing_to_other_rows`).
        assert_eq!(norm(b"abcdef\x1b[1;3HX\n"), "abXdef\n");
        assert_eq!(norm(b"abcdef\x1b[1;3fX\x1b[HY\n"), "YbXdef\n");
        assert_eq!(norm(b"abc\x1b[2AX\x1b[CY\n"), "abcX Y\n");
        assert_eq!(norm(b"abc\x1b[EX\x1b[1FY\n").lines().next(), Some("Ybc"));
        assert_eq!(norm(b"abc\x1b[20C\n"), "abc\n");
        assert_eq!(
            norm("\u{e9}\u{e8}\u{ea}\x1b[2GX\x1b[CY\n".as_bytes()),
            "\u{e9}X\u{ea}Y\n"
        );
    }

    #[test]
    fn save_and_restore_cursor() {
        assert_eq!(norm(b"ab\x1b[scdef\x1b[uX\n"), "abXdef\n");
        assert_eq!(norm(b"ab\x1b7cdef\x1b8X\n"), "abXdef\n");
        assert_eq!(norm(b"ab\x1b[uX\n"), "Xb\n");
        assert_eq!(norm(b"ab\x1b[?scd\x1b[?uX\n"), "abcdX\n");
    }

    #[test]
    fn osc_strings_are_removed() {
        assert_eq!(norm(b"\x1b]0;title\x07text\n"), "text\n");
        assert_eq!(norm(b"\x1b]2;title\x1b\\text\n"), "text\n");
        let link = b"\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\ after\n";
        assert_eq!(norm(link), "link after\n");
        assert_eq!(norm(b"a\x1b]0;never ends\nstill title"), "a");
        let st = b"a\x1b]0;t\x1b\\b\n";
        for cut in 0..st.len() {
            assert_eq!(chunked(st, &[cut], NormaliseOptions::default()), "ab\n");
        }
    }

    #[test]
    fn escape_state_is_tracked_across_sequences() {
        assert_eq!(norm(b"\x1b\x1b[31mx\n"), "x\n");
        // C0 controls act inside sequences; ESC LF ] still opens an OSC string.
        assert_eq!(norm(b"a\x1b\n]0;t\x07b\n"), "a\nb\n");
        // A CSI that vte ignores ends without a callback; text after it is still text.
        assert_eq!(norm(b"abc\x1b[1;2?K\rX\x08\x08Y\n"), "Ybc\n");
        // vte sees bytes inside a DCS: the 0x9C in U+2713 ends it, the char's last byte is
        // dropped as a C1 control.
        assert_eq!(norm("a\x1bPq\u{2713}b\n".as_bytes()), "ab\n");
    }

    #[test]
    fn long_osc_keeps_memory_bounded_and_still_ends() {
        let mut input = b"a\x1b]0;".to_vec();
        input.extend(std::iter::repeat_n(b'x', 100_000));
        input.extend_from_slice(b"\x07b\n");
        assert_eq!(norm(&input), "ab\n");
        assert_eq!(
            chunked(
                &input,
                &[7, 5000, 5001, 99_000],
                NormaliseOptions::default()
            ),
            "ab\n"
        );
    }

    #[test]
    fn dcs_sos_pm_apc_and_two_byte_escapes_are_removed() {
        assert_eq!(norm(b"a\x1bPq#0;2;0;0;0#0!10~\x1b\\b\n"), "ab\n");
        assert_eq!(
            norm(b"a\x1bXsos\x1b\\b\x1b^pm\x1b\\c\x1b_apc\x1b\\d\n"),
            "abcd\n"
        );
        assert_eq!(norm(b"a\x1b=b\x1b>c\x1b(Bd\x1bNe\x1bOf\n"), "abcdef\n");
        assert_eq!(norm(b"a\x1b[31\x18b\n"), "ab\n");
        assert_eq!(norm(b"a\x1b]0;t\x1ab\n"), "ab\n");
    }

    #[test]
    fn controls_are_dropped() {
        assert_eq!(norm(b"a\x00b\x07c\x0bd\x0ce\x7ff\x1cg\n"), "abcdefg\n");
        assert_eq!(
            norm("a\u{85}b\u{9b}c\u{9f}d\u{a0}e\n".as_bytes()),
            "abcd\u{a0}e\n"
        );
        assert_eq!(norm("\u{85}\u{9b}31mx\n".as_bytes()), "31mx\n");
    }

    #[test]
    fn chars_across_the_end_of_a_vte_span_are_whole() {
        // Found by the `normalise` fuzz target. After an ignored CSI, vte prints the text that
        // follows until the span handed to it ends (64 bytes on); a span that ended inside a
        // char made vte complete it from the next span, printing U+009B (a C1 control, which
        // it executes when it gets it whole) and skipping the "c" after an "é".
        let ignored_csi_then =
            |rest: &str| [b"\x1b[ 0D", &[b'x'; 59][..], rest.as_bytes()].concat();
        for (input, expected) in [
            (ignored_csi_then("\u{e9}c\u{e8}\n"), "\u{e9}c\u{e8}\n"),
            (ignored_csi_then("\u{9b}y\n"), "y\n"),
        ] {
            let expected = "x".repeat(59) + expected;
            assert_eq!(norm(&input), expected);
            for cut in 0..input.len() {
                assert_eq!(
                    chunked(&input, &[cut], NormaliseOptions::default()),
                    expected
                );
            }
        }
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        assert_eq!(norm(b"a\xffb\n"), "a\u{FFFD}b\n");
        assert_eq!(norm(b"a\x80\x9bb\n"), "a\u{FFFD}\u{FFFD}b\n");
        assert_eq!(norm(b"a\xf0\x9f\x98b\n"), "a\u{FFFD}b\n");
        assert_eq!(norm(b"a\xe2\x28\xa1\n"), "a\u{FFFD}(\u{FFFD}\n");
        assert_eq!(norm(b"a\xed\xa0\x80\n"), "a\u{FFFD}\u{FFFD}\u{FFFD}\n");
        assert_eq!(norm(b"a\xc0\xafb\n"), "a\u{FFFD}\u{FFFD}b\n");
        assert_eq!(norm(b"tail\xe2\x82"), "tail\u{FFFD}");
        assert_eq!(norm(b"\xe2\x82\x1b[31mx\n"), "\u{FFFD}x\n");
        let split = "\u{1F600}".as_bytes();
        assert_eq!(
            chunked(split, &[1, 2, 3], NormaliseOptions::default()),
            "\u{1F600}"
        );
        assert_eq!(
            chunked(b"\xf0\x9f\x98A", &[1, 2], NormaliseOptions::default()),
            "\u{FFFD}A"
        );
    }

    #[test]
    fn no_wrapping_and_padding() {
        let long = "x".repeat(5000) + "\n";
        assert_eq!(norm(long.as_bytes()), long);
        assert_eq!(norm(b"ab\x1b[6GX\n"), "ab   X\n");
    }

    #[test]
    fn line_cap_commits_in_pieces() {
        assert_eq!(with_cap(b"abcdefghij\n", 4), "abcdefghij\n");
        // "abcd" and "efgh" are frozen; the \r returns to the start of "ij".
        assert_eq!(with_cap(b"abcdefghij\rX\n", 4), "abcdefghXj\n");
        assert_eq!(with_cap(b"abcdefghij\x1b[9DX\n", 4), "abcdefghXj\n");
        assert_eq!(with_cap(b"abcdefgh\rX\n", 4), "abcdXfgh\n");
        assert_eq!(with_cap(b"abcdef\x1b[2KX\n", 4), "abcd  X\n");
        assert_eq!(with_cap("abc\u{e9}d\n".as_bytes(), 4), "abc\u{e9}d\n");
        assert_eq!(with_cap("abc\u{e9}d\rX\n".as_bytes(), 4), "abcXd\n");
        assert_eq!(with_cap(b"ab\x1b[11GX\rY\n", 4), "ab      Y X\n");
        assert_eq!(with_cap(b"ab\x1b[11GX\rY\n", 1), "ab      Y X\n");
        let mut n = Normaliser::new(NormaliseOptions {
            max_line_bytes: 4,
            ..NormaliseOptions::default()
        });
        let mut out = String::new();
        n.feed(b"abcdefghij", &mut out);
        assert_eq!(out, "abcdefgh");
        assert_eq!(n.pending_len(), 2);
    }

    #[test]
    fn the_pending_line_is_the_line_as_it_looks_now() {
        let mut n = Normaliser::new(NormaliseOptions::default());
        let mut out = String::new();
        n.feed(b"done\r\nprogress 10%\rprogress 50%\x1b[K", &mut out);
        assert_eq!(out, "done\n");
        assert_eq!(n.pending_line(), "progress 50%");
        n.feed(b"\r\ncontinue? ", &mut out);
        assert_eq!(out, "done\nprogress 50%\n");
        assert_eq!(n.pending_line(), "continue? ");
        let mut raw = Normaliser::new(NormaliseOptions {
            raw: true,
            ..NormaliseOptions::default()
        });
        raw.feed(b"prompt? ", &mut out);
        assert_eq!(raw.pending_line(), "", "raw mode holds nothing back");
    }

    #[test]
    fn raw_mode_only_repairs_utf8() {
        let input = b"a\x1b[31mb\r\n\x08c\xff\x1b]0;t\x07\n";
        assert_eq!(raw(input), String::from_utf8_lossy(input));
        assert_eq!(raw(b"x\xe2\x82"), "x\u{FFFD}");
    }

    #[test]
    fn inert_sequences_are_skipped_whole_and_others_left_to_vte() {
        assert_eq!(inert_csi_len(b"\x1b[mx"), Some(3));
        assert_eq!(inert_csi_len(b"\x1b[1;38:5:196mx"), Some(13));
        assert_eq!(inert_csi_len(b"\x1b[?25lx"), Some(6));
        assert_eq!(inert_csi_len(b"\x1b[>4;2m"), Some(7));
        for other in [
            &b"\x1b[K"[..],
            b"\x1b[2J",
            b"\x1b[1;31",
            b"\x1b[",
            b"\x1b[1 q",
            b"\x1b]0;t\x07",
        ] {
            assert_eq!(inert_csi_len(other), None, "{other:?}");
        }
        assert_eq!(
            norm(b"\x1b[32m   Compiling\x1b[0m foo\r\n\x1b[1mab\x1b[0m\rX\n\x1b[?25lok"),
            "   Compiling foo\nXb\nok"
        );
    }

    fn sized(input: &[u8], cols: u16, rows: u16) -> String {
        let opts = NormaliseOptions {
            cols,
            rows,
            ..NormaliseOptions::default()
        };
        let whole = normalise(input, opts);
        for cut in [1, input.len() / 3, input.len() / 2] {
            assert_eq!(chunked(input, &[cut], opts), whole, "cut at {cut}");
        }
        whole
    }

    #[test]
    fn cursor_addressing_to_other_rows() {
        assert_eq!(norm(b"abcdef\x1b[5;3HX\n"), "abcdef\n\n\n\n  X\n");
        assert_eq!(norm(b"abcdef\x1b[5;3fX\x1b[HY\n"), "Ybcdef\n\n\n\n  X\n");
        assert_eq!(norm(b"abc\x1b[2AX\x1b[BY\n"), "abcX\n    Y\n");
        assert_eq!(norm(b"abc\x1b[EX\x1b[1FY\n"), "Ybc\nX\n");
        assert_eq!(norm(b"one\ntwo\n\x1b[2AONE\n"), "one\ntwo\nONE\n");
        // VPA keeps the column.
        assert_eq!(norm(b"a\nb\x1b[1;1HA\x1b[3dc\n"), "a\nA\nb\n c\n");
    }

    #[test]
    fn cursor_addressed_dashboard() {
        let frame = b"\x1b[2J\x1b[1;1Hcluster status\x1b[4;1Hnode-07 FAILED\x1b[5;1Hnode-08 ok";
        let input = [&b"build starts\r\n"[..], frame].concat();
        let expected = "build starts\ncluster status\n\n\nnode-07 FAILED\nnode-08 ok\n";
        assert_eq!(norm(&input), expected);
        // The same frame redrawn a hundred times is written out once.
        let redrawn = [&b"build starts\r\n"[..], &frame.repeat(100)].concat();
        assert_eq!(norm(&redrawn), expected);
        // Each frame that differs is written out when the screen is cleared.
        let mut ticking = b"build starts\r\n".to_vec();
        for i in 0..5 {
            ticking.extend_from_slice(
                format!("\x1b[2J\x1b[Hup {i}s\x1b[3;1Hnode-07 FAILED").as_bytes(),
            );
        }
        let out = norm(&ticking);
        for i in 0..5 {
            assert_eq!(out.matches(&format!("up {i}s\n")).count(), 1, "{out}");
        }
        assert_eq!(out.matches("node-07 FAILED").count(), 5);
        // A one-line status redrawn on a cleared screen.
        assert_eq!(norm(&b"\x1b[2J\x1b[Hstatus: ok".repeat(50)), "status: ok\n");
    }

    #[test]
    fn alternate_screen() {
        for mode in ["1049", "1047", "47"] {
            let input = format!(
                "before\r\n\x1b[?{mode}h\x1b[H\x1b[2Jpage line 1\r\npage line 2\x1b[1;6HLINE\
                 \x1b[?{mode}lafter\r\n"
            );
            assert_eq!(
                norm(input.as_bytes()),
                "before\npage LINE 1\npage line 2\nafter\n",
                "mode {mode}"
            );
        }
        // Redrawn in place, many times: the last state is written out when the program leaves.
        let mut input = b"$ less log\r\n\x1b[?1049h".to_vec();
        for i in 0..20 {
            input.extend_from_slice(
                format!("\x1b[Hline {i}\x1b[K\r\nline {}\x1b[K", i + 1).as_bytes(),
            );
        }
        input.extend_from_slice(b"\x1b[?1049l$ ");
        assert_eq!(norm(&input), "$ less log\nline 19\nline 20\n$ ");
        // A prompt left pending before the alternate screen is still pending after it.
        // (1049 keeps the cursor where it was: on the alternate screen too.)
        let prompt = b"wait: \x1b[?1049hfull\x1b[?1049lok\n";
        assert_eq!(norm(prompt), "      full\nwait: ok\n");
        // The alternate screen shown when the output ends is written out.
        assert_eq!(norm(b"\x1b[?1049h\x1b[2;1Hhtop"), "htop\n");
        // Leaving it when it was not shown changes nothing.
        assert_eq!(norm(b"a\x1b[?1049lb\n"), "ab\n");
    }

    #[test]
    fn scroll_regions() {
        // apt-style: the last row holds a progress bar, the log scrolls in the rows above.
        let mut input = b"\x1b7\x1b[1;4r\x1b8".to_vec();
        for i in 1..=10 {
            input.extend_from_slice(
                format!(
                    "log line {i}\r\n\x1b7\x1b[5;1HProgress: {}%\x1b[K\x1b8",
                    i * 10
                )
                .as_bytes(),
            );
        }
        let logs: String = (1..=10).map(|i| format!("log line {i}\n")).collect();
        assert_eq!(sized(&input, 40, 5), logs.clone() + "\nProgress: 100%\n");
        // The bar erased and the region reset at the end, as apt does.
        input.extend_from_slice(b"\x1b7\x1b[r\x1b[5;1H\x1b[K\x1b8done\r\n");
        assert_eq!(sized(&input, 40, 5), logs + "done\n");
        // A region below a fixed header: rows scrolled out of it are written out too.
        let mut input = b"\x1b[2J\x1b[1;1Hheader\x1b[2;3r\x1b[2;1H".to_vec();
        for i in 1..=4 {
            input.extend_from_slice(format!("item {i}\r\n").as_bytes());
        }
        assert_eq!(
            sized(&input, 20, 3),
            "item 1\nitem 2\nitem 3\nheader\nitem 4\n"
        );
        // Reverse index at the top of the region scrolls it down.
        // Reverse index at the top of the region scrolls it down; the row pushed out at its
        // bottom is dropped, as on a terminal.
        assert_eq!(
            sized(
                b"\x1b[2;1H\x1b[Ha\r\nb\r\nc\x1b[2;3r\x1b[2;1H\x1bMnew",
                20,
                3
            ),
            "a\nnew\nb\n"
        );
    }

    #[test]
    fn top_like_output() {
        // `top -b` writes plain frames: they pass as they are.
        let batch = "top - 10:00:01 up 1 day\nTasks: 1 total\n\n  PID USER\n    1 root\n\n";
        assert_eq!(norm(batch.repeat(3).as_bytes()), batch.repeat(3));
        // Interactive top: each frame drawn from the home position over the last one.
        let mut input = b"\x1b[H\x1b[2J".to_vec();
        for s in 1..=30 {
            input.extend_from_slice(
                format!(
                    "\x1b[Htop - 10:00:{s:02} up 1 day\x1b[K\r\nTasks: {s} total\x1b[K\r\n\x1b[K\r\n  \
                     PID USER\x1b[K\r\n    1 root\x1b[K\x1b[J"
                )
                .as_bytes(),
            );
        }
        let out = norm(&input);
        assert_eq!(
            out,
            "top - 10:00:01 up 1 day\nTasks: 1 total\n\n  PID USER\n\
             top - 10:00:30 up 1 day\nTasks: 30 total\n\n  PID USER\n    1 root\n"
        );
    }

    #[test]
    fn multi_line_progress_redrawn_with_cursor_up() {
        let progress = |before: &str| {
            let mut input = before.as_bytes().to_vec();
            input.extend_from_slice(b"#1 pull 0%\r\n#2 build 0%\r\n");
            for i in 1..=100 {
                input.extend_from_slice(
                    format!("\x1b[2A#1 pull {i}%\x1b[K\r\n#2 build {i}%\x1b[K\r\n").as_bytes(),
                );
            }
            input.extend_from_slice(b"done\r\n");
            input
        };
        let expected = "#1 pull 0%\n#2 build 0%\n#1 pull 100%\n#2 build 100%\ndone\n";
        assert_eq!(
            sized(&progress("start\r\n"), 200, 50),
            format!("start\n{expected}")
        );
        // At the bottom of a full screen, which has scrolled.
        let before: String = (0..60).map(|i| format!("line {i}\r\n")).collect();
        let out = sized(&progress(&before), 200, 50);
        assert_eq!(out, before.replace('\r', "") + expected);
        // indicatif-style: each bar cleared with cursor-up and erase, then drawn again.
        let mut input = b"log\r\n".to_vec();
        for i in 0..50 {
            if i > 0 {
                input.extend_from_slice(b"\x1b[1A\x1b[2K\x1b[1A\x1b[2K\r");
            }
            input.extend_from_slice(format!("a [{i:>2}/49]\r\nb [{i:>2}/49]\r\n").as_bytes());
        }
        assert_eq!(
            norm(&input),
            "log\na [ 0/49]\nb [ 0/49]\na [49/49]\nb [49/49]\n"
        );
    }

    #[test]
    fn carriage_return_progress_collapses_in_both_models() {
        let mut bar = b"\x1b[2J\x1b[3;1Hdownloading\r\n".to_vec();
        for i in 0..=100 {
            bar.extend_from_slice(format!("\r[{i:>3}%]").as_bytes());
        }
        bar.extend_from_slice(b"\r\n");
        assert_eq!(norm(&bar), "downloading\n[100%]\n");
    }

    #[test]
    fn screen_rows_scroll_off_in_order() {
        let mut input = b"\x1b[2;1Hfirst\r\n".to_vec();
        for i in 0..20 {
            input.extend_from_slice(format!("row {i}\r\n").as_bytes());
        }
        let expected: String = (0..20).map(|i| format!("row {i}\n")).collect();
        assert_eq!(sized(&input, 10, 4), format!("\nfirst\n{expected}"));
    }

    #[test]
    fn autowrap_in_screen_mode() {
        // A long line wraps on the screen but is written out whole.
        assert_eq!(
            sized(b"\x1b[2;1H\x1b[Habcdefghij\r\nk", 4, 4),
            "abcdefghij\nk\n"
        );
        // Also when its rows scroll off one by one, and when the rest is on the screen at the
        // end. (The blank row scrolled off first is an empty line, as in a scrollback. Once a
        // screen of lines has scrolled, "m" is the line model's pending line.)
        let scrolled = sized(b"\x1b[2;1Habcdefghij\r\nk\r\nl\r\nm", 4, 3);
        assert_eq!(scrolled, "\nabcdefghij\nk\nl\nm");
        assert_eq!(
            sized(b"\x1b[2;1Habcdefghij\r\nk", 4, 3),
            "\nabcdefghij\nk\n"
        );
        // With autowrap off, the last column is overwritten.
        assert_eq!(sized(b"\x1b[?7l\x1b[2;1Habcdefghij", 4, 3), "abcj\n");
    }

    #[test]
    fn screen_edits() {
        let screen = |s: &[u8]| sized(&[&b"\x1b[2;1H\x1b[H"[..], s].concat(), 10, 4);
        assert_eq!(screen(b"a\r\nb\r\nc\x1b[2;1H\x1b[L"), "a\n\nb\nc\n");
        assert_eq!(screen(b"a\r\nb\r\nc\x1b[2;1H\x1b[M"), "a\nc\n");
        assert_eq!(screen(b"abcdef\x1b[1;3H\x1b[2P"), "abef\n");
        assert_eq!(screen(b"abcdef\x1b[1;3H\x1b[2@"), "ab  cdef\n");
        assert_eq!(screen(b"abcdef\x1b[1;3H\x1b[2X"), "ab  ef\n");
        assert_eq!(screen(b"a\r\nb\r\nc\x1b[2;2H\x1b[1J"), "c\n");
        assert_eq!(screen(b"a\r\nb\r\nc\x1b[2;1H\x1b[J"), "a\n");
        assert_eq!(screen(b"abc\x1b[1;2H\x1b[1K"), "  c\n");
        assert_eq!(screen(b"a\tb"), "a       b\n");
        assert_eq!(screen(b"a\r\nb\x1b[S"), "a\nb\n");
        assert_eq!(screen(b"a\r\nb\x1b[T"), "a\nb\n");
        // Full reset: what the screen showed is written out, then plain text as before.
        assert_eq!(norm(b"\x1b[5;1Hx\x1bcplain\n"), "x\nplain\n");
    }

    #[test]
    fn plain_text_after_the_screen_is_line_mode_again() {
        let mut n = Normaliser::new(NormaliseOptions::default());
        let mut out = String::new();
        n.feed(b"\x1b[3;1Hdrawn\x1b[H\x1b[2J", &mut out);
        assert_eq!(out, "drawn\n");
        assert!(
            n.term.display.screen.is_none(),
            "clearing the screen ends screen mode"
        );
        n.feed(b"progress 1\rprogress 2", &mut out);
        assert_eq!(n.pending_line(), "progress 2");
        n.feed(b"\r\n", &mut out);
        assert_eq!(out, "drawn\nprogress 2\n");
    }

    #[test]
    fn the_line_model_takes_over_once_a_screen_of_lines_has_scrolled() {
        let mut input = b"one\r\ntwo\r\n\x1b[2Aone!\r\ntwo!\r\n".to_vec();
        let lines: String = (0..10).map(|i| format!("l{i}\n")).collect();
        input.extend_from_slice(lines.replace('\n', "\r\n").as_bytes());
        input.extend_from_slice(b"x\ry");
        let opts = NormaliseOptions {
            cols: 20,
            rows: 5,
            ..NormaliseOptions::default()
        };
        let mut n = Normaliser::new(opts);
        let mut out = String::new();
        n.feed(&input, &mut out);
        assert!(n.term.display.screen.is_none(), "back in the line model");
        assert_eq!(n.pending_line(), "y");
        n.finish(&mut out);
        assert_eq!(out, format!("one\ntwo\none!\ntwo!\n{lines}y"));
        assert_eq!(sized(&input, 20, 5), out);
        // Not while the program still draws above: a bar redrawn below the log.
        let mut bars = Vec::new();
        for i in 0..20 {
            bars.extend_from_slice(format!("\x1b[1A\x1b[2Klog {i}\r\n[{i:>2}/19]\r\n").as_bytes());
        }
        let log: String = (0..20).map(|i| format!("log {i}\n")).collect();
        assert_eq!(
            sized(&[&b"start\r\n\r\n"[..], &bars].concat(), 20, 5),
            format!("start\n\n{log}[19/19]\n")
        );
        // Colours do not count as drawing, whichever path takes them.
        let coloured = "\x1b[2A\x1b[1;32mok\x1b[m\r\n".repeat(6);
        let coloured = [&b"a\r\nb\r\n"[..], coloured.as_bytes()].concat();
        assert_eq!(sized(&coloured, 20, 5), "a\nb\nok\n");
        assert_eq!(norm(&coloured), "a\nb\nok\n");
        // A line wrapped across the hand-over stays one line.
        let mut wide = b"\x1b[2;1H\x1b[H".to_vec();
        wide.extend_from_slice("abcdefghij\r\n".repeat(3).as_bytes());
        wide.extend_from_slice(b"abcdefghij");
        assert_eq!(sized(&wide, 4, 3), "abcdefghij\n".repeat(3) + "abcdefghij");
    }

    #[test]
    fn pending_line_in_screen_mode_is_the_cursor_row() {
        let mut n = Normaliser::new(NormaliseOptions::default());
        let mut out = String::new();
        assert_eq!(
            n.feed(b"\x1b[?1049h\x1b[10;1HContinue? [y/N] ", &mut out),
            0
        );
        assert_eq!(n.pending_line(), "Continue? [y/N]");
        assert_eq!(out, "");
        assert_eq!(n.finish(&mut out), 1);
        assert_eq!(out, "Continue? [y/N]\n");
    }

    /// Pieces that random inputs are made of.
    fn piece() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            4 => "[ -~]{0,12}".prop_map(String::into_bytes),
            1 => "[\u{80}-\u{10ffff}]{1,3}".prop_map(String::into_bytes),
            2 => prop::sample::select(vec![
                b"\r".to_vec(), b"\n".to_vec(), b"\r\n".to_vec(), b"\x08".to_vec(),
                b"\t".to_vec(), b"\x1b".to_vec(), b"\x1b[".to_vec(), b"\x1b]0;t".to_vec(),
                b"\x07".to_vec(), b"\x1b\\".to_vec(), b"\x1bP".to_vec(), b"\x1b_".to_vec(),
                b"\x1b7".to_vec(), b"\x1b8".to_vec(), b"\x18".to_vec(), b"\x7f".to_vec(),
                "\u{9b}".as_bytes().to_vec(), b"\xc2".to_vec(), b"\xe2\x82".to_vec(),
                b"\x80".to_vec(), b"\xff".to_vec(), b"\x1b]8;;http://x\x1b\\".to_vec(),
            ]),
            2 => screen_piece(),
            2 => ("[<-?]?", prop::collection::vec(0u16..30, 0..3), "[ -/]?", "[@-~]").prop_map(
                |(private, params, inter, fin)| {
                    let params: Vec<String> = params.iter().map(u16::to_string).collect();
                    format!("\x1b[{private}{}{inter}{fin}", params.join(";")).into_bytes()
                }
            ),
            1 => prop::collection::vec(any::<u8>(), 1..6),
        ]
    }

    /// Sequences that hand over to the screen model, or act on it.
    fn screen_piece() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            (0u16..8, 0u16..14, prop::sample::select(vec!["H", "f"]))
                .prop_map(|(r, c, f)| format!("\x1b[{r};{c}{f}").into_bytes()),
            (
                0u16..4,
                prop::sample::select(vec!["A", "B", "E", "F", "d", "L", "M", "S", "T"])
            )
                .prop_map(|(n, f)| format!("\x1b[{n}{f}").into_bytes()),
            (0u16..5, 0u16..8).prop_map(|(t, b)| format!("\x1b[{t};{b}r").into_bytes()),
            prop::sample::select(vec![
                b"\x1b[2J".to_vec(),
                b"\x1b[J".to_vec(),
                b"\x1b[1J".to_vec(),
                b"\x1b[?1049h".to_vec(),
                b"\x1b[?1049l".to_vec(),
                b"\x1b[?47h".to_vec(),
                b"\x1b[?47l".to_vec(),
                b"\x1b[?1047;25h".to_vec(),
                b"\x1b[?7l".to_vec(),
                b"\x1b[?7h".to_vec(),
                b"\x1bM".to_vec(),
                b"\x1bD".to_vec(),
                b"\x1bE".to_vec(),
                b"\x1bc".to_vec(),
                b"\x1b7".to_vec(),
                b"\x1b8".to_vec(),
                b"\x1b[s".to_vec(),
                b"\x1b[u".to_vec(),
                b"\x1b[r".to_vec(),
                b"\x1b[2P".to_vec(),
                b"\x1b[3@".to_vec(),
                b"\x1b[2X".to_vec(),
                b"\x1b[K".to_vec(),
                b"\x1b[1;31m".to_vec(),
                b"\x1b[m".to_vec(),
                b"\x1b[?25l".to_vec(),
            ]),
        ]
    }

    /// Input that uses the screen model: plain text, line ends and screen sequences.
    fn screen_input() -> impl Strategy<Value = Vec<u8>> {
        let part = prop_oneof![
            3 => "[ -~\t\u{e9}]{0,12}".prop_map(String::into_bytes),
            2 => prop::sample::select(vec![b"\r\n".to_vec(), b"\n".to_vec(), b"\r".to_vec()]),
            3 => screen_piece(),
            1 => piece(),
        ];
        prop::collection::vec(part, 0..60).prop_map(|parts| parts.concat())
    }

    /// A small terminal, so that rows scroll off and wrap often.
    fn small_terminal() -> impl Strategy<Value = NormaliseOptions> {
        (1u16..12, 1u16..7).prop_map(|(cols, rows)| NormaliseOptions {
            cols,
            rows,
            ..NormaliseOptions::default()
        })
    }

    fn input() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(piece(), 0..40).prop_map(|pieces| pieces.concat())
    }

    /// Log-like input: lines long enough to fill the fast path's 64-byte blocks, mostly plain,
    /// some with a piece that needs the terminal model, ended in `\r\n`, `\n` or `\r`.
    fn log() -> impl Strategy<Value = Vec<u8>> {
        let line = (
            "[ -~\t\u{e9}]{0,150}",
            prop::option::weighted(0.2, piece()),
            "[ -~]{0,20}",
            prop::sample::select(vec!["\r\n", "\r\n", "\n", "\r", ""]),
        )
            .prop_map(|(text, piece, more, end)| {
                [
                    text.as_bytes(),
                    &piece.unwrap_or_default(),
                    more.as_bytes(),
                    end.as_bytes(),
                ]
                .concat()
            });
        prop::collection::vec(line, 0..60).prop_map(|lines| lines.concat())
    }

    proptest! {
        #[test]
        fn chunking_does_not_change_output(
            input in input(),
            cuts in prop::collection::vec(any::<usize>(), 0..8),
        ) {
            let opts = NormaliseOptions::default();
            prop_assert_eq!(chunked(&input, &cuts, opts), normalise(&input, opts));
        }

        /// Fed a byte at a time, no text holds a whole line, let alone a 64-byte block: the
        /// fast paths must agree with the line model.
        #[test]
        fn fast_paths_agree_with_byte_at_a_time(
            input in log(),
            cuts in prop::collection::vec(any::<usize>(), 0..4),
        ) {
            let opts = NormaliseOptions::default();
            let mut n = Normaliser::new(opts);
            let mut slow = String::new();
            for byte in &input {
                n.feed(std::slice::from_ref(byte), &mut slow);
            }
            n.finish(&mut slow);
            prop_assert_eq!(&normalise(&input, opts), &slow);
            prop_assert_eq!(&chunked(&input, &cuts, opts), &slow);
        }

        /// Every vector form of the scan (the block pass with AVX-512 or AVX2, the stops'
        /// walk alone at the baseline) gives the same text and line count as the others.
        #[test]
        fn every_simd_level_gives_the_same_text(
            input in log(),
            cuts in prop::collection::vec(any::<usize>(), 0..4),
        ) {
            let levels = Level::supported();
            if !levels.iter().any(|l| l.avx512()) {
                println!("SKIPPED: no AVX-512 VBMI2 on this CPU, its block pass was not compared");
            }
            let run = |level: Level| {
                let n = Normaliser::at_level(NormaliseOptions::default(), level);
                fed_in_pieces(n, &input, &cuts)
            };
            let baseline = run(levels[0]);
            prop_assert_eq!(baseline.1, baseline.0.matches('\n').count() as u64);
            for &level in &levels[1..] {
                prop_assert_eq!(&run(level), &baseline, "{:?}", level);
            }
        }

        #[test]
        fn raw_mode_is_lossy_utf8_however_chunked(
            input in input(),
            cuts in prop::collection::vec(any::<usize>(), 0..8),
        ) {
            let opts = NormaliseOptions { raw: true, ..NormaliseOptions::default() };
            let expected = String::from_utf8_lossy(&input);
            prop_assert_eq!(&chunked(&input, &cuts, opts), &expected);
            prop_assert_eq!(&normalise(&input, opts), &expected);
        }

        #[test]
        fn line_cap_bounds_pending_line(
            input in input(),
            cap in 4usize..24,
            cuts in prop::collection::vec(any::<usize>(), 0..8),
        ) {
            let opts = NormaliseOptions { max_line_bytes: cap, ..NormaliseOptions::default() };
            let mut n = Normaliser::new(opts);
            let mut out = String::new();
            for byte in &input {
                n.feed(std::slice::from_ref(byte), &mut out);
                prop_assert!(n.pending_len() <= cap);
            }
            n.finish(&mut out);
            prop_assert_eq!(&out, &normalise(&input, opts));
            prop_assert_eq!(&chunked(&input, &cuts, opts), &out);
        }

        #[test]
        fn plain_text_passes_through(
            lines in prop::collection::vec("[ -~\u{a0}-\u{10ffff}]{0,40}", 0..10),
            last in "[ -~]{0,5}",
        ) {
            let text = lines.iter().fold(String::new(), |text, l| text + l + "\n") + &last;
            prop_assert_eq!(norm(text.as_bytes()), text);
        }

        #[test]
        fn screen_mode_does_not_depend_on_chunking(
            input in screen_input(),
            opts in small_terminal(),
            cuts in prop::collection::vec(any::<usize>(), 0..8),
        ) {
            let whole = normalise(&input, opts);
            prop_assert_eq!(&chunked(&input, &cuts, opts), &whole);
            let mut n = Normaliser::new(opts);
            let (mut slow, mut newlines) = (String::new(), 0);
            for byte in &input {
                newlines += n.feed(std::slice::from_ref(byte), &mut slow);
                prop_assert!(!n.pending_line().contains('\n'));
            }
            newlines += n.finish(&mut slow);
            prop_assert_eq!(&slow, &whole);
            prop_assert_eq!(newlines, count_newlines(&slow));
        }

        /// Whatever is printed, the screen model holds its grids (two while the alternate
        /// screen is shown), the last frame and the cursor's row: rows x cols chars each.
        #[test]
        fn screen_memory_is_bounded(
            input in screen_input(),
            opts in small_terminal(),
            repeat in 1usize..20,
        ) {
            let (cols, rows) = (usize::from(opts.cols), usize::from(opts.rows));
            // Two grids of `char` cells and a row's state and place each; the last frame and
            // the cursor's row in chars of 4 bytes at most (a newline per row), twice over for
            // `String`'s doubling, and a small allocation's minimum.
            let grid = cols * rows * 4 + rows * 3 * size_of::<usize>();
            let bound = 2 * grid + 2 * rows * (cols * 4 + 1) + 2 * cols * 4 + 2 * 16;
            let mut n = Normaliser::new(opts);
            let mut out = String::new();
            for _ in 0..repeat {
                for chunk in input.chunks(7) {
                    n.feed(chunk, &mut out);
                    let held = n.term.display.screen_bytes();
                    prop_assert!(held <= bound, "{} bytes held, bound {}", held, bound);
                    prop_assert!(n.pending_len() <= DEFAULT_MAX_LINE_BYTES);
                }
                out.clear();
            }
        }

        /// Plain text is unchanged by the screen model, before it and after it: once the screen
        /// is cleared, or the alternate screen left, lines pass as they are again.
        #[test]
        fn plain_text_around_the_screen_is_unchanged(
            before in prop::collection::vec("[ -~\u{a0}-\u{10ffff}]{0,40}", 0..6),
            screen in screen_input(),
            after in prop::collection::vec("[ -~\u{a0}-\u{10ffff}]{0,40}", 1..6),
            alt in any::<bool>(),
        ) {
            let lines = |lines: &[String]| lines.iter().fold(String::new(), |t, l| t + l + "\n");
            let (before, after) = (lines(&before), lines(&after));
            let (open, close): (&[u8], &[u8]) = if alt {
                (b"\x1b[?1049h", b"\x1b[?1049l\x1bc")
            } else {
                (b"\x1b[5;1H", b"\x1bc")
            };
            let input = [before.as_bytes(), open, &screen, close, after.as_bytes()].concat();
            let out = norm(&input);
            prop_assert!(out.starts_with(&before), "{:?}", out);
            prop_assert!(out.ends_with(&after), "{:?}", out);
        }
    }
}
