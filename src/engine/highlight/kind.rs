//! The *kind* of a candidate line: what stays the same between instances of one error, so a
//! preview can tell the 300th `TS7006` from the one `TS2307` that caused them.
//!
//! A line's kind is the line with what varies between instances left out: numbers that stand
//! alone (line and column numbers, counts, addresses), quoted names, and locations (tokens that
//! hold a path separator or read `file.ext:12`). Numbers glued to letters stay, since they
//! name things (`TS7006`, `E0308`, `sha256`). The result is hashed: kinds are only compared.

use std::borrow::Cow;
use std::cell::RefCell;
use std::hash::Hasher;

use rustc_hash::{FxHashMap, FxHasher};

use super::{Candidate, Patterns};

/// The kinds of an output's lines, by line number, each worked out when first asked: a
/// preview's budget is found in several passes that show and offer mostly the same lines, and
/// each pass asks which kinds its ends show and which its candidates are. A line number stands
/// for one text in every view of an output, so the first answer holds; a shown line (which the
/// outline may keep cut) and a candidate (kept whole) are kept apart.
#[derive(Debug, Clone, Default)]
pub struct KindMemo {
    shown: RefCell<FxHashMap<u64, Option<u64>>>,
    candidates: RefCell<FxHashMap<u64, u64>>,
}

impl KindMemo {
    /// The kind of a shown line `number`, whose text is `line`, if `patterns` match it.
    pub fn of_shown(&self, number: u64, line: &str, patterns: &Patterns) -> Option<u64> {
        *self
            .shown
            .borrow_mut()
            .entry(number)
            .or_insert_with(|| patterns.is_match(line).then(|| kind_of(line)))
    }

    /// The kind of `candidate`'s line.
    pub fn of_candidate(&self, candidate: &Candidate) -> u64 {
        *self
            .candidates
            .borrow_mut()
            .entry(candidate.line)
            .or_insert_with(|| kind_of(&candidate.text))
    }
}

/// The kind of `line`.
pub fn kind_of(line: &str) -> u64 {
    let unquoted = without_quotes(line);
    let capacity = unquoted.len().min(256);
    let mut h = FxHasher::default();
    if unquoted.is_ascii() {
        let mut key = Vec::with_capacity(capacity);
        ascii_key(&mut key, unquoted.as_bytes());
        h.write(&key);
    } else {
        let mut key = String::with_capacity(capacity);
        char_key(&mut key, &unquoted);
        h.write(key.as_bytes());
    }
    h.finish()
}

/// The key [`kind_of`] hashes, for a line without quotes: its tokens (between whitespace),
/// each a location's `@` or the token with its numbers as `0`, a space apart.
fn char_key(key: &mut String, line: &str) {
    for (i, token) in line.split_whitespace().enumerate() {
        if i > 0 {
            key.push(' ');
        }
        if is_location(token.as_bytes()) {
            key.push('@');
        } else {
            push_token(key, token);
        }
    }
}

/// The key [`kind_of`] hashes, for an ASCII line without quotes: what its `char` walk gives,
/// a byte at a time. In a flood of one error (a million lines of it, each a candidate whose
/// kind is asked, since no second kind comes to fill the slots) the `char` walk took some
/// 3,300 instructions a line.
fn ascii_key(key: &mut Vec<u8>, line: &[u8]) {
    // `char::is_whitespace` in ASCII: `\t`, `\n`, vertical tab, form feed, `\r`, space.
    let blank = |b: &u8| matches!(b, b'\t'..=b'\r' | b' ');
    let tokens = line.split(blank).filter(|t| !t.is_empty());
    for (i, token) in tokens.enumerate() {
        if i > 0 {
            key.push(b' ');
        }
        if is_location(token) {
            key.push(b'@');
        } else {
            push_ascii_token(key, token);
        }
    }
}

/// [`push_token`] for an ASCII token.
fn push_ascii_token(key: &mut Vec<u8>, token: &[u8]) {
    let mut prev_alpha = false;
    let mut at = 0;
    while at < token.len() {
        let b = token[at];
        if b.is_ascii_digit() && !prev_alpha {
            let hex = token[at..].starts_with(b"0x");
            at += 1;
            while at < token.len()
                && (token[at].is_ascii_digit()
                    || (hex && (token[at].is_ascii_hexdigit() || token[at] == b'x')))
            {
                at += 1;
            }
            key.push(b'0');
            prev_alpha = false;
            continue;
        }
        prev_alpha = b.is_ascii_alphabetic() || (prev_alpha && b.is_ascii_digit());
        key.push(b);
        at += 1;
    }
}

