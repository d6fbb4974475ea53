//! What the terminal shows: the line model, or the screen model once the line cannot hold what
//! the program does, and the moves between the two (see the module docs of `normalise`).

use vte::Params;

use super::count_newlines;
use super::line::{Line, arg};
use super::screen::{Main, Screen, Sink};

/// Private modes that show (`h`) or leave (`l`) the alternate screen.
const ALT_SCREEN_MODES: [u16; 3] = [1049, 1047, 47];
/// The private mode of autowrap.
const AUTOWRAP_MODE: u16 = 7;

/// Whether the display acts on private mode `mode` (the others change nothing it keeps).
pub(super) fn is_kept_mode(mode: u16) -> bool {
    mode == AUTOWRAP_MODE || ALT_SCREEN_MODES.contains(&mode)
}

/// The line model, and the screen model while it draws.
pub(super) struct Display {
    pub(super) line: Line,
    /// `Some` in screen mode.
    pub(super) screen: Option<Box<Screen>>,
    cols: usize,
    rows: usize,
    autowrap: bool,
    /// Where the line model is on the screen: its cursor was on row `row_base`, below
    /// `stale_base` rows of text already written out, when `line.ended` was `ended_base`. Each
    /// line ended since has moved it a row down (the screen scrolls at the bottom).
    row_base: usize,
    ended_base: u64,
    stale_base: usize,
    /// The row of the cursor the line model saved (the line keeps its column).
    saved_row: usize,
    /// The last frame written out, and `line.ended` right after it.
    last_frame: String,
    frame_ended: u64,
    /// The cursor's row in screen mode, as [`Display::pending_line`] gives it.
    pending: String,
}

impl Display {
    pub(super) fn new(cap: usize, cols: usize, rows: usize) -> Display {
        Display {
            line: Line::new(cap),
            screen: None,
            cols,
            rows,
            autowrap: true,
            row_base: 0,
            ended_base: 0,
            stale_base: 0,
            saved_row: 0,
            last_frame: String::new(),
            frame_ended: 0,
            pending: String::new(),
        }
    }

    /// The line still being written: in screen mode, the cursor's row (as of the last
    /// [`Display::settle`]).
    pub(super) fn pending_line(&self) -> &str {
        if self.screen.is_some() {
            &self.pending
        } else {
            &self.line.text
        }
    }

    /// Brings [`Display::pending_line`] up to date; called when a chunk has been processed.
    pub(super) fn settle(&mut self) {
        if let Some(screen) = &self.screen {
            screen.cursor_row(&mut self.pending);
        }
    }

    /// Memory held by the screen model, in bytes (for tests of the bound).
    #[cfg(test)]
    pub(super) fn screen_bytes(&self) -> usize {
        self.screen.as_ref().map_or(0, |s| s.held_bytes())
            + self.last_frame.capacity()
            + self.pending.capacity()
    }

    /// Ends the stream: the screen's frame is written out (the alternate screen's first, then
    /// the main one's), then the pending line.
    pub(super) fn finish(&mut self, out: &mut String) {
        while let Some(screen) = &self.screen {
            if screen.main.is_some() {
                self.leave_alt(out);
            } else {
                self.write_frame(out);
                self.screen = None;
            }
        }
        // A line redrawn on a cleared screen, as it was written out last: not again.
        let text = self.line.text.trim_end_matches(' ');
        let redrawn = self.line.ended == self.frame_ended
            && self.last_frame.strip_suffix('\n') == Some(text)
            && !self.line.is_open();
        if !redrawn {
            self.line.flush(out);
        }
    }

    /// The line model's cursor row.
    fn row(&self) -> usize {
        let down = usize::try_from(self.line.ended - self.ended_base).unwrap_or(usize::MAX);
        self.row_base.saturating_add(down).min(self.rows - 1)
    }

    /// Rows of text already written out right above the line model's cursor.
    fn stale(&self) -> usize {
        let down = usize::try_from(self.line.ended - self.ended_base).unwrap_or(usize::MAX);
        self.stale_base.saturating_add(down).min(self.row())
    }

    /// The line model's cursor is now on `row`, below `stale` rows of text written out.
    fn rebase(&mut self, row: usize, stale: usize) {
        (self.row_base, self.stale_base, self.ended_base) = (row, stale, self.line.ended);
    }

    fn sink<'a>(line: &'a mut Line, out: &'a mut String) -> Sink<'a> {
        Sink {
            out,
            ended: &mut line.ended,
        }
    }

