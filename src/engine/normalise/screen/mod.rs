//! The screen model: a grid of the terminal's size, for output drawn with cursor addressing.
//!
//! A grid of `rows` x `cols` cells (one char each, a space when blank) with a cursor, a scroll
//! region, a saved cursor and autowrap, as a VT100-style terminal has; memory is the grid's
//! (twice, while the alternate screen keeps the main one), whatever is printed. What it writes
//! to the output (see the module docs of `normalise` for when):
//! - a row that scrolls off the top of the scroll region (a line feed at its bottom, `ESC D`,
//!   `CSI S`), as it goes, like a terminal's scrollback;
//! - a *frame*: the rows that hold text, top to bottom, each trimmed of trailing spaces, with
//!   leading and trailing blank rows left out ([`Screen::frame`]; the caller writes it out).
//!
//! A row is *stale* when it holds text that is already in the output but not in the grid: the
//! rows above the cursor when the screen takes over from the line model. A stale row is never
//! written out again; once something is drawn on it, it holds that (blank elsewhere) and is
//! written out like any other row. A row that autowrap continued on the next one is joined to
//! it when written out, as a terminal's copy would, so a long line stays one line.

use std::ops::Range;

use vte::Params;

use super::line::arg;

mod edit;

/// Columns between tab stops.
const TAB: usize = 8;

/// Where the screen's text goes: the output and the count of lines ended in it.
pub(super) struct Sink<'a> {
    pub(super) out: &'a mut String,
    pub(super) ended: &'a mut u64,
}

