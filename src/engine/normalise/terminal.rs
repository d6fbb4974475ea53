//! The terminal: ground text through the fast path, escape sequences through `vte`, both onto
//! the display (stages 2 and 3 of the module doc).

use vte::{Params, Parser, Perform};

use super::blocks;
use super::display::{self, Display};
use super::scan::Stops;
use super::simd::Level;

/// OSC bytes vte may buffer before it is restarted in a fresh, empty OSC string.
const OSC_BUFFER_LIMIT: usize = 4096;

/// Most bytes handed to vte at once inside a sequence (the search for the next ESC stops here).
const SEQ_WINDOW: usize = 64;

pub(super) const ESC: u8 = 0x1B;

/// What the loop knows about vte's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seq {
    /// vte is in ground: text goes through the fast path.
    Ground,
    /// vte is in its escape state (after an ESC, or a byte that keeps it there).
    Escape,
    /// vte is collecting an OSC string and has buffered about this many bytes of it.
    Osc(usize),
    /// Anywhere else: CSI, DCS, SOS/PM/APC, or ground after a sequence that ended silently.
    Other,
}

/// The escape parser and the display it draws on.
pub(super) struct Terminal {
    parser: Parser,
    seq: Seq,
    pub(super) display: Display,
    /// The vector instructions the fast path's scan uses.
    level: Level,
}

impl Terminal {
    pub(super) fn new(display: Display, level: Level) -> Self {
        Terminal {
            parser: Parser::new(),
            seq: Seq::Ground,
            display,
            level,
        }
    }

    /// Processes repaired text (complete chars).
    pub(super) fn process(&mut self, text: &str, out: &mut String) {
        let mut stops = Stops::new(text.as_bytes(), self.level);
        let mut pos = 0;
        while pos < text.len() {
            if self.seq == Seq::Ground {
                // `Seq::Ground` is only entered at a char boundary.
                pos = self.ground(text, pos, &mut stops, out);
                if pos == text.len() {
                    break;
                }
            }
            pos += self.sequence(text, pos, out);
        }
    }

    /// Fast path for ground text from `start`; stops at an ESC that vte must take (it skips
    /// those of sequences that change nothing, such as colours). Returns where it stopped.
    ///
    /// Complete lines of plain text met at the start of a line bypass the line buffer; those
    /// ending in `\n` are copied to `out` together, as `text[copied..i]`.
    fn ground(&mut self, text: &str, start: usize, stops: &mut Stops, out: &mut String) -> usize {
        let bytes = text.as_bytes();
        let mut start = start;
        if self.display.screen.is_some() {
            start = self.ground_screen(text, start, stops, out);
            if self.display.screen.is_some() || start == bytes.len() {
                return start;
            }
        }
        let line = &mut self.display.line;
        let mut i = start;
        let mut copied = start;
        while i < bytes.len() {
            if line.is_pristine() {
                i = plain_lines(text, stops, i, &mut copied, out, &mut line.ended);
                if i == bytes.len() {
                    break;
                }
            }
            let end = stops.plain_end(i);
            out.push_str(&text[copied..i]);
            if end > i {
                line.write_str(&text[i..end], out);
            }
            match bytes.get(end) {
                None => return end,
                Some(&ESC) => match inert_csi_len(&bytes[end..]) {
                    Some(len) => i = end + len,
                    None => return end,
                },
                Some(&b) if b.is_ascii() => {
                    line.control(b, out);
                    i = end + 1;
                }
                // `plain_end` stops at a non-ASCII byte only for a C1 char (2 bytes): dropped.
                Some(_) => i = end + 2,
            }
            copied = i;
        }
        out.push_str(&text[copied..]);
        bytes.len()
    }

    /// [`Terminal::ground`] in screen mode: runs of plain text are printed on the screen at once.
    /// Returns where it stopped: at an ESC for vte, at the end, or where the line model took
    /// over.
    fn ground_screen(
        &mut self,
        text: &str,
        start: usize,
        stops: &mut Stops,
        out: &mut String,
    ) -> usize {
        let bytes = text.as_bytes();
        let mut i = start;
        while i < bytes.len() {
            let end = stops.plain_end(i);
            if end > i {
                self.display.write_str(&text[i..end], out);
            }
            i = match bytes.get(end) {
                None => return end,
                Some(&ESC) => match inert_csi_len(&bytes[end..]) {
                    Some(len) => end + len,
                    None => return end,
                },
                Some(&b) if b.is_ascii() => {
                    self.display.control(b, out);
                    if self.display.screen.is_none() {
                        return end + 1;
                    }
                    end + 1
                }
                Some(_) => end + 2,
            };
        }
        bytes.len()
    }