    pub(super) fn print(&mut self, c: char, out: &mut String) {
        match &mut self.screen {
            Some(screen) => screen.print(c, &mut Self::sink(&mut self.line, out)),
            None => self.line.put(c, out),
        }
    }

    pub(super) fn write_str(&mut self, s: &str, out: &mut String) {
        match &mut self.screen {
            Some(screen) => screen.write_str(s, &mut Self::sink(&mut self.line, out)),
            None => self.line.write_str(s, out),
        }
    }

    pub(super) fn control(&mut self, byte: u8, out: &mut String) {
        match &mut self.screen {
            Some(screen) => {
                screen.control(byte, &mut Self::sink(&mut self.line, out));
                if byte == b'\n' && screen.is_line_like() {
                    self.hand_over(out);
                }
            }
            None => self.line.control(byte, out),
        }
    }

    /// The line model takes over from a screen that shows only lines written one after the
    /// other (see [`Screen::is_line_like`]): what the rows above the cursor hold is written
    /// out, and the cursor's row becomes the pending line.
    fn hand_over(&mut self, out: &mut String) {
        let Some(mut screen) = self.screen.take() else {
            return;
        };
        let ((row, col), saved) = (screen.cursor(), screen.saved());
        let mut text = std::mem::take(&mut self.pending);
        if screen.hand_over(&mut text, &mut Self::sink(&mut self.line, out)) {
            self.line.mark_open();
        }
        self.line.write_str(&text, out);
        self.line.seek(col);
        (self.saved_row, self.line.saved) = saved;
        self.rebase(row, row);
        text.clear();
        self.pending = text;
    }

    /// Applies a two-byte escape without intermediates.
    pub(super) fn esc(&mut self, byte: u8, out: &mut String) {
        if byte == b'c' {
            return self.reset(out);
        }
        if let Some(screen) = &mut self.screen {
            return screen.esc(byte, &mut Self::sink(&mut self.line, out));
        }
        let row = self.row();
        match byte {
            b'7' => {
                self.saved_row = row;
                self.line.esc(byte);
            }
            b'8' if self.saved_row == row => self.line.esc(byte),
            b'8' | b'M' => {
                self.enter(out);
                self.esc(byte, out);
            }
            // Index: a new line, the cursor in the same column.
            b'D' => {
                let col = self.line.col;
                self.line.control(b'\n', out);
                self.line.seek(col);
            }
            b'E' => self.line.control(b'\n', out),
            _ => {}
        }
    }

    /// Applies a CSI sequence with no intermediates (`private` false) or with the private
    /// marker `?` only (`private` true).
    pub(super) fn csi(&mut self, params: &Params, private: bool, action: char, out: &mut String) {
        if private && matches!(action, 'h' | 'l') {
            for mode in params.iter().filter_map(|p| p.first().copied()) {
                if mode == AUTOWRAP_MODE {
                    self.autowrap = action == 'h';
                } else if ALT_SCREEN_MODES.contains(&mode) {
                    if action == 'h' {
                        self.enter_alt();
                    } else {
                        self.leave_alt(out);
                    }
                }
            }
            if let Some(screen) = &mut self.screen {
                screen.autowrap = self.autowrap;
            }
            return;
        }
        if private {
            return;
        }
        if action == 'J' && arg(params, 0) == 2 {
            return self.clear(out);
        }
        if let Some(screen) = &mut self.screen {
            return screen.csi(params, action, &mut Self::sink(&mut self.line, out));
        }
        let row = self.row();
        let to_row = || usize::from(arg(params, 0).max(1) - 1).min(self.rows - 1);
        let region = || {
            let bottom = match usize::from(arg(params, 1)) {
                0 => self.rows,
                b => b.min(self.rows),
            };
            (to_row(), bottom - 1)
        };
        let leaves_row = match action {
            'H' | 'f' | 'd' => to_row() != row,
            'A' | 'F' => row > 0,
            'B' | 'E' => row + 1 < self.rows,
            'L' | 'M' | 'S' | 'T' => true,
            // DECSTBM homes the cursor too.
            'r' => {
                let (top, bottom) = region();
                top < bottom && (row > 0 || top > 0 || bottom + 1 < self.rows)
            }
            'u' => self.saved_row != row,
            _ => false,
        };
        if leaves_row {
            self.enter(out);
            return self.csi(params, false, action, out);
        }
        match action {
            'J' if arg(params, 0) == 1 => {
                self.line.erase(1);
                self.rebase(row, 0);
            }
            'r' if region().0 < region().1 => self.line.seek(0),
            's' => {
                self.saved_row = row;
                self.line.csi(params, action);
            }
            _ => self.line.csi(params, action),
        }
    }

