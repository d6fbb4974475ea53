//! Words of a line and their class: a word that carries a variable field (a number, a hash, a
//! path, a quoted string) is a wildcard from the start, whatever command printed it. Deciding by
//! the shape of a word and not by the command keeps the learner generic: `test a::b ... ok`,
//! `Compiling foo v0.1.0 (/src/foo)` and `GET /api/7 200 12ms` are all read the same way.

/// One word of a line, as the learner compares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece<'a> {
    /// A word that may be part of a template's fixed text.
    Word(&'a str),
    /// A word whose shape says it is a variable field.
    Var,
}

impl Piece<'_> {
    /// Whether the piece is a fixed word.
    pub fn is_word(&self) -> bool {
        matches!(self, Piece::Word(_))
    }

    /// The fixed word, if it is one.
    pub fn word(&self) -> Option<&str> {
        match self {
            Piece::Word(word) => Some(word),
            Piece::Var => None,
        }
    }
}

/// Splits `line` into its whitespace-separated words, classed, into `out` (cleared first).
/// Returns false, leaving `out` partial, when the line has more than `max` words: a line that
/// long is not a template's instance worth the memory.
pub fn split<'a>(line: &'a str, max: usize, out: &mut Vec<Piece<'a>>) -> bool {
    out.clear();
    for word in line.split_ascii_whitespace() {
        if out.len() == max {
            return false;
        }
        out.push(if is_variable(word) {
            Piece::Var
        } else {
            Piece::Word(word)
        });
    }
    true
}

/// Whether a word is a variable field by its shape alone: it holds a digit (numbers, durations,
/// versions, dates, addresses, identifiers with digits), it is a path (`/` or `\` among other
/// characters), a quoted string, or a long run of hex letters (a hash without digits).
pub fn is_variable(word: &str) -> bool {
    let bytes = word.as_bytes();
    bytes.iter().any(u8::is_ascii_digit) || is_path(bytes) || is_quoted(bytes) || is_hex(bytes)
}

fn is_path(word: &[u8]) -> bool {
    word.len() > 1
        && word.iter().any(|&c| c == b'/' || c == b'\\')
        && word.iter().any(u8::is_ascii_alphanumeric)
}

/// `"…"`, `'…'` or `` `…` ``, allowing one trailing `,` `;` `:` or `.` after the closing quote.
fn is_quoted(word: &[u8]) -> bool {
    let word = match word.last() {
        Some(b',' | b';' | b':' | b'.') => &word[..word.len() - 1],
        _ => word,
    };
    match (word.first(), word.last()) {
        (Some(&open), Some(&close)) if word.len() >= 2 => {
            open == close && matches!(open, b'"' | b'\'' | b'`')
        }
        _ => false,
    }
}

/// Eight or more hex letters only: a hash or an address printed without a digit in it.
fn is_hex(word: &[u8]) -> bool {
    word.len() >= 8 && word.iter().all(u8::is_ascii_hexdigit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variable_fields_are_told_by_shape() {
        for word in [
            "42",
            "0.12s",
            "v1.2.3",
            "2026-11-26T15:00:00Z",
            "test_7",
            "/usr/lib/x",
            "src\\main.rs",
            "\"hello world\"",
            "'name',",
            "deadbeefcafe",
            "0x1f",
        ] {
            assert!(is_variable(word), "{word} should be variable");
        }
        for word in [
            "test", "ok", "...", "/", "error:", "FAILED", "a::b", "\"", "'", "deadbee", "cafe",
        ] {
            assert!(!is_variable(word), "{word} should be a word");
        }
    }

    #[test]
    fn split_classes_words_and_stops_past_the_limit() {
        let mut out = Vec::new();
        assert!(split("test a::b ... ok 0.1s", 8, &mut out));
        assert_eq!(
            out,
            [
                Piece::Word("test"),
                Piece::Word("a::b"),
                Piece::Word("..."),
                Piece::Word("ok"),
                Piece::Var
            ]
        );
        assert!(!split("a b c", 2, &mut out));
        assert!(split("", 2, &mut out) && out.is_empty());
    }
}
