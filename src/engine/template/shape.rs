//! A line's *shape*: its template as [`super::token`] reads it (its words, each variable field
//! one wildcard), hashed in one pass over its bytes. The capture works out every line's shape
//! as the output streams, to tell a rare line among frequent ones (a needle no pattern names);
//! splitting the line into words and classing each, as the learner does, costs several passes
//! over each byte, this one.

/// Byte classes, as bits: what [`super::token::is_variable`] looks at in a word.
const SPACE: u8 = 1;
const DIGIT: u8 = 2;
const SLASH: u8 = 4;
const ALNUM: u8 = 8;
const HEX: u8 = 16;
const QUOTE: u8 = 32;

/// The class of each byte: ASCII whitespace as `split_ascii_whitespace` takes it, digits,
/// path separators, letters and digits, hex digits, quotes.
const CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        let mut k = 0;
        if matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0c) {
            k |= SPACE;
        }
        if c.is_ascii_digit() {
            k |= DIGIT;
        }
        if c == b'/' || c == b'\\' {
            k |= SLASH;
        }
        if c.is_ascii_alphanumeric() {
            k |= ALNUM;
        }
        if c.is_ascii_hexdigit() {
            k |= HEX;
        }
        if matches!(c, b'"' | b'\'' | b'`') {
            k |= QUOTE;
        }
        t[b] = k;
        b += 1;
    }
    t
};

/// What stands for a variable field in the hash.
const VAR: u64 = 0x9e37_79b9_7f4a_7c15;

/// Mixing constant (FxHash's).
const K: u64 = 0x517c_c1b7_2722_0a95;

/// The shape of `line`: two lines have the same shape when [`super::token::split`] gives the
/// same pieces for both (up to hash collisions, which are rare and only make lines look more
/// alike). A line's newline, if any, is whitespace like any other.
pub fn shape_key(line: &str) -> u64 {
    let mut shape = Shaper::default();
    shape.feed(line.as_bytes());
    shape.finish()
}

/// [`shape_key`] worked out piece by piece, for a line that arrives in parts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shaper {
    /// The hash of the words ended so far.
    line: u64,
    /// The word in progress: its hash, length, the classes of its bytes, whether all are hex
    /// digits, and its first byte and the two last.
    word: u64,
    len: usize,
    classes: u8,
    all_hex: bool,
    first: u8,
    last: [u8; 2],
}

impl Shaper {
    /// Takes the next bytes of the line.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            let class = CLASS[b as usize];
            if class & SPACE != 0 {
                self.end_word();
                continue;
            }
            if self.len == 0 {
                self.first = b;
                self.all_hex = true;
                self.classes = 0;
                self.word = 0;
            }
            self.len += 1;
            self.classes |= class;
            self.all_hex &= class & HEX != 0;
            self.last = [self.last[1], b];
            self.word = (self.word.rotate_left(5) ^ b as u64).wrapping_mul(K);
        }
    }

    /// The shape of the line fed so far, and a fresh start for the next line.
    pub fn finish(&mut self) -> u64 {
        self.end_word();
        let line = self.line;
        *self = Shaper::default();
        line
    }

    fn end_word(&mut self) {
        if self.len == 0 {
            return;
        }
        let piece = if self.is_variable() {
            VAR
        } else {
            self.word ^ self.len as u64
        };
        self.line = (self.line.rotate_left(5) ^ piece).wrapping_mul(K);
        self.len = 0;
    }

    /// [`super::token::is_variable`] of the word that just ended, from what was kept of it.
    fn is_variable(&self) -> bool {
        let path = self.len > 1 && self.classes & SLASH != 0 && self.classes & ALNUM != 0;
        let hex = self.len >= 8 && self.all_hex;
        self.classes & DIGIT != 0 || path || hex || self.is_quoted()
    }

    /// `"…"`, `'…'` or `` `…` ``, with one trailing `,` `;` `:` or `.` allowed.
    fn is_quoted(&self) -> bool {
        if self.classes & QUOTE == 0 {
            return false;
        }
        let [before, last] = self.last;
        let (close, len) = match last {
            b',' | b';' | b':' | b'.' => (before, self.len - 1),
            _ => (last, self.len),
        };
        len >= 2 && close == self.first && CLASS[close as usize] & QUOTE != 0
    }
}

#[cfg(test)]
mod tests {
    use super::super::token::{Piece, split};
    use super::*;

    fn pieces(line: &str) -> Vec<Piece<'_>> {
        let mut out = Vec::new();
        split(line, usize::MAX, &mut out);
        out
    }

    #[test]
    fn lines_of_one_template_share_a_shape() {
        assert_eq!(
            shape_key("settings.py:12:1: E302 expected 2 blank lines, found 0"),
            shape_key("app.py:7:3: E999 expected 4 blank lines, found 1")
        );
        assert_eq!(
            shape_key("ok 212 - rounds price 211"),
            shape_key("ok 7 - rounds  price 6\n")
        );
        assert_ne!(
            shape_key("ok 212 - rounds price 211"),
            shape_key("not ok 213 - rounds price 212")
        );
        assert_ne!(shape_key("a b"), shape_key("ab"));
        assert_ne!(shape_key("'x' y"), shape_key("'x y"));
    }

    proptest::proptest! {
        /// The shape agrees with the learner's words: equal pieces, equal shapes; different
        /// pieces, different shapes (a collision of 64-bit hashes aside); and a line fed in
        /// parts has the shape it has whole.
        #[test]
        fn agrees_with_the_learners_words(
            a in proptest::collection::vec(word(), 0..8),
            b in proptest::collection::vec(word(), 0..8),
            cut in 0usize..64,
        ) {
            let (a, b) = (a.join(" "), b.join("\t"));
            proptest::prop_assert_eq!(
                pieces(&a) == pieces(&b),
                shape_key(&a) == shape_key(&b),
                "{:?} / {:?}", a, b
            );
            let cut = (0..=cut.min(a.len())).rev().find(|&c| a.is_char_boundary(c)).unwrap_or(0);
            let mut parts = Shaper::default();
            parts.feed(&a.as_bytes()[..cut]);
            parts.feed(&a.as_bytes()[cut..]);
            proptest::prop_assert_eq!(parts.finish(), shape_key(&a));
        }
    }

    fn word() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            prop::sample::select(vec![
                "ok", "not", "error:", "a", "b", "'a'", "'a',", "\"x\"", "`y`.", "'", "\"", "'a",
                "/", "a/b", "C:\\x", "deadbeef", "deadbee", "cafe", "0x1f", "v1.2", "…", "│", "''",
                "'.", "a'", "'a'b'",
            ])
            .prop_map(str::to_string),
            "[a-f0-9'/.,:]{1,10}",
        ]
    }
}
