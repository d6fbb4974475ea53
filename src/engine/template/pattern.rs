//! One template: a line's words with its variable fields as wildcards, how many lines it stands
//! for, and where they are. A template only ever loses fixed words (a merge turns the words that
//! differ into wildcards), so every line it has taken still matches it.

use super::ranges::LineRanges;
use super::token::Piece;

/// How a template's variable fields are written.
pub const WILDCARD: &str = "<*>";

/// A template and the lines it stands for.
#[derive(Debug, Clone)]
pub struct Template {
    /// The fixed words of the line it started from, one after another: a merge only turns
    /// words into wildcards, so they never change. One allocation for them all, not one a
    /// word: a preview learns thousands of templates, most of them from one line.
    words: Box<str>,
    /// The words in order: `Some` a fixed word (where it is in `words`), `None` a variable
    /// field.
    slots: Vec<Option<Span>>,
    count: u64,
    lines: LineRanges,
    /// The key of the leaf of the learner's index that holds it.
    pub(super) leaf: u64,
}

/// Where a fixed word is in a template's `words`.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: u32,
    end: u32,
}

impl Template {
    /// The template of one line (its pieces) seen at `line`.
    pub(super) fn new(pieces: &[Piece<'_>], line: u64, leaf: u64) -> Template {
        let length = pieces
            .iter()
            .map(|piece| piece.word().map_or(0, str::len))
            .sum();
        let mut words = String::with_capacity(length);
        // A line the learner takes is at most `MAX_LINE_BYTES` long.
        let at = |n: usize| u32::try_from(n).expect("a line shorter than 4 GiB");
        let slots = pieces
            .iter()
            .map(|piece| {
                let word = piece.word()?;
                let start = words.len();
                words.push_str(word);
                Some(Span {
                    start: at(start),
                    end: at(words.len()),
                })
            })
            .collect();
        Template {
            words: words.into_boxed_str(),
            slots,
            count: 1,
            lines: LineRanges::new(line),
            leaf,
        }
    }

    /// The share of a line's pieces that agree with the template, from 0 to 1, when it is at
    /// least `at_least`; `None` below it, when the two have different numbers of words, or
    /// when joining would turn a status word into a wildcard ([`is_status`]). A fixed word
    /// agrees with the same word, a variable field with a wildcard; a word where the template
    /// has a wildcard fits it but does not count, so a template made loose by merges takes a
    /// line only when the line agrees with the rest of it. Stops at the first disagreement too
    /// many: most lines compared with a template are not of it.
    pub(super) fn similarity(&self, pieces: &[Piece<'_>], at_least: f64) -> Option<f64> {
        if pieces.len() != self.slots.len() || pieces.is_empty() {
            return None;
        }
        let n = pieces.len();
        let mut disagree_left =
            n - (at_least * n as f64 - 1e-9).ceil().clamp(0.0, n as f64) as usize;
        let mut agree = 0;
        for (slot, piece) in self.slots.iter().zip(pieces) {
            let agrees = match (self.word(*slot), piece) {
                (Some(fixed), Piece::Word(word)) => fixed == *word,
                (None, Piece::Var) => true,
                _ => false,
            };
            if agrees {
                agree += 1;
            } else if disagree_left == 0 {
                return None;
            } else {
                disagree_left -= 1;
            }
        }
        (!self.would_hide_status(pieces)).then_some(agree as f64 / n as f64)
    }

    /// Whether a fixed word that differs from the line's word there is a status word, on
    /// either side.
    fn would_hide_status(&self, pieces: &[Piece<'_>]) -> bool {
        let last = pieces.len() - 1;
        self.slots
            .iter()
            .zip(pieces)
            .enumerate()
            .any(|(i, (slot, piece))| match (self.word(*slot), piece) {
                (Some(fixed), Piece::Word(word)) => {
                    fixed != *word && (is_status(fixed, i == last) || is_status(word, i == last))
                }
                (Some(fixed), Piece::Var) => is_status(fixed, i == last),
                (None, _) => false,
            })
    }

    /// Takes a line seen at `line`: the fixed words it does not share become wildcards.
    pub(super) fn merge(&mut self, pieces: &[Piece<'_>], line: u64) {
        let words = &self.words;
        for (slot, piece) in self.slots.iter_mut().zip(pieces) {
            let keep = match (*slot, piece) {
                (Some(fixed), Piece::Word(word)) => fixed.of(words) == *word,
                _ => false,
            };
            if !keep {
                *slot = None;
            }
        }
        self.count += 1;
        self.lines.push(line);
    }

    /// Whether `line` is an instance of the template: as many words, and each fixed word the
    /// same. What a fold claims of every line it hides.
    pub fn matches(&self, line: &str) -> bool {
        let mut words = line.split_ascii_whitespace();
        self.slots
            .iter()
            .all(|slot| match (self.word(*slot), words.next()) {
                (Some(fixed), Some(word)) => fixed == word,
                (None, Some(_)) => true,
                (_, None) => false,
            })
            && words.next().is_none()
    }

    /// The template as text: its words joined by single spaces, variable fields as `<*>`.
    pub fn text(&self) -> String {
        // Sized first: grown from nothing, its copies were a third of this function's cost
        // in a preview of templates.
        let words: usize = self
            .slots
            .iter()
            .map(|slot| self.word(*slot).map_or(WILDCARD.len(), str::len))
            .sum();
        let mut text = String::with_capacity(words + self.slots.len());
        for (i, slot) in self.slots.iter().enumerate() {
            if i > 0 {
                text.push(' ');
            }
            text.push_str(self.word(*slot).unwrap_or(WILDCARD));
        }
        text
    }

    /// The fixed word of `slot`, if it is one.
    fn word(&self, slot: Option<Span>) -> Option<&str> {
        slot.map(|span| span.of(&self.words))
    }

    /// How many lines it stands for.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Where its lines are.
    pub fn lines(&self) -> &LineRanges {
        &self.lines
    }

    /// How many of its words are fixed.
    pub fn fixed_words(&self) -> usize {
        self.slots.iter().filter(|slot| slot.is_some()).count()
    }

    /// Heap and inline bytes the learner counts against its cap for this template: the
    /// template itself, its words, a full list of ranges, and its entries in the learner's maps.
    pub(super) fn held_bytes(&self) -> usize {
        const INDEX_ENTRIES: usize = 64;
        std::mem::size_of::<Template>()
            + self.slots.len() * std::mem::size_of::<Option<Span>>()
            + self.words.len()
            + LineRanges::reserved_bytes()
            + INDEX_ENTRIES
    }
}

impl Span {
    fn of(self, words: &str) -> &str {
        &words[self.start as usize..self.end as usize]
    }
}

/// Whether a word says an outcome or a level, which must stay in a template's text: a word in
/// capitals (`FAILED`, `PASSED`, `ERROR`, `WARN:`), or the last word of a line when it is letters
/// only (cargo's `ok` and `ignored`). A fold of passing tests must say that they passed.
fn is_status(word: &str, last: bool) -> bool {
    let word = word.trim_end_matches([':', ']', ')']);
    let letters = word.bytes().filter(u8::is_ascii_alphabetic).count();
    (letters >= 2
        && word
            .bytes()
            .all(|c| c.is_ascii_uppercase() || !c.is_ascii_alphabetic()))
        || (last && !word.is_empty() && word.bytes().all(|c| c.is_ascii_alphabetic()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::template::token::split;

    fn pieces(line: &str) -> Vec<Piece<'_>> {
        let mut out = Vec::new();
        assert!(split(line, 64, &mut out));
        out
    }

    #[test]
    fn a_merge_turns_differing_words_into_wildcards_and_keeps_every_line_matching() {
        let first = "test a::one ... ok";
        let mut template = Template::new(&pieces(first), 1, 0);
        assert_eq!(template.text(), "test a::one ... ok");
        let second = "test a::two ... ok";
        assert_eq!(template.similarity(&pieces(second), 0.0), Some(0.75));
        template.merge(&pieces(second), 2);
        assert_eq!(template.text(), "test <*> ... ok");
        assert!(template.matches(first) && template.matches(second));
        assert!(!template.matches("test a::two ... FAILED"));
        assert!(!template.matches("test a::two ... ok extra"));
        assert!(!template.matches("test a::two ..."));
        assert_eq!(template.count(), 2);
        assert_eq!(template.lines().ranges(), [(1, 2)]);
    }

    #[test]
    fn status_words_keep_templates_apart() {
        let template = Template::new(&pieces("test case_1 ... ok"), 1, 0);
        assert_eq!(
            template.similarity(&pieces("test case_2 ... FAILED"), 0.0),
            None
        );
        assert_eq!(
            template.similarity(&pieces("test case_2 ... ignored"), 0.0),
            None
        );
        let template = Template::new(&pieces("a/b.py::t PASSED [ 10%]"), 1, 0);
        assert_eq!(
            template.similarity(&pieces("a/c.py::u FAILED [ 20%]"), 0.0),
            None
        );
        let template = Template::new(&pieces("12:00 INFO served one"), 1, 0);
        assert_eq!(
            template.similarity(&pieces("12:01 WARN served one"), 0.0),
            None
        );
        assert_eq!(
            template.similarity(&pieces("12:01 INFO served two"), 0.0),
            None
        );
        assert_eq!(
            template.similarity(&pieces("12:01 INFO served one"), 0.0),
            Some(1.0)
        );
    }

    #[test]
    fn variable_fields_agree_with_wildcards_and_lengths_must_match() {
        let template = Template::new(&pieces("took 12ms at 2026-01-01"), 1, 0);
        assert_eq!(template.text(), "took <*> at <*>");
        assert_eq!(
            template.similarity(&pieces("took 9ms at 2027-02-02"), 0.0),
            Some(1.0)
        );
        assert_eq!(template.similarity(&pieces("took 9ms"), 0.0), None);
    }
}
