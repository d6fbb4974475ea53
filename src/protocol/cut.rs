//! Where text a client receives may stop short: a line cut at a length, a piece of a long line,
//! a line still being written.
//!
//! Redaction finds a secret only when it sees it whole: `ghp_` and 36 characters, a password
//! after its flag. A cut that shows 38 of a token's 40 characters shows a secret that no rule
//! can recognise any more. So text never stops inside a *piece*, a run of characters that
//! could belong to one secret: the piece is held back (a cut line ends before it, a line
//! still being written shows it once it is complete), and what is shown holds only whole
//! pieces for the redaction that follows.

/// Characters that end a piece: whitespace, quotes, brackets and separators never occur
/// inside the secrets the rules know (a password may hold them, but then the rule that finds
/// it sees its key before the separator and the rest after it).
/// Secrets are ASCII: any other character ends a piece too.
fn ends_piece(c: char) -> bool {
    !c.is_ascii()
        || c.is_ascii_whitespace()
        || c.is_ascii_control()
        || "\"'`:;,()[]{}<>|".contains(c)
}

/// Longest trailing piece held back, in characters. The formats the rules know have a least
/// length but no small greatest one, so a longer prefix of a token is still recognised (and a
/// prefix of a run this long is no secret a rule could name): a line of one piece is then
/// shown, cut, rather than left out.
const MAX_PIECE: usize = 1024;

/// The byte form of [`ends_piece`], for text that may not be UTF-8 (a byte of a multi-byte
/// character never ends a piece).
pub fn byte_ends_piece(b: u8) -> bool {
    b.is_ascii() && ends_piece(char::from(b))
}

/// Longest trailing word shown although unfinished: prose (`continue`, `Press Enter.`) is no
/// secret's start worth hiding.
const MAX_PLAIN_WORD: usize = 24;

/// Whether `piece` reads as a plain word: one capital at most, and that first, then lower-case
/// letters, then at most some closing punctuation (`continue...`, `Done!`).
fn plain_word(piece: &str) -> bool {
    let word = piece.trim_end_matches(['.', '?', '!']);
    let mut chars = word.chars();
    piece.len() <= MAX_PLAIN_WORD
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_lowercase())
}

/// The length of `text` that may be shown when it stops here (cut, or not complete yet):
/// all of it but a trailing piece that could be the start of a secret. A trailing plain word
/// after a space is shown, and so is a piece longer than [`MAX_PIECE`].
pub fn shown_end(text: &str) -> usize {
    let start = text
        .char_indices()
        .rev()
        .find(|&(_, c)| ends_piece(c))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let piece = &text[start..];
    // A plain word is shown only where a word starts: after a `:`, `=` or `@` it is a value.
    let word_start = text[..start]
        .chars()
        .next_back()
        .is_none_or(|c| c.is_whitespace());
    if piece.is_empty() || piece.len() > MAX_PIECE || (word_start && plain_word(piece)) {
        text.len()
    } else {
        start
    }
}

/// `text` cut to at most `max_chars` characters and never inside a piece; `None` when it has
/// no more characters than that (nothing is cut).
pub fn cut_chars(text: &str, max_chars: usize) -> Option<&str> {
    let (at, next) = text.char_indices().nth(max_chars)?;
    let kept = &text[..at];
    // The piece is cut only if it goes on after the cut.
    if ends_piece(next) {
        return Some(kept);
    }
    Some(&kept[..shown_end(kept)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Wherever a line is cut, what is kept is a prefix of it within the limit, and a
        /// secret in it is either kept whole or not begun.
        #[test]
        fn a_cut_keeps_a_secret_whole_or_not_at_all(
            before in "[a-z =:,é]{0,60}",
            after in "[a-z =:,]{0,20}",
            cut in 0usize..140,
        ) {
            let token = format!("ghp_{}", "aB3".repeat(12));
            let line = format!("{before}{token} {after}");
            let kept = cut_chars(&line, cut).unwrap_or(&line);
            prop_assert!(line.starts_with(kept));
            prop_assert!(kept.chars().count() <= cut.max(line.chars().count()));
            prop_assert!(!kept.contains("ghp_") || kept.contains(&token), "{kept}");
        }
    }

    #[test]
    fn a_trailing_piece_is_held_back() {
        let token = format!("ghp_{}", "aB3".repeat(12));
        let line = format!("export GITHUB_TOKEN={token} && make");
        for cut in 1..line.len() {
            let kept = cut_chars(&line, cut).unwrap();
            assert!(
                !kept.contains("ghp_") || kept.contains(&token),
                "{cut}: {kept}"
            );
        }
        assert_eq!(cut_chars(&line, line.len()), None);
        assert_eq!(shown_end("Password: "), 10);
        assert_eq!(shown_end("Password:"), 9);
        assert_eq!(shown_end("continue? [y/N]"), 15);
        assert_eq!(shown_end("Press any key to continue..."), 28);
        assert_eq!(shown_end("Token: Qm7Tz9"), 7);
        assert_eq!(shown_end("url https://user:pa"), 17);
        assert_eq!(shown_end("Qm7Tz9xLp2Kw"), 0);
        assert_eq!(shown_end("é ghp_ab"), 3);
        assert_eq!(
            shown_end("éghp_ab"),
            2,
            "a letter that is not ASCII ends a piece"
        );
        let blob = "x".repeat(MAX_PIECE + 1);
        assert_eq!(shown_end(&blob), blob.len(), "a run this long is shown cut");
        // A cut just before a separator keeps the whole piece before it.
        assert_eq!(cut_chars("key=abc def", 7), Some("key=abc"));
        assert_eq!(cut_chars("key=abc def", 6), Some(""));
    }
}