/// `line` with each quoted part (`'x'`, `"x"`, `` `x` ``) as one `Q`.
fn without_quotes(line: &str) -> Cow<'_, str> {
    if memchr::memchr3(b'\'', b'"', b'`', line.as_bytes()).is_none() {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find(['\'', '"', '`']) {
        let quote = rest.as_bytes()[at] as char;
        out.push_str(&rest[..at]);
        match rest[at + 1..].find(quote) {
            Some(len) => {
                out.push('Q');
                rest = &rest[at + 1 + len + 1..];
            }
            None => {
                out.push(quote);
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// A path (`src/a.ts(3,1):`, `/usr/lib/x.so`) or a `file.ext:LINE` location: a `/` or `\`
/// anywhere, or a `:` or `(` followed by a digit and then something other than `.`, right
/// after a `name.ext` whose extension is letters and digits. One pass over the bytes (a `.`,
/// `:` or `(` byte is that char wherever it stands in UTF-8).
fn is_location(token: &[u8]) -> bool {
    // The last `.` so far, and whether only letters and digits came after it.
    let mut dot = None;
    let mut ext_alnum = false;
    let mut location = false;
    for (i, &b) in token.iter().enumerate() {
        match b {
            b'/' | b'\\' => return true,
            b'.' => {
                dot = Some(i);
                ext_alnum = true;
                continue;
            }
            b':' | b'(' if !location => {
                location = ext_alnum
                    && dot.is_some_and(|d| d > 0 && d + 1 < i)
                    && token.get(i + 1).is_some_and(u8::is_ascii_digit)
                    && token.get(i + 2).is_some_and(|&c| c != b'.');
            }
            _ => {}
        }
        ext_alnum &= b.is_ascii_alphanumeric();
    }
    location
}

/// Appends `token` with its free-standing numbers and hex addresses as `0`.
fn push_token(key: &mut String, token: &str) {
    let mut chars = token.char_indices().peekable();
    let mut prev_alpha = false;
    while let Some((at, c)) = chars.next() {
        if c.is_ascii_digit() && !prev_alpha {
            let hex = token[at..].starts_with("0x");
            while chars.peek().is_some_and(|&(_, d)| {
                d.is_ascii_digit() || (hex && (d.is_ascii_hexdigit() || d == 'x'))
            }) {
                chars.next();
            }
            key.push('0');
            prev_alpha = false;
            continue;
        }
        prev_alpha = c.is_alphabetic() || (prev_alpha && c.is_ascii_digit());
        key.push(c);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn an_ascii_line_has_the_key_its_chars_give(
            line in "([ -~\\t\\n\\x0b\\x0c\\r]|0x|[0-9]{1,3}|[a-f]{1,2}|[./:(]|\\.rs:)*",
        ) {
            let (mut by_bytes, mut by_chars) = (Vec::new(), String::new());
            ascii_key(&mut by_bytes, line.as_bytes());
            char_key(&mut by_chars, &line);
            prop_assert_eq!(by_bytes, by_chars.into_bytes());
        }

        #[test]
        fn a_location_is_what_its_definition_says(
            pieces in prop::collection::vec(
                prop::sample::select(vec!["a", "a.rs", ".b", ".", ":1", "(7", "1", ":", "é", "x."]),
                0..10,
            ),
        ) {
            let token = pieces.concat();
            prop_assert_eq!(is_location(token.as_bytes()), location_by_definition(&token));
        }
    }

    /// [`is_location`] as its doc says, window by window.
    fn location_by_definition(token: &str) -> bool {
        if token.contains('/') || token.contains('\\') {
            return true;
        }
        let bytes = token.as_bytes();
        bytes.windows(3).enumerate().any(|(i, w)| {
            (w[0] == b':' || w[0] == b'(')
                && w[1].is_ascii_digit()
                && w[2] != b'.'
                && token[..i].rsplit_once('.').is_some_and(|(name, ext)| {
                    !name.is_empty()
                        && !ext.is_empty()
                        && ext.bytes().all(|b| b.is_ascii_alphanumeric())
                })
        })
    }

    #[test]
    fn instances_of_one_error_share_a_kind() {
        assert_eq!(
            kind_of("src/a.ts(12,5): error TS7006: Parameter 'x' implicitly has an 'any' type."),
            kind_of(
                "src/lib/b.ts(3,41): error TS7006: Parameter 'value' implicitly has an 'any' type."
            )
        );
        assert_eq!(
            kind_of("==4242== Invalid read of size 8"),
            kind_of("==17== Invalid read of size 4")
        );
        assert_eq!(
            kind_of("main.c:34:14: error: no member named 'len' in 'struct s'"),
            kind_of("util.c:3:1: error: no member named 'cap' in 'struct t'")
        );
    }

    #[test]
    fn different_errors_have_different_kinds() {
        let ts7006 =
            kind_of("src/a.ts(12,5): error TS7006: Parameter 'x' implicitly has an 'any' type.");
        let ts2307 = kind_of("src/a.ts(1,20): error TS2307: Cannot find module 'lodash'.");
        assert_ne!(ts7006, ts2307);
        assert_ne!(
            kind_of("error[E0308]: mismatched types"),
            kind_of("error[E0425]: mismatched types")
        );
        assert_ne!(kind_of("ValueError: bad"), kind_of("KeyError: bad"));
    }
}
