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

/// False for lines that end in different letters: they differ outside their numbers. Most
/// lines of a log are told apart so, without reading them.
#[inline]
pub(super) fn may_be_similar(a: &[u8], b: &[u8]) -> bool {
    match (a.last(), b.last()) {
        (Some(&x), Some(&y)) => x == y || x.is_ascii_digit() || y.is_ascii_digit(),
        _ => true,
    }
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
    i == a.len()
        && j == b.len()
        && a.iter().filter(|c| c.is_ascii_alphabetic()).count() >= MIN_LETTERS
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