    /// Hands the next span at `pos` to vte and updates [`Seq`]. Returns the bytes consumed.
    ///
    /// In [`Seq::Ground`] the span starts with the ESC that opens a sequence, after which vte is
    /// in its escape state.
    fn sequence(&mut self, text: &str, pos: usize, out: &mut String) -> usize {
        let bytes = &text.as_bytes()[pos..];
        let (skip, state) = match self.seq {
            Seq::Ground => (1, Seq::Escape),
            seq => (0, seq),
        };
        let next = bytes.get(skip).copied();
        let len = match (state, next) {
            (Seq::Osc(_), _) => bytes.len().min(OSC_BUFFER_LIMIT),
            (Seq::Escape, None) => skip,
            (Seq::Escape, Some(b)) if b == b']' || keeps_escape(b) => skip + 1,
            _ => skip + up_to_esc(&bytes[skip..]),
        };
        // A span ends at a char boundary: vte mishandles a char whose bytes come in two calls
        // (it prints a C1 control, and skips the chars after it up to the end of 4 bytes).
        let len = text.ceil_char_boundary(pos + len) - pos;
        let span = &bytes[..len];
        let mut performer = Performer {
            display: &mut self.display,
            out,
            ended: false,
        };
        // vte consumes at least one byte of a non-empty span; the guard keeps the loop finite.
        let n = self
            .parser
            .advance_until_terminated(&mut performer, span)
            .clamp(1, span.len());
        let ended = performer.ended;
        self.seq = if span[n - 1] == ESC {
            Seq::Escape
        } else if ended {
            if text.is_char_boundary(pos + n) {
                Seq::Ground
            } else {
                Seq::Other
            }
        } else {
            match (state, next) {
                (Seq::Osc(len), _) => self.grow_osc(len + n, out),
                (Seq::Escape, Some(b']')) => Seq::Osc(0),
                (Seq::Escape, Some(b)) if keeps_escape(b) => Seq::Escape,
                _ => Seq::Other,
            }
        };
        n
    }

    /// Bounds vte's OSC buffer: past the limit, restarts vte in a fresh OSC string (its content
    /// is never used, only where it ends).
    fn grow_osc(&mut self, len: usize, out: &mut String) -> Seq {
        if len <= OSC_BUFFER_LIMIT {
            return Seq::Osc(len);
        }
        self.parser = Parser::new();
        let mut performer = Performer {
            display: &mut self.display,
            out,
            ended: false,
        };
        self.parser.advance(&mut performer, b"\x1b]");
        Seq::Osc(0)
    }
}

/// Passes the complete lines of plain text from `i` on, each ending in `\n` or `\r\n`: the
/// text up to `copied` is in `out`, and the rest waits to be copied in one go, so `\n` lines
/// cost no copy of their own and a `\r\n` line only the copy that drops its `\r`. Returns
/// where the first other line (or the text's end) is.
///
/// A plain line may hold escapes that change nothing ([`inert_csi_len`]: colours, mostly):
/// its text around them is copied as it comes, and taken back out of `out` if the line turns
/// out not to be plain (a `\r` redraw, say), for the line model to draw.
///
/// Runs of whole blocks of plain lines go through [`blocks::plain_line_blocks`] when the CPU
/// can; the lines around a block it gives up on are walked stop by stop.
fn plain_lines(
    text: &str,
    stops: &mut Stops,
    mut i: usize,
    copied: &mut usize,
    out: &mut String,
    ended: &mut u64,
) -> usize {
    let bytes = text.as_bytes();
    let mut blocks_from = i;
    loop {
        if i >= blocks_from {
            out.push_str(&text[*copied..i]);
            let blocks = blocks::plain_line_blocks(text, i, out, stops.level());
            *ended += blocks.lines;
            (i, blocks_from) = (blocks.done, blocks.stuck);
            *copied = i;
        }
        // `out`'s length once the text up to this line is in it (`copied <= i` here).
        let line_start_out = out.len() + (i - *copied);
        let mut end = stops.plain_end(i);
        while bytes.get(end) == Some(&ESC) {
            let Some(len) = inert_csi_len(&bytes[end..]) else {
                break;
            };
            out.push_str(&text[*copied..end]);
            *copied = end + len;
            end = stops.plain_end(end + len);
        }
        match bytes.get(end..end + 2) {
            Some([b'\n', _]) => i = end + 1,
            Some([b'\r', b'\n']) => {
                out.push_str(&text[*copied..end]);
                *copied = end + 1;
                i = end + 2;
            }
            None if bytes.get(end) == Some(&b'\n') => {
                *ended += 1;
                return end + 1;
            }
            _ => {
                if *copied > i {
                    out.truncate(line_start_out);
                    *copied = i;
                }
                return i;
            }
        }
        *ended += 1;
    }
}

