//! A floor under o200k's count of a text, in one pass over its bytes and without the
//! tokenizer: enough to learn that an output is above a threshold (the template folds' "small
//! stays whole") without building the split pattern (tens of millions of instructions) or
//! touching the vocabulary's pages (megabytes of a short-lived process's memory).
//!
//! Why it is a floor: o200k splits a text into pieces by its pattern and encodes each piece into
//! one token or more. Of those pieces, the ones holding letters hold one run of letters each
//! (after at most one other character, and before a contraction such as `'s`), and the ones
//! holding digits hold one to three digits and nothing else. So every run of ASCII letters
//! starts a piece of its own (unless an apostrophe just before it may make it a contraction),
//! and every run of k ASCII digits takes at least ⌈k/3⌉ pieces. Bytes past ASCII could be letters,
//! digits or neither: they join the run they touch and never start one, so no run is counted
//! twice. Whitespace and punctuation pieces are not counted at all.

/// What each byte is to the floor.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Letter,
    Digit,
    /// Past ASCII: part of whatever run it touches.
    Wide,
    Apostrophe,
    Other,
}

fn class(b: u8) -> Class {
    match b {
        b'a'..=b'z' | b'A'..=b'Z' => Class::Letter,
        b'0'..=b'9' => Class::Digit,
        0x80.. => Class::Wide,
        b'\'' => Class::Apostrophe,
        _ => Class::Other,
    }
}

/// At least this many o200k tokens are in `bytes` (read as UTF-8, invalid bytes replaced),
/// counted until the floor reaches `enough`.
pub fn at_least(bytes: &[u8], enough: usize) -> usize {
    let mut floor = 0;
    // The letter run in progress: whether it has an ASCII letter, and whether it began right
    // after an apostrophe (a contraction's letters, which belong to the piece before).
    let (mut letters, mut after_apostrophe, mut in_letters) = (false, false, false);
    // ASCII digits in the digit run in progress.
    let (mut digits, mut in_digits) = (0usize, false);
    let mut previous = Class::Other;
    for &b in bytes {
        let class = class(b);
        let letter_like = matches!(class, Class::Letter | Class::Wide);
        if !letter_like && in_letters {
            floor += usize::from(letters && !after_apostrophe);
            in_letters = false;
        }
        if !matches!(class, Class::Digit | Class::Wide) && in_digits {
            floor += digits.div_ceil(3);
            in_digits = false;
        }
        if floor >= enough {
            return floor;
        }
        if letter_like && !in_letters {
            (in_letters, letters) = (true, false);
            after_apostrophe = previous == Class::Apostrophe;
        }
        letters |= class == Class::Letter;
        if matches!(class, Class::Digit | Class::Wide) && !in_digits {
            (in_digits, digits) = (true, 0);
        }
        digits += usize::from(class == Class::Digit);
        previous = class;
    }
    floor
        + usize::from(in_letters && letters && !after_apostrophe)
        + if in_digits { digits.div_ceil(3) } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::tokens::count;

    fn floor(text: impl AsRef<[u8]>) -> usize {
        at_least(text.as_ref(), usize::MAX)
    }

    #[test]
    fn counts_word_and_digit_runs() {
        assert_eq!(floor(""), 0);
        assert_eq!(floor("  ,;  \n"), 0);
        assert_eq!(floor("hello world"), 2);
        assert_eq!(floor("1234567"), 3);
        assert_eq!(floor("don't"), 1);
        assert_eq!(floor("2026-11-27T00:42:35Z INFO started"), 11);
        assert_eq!(floor("café au lait"), 3);
        assert!(at_least(b"a b c d e f g", 3) >= 3);
        assert!(at_least(b"a b c d e f g", 3) < 7);
    }

    #[test]
    fn is_under_the_count_on_real_looking_text() {
        for text in [
            "test engine::tokens::floor::tests::counts ... ok\n",
            "error[E0308]: mismatched types\n  --> src/main.rs:4:12\n",
            "HTTPServer's camelCase ²³ 1²2 é1é x'Y '' ' a'b'c 0x1f 3.14159",
            "\u{feff}日本語のテキスト 12,345.678 ſ'ſ 'ſ Ⅻ ①②③",
        ] {
            assert!(
                floor(text) <= count(text),
                "{text:?}: {} > {}",
                floor(text),
                count(text)
            );
        }
    }

    proptest::proptest! {
        /// Never more than the tokenizer's count, whatever the text (invalid UTF-8 included,
        /// read as the count reads it).
        #[test]
        fn never_exceeds_the_count(bytes in proptest::collection::vec(byte(), 0..200)) {
            let text = String::from_utf8_lossy(&bytes);
            let tokens = count(&text);
            proptest::prop_assert!(floor(&bytes) <= tokens, "{:?}", text);
        }

        #[test]
        fn stops_once_enough(text in "[a-z0-9 ]{0,80}", enough in 0usize..20) {
            let all = floor(&text);
            let some = at_least(text.as_bytes(), enough);
            proptest::prop_assert!(some <= all);
            proptest::prop_assert!(some >= enough.min(all));
        }
    }

    /// Bytes that stress the runs: letters, digits, apostrophes, spaces and punctuation, and
    /// bytes of multi-byte characters (letters, digits and symbols past ASCII), whole or not.
    fn byte() -> impl proptest::strategy::Strategy<Value = u8> {
        use proptest::prelude::*;
        prop_oneof![
            prop::sample::select(b"aZs'tdm0 9\n\t-_.:/,".to_vec()),
            prop::sample::select(vec![
                0xc3, 0xa9, 0xc2, 0xb2, 0xe2, 0x85, 0xab, 0xc5, 0xbf, 0xff
            ]),
            any::<u8>(),
        ]
    }
}
