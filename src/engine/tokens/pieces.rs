//! The pieces o200k's pattern splits text into before BPE merges each, found by hand in text
//! that is all ASCII, where the pattern's classes are a few byte ranges.
//!
//! The pattern (`tiktoken_rs::O200K_BASE_PAT_STR`) needs `fancy-regex` for one look-ahead
//! (`\s+(?!\S)`), whose backtracking engine fetches its scratch space from a pool for every
//! piece: 8-13 MB/s, most of a count's time. Output is nearly all ASCII, and there its seven
//! alternatives are plain loops over bytes, ten times as fast. Text that is not all ASCII is
//! cut where no piece can cross ([`segments`]), so that only its lines around other characters
//! go to the pattern. Tests check the pieces against the pattern's on random ASCII text and the
//! counts against `tiktoken-rs`'s.

/// What the pattern's classes make of an ASCII byte.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    /// `\p{Lu}`.
    Upper,
    /// `\p{Ll}`.
    Lower,
    /// `\p{N}`.
    Digit,
    /// `\r` or `\n`.
    Newline,
    /// The rest of `\s`: tab, vertical tab, form feed, space.
    Space,
    /// Neither a letter, a digit nor whitespace.
    Other,
}

fn class(byte: u8) -> Class {
    match byte {
        b'A'..=b'Z' => Class::Upper,
        b'a'..=b'z' => Class::Lower,
        b'0'..=b'9' => Class::Digit,
        b'\r' | b'\n' => Class::Newline,
        b'\t' | 0x0B | 0x0C | b' ' => Class::Space,
        _ => Class::Other,
    }
}

/// Where the bytes of `text` from `at` on stop being of a class `keep` takes.
fn run_of(text: &[u8], mut at: usize, keep: impl Fn(Class) -> bool) -> usize {
    while at < text.len() && keep(class(text[at])) {
        at += 1;
    }
    at
}

/// `at`, past the pattern's optional contraction (`(?i:'s|'t|'re|'ve|'m|'ll|'d)`) if one
/// starts there.
fn past_contraction(text: &[u8], at: usize) -> usize {
    let lower = |i: usize| text.get(i).map(u8::to_ascii_lowercase);
    if text.get(at) != Some(&b'\'') {
        return at;
    }
    match (lower(at + 1), lower(at + 2)) {
        (Some(b's' | b't' | b'm' | b'd'), _) => at + 2,
        (Some(b'r' | b'v'), Some(b'e')) | (Some(b'l'), Some(b'l')) => at + 3,
        _ => at,
    }
}

/// Where the piece that starts at byte `start` of `text` (all ASCII, `start < text.len()`)
/// ends: the first of the pattern's alternatives that matches there, as the pattern's
/// leftmost-first search takes it.
pub(super) fn piece_end(text: &[u8], start: usize) -> usize {
    let first = class(text[start]);
    // 1 and 2: a prefix that is not \r, \n, a letter or a digit, maybe; then upper-case
    // letters and lower-case ones, at least one of either (lower-case ones, for the first),
    // and a contraction. Without a prefix if letters do not follow it.
    let prefixed = usize::from(matches!(first, Class::Space | Class::Other));
    for letters in [start + prefixed, start] {
        let upper = run_of(text, letters, |c| c == Class::Upper);
        let lower = run_of(text, upper, |c| c == Class::Lower);
        if lower > letters {
            return past_contraction(text, lower);
        }
    }
    // 3: one to three digits.
    if first == Class::Digit {
        return run_of(text, start, |c| c == Class::Digit).min(start + 3);
    }
    // 4: a space maybe, then what is neither a letter, a digit nor whitespace, then \r, \n
    // and slashes.
    let marks = start + usize::from(text[start] == b' ');
    let end = run_of(text, marks, |c| c == Class::Other);
    if end > marks {
        let mut end = end;
        while end < text.len() && matches!(text[end], b'\r' | b'\n' | b'/') {
            end += 1;
        }
        return end;
    }
    // Whitespace only from here (the rest was taken above).
    let spaces = run_of(text, start, |c| matches!(c, Class::Space | Class::Newline));
    // 5: whitespace up to its last \r or \n.
    if let Some(last) = (start..spaces)
        .rev()
        .find(|&i| class(text[i]) == Class::Newline)
    {
        return last + 1;
    }
    // 6: whitespace not followed by what is not: a run before a non-space but its last byte,
    // which goes with what follows. 7: a single one before a non-space.
    if spaces < text.len() && spaces - start > 1 {
        spaces - 1
    } else {
        spaces
    }
}

