//! The screen's edits of its grid: line feeds and reverse line feeds, scrolling the region,
//! inserting and deleting rows and cells, and erasing.

use std::ops::Range;

use super::{Screen, Sink};

impl Screen {
    /// Line feed without carriage return: down a row, scrolling at the region's bottom.
    pub(super) fn index(&mut self, sink: &mut Sink) {
        self.grid.wrap_next = false;
        if self.grid.row == self.grid.bottom {
            self.fed += 1;
            self.scroll_up(1, sink);
        } else if self.grid.row + 1 < self.rows {
            self.grid.row += 1;
        }
    }

    /// Up a row, scrolling the region down at its top.
    pub(super) fn reverse_index(&mut self) {
        self.grid.wrap_next = false;
        if self.grid.row == self.grid.top {
            self.scroll_down(1);
        } else {
            self.grid.row = self.grid.row.saturating_sub(1);
        }
    }

    /// Scrolls the region up `n` rows; the rows leaving it at its top are written out.
    pub(super) fn scroll_up(&mut self, n: usize, sink: &mut Sink) {
        let (top, bottom) = (self.grid.top, self.grid.bottom);
        let n = n.min(bottom + 1 - top);
        for row in top..top + n {
            self.scrolled_off(row, sink);
        }
        self.grid.order[top..=bottom].rotate_left(n);
        self.grid.blank_rows(bottom + 1 - n..bottom + 1);
    }

    /// Scrolls the region down `n` rows; rows pushed past its bottom are dropped.
    pub(super) fn scroll_down(&mut self, n: usize) {
        let (top, bottom) = (self.grid.top, self.grid.bottom);
        let n = n.min(bottom + 1 - top);
        self.grid.order[top..=bottom].rotate_right(n);
        self.grid.blank_rows(top..top + n);
    }

    /// Inserts `n` blank rows at the cursor's (inside the region), pushing the rest down.
    pub(super) fn insert_rows(&mut self, n: usize) {
        let (row, bottom) = (self.grid.row, self.grid.bottom);
        if row < self.grid.top || row > bottom {
            return;
        }
        let n = n.min(bottom + 1 - row);
        self.grid.order[row..=bottom].rotate_right(n);
        self.grid.blank_rows(row..row + n);
        self.set_col(0);
    }

    /// Deletes `n` rows at the cursor's (inside the region), pulling the rest up.
    pub(super) fn delete_rows(&mut self, n: usize) {
        let (row, bottom) = (self.grid.row, self.grid.bottom);
        if row < self.grid.top || row > bottom {
            return;
        }
        let n = n.min(bottom + 1 - row);
        self.grid.order[row..=bottom].rotate_left(n);
        self.grid.blank_rows(bottom + 1 - n..bottom + 1);
        self.set_col(0);
    }

    /// Blanks `cols` of `row`; a row blanked to its end no longer wraps, and one blanked whole
    /// is no longer stale.
    pub(super) fn blank(&mut self, row: usize, cols: Range<usize>) {
        let g = &mut self.grid;
        let len = g.state(row).len;
        let end = cols.end.min(len);
        if cols.start < end {
            g.cells_mut(row)[cols.start..end].fill(' ');
        }
        if cols.end == self.cols {
            let state = g.state_mut(row);
            state.wrapped = false;
            state.len = len.min(cols.start);
            if cols.start == 0 {
                state.stale = false;
            }
        }
        g.wrap_next = false;
    }

    /// Erase in display: 0 from the cursor to the end, 1 from the start to the cursor, 2 all.
    pub(super) fn erase_display(&mut self, mode: usize) {
        let (row, col) = self.cursor();
        match mode {
            0 => {
                self.blank(row, col..self.cols);
                self.grid.blank_rows(row + 1..self.rows);
            }
            1 => {
                self.grid.blank_rows(0..row);
                self.blank(row, 0..col + 1);
            }
            2 => self.clear(),
            _ => {}
        }
    }

    /// Erase in line: 0 from the cursor to the end, 1 from the start to the cursor, 2 all.
    pub(super) fn erase_line(&mut self, mode: usize) {
        let (row, col) = self.cursor();
        match mode {
            0 => self.blank(row, col..self.cols),
            1 => self.blank(row, 0..col + 1),
            2 => self.blank(row, 0..self.cols),
            _ => {}
        }
    }

    /// Inserts `n` blank cells at the cursor, pushing the rest of the row right.
    pub(super) fn insert_cells(&mut self, n: usize) {
        let (row, col) = self.cursor();
        let n = n.min(self.cols - col);
        let cols = self.cols;
        let cells = self.grid.cells_mut(row);
        cells.copy_within(col..cols - n, col + n);
        cells[col..col + n].fill(' ');
        let state = self.grid.state_mut(row);
        if col < state.len {
            state.len = (state.len + n).min(cols);
        }
        self.grid.wrap_next = false;
    }

    /// Deletes `n` cells at the cursor, pulling the rest of the row left.
    pub(super) fn delete_cells(&mut self, n: usize) {
        let (row, col) = self.cursor();
        let n = n.min(self.cols - col);
        let cols = self.cols;
        let cells = self.grid.cells_mut(row);
        cells.copy_within(col + n.., col);
        cells[cols - n..].fill(' ');
        let state = self.grid.state_mut(row);
        if col < state.len {
            state.len = state.len.saturating_sub(n).max(col);
        }
        self.grid.wrap_next = false;
    }
}
