//! Templates of an output's lines, learnt online: which lines are the same words in the same
//! order, differing only in variable fields (numbers, hashes, paths, quoted strings), so that a
//! preview can show one of them and fold the rest into a marker that says how many there are,
//! what they look like and where they are.
//!
//! The learner is of the Drain family of log parsers: one pass, each line compared only with
//! the templates in its leaf of a shallow index (its number of words and its first word, or a
//! wildcard when that word is a variable field), joining the most similar one when at least
//! [`SIMILARITY`] of its words agree with it, else starting a template of its own. Words are
//! classed by their shape alone ([`token`]), never by the command that printed them.
//!
//! Memory is bounded by [`Limits`]: a cap on templates and on the bytes they hold (their words
//! and a bounded list of line ranges each). A template about to exceed a cap first evicts the
//! oldest template that has only one line (it folds nothing, so nothing a preview could fold is
//! lost, and its line stays a line of its own); when every template has two lines or more, the
//! learner is full and a line that joins none of them gets no template. Lines longer than
//! [`MAX_LINE_BYTES`] or [`MAX_WORDS`], and lines without a fixed word, get none either. A line
//! without a template is never folded.
//!
//! [`plan_folds`] turns the learnt templates into folds (data, not text) under the rules of
//! what may never fold; [`fold_text`] writes a fold's marker.

mod fold;
mod pattern;
mod ranges;
mod render;
pub mod shape;
mod token;

#[cfg(test)]
mod properties;

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};

use rustc_hash::{FxHashMap, FxHasher};

pub use fold::{Fold, FoldGroup, LineTemplate, MAX_GROUPS, MIN_FOLDED, plan_folds};
pub use pattern::{Template, WILDCARD};
pub use ranges::{LineRanges, MAX_RANGES};
pub use render::{fold_text, long_line};

use token::Piece;

/// Share of a line's words that must agree with a template for the line to join it. Below
/// this two lines are kept apart: `test a ... ok` and `test b ... FAILED` agree in half their
/// words and stay two templates.
pub const SIMILARITY: f64 = 0.6;
/// Longest line the learner takes, in bytes.
pub const MAX_LINE_BYTES: usize = 2048;
/// Most words of a line the learner takes.
pub const MAX_WORDS: usize = 128;
/// Most templates of a leaf a line is compared with, most recently joined first: keeps the
/// cost of a line bounded when one leaf holds many templates.
pub const MAX_CANDIDATES: usize = 16;

/// A template's identity. Never reused, so the id of an evicted template names nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TemplateId(u64);

/// The learner's caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most templates held at once.
    pub max_templates: usize,
    /// Most bytes the templates hold at once (see [`Learner::held_bytes`]).
    pub max_bytes: usize,
}

impl Default for Limits {
    /// 512 templates and 256 KiB: more kinds of line than a preview's budget can show, in a
    /// small share of what a capture already holds (its head and tail, 100 KiB by default).
    fn default() -> Self {
        Limits {
            max_templates: 512,
            max_bytes: 256 << 10,
        }
    }
}

/// Learns the templates of an output's lines, one line at a time.
#[derive(Debug, Default)]
pub struct Learner {
    limits: Limits,
    templates: FxHashMap<TemplateId, Template>,
    /// Leaf key -> its templates, most recently joined first.
    leaves: FxHashMap<u64, Vec<TemplateId>>,
    /// Templates that had one line when made, oldest first: who is evicted at a cap (an entry
    /// whose template has since grown or gone is skipped).
    singles: VecDeque<TemplateId>,
    next_id: u64,
    lines: u64,
    held: usize,
    /// The pieces of the line being learnt (kept to reuse its allocation).
    pieces: Vec<Piece<'static>>,
}

impl Learner {
    /// A learner within `limits`.
    pub fn new(limits: Limits) -> Learner {
        Learner {
            limits,
            ..Learner::default()
        }
    }

