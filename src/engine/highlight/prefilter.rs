//! The prefilter: the literals the default patterns need, looked for at once by a SIMD search
//! (Teddy), so that only the lines holding one are tried against the patterns themselves.
//!
//! Teddy sorts its literals into 8 buckets (16 in its "fat" form, which takes half as many
//! bytes a step) and stops wherever the first bytes of some text could start a literal of
//! one bucket, judged by their nibbles: the nibbles of a bucket's literals, taken together,
//! are what it lets through. A bucket of literals alike (all capitals, all after a newline)
//! lets little through; a bucket of literals that share nothing stops the search on ordinary
//! words. The library sorts by where a literal stands in its list, which knows nothing of
//! text, and with the 44 literals here that needed the fat form: a slim search sorted so
//! stopped on ordinary text so often that it was slower. Sorted by [`BUCKETS`] the slim form
//! runs 1.2-1.4x the fat one's speed on a build log, on Rust sources and on system logs and
//! documentation (64 MiB of the truncate bench's log: 4.6 -> 5.8 GB/s).

use aho_corasick::{AhoCorasick, MatchKind, Span, packed};

#[cfg(target_arch = "x86_64")]
use super::teddy::Teddy;
#[cfg(target_arch = "x86_64")]
use crate::engine::normalise::Level;

/// Buckets in a slim Teddy search.
const SLIM: usize = 8;

/// The prefilter's literals as the search's buckets: those the default patterns need
/// anywhere in a line, and (after a newline) each of [`LINE_STARTS`].
///
/// A literal that a pattern needs only part of starts where ordinary text seldom does
/// (`): undefined`, `wed its stack`, `ld: cannot`): the search compares first bytes, and
/// "com", "ter", "und" would stop it at every other line.
///
/// Grouped by counting, over a sample of build logs, compiler and test runner output, Rust
/// sources, system logs and documentation, where each bucket would stop the search, and
/// moving one literal at a time to whichever bucket cut those stops most (each weighted by
/// the literals it checks), until no move helped. Literals whose first four bytes share their
/// low nibbles (`error`, `Error`, `ERROR`) must share a bucket: the library puts them in one.
/// The first bucket stops least: the places of the search's list no bucket needs repeat its
/// first literal (see [`search_order`]).
const BUCKETS: [&[&str]; SLIM] = [
    &[
        "FAIL",
        "FATAL",
        "Syscall param",
        "Source and destination overlap",
        "No such file or directory",
        "\nTraceback",
    ],
    &["CRITICAL", "definitely lost", "ld: cannot", "kOff", "\nE: "],
    &[
        "Mismatched free",
        "uninitialised",
        "Killed",
        "\nnpm ",
        "\nmake",
    ],
    &["panic", ": command not found", "\nCaused by", "\nfatal: "],
    &[
        "Exception",
        "Conditional jump",
        "Illegal instruction",
        "Aborted",
        "Sanitizer",
        "\nterminate called",
    ],
    &[
        "Invalid ",
        "Process terminating",
        "Segmentation fault",
        "Assertion",
        "Permission denied",
        "Build failed",
    ],
    &[
        "*** ",
        "\n** (",
        ".go:",
        "): undefined",
        "wed its stack",
        "\nE   ",
        "\n* What went wrong",
    ],
    &["error", "Error", "ERROR", "Unhandled", "ErrImagePull"],
];

/// What the other default patterns need at a line's start (`npm ERR!`, `fatal:`, pytest's
/// `E   `, ...). They join the search after a newline, so no line is looked at one by one; a
/// text's first line is checked apart.
pub(super) const LINE_STARTS: &[&str] = &[
    "npm ",
    "Traceback",
    "Caused by",
    "make",
    "fatal: ",
    "E   ",
    "E: ",
    "* What went wrong",
    "** (",
    "terminate called",
];

