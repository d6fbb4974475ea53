//! The line model: the pending line and its cursor, which plain output is drawn on.

use vte::Params;

use super::utf8_width;

/// The pending line and its cursor.
///
/// Invariants: `chars` counts the chars of `text`; `at` is the byte offset of column
/// `min(col, chars)`; `text.len() <= cap` between operations; if `ascii`, `text` is ASCII (the
/// flag may be false for an ASCII text). Columns count chars. When the line would grow past
/// `cap`, its longest prefix of at most `cap` bytes is committed to the output and frozen: the
/// end of the frozen part becomes column 0.
pub(super) struct Line {
    pub(super) text: String,
    pub(super) chars: usize,
    pub(super) col: usize,
    at: usize,
    ascii: bool,
    pub(super) saved: usize,
    cap: usize,
    /// `ended` when text was last committed without a line end: the output is inside the
    /// line while `ended` still has that value.
    committed_at: Option<u64>,
    /// Lines ended in the output so far: by a `\n` here, or passed by the fast path (or, in
    /// raw mode, copied) without this line's help.
    pub(super) ended: u64,
}

impl Line {
    pub(super) fn new(cap: usize) -> Self {
        Line {
            text: String::new(),
            chars: 0,
            col: 0,
            at: 0,
            ascii: true,
            saved: 0,
            cap,
            committed_at: None,
            ended: 0,
        }
    }

    /// Empty with the cursor at column 0: a whole line can bypass the buffer.
    pub(super) fn is_pristine(&self) -> bool {
        self.text.is_empty() && self.col == 0
    }

    /// Applies a C0 or C1 control (by code); all but LF, CR, BS and TAB are dropped.
    pub(super) fn control(&mut self, byte: u8, out: &mut String) {
        match byte {
            b'\n' => {
                self.flush(out);
                out.push('\n');
                self.ended += 1;
            }
            b'\r' => self.seek(0),
            0x08 => self.seek(self.col.saturating_sub(1)),
            b'\t' => self.put('\t', out),
            _ => {}
        }
    }

    /// Applies a CSI sequence without intermediates or private markers.
    pub(super) fn csi(&mut self, params: &Params, action: char) {
        let arg = |i: usize| arg(params, i);
        let count = || usize::from(arg(0).max(1));
        match action {
            'K' => self.erase(arg(0)),
            'J' if arg(0) == 0 => self.erase(0),
            'G' => self.seek(count() - 1),
            'C' => self.seek(self.col.saturating_add(count())),
            'D' => self.seek(self.col.saturating_sub(count())),
            'E' | 'F' => self.seek(0),
            'H' | 'f' => self.seek(usize::from(arg(1).max(1)) - 1),
            's' => self.saved = self.col,
            'u' => self.seek(self.saved),
            _ => {}
        }
    }

    /// Applies a two-byte escape without intermediates: only save/restore cursor matter.
    pub(super) fn esc(&mut self, byte: u8) {
        match byte {
            b'7' => self.saved = self.col,
            b'8' => self.seek(self.saved),
            _ => {}
        }
    }

    /// Erase in line: 0 from the cursor to the end, 1 from the start to the cursor, 2 all.
    pub(super) fn erase(&mut self, mode: u16) {
        match mode {
            0 if self.col < self.chars => {
                self.text.truncate(self.at);
                self.chars = self.col;
            }
            1 => {
                let (cells, end) = if self.col < self.chars {
                    (self.col + 1, self.at + char_len_at(&self.text, self.at))
                } else {
                    (self.chars, self.text.len())
                };
                self.text.replace_range(..end, &" ".repeat(cells));
                self.at = if self.col < self.chars {
                    self.col
                } else {
                    self.text.len()
                };
            }
            2 => {
                self.text.clear();
                self.chars = 0;
                self.at = 0;
                self.ascii = true;
            }
            _ => {}
        }
    }

    /// Moves the cursor to column `col` (past the end is allowed).
    pub(super) fn seek(&mut self, col: usize) {
        let from = self.col.min(self.chars);
        let to = col.min(self.chars);
        self.at = if self.ascii || to == 0 {
            to
        } else if to == self.chars {
            self.text.len()
        } else if to >= from {
            self.offset_after(to - from)
        } else {
            let head = &self.text[..self.at];
            head.char_indices()
                .rev()
                .nth(from - to - 1)
                .map_or(0, |(i, _)| i)
        };
        self.col = col;
    }

    /// Writes one char at the cursor.
    pub(super) fn put(&mut self, c: char, out: &mut String) {
        let mut buf = [0; 4];
        let c = c.encode_utf8(&mut buf);
        if self.col < self.chars {
            let old = char_len_at(&self.text, self.at);
            self.text.replace_range(self.at..self.at + old, c);
            self.ascii &= c.is_ascii();
            self.col += 1;
            self.at += c.len();
            self.spill(out);
        } else {
            self.append(c, out);
        }
    }

