//! A line's *shape*: its template as [`super::token`] reads it (its words, each variable field
//! one wildcard), hashed in one pass over its bytes. The capture works out every line's shape
//! as the output streams, to tell a rare line among frequent ones (a needle no pattern names);
//! splitting the line into words and classing each, as the learner does, costs several passes
//! over each byte, this one pass.

use std::hash::Hasher;

/// Byte classes, as bits: what [`super::token::is_variable`] looks at in a word.
const SPACE: u8 = 1;
const DIGIT: u8 = 2;
const SLASH: u8 = 4;
const ALNUM: u8 = 8;
const NOT_HEX: u8 = 16;
const QUOTE: u8 = 32;

/// The class of each byte: ASCII whitespace as `split_ascii_whitespace` takes it, digits,
/// path separators, letters and digits, bytes that are not hex digits, quotes.
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
        if !c.is_ascii_hexdigit() {
            k |= NOT_HEX;
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
///
/// One pass over the bytes does little more than look up each byte's class: a word's own
/// bytes are hashed only when it ends and is not a variable field. A byte inside a word costs
/// a lookup, a test and an `or` (a word starts after the last space): this runs on every line
/// of an output's first MiBs.
pub fn shape_key(line: &str) -> u64 {
    let bytes = line.as_bytes();
    let mut shape = 0u64;
    let (mut start, mut classes) = (0, 0u8);
    for (i, &b) in bytes.iter().enumerate() {
        let class = CLASS[b as usize];
        if class & SPACE == 0 {
            classes |= class;
            continue;
        }
        if i > start {
            shape = mix(shape, piece(&bytes[start..i], classes));
        }
        (start, classes) = (i + 1, 0);
    }
    if bytes.len() > start {
        shape = mix(shape, piece(&bytes[start..], classes));
    }
    shape
}

fn mix(shape: u64, piece: u64) -> u64 {
    (shape.rotate_left(5) ^ piece).wrapping_mul(K)
}

/// A word's hash, or [`VAR`] when it is a variable field: [`super::token::is_variable`],
/// from the classes of its bytes.
fn piece(word: &[u8], classes: u8) -> u64 {
    let path = word.len() > 1 && classes & SLASH != 0 && classes & ALNUM != 0;
    let hex = word.len() >= 8 && classes & NOT_HEX == 0;
    if classes & DIGIT != 0 || path || hex || (classes & QUOTE != 0 && is_quoted(word)) {
        return VAR;
    }
    let mut h = rustc_hash::FxHasher::default();
    h.write(word);
    h.write_usize(word.len());
    h.finish()
}

/// `"…"`, `'…'` or `` `…` ``, with one trailing `,` `;` `:` or `.` allowed.
fn is_quoted(word: &[u8]) -> bool {
    let word = match word.last() {
        Some(b',' | b';' | b':' | b'.') => &word[..word.len() - 1],
        _ => word,
    };
    word.len() >= 2 && word[0] == word[word.len() - 1] && CLASS[word[0] as usize] & QUOTE != 0
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
        /// pieces, different shapes (a collision of 64-bit hashes aside).
        #[test]
        fn agrees_with_the_learners_words(
            a in proptest::collection::vec(word(), 0..8),
            b in proptest::collection::vec(word(), 0..8),
        ) {
            let (a, b) = (a.join(" "), b.join("\t"));
            proptest::prop_assert_eq!(
                pieces(&a) == pieces(&b),
                shape_key(&a) == shape_key(&b),
                "{:?} / {:?}", a, b
            );
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
