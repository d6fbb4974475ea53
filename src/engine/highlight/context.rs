//! What a candidate carries besides its own line: the frame just before it (an exception's
//! innermost `File "...", line N` and its source line) and the block after it (a panic's
//! frames, a compiler error's location and carets), taken as the lines stream by.

use super::{BEFORE_LINES, CONTEXT_BYTES, Candidate, Highlighter, MAX_HIGHLIGHT_BYTES};

impl Highlighter {
    /// The context before the candidate line that starts at byte `start` of `text`.
    pub(super) fn before_at(&self, text: &str, start: usize) -> Vec<String> {
        // Only an indented line before it can end a frame (its source line).
        if follows_indented(text, start) {
            self.before_context(&lines_before(text, start))
        } else if start == 0 && self.recent.back().is_some_and(|l| is_indented(l)) {
            self.before_context(&[])
        } else {
            Vec::new()
        }
    }

    /// Remembers the last lines of `lines` (in order) for the context of a later candidate.
    pub(super) fn remember<'a>(&mut self, lines: impl Iterator<Item = &'a str>) {
        for line in lines {
            if self.recent.len() == BEFORE_LINES {
                self.recent.pop_front();
            }
            self.recent
                .push_back(cut_at(line, MAX_HIGHLIGHT_BYTES).to_string());
        }
    }

    /// The context before a candidate: its innermost frame when the lines before it (`nearest`,
    /// in order, then the remembered ones before those) end with one.
    pub(super) fn before_context(&self, nearest: &[&str]) -> Vec<String> {
        let lines: Vec<&str> = self
            .recent
            .iter()
            .map(String::as_str)
            .chain(nearest.iter().copied())
            .collect();
        let lines = &lines[lines.len().saturating_sub(BEFORE_LINES)..];
        let Some(frame) = lines
            .iter()
            .rposition(|l| self.patterns.compiled().frame().is_match(l))
        else {
            return Vec::new();
        };
        // Only the frame's own lines: its source line and carets, indented.
        if !lines[frame + 1..]
            .iter()
            .all(|l| l.starts_with([' ', '\t']))
        {
            return Vec::new();
        }
        lines[frame..].iter().map(|l| l.to_string()).collect()
    }

    /// Offers the lines of `text` from byte `from` on as context of the last candidate.
    pub(super) fn take_following(&mut self, text: &str, mut from: usize) {
        while self.wants_after > 0 && from < text.len() {
            let Some(len) = memchr::memchr(b'\n', &text.as_bytes()[from..]) else {
                return;
            };
            self.take_after(&text[from..from + len], false);
            from += len + 1;
        }
    }

    /// The last candidate kept, which takes the context lines that follow it.
    pub(super) fn last_kept(&mut self) -> Option<&mut Candidate> {
        if self.last_in_recent {
            self.latest.back_mut()
        } else {
            self.kept.last_mut()
        }
    }

    /// Ends the last candidate's block: it takes no more lines, and a blank line it took in
    /// the hope that the block went on is given back.
    pub(super) fn end_block(&mut self) {
        self.wants_after = 0;
        if let Some(candidate) = self.last_kept() {
            while candidate.after.last().is_some_and(|l| l.trim().is_empty()) {
                candidate.after.pop();
            }
        }
    }

    /// Keeps `line` as context of the last candidate if it continues its block.
    pub(super) fn take_after(&mut self, line: &str, cut: bool) {
        if self.wants_after == 0 {
            return;
        }
        // One blank line may sit inside a block (a Go panic's, between its signal and its
        // goroutine); it is kept only if the block goes on after it.
        let blank = line.trim().is_empty();
        let continues = blank || self.patterns.compiled().continuation().is_match(line);
        let Some(candidate) = self.last_kept() else {
            self.wants_after = 0;
            return;
        };
        let bytes: usize = candidate.after.iter().map(String::len).sum();
        let after_blank = candidate.after.last().is_some_and(|l| l.trim().is_empty());
        let ends =
            cut || bytes + line.len() > CONTEXT_BYTES || (blank && after_blank) || !continues;
        if !ends {
            candidate.after.push(line.to_string());
            self.wants_after -= 1;
        }
        if ends || self.wants_after == 0 {
            self.end_block();
        }
    }
}

pub(super) fn is_indented(line: &str) -> bool {
    line.starts_with([' ', '\t'])
}

/// Whether the line before the one starting at `start` in `text` is indented.
pub(super) fn follows_indented(text: &str, start: usize) -> bool {
    if start == 0 {
        return false;
    }
    let prev_start = memchr::memrchr(b'\n', &text.as_bytes()[..start - 1]).map_or(0, |i| i + 1);
    is_indented(&text[prev_start..start - 1])
}

/// The lines of `text` before byte `end` (a line start), at most [`BEFORE_LINES`], in order.
pub(super) fn lines_before(text: &str, end: usize) -> Vec<&str> {
    let mut lines: Vec<&str> = text[..end]
        .strip_suffix('\n')
        .unwrap_or(&text[..end])
        .rsplit('\n')
        .take(BEFORE_LINES)
        .collect();
    if end == 0 {
        lines.clear();
    }
    lines.reverse();
    lines
}

/// `line` cut to at most `max` bytes, at a character boundary.
pub(super) fn cut_at(line: &str, max: usize) -> &str {
    let mut end = line.len().min(max);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}