    /// Learns the next line (line numbers count from 1, one per call; `line` without its line
    /// end) and returns the template it joined or started, or `None` when it has none (see the
    /// module's documentation).
    pub fn learn(&mut self, line: &str) -> Option<TemplateId> {
        self.lines += 1;
        if line.len() > MAX_LINE_BYTES {
            return None;
        }
        let mut pieces = std::mem::take(&mut self.pieces)
            .into_iter()
            .map(|_| Piece::Var)
            .collect::<Vec<Piece<'_>>>();
        let id = if token::split(line, MAX_WORDS, &mut pieces) && pieces.iter().any(Piece::is_word)
        {
            self.place(&pieces)
        } else {
            None
        };
        pieces.clear();
        // The buffer goes back empty, so no borrow of `line` outlives the call.
        self.pieces = pieces.into_iter().map(|_| Piece::Var).collect();
        id
    }

    /// How many lines it has been given.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// The template `id`, unless it was evicted.
    pub fn template(&self, id: TemplateId) -> Option<&Template> {
        self.templates.get(&id)
    }

    /// Every template held, in no order.
    pub fn templates(&self) -> impl Iterator<Item = (TemplateId, &Template)> {
        self.templates.iter().map(|(id, template)| (*id, template))
    }

    /// Bytes the templates hold, as counted against [`Limits::max_bytes`]: each template's
    /// words, its bounded ranges and its index entries.
    pub fn held_bytes(&self) -> usize {
        self.held
    }

    /// The caps it learns within.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Joins the line's pieces to the most similar template of their leaf, or starts one.
    fn place(&mut self, pieces: &[Piece<'_>]) -> Option<TemplateId> {
        let leaf = leaf_key(pieces);
        let line = self.lines;
        if let Some(id) = self.most_similar(leaf, pieces) {
            let template = self.templates.get_mut(&id)?;
            let before = template.held_bytes();
            template.merge(pieces, line);
            self.held = self.held - before + template.held_bytes();
            let candidates = self.leaves.get_mut(&leaf)?;
            if let Some(at) = candidates.iter().position(|c| *c == id) {
                candidates[..=at].rotate_right(1);
            }
            return Some(id);
        }
        let template = Template::new(pieces, line, leaf);
        let bytes = template.held_bytes();
        if !self.make_room(bytes) {
            return None;
        }
        let id = TemplateId(self.next_id);
        self.next_id += 1;
        self.held += bytes;
        self.templates.insert(id, template);
        self.leaves.entry(leaf).or_default().insert(0, id);
        self.singles.push_back(id);
        Some(id)
    }

    /// The template of `leaf` the pieces agree with most, if it reaches [`SIMILARITY`].
    fn most_similar(&self, leaf: u64, pieces: &[Piece<'_>]) -> Option<TemplateId> {
        let mut best: Option<(f64, TemplateId)> = None;
        for id in self.leaves.get(&leaf)?.iter().take(MAX_CANDIDATES) {
            let score = self.templates.get(id)?.similarity(pieces, SIMILARITY);
            if let Some(score) = score
                && best.is_none_or(|(b, _)| score > b)
            {
                best = Some((score, *id));
            }
        }
        best.map(|(_, id)| id)
    }

    /// Evicts single-line templates, oldest first, until a template of `bytes` fits both caps.
    /// False when it cannot: every template left has two lines or more.
    fn make_room(&mut self, bytes: usize) -> bool {
        while self.templates.len() >= self.limits.max_templates
            || self.held + bytes > self.limits.max_bytes
        {
            let Some(id) = self.singles.pop_front() else {
                return false;
            };
            if self.templates.get(&id).is_some_and(|t| t.count() == 1) {
                self.evict(id);
            }
        }
        true
    }

    fn evict(&mut self, id: TemplateId) {
        let Some(template) = self.templates.remove(&id) else {
            return;
        };
        self.held -= template.held_bytes();
        if let Some(candidates) = self.leaves.get_mut(&template.leaf) {
            candidates.retain(|c| *c != id);
            if candidates.is_empty() {
                self.leaves.remove(&template.leaf);
            }
        }
    }
}

/// The leaf of a line: its number of words and its first word (a wildcard when that word is a
/// variable field). Lines in different leaves never share a template.
fn leaf_key(pieces: &[Piece<'_>]) -> u64 {
    let mut hasher = FxHasher::default();
    pieces.len().hash(&mut hasher);
    match pieces.first() {
        Some(Piece::Word(word)) => word.hash(&mut hasher),
        _ => WILDCARD.hash(&mut hasher),
    }
    hasher.finish()
}