/// The prefilter: [`BUCKETS`]' literals looked for at once. A packed SIMD search (Teddy) where
/// the CPU has one (this crate's own with AVX2 or AVX-512, else the library's), else an automaton:
/// either says where a literal starts and stops there, where a regex of the same literals
/// runs a second, confirming search at every hit (in a log of error lines, every fifth
/// line).
#[derive(Debug, Clone)]
pub(super) enum Prefilter {
    #[cfg(target_arch = "x86_64")]
    Own(Box<Teddy>),
    Packed(packed::Searcher),
    Automaton(AhoCorasick),
}

impl Prefilter {
    /// The fastest search the CPU can run, within the vector instructions `SPILLWAY_SIMD`
    /// allows.
    pub(super) fn new() -> Prefilter {
        #[cfg(target_arch = "x86_64")]
        if let Some(teddy) = Teddy::new(&BUCKETS, Level::get()) {
            return Prefilter::Own(Box::new(teddy));
        }
        Prefilter::packed()
    }

    /// The library's packed search, where it has one for the CPU, else the automaton.
    fn packed() -> Prefilter {
        let literals = search_order();
        let mut config = packed::Config::new();
        config.only_teddy_fat(Some(false));
        match config.builder().extend(&literals).build() {
            Some(searcher) => Prefilter::Packed(searcher),
            None => Prefilter::automaton(&literals),
        }
    }

    fn automaton(literals: &[&str]) -> Prefilter {
        Prefilter::Automaton(
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostFirst)
                .build(literals)
                .expect("the prefilter is valid"),
        )
    }

    /// Where the leftmost literal at or after byte `from` of `text` starts.
    pub(super) fn find(&self, text: &str, from: usize) -> Option<usize> {
        let span = Span::from(from..text.len());
        let found = match self {
            #[cfg(target_arch = "x86_64")]
            Prefilter::Own(teddy) => return teddy.find(text.as_bytes(), from),
            Prefilter::Packed(searcher) => searcher.find_in(text, span),
            Prefilter::Automaton(automaton) => {
                automaton.find(aho_corasick::Input::new(text).span(span))
            }
        };
        found.map(|m| m.start())
    }
}

/// Where the first newline of `text` at or after byte `from` is (the end of a line the search
/// found), by `prefilter`'s own search where it has one.
pub(super) fn newline_from(
    prefilter: Option<&Prefilter>,
    text: &str,
    from: usize,
) -> Option<usize> {
    match prefilter {
        #[cfg(target_arch = "x86_64")]
        Some(Prefilter::Own(teddy)) => teddy.newline_from(text.as_bytes(), from),
        _ => memchr::memchr(b'\n', &text.as_bytes()[from..]).map(|i| from + i),
    }
}

/// Where the line holding byte `at` of `text` starts (after the last newline before it), by
/// `prefilter`'s own search where it has one.
pub(super) fn line_start(prefilter: Option<&Prefilter>, text: &str, at: usize) -> usize {
    match prefilter {
        #[cfg(target_arch = "x86_64")]
        Some(Prefilter::Own(teddy)) => teddy.line_start(text.as_bytes(), at),
        _ => memchr::memrchr(b'\n', &text.as_bytes()[..at]).map_or(0, |i| i + 1),
    }
}

/// [`BUCKETS`]' literals listed so that the library's slim search sorts each bucket's into
/// a bucket of its own. It puts the literal at place `i` of its list in bucket `7 - i % 8`,
/// unless an earlier one shares its nibble key (see [`nibble_key`]), whose bucket it then
/// joins. So bucket `b`'s literals of new keys take places `7 - b`, `15 - b`, ...; those whose
/// key its earlier ones have come last; a place no bucket needs repeats the first bucket's
/// first literal (every place before the eighth is taken, so that one is always earlier).
///
/// Were the library to sort otherwise, only the speed would change: a literal is found
/// whichever bucket holds it.
fn search_order() -> Vec<&'static str> {
    let mut places: Vec<Option<&str>> = Vec::new();
    let mut joining = Vec::new();
    for (b, literals) in BUCKETS.iter().enumerate() {
        let mut keys = Vec::new();
        let mut place = SLIM - 1 - b;
        for &literal in *literals {
            let key = nibble_key(literal);
            if keys.contains(&key) {
                joining.push(literal);
                continue;
            }
            keys.push(key);
            if places.len() <= place {
                places.resize(place + 1, None);
            }
            places[place] = Some(literal);
            place += SLIM;
        }
    }
    let filler = BUCKETS[0][0];
    places
        .into_iter()
        .map(|literal| literal.unwrap_or(filler))
        .chain(joining)
        .collect()
}

