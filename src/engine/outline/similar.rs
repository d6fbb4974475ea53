//! When two lines are "similar": the same text but for their numbers, which is what the
//! outline folds into one `[... N similar lines ...]` marker.

use super::MIN_LETTERS;

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
pub fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Whether two lines differ only in their numbers (each run of digits counts as one digit),
/// and carry enough text ([`MIN_LETTERS`]) for the numbers to be what varies.
pub fn similar(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    may_be_similar(a, b) && similar_bytes(a, b)
}

/// Bytes from their ends that [`may_be_similar`] compares two lines by, at most.
const ENDS_COMPARED: usize = 16;

/// False for lines that, read back from their ends, first differ where neither has a digit:
/// they differ outside their numbers (the bytes after that place are the same in both, so no
/// number reaches into it). Most lines of a log are told apart so in a byte or a few, without
/// reading them: lines that end in the same letter (the same word) are common, lines that end
/// in the same few words much rarer.
#[inline]
pub(super) fn may_be_similar(a: &[u8], b: &[u8]) -> bool {
    let ends = a.iter().rev().zip(b.iter().rev()).take(ENDS_COMPARED);
    for (x, y) in ends {
        if x != y {
            return x.is_ascii_digit() || y.is_ascii_digit();
        }
    }
    true
}

/// [`similar`] past [`may_be_similar`].
pub(super) fn similar_bytes(a: &[u8], b: &[u8]) -> bool {
    let (mut i, mut j) = (0, 0);
    loop {
        // Equal bytes are skipped many at a time; only a difference needs looking at.
        let same = common_prefix(&a[i..], &b[j..]);
        i += same;
        j += same;
        if i == a.len() || j == b.len() {
            break;
        }
        // A difference is allowed only inside numbers: back to where the number starts (the
        // same on both sides, which are equal up to here), then past it on each side.
        let digits_before = a[i - same..i]
            .iter()
            .rev()
            .take_while(|c| c.is_ascii_digit())
            .count();
        let (si, sj) = (i - digits_before, j - digits_before);
        if !(a[si..].first().is_some_and(u8::is_ascii_digit)
            && b[sj..].first().is_some_and(u8::is_ascii_digit))
        {
            return false;
        }
        i = si + a[si..].iter().take_while(|c| c.is_ascii_digit()).count();
        j = sj + b[sj..].iter().take_while(|c| c.is_ascii_digit()).count();
    }
    // One line may end inside a number that goes on in the other (`in 9` and `in 10`): then
    // what is left of the other is that number's digits.
    let in_number = |line: &[u8], at: usize| at > 0 && line[at - 1].is_ascii_digit();
    let rest_of_a_number = (i == a.len() && j == b.len())
        || (in_number(a, i)
            && in_number(b, j)
            && a[i..].iter().chain(&b[j..]).all(u8::is_ascii_digit));
    // Counted only as far as the least needed: most lines have that many long before their end.
    let letters = a.iter().filter(|c| c.is_ascii_alphabetic());
    rest_of_a_number && letters.take(MIN_LETTERS).count() == MIN_LETTERS
}

/// How many bytes `a` and `b` share at their start, compared 16 at a time.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 16 <= n && a[i..i + 16] == b[i..i + 16] {
        i += 16;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// [`similar`] as its doc defines it: the lines' bytes equal once each run of digits is
    /// one digit, and enough letters.
    fn by_definition(a: &str, b: &str) -> bool {
        let shape = |s: &str| {
            let mut shape = Vec::new();
            for c in s.bytes() {
                if !(c.is_ascii_digit() && shape.last().is_some_and(u8::is_ascii_digit)) {
                    shape.push(c);
                }
            }
            shape
                .iter_mut()
                .filter(|c| c.is_ascii_digit())
                .for_each(|c| *c = b'0');
            shape
        };
        shape(a) == shape(b) && a.bytes().filter(u8::is_ascii_alphabetic).count() >= MIN_LETTERS
    }

    /// `line` with each run of digits replaced by the next of `numbers` (in turn).
    fn renumbered(line: &str, numbers: &[String]) -> String {
        let mut out = String::new();
        let mut next = numbers.iter().cycle();
        let mut in_digits = false;
        for c in line.chars() {
            if c.is_ascii_digit() {
                if !in_digits {
                    out.push_str(next.next().map_or("7", String::as_str));
                }
                in_digits = true;
            } else {
                out.push(c);
                in_digits = false;
            }
        }
        out
    }

    proptest! {
        /// Lines alike but for their numbers, or unlike in a byte, near their end or not.
        #[test]
        fn similar_is_its_definition(
            line in "[a-e é:1-3]{0,60}",
            numbers in prop::collection::vec("[0-9]{1,4}", 1..4),
            other in "[a-e é:1-3]{0,60}",
            cut in 0usize..40,
            byte in "[ab:1]",
        ) {
            let alike = renumbered(&line, &numbers);
            let mut changed = alike.clone();
            let at = changed.floor_char_boundary(cut.min(changed.len()));
            changed.insert_str(at, &byte);
            for (a, b) in [(&line, &alike), (&line, &changed), (&line, &other), (&alike, &line)] {
                prop_assert_eq!(similar(a, b), by_definition(a, b), "{:?} {:?}", a, b);
            }
        }
    }
}