impl Sink<'_> {
    fn end_line(&mut self) {
        self.out.push('\n');
        *self.ended += 1;
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct RowState {
    /// Holds text already in the output that the grid does not have.
    stale: bool,
    /// Autowrap went on from the end of this row to the next.
    wrapped: bool,
    /// The cells past this many are blank.
    len: usize,
}

/// One screen: its cells, the cursor, the scroll region and the saved cursor.
///
/// Rows are stored in any order: `order` maps a row of the screen to its place in `cells` and
/// `state`, so scrolling moves `rows` indices, not `rows x cols` cells.
pub(super) struct Grid {
    cols: usize,
    cells: Vec<char>,
    state: Vec<RowState>,
    order: Vec<usize>,
    row: usize,
    col: usize,
    /// The last column was just written: the next char wraps first (when autowrap is on).
    wrap_next: bool,
    /// The scroll region, `top..=bottom`.
    top: usize,
    bottom: usize,
    saved: (usize, usize),
}

impl Grid {
    fn new(cols: usize, rows: usize) -> Grid {
        Grid {
            cols,
            cells: vec![' '; cols * rows],
            state: vec![RowState::default(); rows],
            order: (0..rows).collect(),
            row: 0,
            col: 0,
            wrap_next: false,
            top: 0,
            bottom: rows - 1,
            saved: (0, 0),
        }
    }

    fn state(&self, row: usize) -> RowState {
        self.state[self.order[row]]
    }

    fn state_mut(&mut self, row: usize) -> &mut RowState {
        &mut self.state[self.order[row]]
    }

    /// The cells of `row` that may hold text.
    fn text(&self, row: usize) -> &[char] {
        let at = self.order[row];
        &self.cells[at * self.cols..][..self.state[at].len]
    }

    fn cells_mut(&mut self, row: usize) -> &mut [char] {
        let at = self.order[row];
        &mut self.cells[at * self.cols..][..self.cols]
    }

    /// Blanks `rows` (no longer stale or wrapped).
    fn blank_rows(&mut self, rows: Range<usize>) {
        for row in rows {
            let len = self.state(row).len;
            self.cells_mut(row)[..len].fill(' ');
            *self.state_mut(row) = RowState::default();
        }
    }
}

/// What the main screen is while the alternate screen is shown.
pub(super) enum Main {
    /// The line model (kept by the caller), the cursor on `row`, below `stale` rows of text
    /// already written out.
    Line { row: usize, stale: usize },
    /// A grid of its own.
    Grid(Box<Grid>),
}

/// The screen model: the grid shown, and the main screen while the alternate one is.
pub(super) struct Screen {
    cols: usize,
    rows: usize,
    grid: Grid,
    /// `Some` while the alternate screen is shown.
    pub(super) main: Option<Main>,
    pub(super) autowrap: bool,
    /// A wrapped row has scrolled off: the output is inside its line.
    open: bool,
    /// See [`Screen::is_line_like`].
    fed: usize,
}

impl Screen {
    /// A blank screen of `cols` x `rows` (each at least 1).
    pub(super) fn new(cols: usize, rows: usize, autowrap: bool) -> Screen {
        Screen {
            cols,
            rows,
            grid: Grid::new(cols, rows),
            main: None,
            autowrap,
            open: false,
            fed: 0,
        }
    }

    pub(super) fn cursor(&self) -> (usize, usize) {
        (self.grid.row, self.grid.col)
    }

    pub(super) fn saved(&self) -> (usize, usize) {
        self.grid.saved
    }

    /// Puts the cursor at (`row`, `col`), clamped to the screen.
    pub(super) fn set_cursor(&mut self, row: usize, col: usize) {
        let g = &mut self.grid;
        g.row = row.min(self.rows - 1);
        g.col = col.min(self.cols - 1);
        g.wrap_next = false;
    }

    pub(super) fn set_saved(&mut self, row: usize, col: usize) {
        self.grid.saved = (row.min(self.rows - 1), col.min(self.cols - 1));
    }

    /// Whether the scroll region is the whole screen.
    pub(super) fn full_region(&self) -> bool {
        self.grid.top == 0 && self.grid.bottom == self.rows - 1
    }

    /// Marks `rows` as holding text already written out.
    pub(super) fn mark_stale(&mut self, rows: Range<usize>) {
        for row in rows {
            self.grid.state_mut(row).stale = true;
        }
    }

    /// Writes `text` (at most `cols` chars are kept) at the start of `row`.
    pub(super) fn load_row(&mut self, row: usize, text: &str) {
        let mut len = 0;
        for (cell, c) in self.grid.cells_mut(row).iter_mut().zip(text.chars()) {
            *cell = c;
            len += 1;
        }
        self.grid.state_mut(row).len = len;
    }

    /// Rows scrolled off by line feeds since the program last moved the cursor off its row or
    /// changed the screen otherwise: once a whole screen has, every row shown was written line
    /// after line, and the line model can take over again ([`Screen::is_line_like`]).
    pub(super) fn is_line_like(&self) -> bool {
        self.main.is_none()
            && self.full_region()
            && self.fed >= self.rows
            && self.grid.row + 1 == self.rows
    }

    /// Hands over to the line model: the rows above the cursor are written out as if they
    /// scrolled off, and the cursor's row (its text as `row`, trailing blanks left out) is
    /// left for the line. Returns whether the output is inside a line a wrapped row left open.
    pub(super) fn hand_over(&mut self, row: &mut String, sink: &mut Sink) -> bool {
        for above in 0..self.grid.row {
            self.scrolled_off(above, sink);
        }
        row.clear();
        if !self.grid.state(self.grid.row).stale {
            row.extend(self.grid.text(self.grid.row));
            row.truncate(row.trim_end_matches(' ').len());
        }
        self.open
    }

    /// Memory held by the grids, in bytes (for tests of the bound).
    #[cfg(test)]
    pub(super) fn held_bytes(&self) -> usize {
        let grid = |g: &Grid| {
            g.cells.capacity() * size_of::<char>()
                + g.state.capacity() * size_of::<RowState>()
                + g.order.capacity() * size_of::<usize>()
        };
        grid(&self.grid)
            + match &self.main {
                Some(Main::Grid(main)) => grid(main),
                _ => 0,
            }
    }

    /// Shows the alternate screen (blank, the cursor where it was); this grid comes back when
    /// it is left.
    pub(super) fn enter_alt(&mut self) {
        let mut alt = Grid::new(self.cols, self.rows);
        (alt.row, alt.col) = self.cursor();
        let main = std::mem::replace(&mut self.grid, alt);
        self.main = Some(Main::Grid(Box::new(main)));
    }

    /// Takes the main screen back from the alternate one: `Some(Main::Line { .. })` when the
    /// line model is to take over again, else `None` (the grid is back, or there was no
    /// alternate screen).
    pub(super) fn leave_alt(&mut self) -> Option<Main> {
        match self.main.take()? {
            Main::Grid(main) => {
                self.grid = *main;
                self.fed = 0;
                None
            }
            line => Some(line),
        }
    }

    /// Blanks the whole grid (the cursor stays).
    pub(super) fn clear(&mut self) {
        self.grid.blank_rows(0..self.rows);
        self.grid.wrap_next = false;
    }

    /// The rows that hold text, as lines (see the module docs), and whether the first goes on
    /// with the output's open line: a wrapped row that scrolled off is continued by the top
    /// row (when the region starts at the top and that row holds text); otherwise that line is
    /// ended first.
    pub(super) fn frame(&mut self, sink: &mut Sink) -> (String, bool) {
        let continued = self.open && self.grid.top == 0 && !self.grid.state(0).stale;
        if !continued {
            self.close(sink);
        }
        self.open = false;
        let mut frame = String::new();
        let mut line = String::new();
        for row in 0..self.rows {
            let state = self.grid.state(row);
            if state.stale {
                continue;
            }
            line.extend(self.grid.text(row));
            if state.wrapped && row + 1 < self.rows && !self.grid.state(row + 1).stale {
                continue;
            }
            frame.push_str(line.trim_end_matches(' '));
            frame.push('\n');
            line.clear();
        }
        let text = frame.trim_end_matches('\n');
        let text = if continued {
            text
        } else {
            text.trim_start_matches('\n')
        };
        if text.is_empty() && !continued {
            (String::new(), false)
        } else {
            (format!("{text}\n"), continued)
        }
    }

    /// The cursor's row as it looks now, trailing spaces left out.
    pub(super) fn cursor_row(&self, into: &mut String) {
        into.clear();
        into.extend(self.grid.text(self.grid.row));
        let len = into.trim_end_matches(' ').len();
        into.truncate(len);
    }

    /// Ends the output's open line, if a wrapped row left one.
    fn close(&mut self, sink: &mut Sink) {
        if std::mem::take(&mut self.open) {
            sink.end_line();
        }
    }

    /// Writes out a row leaving the screen at the top of the scroll region.
    fn scrolled_off(&mut self, row: usize, sink: &mut Sink) {
        let state = self.grid.state(row);
        if state.stale {
            self.close(sink);
            return;
        }
        let start = sink.out.len();
        sink.out.extend(self.grid.text(row));
        if state.wrapped {
            self.open = true;
            return;
        }
        let len = sink.out[start..].trim_end_matches(' ').len();
        sink.out.truncate(start + len);
        self.open = false;
        sink.end_line();
    }

    /// Prints a char at the cursor.
    pub(super) fn print(&mut self, c: char, sink: &mut Sink) {
        if c == '\t' {
            // The fast path passes tabs as text; vte executes them.
            return self.control(b'\t', sink);
        }
        if self.grid.wrap_next {
            self.grid.wrap_next = false;
            if self.autowrap {
                self.grid.state_mut(self.grid.row).wrapped = true;
                self.grid.col = 0;
                self.index(sink);
            }
        }
        let g = &mut self.grid;
        let (row, col) = (g.row, g.col);
        g.cells_mut(row)[col] = c;
        let state = g.state_mut(row);
        state.stale = false;
        state.len = state.len.max(col + 1);
        if g.col + 1 < self.cols {
            g.col += 1;
        } else {
            g.wrap_next = true;
        }
    }

    /// Prints a run of chars.
    pub(super) fn write_str(&mut self, s: &str, sink: &mut Sink) {
        for c in s.chars() {
            self.print(c, sink);
        }
    }

    /// Applies a C0 or C1 control: `\n` (as a new line, as the line model has it), `\r`,
    /// backspace and tab; the others are dropped.
    pub(super) fn control(&mut self, byte: u8, sink: &mut Sink) {
        match byte {
            b'\n' => {
                self.grid.col = 0;
                self.index(sink);
            }
            b'\r' => self.set_col(0),
            0x08 => self.set_col(self.grid.col.saturating_sub(1)),
            b'\t' if !self.grid.wrap_next => self.set_col((self.grid.col / TAB + 1) * TAB),
            _ => {}
        }
    }

    /// Applies a two-byte escape without intermediates.
    pub(super) fn esc(&mut self, byte: u8, sink: &mut Sink) {
        if matches!(byte, b'8' | b'M') {
            self.fed = 0;
        }
        match byte {
            b'7' => self.grid.saved = self.cursor(),
            b'8' => {
                let (row, col) = self.grid.saved;
                self.set_cursor(row, col);
            }
            b'D' => self.index(sink),
            b'E' => {
                self.grid.col = 0;
                self.index(sink);
            }
            b'M' => self.reverse_index(),
            _ => {}
        }
    }

    /// Applies a CSI sequence without intermediates (clearing the whole screen is the
    /// caller's).
    pub(super) fn csi(&mut self, params: &Params, action: char, sink: &mut Sink) {
        let arg = |i: usize| usize::from(arg(params, i));
        let n = arg(0).max(1);
        // What draws elsewhere than line after line. (Not colours, which the fast path skips:
        // the same input must count alike however it is chunked.)
        if matches!(
            action,
            'A' | 'B' | 'E' | 'F' | 'H' | 'f' | 'd' | 'r' | 'u' | 'J' | 'L' | 'M' | 'S' | 'T'
        ) {
            self.fed = 0;
        }
        let (row, col) = self.cursor();
        let g = &self.grid;
        match action {
            'A' | 'F' => {
                let limit = if row >= g.top { g.top } else { 0 };
                let col = if action == 'F' { 0 } else { col };
                self.set_cursor(row.saturating_sub(n).max(limit), col);
            }
            'B' | 'E' => {
                let limit = if row <= g.bottom {
                    g.bottom
                } else {
                    self.rows - 1
                };
                let col = if action == 'E' { 0 } else { col };
                self.set_cursor((row + n).min(limit), col);
            }
            'C' => self.set_col(col + n),
            'D' => self.set_col(col.saturating_sub(n)),
            'G' | '`' => self.set_col(n - 1),
            'H' | 'f' => self.set_cursor(n - 1, arg(1).max(1) - 1),
            'd' => self.set_cursor(n - 1, col),
            'J' => self.erase_display(arg(0)),
            'K' => self.erase_line(arg(0)),
            'L' => self.insert_rows(n),
            'M' => self.delete_rows(n),
            '@' => self.insert_cells(n),
            'P' => self.delete_cells(n),
            'X' => self.blank(row, col..(col + n).min(self.cols)),
            'S' => self.scroll_up(n, sink),
            'T' => self.scroll_down(n),
            'r' => {
                let top = arg(0).max(1) - 1;
                let bottom = match arg(1) {
                    0 => self.rows,
                    b => b.min(self.rows),
                } - 1;
                if top < bottom {
                    (self.grid.top, self.grid.bottom) = (top, bottom);
                    self.set_cursor(0, 0);
                }
            }
            's' => self.grid.saved = (row, col),
            'u' => {
                let (row, col) = self.grid.saved;
                self.set_cursor(row, col);
            }
            _ => {}
        }
    }

    /// Resets the scroll region to the whole screen (the cursor stays).
    pub(super) fn reset_region(&mut self) {
        (self.grid.top, self.grid.bottom) = (0, self.rows - 1);
    }

    fn set_col(&mut self, col: usize) {
        self.grid.col = col.min(self.cols - 1);
        self.grid.wrap_next = false;
    }
}
