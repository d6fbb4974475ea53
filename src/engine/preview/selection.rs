//! What a preview shows, as data: the segments from each end, the partial lines and the
//! highlights chosen by `select` (and widened by `unfold`), which `render` lays out and the
//! notice describes. A file of its own so that choosing and opening folds share it without
//! importing each other.

use std::borrow::Cow;

use crate::engine::outline::Segment;

use super::partial::Partial;
use super::pick::Highlight;

/// What a preview shows: segments of the outline from the start and from the end, a partial
/// line when not one whole line fits at an end, and highlights from the part between.
///
/// The segments are the view's own, borrowed, but for the lines of a fold opened to fill the
/// room (see `unfold`): the budget's search makes a preview five to seven times over, and
/// copying each shown segment's lines each time was a third of the `malloc`s of a preview of a
/// long log.
#[derive(Debug, Default)]
pub(super) struct Selection<'a> {
    /// Segments shown from the start, in output order.
    pub(super) head: Vec<Cow<'a, Segment>>,
    /// Segments shown at the end, in output order.
    pub(super) tail: Vec<Cow<'a, Segment>>,
    /// The start of line 1 when not even it fits the head's budget (or, in a head, of the line
    /// after its whole lines); the end of the last line when not even it fits the tail's, or
    /// of the line before the tail's whole lines; with the line's start too where both fit.
    pub(super) head_partial: Option<Partial>,
    pub(super) tail_partial: Option<Partial>,
    /// Lines from the omitted part that look like errors, in output order.
    pub(super) highlights: Vec<Highlight>,
    /// The token budget, when one held the text (for the notice).
    pub(super) max_tokens: Option<usize>,
}

impl Selection<'_> {
    /// The last line the head covers (0: none).
    pub(super) fn head_end(&self) -> u64 {
        match (&self.head.last(), &self.head_partial) {
            (_, Some(p)) => p.info.line,
            (Some(seg), None) => seg.last_line(),
            (None, None) => 0,
        }
    }

    /// The first line the tail covers (`total + 1`: none).
    pub(super) fn tail_start(&self, total: u64) -> u64 {
        let start = self.tail.first().map_or(total + 1, |s| s.first);
        match &self.tail_partial {
            Some(p) => start.min(p.info.line),
            None => start,
        }
    }

    /// The partial line the JSON describes: the tail's, else the head's.
    pub(super) fn partial(&self) -> Option<&Partial> {
        self.tail_partial.as_ref().or(self.head_partial.as_ref())
    }

    /// Whether lines between the head and the tail are left out (not merely folded).
    pub(super) fn is_cut(&self, total: u64) -> bool {
        self.head_end() + 1 < self.tail_start(total)
    }

    pub(super) fn segments(&self) -> impl Iterator<Item = &Segment> {
        self.head.iter().chain(self.tail.iter()).map(|seg| &**seg)
    }

    /// The lines and bytes of output it shows (markers and notice aside).
    pub(super) fn shown_size(&self) -> (usize, usize) {
        let mut lines: u64 = self.segments().map(Segment::shown_lines).sum();
        let mut bytes: u64 = self.segments().map(Segment::shown_bytes).sum();
        for h in &self.highlights {
            lines += h.last - h.first + 1;
            bytes += h.text.len() as u64;
        }
        for p in [&self.head_partial, &self.tail_partial]
            .into_iter()
            .flatten()
        {
            lines += 1;
            bytes += p.shown_len() as u64;
        }
        (lines as usize, bytes as usize)
    }
}