    /// Writes a run of chars at the cursor: the same as writing them one by one.
    pub(super) fn write_str(&mut self, s: &str, out: &mut String) {
        if self.col >= self.chars {
            self.append(s, out);
        } else if self.text.len() + s.len() > self.cap {
            // The line may reach the cap midway: char by char, so that it spills where it would.
            for c in s.chars() {
                self.put(c, out);
            }
        } else {
            // Overwrite up to the end of the text, then append the rest.
            let cells = self.chars - self.col;
            let (head, n) = if s.is_ascii() {
                // A char a byte: what a redrawn progress line nearly always is.
                let n = cells.min(s.len());
                (&s[..n], n)
            } else {
                match s.char_indices().nth(cells) {
                    Some((i, _)) => (&s[..i], cells),
                    None => (s, s.chars().count()),
                }
            };
            let end = self.offset_after(n);
            if end == self.text.len() {
                // The rest of the line overwritten (a redraw as long as the line or longer):
                // a copy, where a replaced range is refilled a byte at a time.
                self.text.truncate(self.at);
                self.text.push_str(head);
            } else if end - self.at == head.len() {
                // As long as what it overwrites (a redraw in ASCII of a line in ASCII, nearly
                // always): copied over it in place.
                // SAFETY: `at..end` starts and ends at char boundaries and `head` (UTF-8) is
                // as long, so the text stays UTF-8.
                unsafe { self.text.as_bytes_mut()[self.at..end].copy_from_slice(head.as_bytes()) };
            } else {
                self.text.replace_range(self.at..end, head);
            }
            self.ascii &= head.is_ascii();
            self.col += n;
            self.at += head.len();
            if head.len() < s.len() {
                self.append(&s[head.len()..], out);
            }
        }
    }

    /// Byte offset `n` chars after the cursor's (the end of the text at most).
    fn offset_after(&self, n: usize) -> usize {
        if self.ascii {
            return (self.at + n).min(self.text.len());
        }
        let rest = &self.text[self.at..];
        self.at + rest.char_indices().nth(n).map_or(rest.len(), |(i, _)| i)
    }

    /// Appends `s` with the cursor at or past the end, padding the gap with spaces.
    fn append(&mut self, mut s: &str, out: &mut String) {
        self.pad(out);
        loop {
            let room = self.cap - self.text.len();
            if s.len() <= room {
                self.push(s);
                return;
            }
            let (head, tail) = s.split_at(floor_char_boundary(s, room));
            self.push(head);
            self.commit(out);
            s = tail;
        }
    }

    /// Fills the gap between the end of the text and the cursor with spaces.
    fn pad(&mut self, out: &mut String) {
        while self.chars < self.col {
            let room = self.cap - self.text.len();
            if room == 0 {
                self.commit(out);
                continue;
            }
            let n = (self.col - self.chars).min(room);
            self.text.extend(std::iter::repeat_n(' ', n));
            self.chars += n;
        }
        self.at = self.text.len();
    }

    /// Pushes `s` at the end (the cursor is at the end); the caller keeps the cap.
    fn push(&mut self, s: &str) {
        let n = if s.is_ascii() {
            s.len()
        } else {
            self.ascii = false;
            s.chars().count()
        };
        self.text.push_str(s);
        self.chars += n;
        self.col = self.chars;
        self.at = self.text.len();
    }

    /// Commits (freezes) the whole text; the line goes on from its end.
    fn commit(&mut self, out: &mut String) {
        out.push_str(&self.text);
        self.committed_at = Some(self.ended);
        self.col -= self.chars.min(self.col);
        self.text.clear();
        self.chars = 0;
        self.at = 0;
        self.ascii = true;
    }

    /// Commits the longest prefix of at most `cap` bytes while the text is over the cap.
    fn spill(&mut self, out: &mut String) {
        while self.text.len() > self.cap {
            let cut = floor_char_boundary(&self.text, self.cap);
            let frozen = &self.text[..cut];
            let n = frozen.chars().count();
            out.push_str(frozen);
            self.committed_at = Some(self.ended);
            self.text.drain(..cut);
            self.chars -= n;
            if self.col >= n {
                self.col -= n;
                self.at -= cut;
            } else {
                self.col = 0;
                self.at = 0;
            }
        }
    }

    /// Takes the output as being inside this line (the screen left it open).
    pub(super) fn mark_open(&mut self) {
        self.committed_at = Some(self.ended);
    }

    /// Whether part of this line is already in the output (committed at the cap).
    pub(super) fn is_open(&self) -> bool {
        self.committed_at == Some(self.ended)
    }

    /// Commits the text (the line ends here or the stream does); the cursor returns to 0.
    pub(super) fn flush(&mut self, out: &mut String) {
        out.push_str(&self.text);
        self.text.clear();
        self.chars = 0;
        self.col = 0;
        self.at = 0;
        self.ascii = true;
    }
}

/// CSI parameter `i`, 0 when absent (which also means "default").
pub(super) fn arg(params: &Params, i: usize) -> u16 {
    params
        .iter()
        .nth(i)
        .and_then(|p| p.first().copied())
        .unwrap_or(0)
}

/// Length of the char starting at byte `at` of `s` (0 at the end).
fn char_len_at(s: &str, at: usize) -> usize {
    s.as_bytes().get(at).map_or(0, |&b| utf8_width(b))
}

/// The largest char boundary of `s` not above `i`.
pub(super) fn floor_char_boundary(s: &str, i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    (0..=i).rev().find(|&j| s.is_char_boundary(j)).unwrap_or(0)
}
