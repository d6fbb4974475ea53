//! A line's *shape*: its template as [`super::token`] reads it (its words, each variable field
//! one wildcard), hashed in one pass over its bytes. The capture works out every line's shape
//! as the output streams, to tell a rare line among frequent ones (a needle no pattern names);
//! splitting the line into words and classing each, as the learner does, costs several passes
//! over each byte, this one pass.

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
    let mut i = 0;
    while i < bytes.len() {
        if CLASS[bytes[i] as usize] & SPACE != 0 {
            i += 1;
            continue;
        }
        let (start, mut classes) = (i, 0u8);
        while let Some(&b) = bytes.get(i) {
            let class = CLASS[b as usize];
            if class & SPACE != 0 {
                break;
            }
            classes |= class;
            i += 1;
        }
        shape = mix(shape, piece(bytes, start, i, classes));
    }
    shape
}

#[inline(always)]
fn mix(shape: u64, piece: u64) -> u64 {
    (shape.rotate_left(5) ^ piece).wrapping_mul(K)
}

/// The hash of the word `line[start..end]`, or [`VAR`] when it is a variable field:
/// [`super::token::is_variable`], from the classes of its bytes.
#[inline(always)]
fn piece(line: &[u8], start: usize, end: usize, classes: u8) -> u64 {
    let len = end - start;
    let path = len > 1 && classes & SLASH != 0 && classes & ALNUM != 0;
    let hex = len >= 8 && classes & NOT_HEX == 0;
    if classes & DIGIT != 0 || path || hex || (classes & QUOTE != 0 && is_quoted(&line[start..end]))
    {
        return VAR;
    }
    word_hash(line, start, end)
}

/// The hash of `line[start..end]`, its length and its bytes eight at a time. A word's last
/// bytes are read as eight bytes of the line, the bytes past the word masked off (or the
/// bytes before it shifted out, at the line's end): a word costs a few instructions, not a
/// general hasher's call.
#[inline(always)]
fn word_hash(line: &[u8], start: usize, end: usize) -> u64 {
    let mut h = mix(0, (end - start) as u64);
    let mut at = start;
    while end - at >= 8 {
        h = mix(h, eight(line, at));
        at += 8;
    }
    let rest = end - at;
    if rest == 0 {
        return h;
    }
    let last = if line.len() - at >= 8 {
        eight(line, at) & (u64::MAX >> (8 * (8 - rest)))
    } else if end >= 8 {
        eight(line, end - 8) >> (8 * (8 - rest))
    } else {
        line[at..end]
            .iter()
            .rev()
            .fold(0, |v, &b| (v << 8) | u64::from(b))
    };
    mix(h, last)
}

/// The eight bytes of `line` from `at`, as a little-endian number.
#[inline(always)]
fn eight(line: &[u8], at: usize) -> u64 {
    let mut bytes = [0; 8];
    bytes.copy_from_slice(&line[at..at + 8]);
    u64::from_le_bytes(bytes)
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

    proptest::proptest! {
        /// A word's hash is its bytes' wherever it lies in a line: read forward and masked,
        /// read back from the line's end, or byte by byte in a short line.
        #[test]
        fn a_words_hash_depends_on_its_bytes_alone(
            before in "[a-z ]{0,12}",
            word in proptest::collection::vec(proptest::num::u8::ANY, 1..24),
            after in "[a-z ]{0,12}",
        ) {
            let alone = word_hash(&word, 0, word.len());
            let line = [before.as_bytes(), &word, after.as_bytes()].concat();
            let start = before.len();
            proptest::prop_assert_eq!(word_hash(&line, start, start + word.len()), alone);
            let padded = [&word[..], b"        "].concat();
            proptest::prop_assert_eq!(word_hash(&padded, 0, word.len()), alone);
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