    /// The screen model takes over from the line model: the rows above the cursor hold text
    /// already written out (stale), the cursor's row holds the pending line.
    fn enter(&mut self, out: &mut String) {
        let (row, stale) = (self.row(), self.stale());
        let mut screen = Screen::new(self.cols, self.rows, self.autowrap);
        screen.mark_stale(row - stale..row);
        let col = self.line.col;
        if self.line.is_open() || self.line.chars > self.cols {
            // Too long for a row (a terminal would have wrapped it): it ends here, and its row
            // counts as written out.
            self.line.control(b'\n', out);
            screen.mark_stale(row..row + 1);
        } else {
            screen.load_row(row, &self.line.text);
            self.line.erase(2);
        }
        self.line.seek(0);
        screen.set_cursor(row, col);
        screen.set_saved(self.saved_row, self.line.saved);
        self.screen = Some(Box::new(screen));
    }

    /// Shows the alternate screen; the main screen (the line model's state, or the grid) is
    /// kept to come back to.
    fn enter_alt(&mut self) {
        match &mut self.screen {
            Some(screen) if screen.main.is_some() => {}
            Some(screen) => screen.enter_alt(),
            None => {
                let (row, stale) = (self.row(), self.stale());
                let mut screen = Screen::new(self.cols, self.rows, self.autowrap);
                screen.set_cursor(row, self.line.col);
                screen.main = Some(Main::Line { row, stale });
                self.screen = Some(Box::new(screen));
            }
        }
    }

    /// Leaves the alternate screen: its frame is written out and the main screen comes back.
    fn leave_alt(&mut self, out: &mut String) {
        if self.screen.as_ref().is_none_or(|s| s.main.is_none()) {
            return;
        }
        self.write_frame(out);
        if let Some(Main::Line { row, stale }) = self.screen.as_mut().and_then(|s| s.leave_alt()) {
            self.screen = None;
            self.rebase(row, stale);
        }
    }

    /// Clears the screen (ED 2): what it showed is written out as a frame. On the main screen
    /// with no scroll region, the line model takes over again, the cursor where it was.
    fn clear(&mut self, out: &mut String) {
        let Some(screen) = &mut self.screen else {
            let (row, col) = (self.row(), self.line.col);
            if self.line.is_open() {
                self.line.control(b'\n', out);
                self.line.seek(col);
            } else {
                self.write_frame(out);
            }
            return self.rebase(row, 0);
        };
        let back_to_line = screen.main.is_none() && screen.full_region();
        let ((row, col), saved) = (screen.cursor(), screen.saved());
        self.write_frame(out);
        match &mut self.screen {
            Some(_) if back_to_line => {
                self.screen = None;
                self.line.seek(col);
                (self.saved_row, self.line.saved) = saved;
                self.rebase(row, 0);
            }
            Some(screen) => screen.clear(),
            None => {}
        }
    }

    /// Full reset (RIS): back to the main screen with no scroll region, cleared, the cursor
    /// home.
    fn reset(&mut self, out: &mut String) {
        self.leave_alt(out);
        self.autowrap = true;
        if let Some(screen) = &mut self.screen {
            screen.reset_region();
        }
        self.clear(out);
        self.line.seek(0);
        self.rebase(0, 0);
    }

    /// Writes out what is shown (the screen's frame, or in line mode the pending line), then
    /// blanks it, unless it is the frame written out last with nothing after it.
    fn write_frame(&mut self, out: &mut String) {
        let (frame, continued) = match &mut self.screen {
            Some(screen) => {
                let frame = screen.frame(&mut Self::sink(&mut self.line, out));
                screen.clear();
                frame
            }
            None => {
                let text = self.line.text.trim_end_matches(' ');
                let frame = if text.is_empty() {
                    String::new()
                } else {
                    format!("{text}\n")
                };
                self.line.erase(2);
                (frame, false)
            }
        };
        let again = frame == self.last_frame && self.line.ended == self.frame_ended;
        if frame.is_empty() || (again && !continued) {
            return;
        }
        out.push_str(&frame);
        self.line.ended += count_newlines(&frame);
        // Kept to tell a redraw of it, but only what a screen can show: in line mode the
        // frame is a whole line, up to the line cap, and the screen model's memory stays
        // bounded by the screen. A longer line drawn again after a clear is written again.
        let fits = frame.len() <= self.rows * (self.cols * 4 + 1);
        self.last_frame = if fits { frame } else { String::new() };
        self.frame_ended = self.line.ended;
    }
}