/// The low nibbles of a literal's first bytes, as many as the search compares (all
/// literals' shortest length, at most 4): the library's test of literals that must share
/// a bucket.
fn nibble_key(literal: &str) -> Vec<u8> {
    let compared = BUCKETS
        .iter()
        .flat_map(|literals| literals.iter().map(|l| l.len()))
        .min()
        .unwrap_or(0)
        .min(4);
    literal.bytes().take(compared).map(|b| b & 0x0F).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> impl Iterator<Item = &'static str> {
        BUCKETS.iter().flat_map(|literals| literals.iter().copied())
    }

    #[test]
    fn the_buckets_hold_each_line_start_after_a_newline_and_nothing_twice() {
        let mut after_newline: Vec<&str> = all().filter_map(|l| l.strip_prefix('\n')).collect();
        let mut starts = LINE_STARTS.to_vec();
        after_newline.sort_unstable();
        starts.sort_unstable();
        assert_eq!(after_newline, starts);
        let mut literals: Vec<&str> = all().collect();
        literals.sort_unstable();
        literals.dedup();
        assert_eq!(literals.len(), all().count(), "a literal in two buckets");
    }

    /// The library would put two literals of one key in the bucket of the first: buckets
    /// sharing a key would not be what [`BUCKETS`] says.
    #[test]
    fn no_key_is_in_two_buckets() {
        for (b, literals) in BUCKETS.iter().enumerate() {
            assert!(!literals.is_empty(), "bucket {b} is empty");
            for other in &BUCKETS[b + 1..] {
                for l in literals.iter() {
                    let key = nibble_key(l);
                    assert!(
                        other.iter().all(|o| nibble_key(o) != key),
                        "{l:?} shares its key with a literal of another bucket"
                    );
                }
            }
        }
    }

    /// Each literal's first place in the list is one that the library's rule gives its bucket
    /// (or one after a literal of its key in that bucket), and the list holds every literal.
    #[test]
    fn the_order_puts_each_literal_in_its_bucket() {
        let order = search_order();
        assert!(order.len() <= 64, "the library gives up past 64 literals");
        let mut bucket_of_key = std::collections::HashMap::new();
        for (i, literal) in order.iter().enumerate() {
            let b = BUCKETS.iter().position(|ls| ls.contains(literal)).unwrap();
            let taken = *bucket_of_key
                .entry(nibble_key(literal))
                .or_insert(SLIM - 1 - i % SLIM);
            assert_eq!(taken, b, "{literal:?} at place {i}");
        }
        for literal in all() {
            assert!(order.contains(&literal), "{literal:?} is not searched for");
        }
    }

    /// Every search this CPU can run, the automaton last, each named.
    fn searches() -> Vec<(&'static str, Prefilter)> {
        let literals: Vec<&str> = all().collect();
        let mut searches = vec![("packed", Prefilter::packed())];
        #[cfg(target_arch = "x86_64")]
        {
            let levels = Level::supported();
            for level in &levels {
                if let Some(teddy) = Teddy::new(&BUCKETS, *level) {
                    searches.push((level.name(), Prefilter::Own(Box::new(teddy))));
                }
            }
            if !levels.iter().any(|l| l.avx2()) {
                eprintln!("the AVX2 search was not tried: this CPU has no AVX2");
            }
            if !levels.iter().any(|l| l.avx512()) {
                eprintln!("the AVX-512 search was not tried: this CPU has no AVX-512 BW");
            }
        }
        searches.push(("automaton", Prefilter::automaton(&literals)));
        searches
    }

    #[test]
    fn every_literal_is_found_at_every_place_from_every_start() {
        let searches = searches();
        // Long enough for the AVX-512 search's two steps (131 bytes) and what it leaves over.
        let filler = "x".repeat(200);
        for literal in all() {
            for at in 0..=filler.len() - literal.len() {
                let text = format!(
                    "{}{literal}{}",
                    &filler[..at],
                    &filler[at + literal.len()..]
                );
                for from in [0, at.saturating_sub(1), at, at + 1, at.saturating_sub(40)] {
                    let want = (from <= at).then_some(at);
                    for (name, search) in &searches {
                        assert_eq!(
                            search.find(&text, from),
                            want,
                            "{name}: {literal:?} at {at}"
                        );
                    }
                }
            }
        }
    }

    /// Pieces of text that hold literals, parts of them, their nibbles' look-alikes and
    /// ordinary words, so the search's buckets are tried at every stop.
    fn piece() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let literal = proptest::sample::select(all().collect::<Vec<_>>()).prop_map(String::from);
        let part = (
            proptest::sample::select(all().collect::<Vec<_>>()),
            1usize..6,
        )
            .prop_map(|(l, n)| l.chars().take(n).collect());
        let word = proptest::sample::select(vec![
            "\n", " ", "E", "e", "Err", "erro", "FAI", "*", "**", "\nE", "\nma", "ok", "Uu", "ld",
            ": ", ")", "\u{e9}", "line 12", "\t", "N", "Segm", "com", "ter", "und",
        ])
        .prop_map(String::from);
        let noise = "[ -~]{0,12}";
        prop_oneof![literal, part, word, noise]
    }

    #[test]
    fn the_search_finds_each_literal_in_ordinary_text() {
        for (name, search) in searches() {
            for literal in all() {
                let text = format!("2026-11-21T09:51:37Z INFO worker-5 linked crate{literal} done");
                let at = text.find(literal).unwrap();
                assert_eq!(search.find(&text, 0), Some(at), "{name}: {literal:?}");
                assert_eq!(search.find(&text, at + 1), None, "{name}: {literal:?}");
            }
        }
    }

    proptest::proptest! {
        /// Each search's line ends and starts are where `memchr` and `memrchr` find them.
        #[test]
        fn line_ends_and_starts_are_where_the_newlines_are(
            text in "([a-z ]{0,70}\n){0,4}[a-z ]{0,70}",
            at in 0usize..400,
        ) {
            let at = at.min(text.len());
            let bytes = text.as_bytes();
            let end = memchr::memchr(b'\n', &bytes[at..]).map(|i| at + i);
            let start = memchr::memrchr(b'\n', &bytes[..at]).map_or(0, |i| i + 1);
            for (name, search) in &searches() {
                proptest::prop_assert_eq!(newline_from(Some(search), &text, at), end, "{}", name);
                proptest::prop_assert_eq!(line_start(Some(search), &text, at), start, "{}", name);
            }
        }

        /// Each search finds what an automaton of the same literals finds, from wherever it
        /// starts.
        #[test]
        fn the_searches_find_what_an_automaton_finds(
            pieces in proptest::collection::vec(piece(), 0..120),
            from in 0usize..400,
        ) {
            let searches = searches();
            let (_, automaton) = searches.last().unwrap();
            let text = pieces.concat();
            let from = text.floor_char_boundary(from.min(text.len()));
            let want = automaton.find(&text, from);
            for (name, search) in &searches {
                proptest::prop_assert_eq!(search.find(&text, from), want, "{}", name);
            }
        }
    }
}