/// `text` cut where no piece of the pattern can cross: after a `\n` that a character other
/// than whitespace or `/` follows. Only alternatives 4 and 5 hold a newline: 4 goes on past it
/// only through `\r`, `\n` and `/`, and 5 through whitespace (up to the run's last `\r` or
/// `\n`); and whatever starts in a run of whitespace before that newline is 5's (it comes
/// before 6's look-ahead), so the pieces before the cut are the same whether the text goes on
/// or not.
pub(super) fn segments(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut newlines = memchr::memchr_iter(b'\n', bytes);
    std::iter::from_fn(move || {
        if start >= bytes.len() {
            return None;
        }
        let cut = newlines
            .by_ref()
            .map(|i| i + 1)
            .find(|&i| {
                text.get(i..)
                    .and_then(|rest| rest.chars().next())
                    .is_some_and(|c| c != '/' && !c.is_whitespace())
            })
            .unwrap_or(bytes.len());
        let segment = &text[start..cut];
        start = cut;
        Some(segment)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern() -> fancy_regex::Regex {
        fancy_regex::Regex::new(tiktoken_rs::O200K_BASE_PAT_STR).unwrap()
    }

    fn by_pattern<'a>(pattern: &fancy_regex::Regex, text: &'a str) -> Vec<&'a str> {
        pattern
            .find_iter(text)
            .map(|m| m.unwrap().as_str())
            .collect()
    }

    fn by_hand(text: &str) -> Vec<&str> {
        let mut pieces = Vec::new();
        let mut start = 0;
        while start < text.len() {
            let end = piece_end(text.as_bytes(), start);
            pieces.push(&text[start..end]);
            start = end;
        }
        pieces
    }

    #[test]
    fn pieces_are_the_pattern_s_on_ascii_text() {
        let pattern = pattern();
        for text in [
            "",
            "Hello world, it's OK'S here's THEY'RE we'VE I'm you'll he'd",
            "  two spaces\n\n  then\t\ttabs\x0b\x0cand feeds   \n",
            "123456789 12 a1b2 x123y ___ //path/to\n/etc\r\n\r\n",
            "CamelCase HTTPServer iPhone ABCdef abcDEF",
            "...!!!\n\n/// --> src/lib.rs:34:18\n    |\n",
            "trailing spaces   ",
            " ",
            "\x00\x01\x1f\x7f odd bytes",
        ] {
            assert_eq!(by_hand(text), by_pattern(&pattern, text), "{text:?}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Every alternative and the boundaries between them, over the bytes that matter.
        #[test]
        fn pieces_are_the_pattern_s_on_any_ascii_text(
            text in "[aAzZbB09 \t\n\r\x0b\x0c'sStTrReEvVmMlLdD/.,;!_\x00\x7f\x1f-]{0,40}"
        ) {
            proptest::prop_assert_eq!(by_hand(&text), by_pattern(&pattern(), &text));
        }

        /// The pattern's pieces of the segments are those of the whole text.
        #[test]
        fn no_piece_crosses_a_segment(
            text in "[aZ09 \t\n\r/.'é日\u{a0}\u{2028}]{0,60}"
        ) {
            let pattern = pattern();
            let whole = by_pattern(&pattern, &text);
            let cut: Vec<&str> = segments(&text).flat_map(|s| by_pattern(&pattern, s)).collect();
            proptest::prop_assert_eq!(segments(&text).collect::<String>(), text.clone());
            proptest::prop_assert_eq!(cut, whole);
        }
    }
}