/// The length of the complete CSI sequence that `bytes` starts with when it changes nothing on
/// the line: a colour or other SGR (`ESC [ 1;31 m`), or one with a private marker
/// (`ESC [ ? 25 l`), which the display ignores too, but for the modes it keeps (the alternate
/// screen, autowrap). Such sequences are most of the escapes in real output, and skipping them
/// here spares vte and keeps the fast path. `None` for anything else, or for a sequence the
/// text cuts short: vte takes those.
pub(super) fn inert_csi_len(bytes: &[u8]) -> Option<usize> {
    let rest = bytes.strip_prefix(b"\x1b[")?;
    let private = usize::from(matches!(rest.first(), Some(b'<'..=b'?')));
    let rest = &rest[private..];
    let params = rest
        .iter()
        .take_while(|&&b| b.is_ascii_digit() || b == b';' || b == b':')
        .count();
    let last = *rest.get(params)?;
    let inert = last == b'm'
        || (private == 1
            && (0x40..=0x7E).contains(&last)
            && !(matches!(last, b'h' | b'l') && sets_kept_mode(&rest[..params])));
    inert.then_some(2 + private + params + 1)
}

/// Whether the parameters of a private mode set or reset name a mode the display keeps. Read
/// as vte reads them (saturating), every number counts, sub-parameters too: a superset of what
/// the display sees, so vte gets every such sequence.
fn sets_kept_mode(params: &[u8]) -> bool {
    params
        .split(|&b| b == b';' || b == b':')
        .map(|p| {
            p.iter().fold(0u16, |n, &d| {
                n.saturating_mul(10).saturating_add(u16::from(d - b'0'))
            })
        })
        .any(display::is_kept_mode)
}

/// Whether a byte leaves vte's escape state unchanged.
fn keeps_escape(b: u8) -> bool {
    matches!(b, 0x00..=0x17 | 0x19 | 0x1B..=0x1F | 0x7F..)
}

/// Length of `bytes` up to and including the first ESC, at most [`SEQ_WINDOW`].
fn up_to_esc(bytes: &[u8]) -> usize {
    let window = &bytes[..bytes.len().min(SEQ_WINDOW)];
    window
        .iter()
        .position(|&b| b == ESC)
        .map_or(window.len(), |i| i + 1)
}

/// vte callbacks, applied to the display.
///
/// `ended` says vte is back in ground: a sequence has ended (unless the byte that ended it was
/// an ESC, which starts the next one) or text was printed, which vte only does in ground.
struct Performer<'a> {
    display: &'a mut Display,
    out: &'a mut String,
    ended: bool,
}

impl Perform for Performer<'_> {
    fn print(&mut self, c: char) {
        self.ended = true;
        // vte executes C0 and C1 chars but prints DEL.
        if c != '\x7f' {
            self.display.print(c, self.out);
        }
    }

    fn execute(&mut self, byte: u8) {
        // CAN and SUB abort a sequence.
        self.ended |= matches!(byte, 0x18 | 0x1A);
        self.display.control(byte, self.out);
    }

    fn csi_dispatch(&mut self, params: &Params, intermediates: &[u8], _ignore: bool, action: char) {
        self.ended = true;
        match intermediates {
            [] => self.display.csi(params, false, action, self.out),
            [b'?'] => self.display.csi(params, true, action, self.out),
            _ => {}
        }
    }

    fn esc_dispatch(&mut self, intermediates: &[u8], _ignore: bool, byte: u8) {
        self.ended = true;
        if intermediates.is_empty() {
            self.display.esc(byte, self.out);
        }
    }

    fn osc_dispatch(&mut self, _params: &[&[u8]], _bell_terminated: bool) {
        self.ended = true;
    }

    fn unhook(&mut self) {
        self.ended = true;
    }

    fn terminated(&self) -> bool {
        self.ended
    }
}
