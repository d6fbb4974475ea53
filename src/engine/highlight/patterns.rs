//! The patterns that make a line a highlight candidate: the built-in ones for compilers, test
//! runners, sanitizers and logs, and a user's own; a SIMD search for their literals finds the
//! lines worth trying, and a log level confirms a log line without the whole set.

use std::sync::{Arc, LazyLock, OnceLock};

use memchr::memmem;
use regex::{Regex, RegexBuilder, RegexSet};

use super::prefilter::{self, LINE_STARTS, Prefilter};
use super::{CONTINUATION, FRAME};

/// Patterns for the root causes of failures in common toolchains.
///
/// Their classes are ASCII (`[0-9]`, `[A-Za-z0-9_]`, `(?-u:\b)`), never Unicode's `\d`, `\w`,
/// `\b`: all the patterns are one regex, whose lazy DFA has a capped cache per thread
/// ([`DFA_CACHE_BYTES`]), and a few Unicode classes in it were enough to overflow the cache on
/// every candidate line and drop the search to the PikeVM, a hundred times slower.
pub(super) const STRONG: &[&str] = &[
    // rustc / cargo
    r"^error(\[E[0-9]{4}\])?: ",
    r"panicked at ",
    // gcc / clang / go / most compilers: file:line[:col]: error
    r"^[^\s:]+:[0-9]+(:[0-9]+)?: (fatal )?error: ",
    r"^(fatal error|error): ",
    // linkers and compiler drivers: `collect2: error: ...`, `ld.lld: error: ...`
    r"^[A-Za-z0-9_.+/-]+: (fatal )?error: ",
    r"\): undefined reference to ",
    r"ld: cannot find ",
    r"^CMake Error",
    r"^[^\s:]+\.go:[0-9]+:[0-9]+: ",
    // tsc
    // tsc, C#, MSBuild: `error TS2307: `, `error CS0246: `
    r"(?-u:\b)error [A-Z]{2,}[0-9]+: ",
    // Python, Java, JavaScript and friends: the exception line (`Error: ENOENT ...` too)
    r"^(Uncaught )?([A-Za-z_][A-Za-z0-9_.$]*)?(Error|Exception)( \[[A-Za-z0-9_-]+\])?(: .*)?$",
    r"^Error(?-u:\b)",
    r"\([A-Za-z0-9_]*(Error|Exception)\)$",
    r"Unhandled[A-Za-z0-9_]*(Rejection|Exception)",
    r"(?-u:\b)(Fatal|Parse) error: ",
    r"^\*\* \([A-Za-z0-9_]+",
    r"^terminate called ",
    r"has overflowed its stack",
    r"Assertion .* failed",
    r"^Exception in thread ",
    r"^Caused by: ",
    // test runners: pytest's summary, its `-v` result and its `E   ` lines; go; cargo
    r"^FAILED ",
    r"^ERROR ",
    r" FAILED( +\[ *[0-9]+%\])?$",
    r"^E {3}",
    r"^--- FAIL: ",
    r"^panic: ",
    r"^test .* \.\.\. FAILED$",
    // package managers and tools: npm, maven, pip, git
    r"^npm (ERR!|error) ",
    r"^\[ERROR\] ",
    r"^ERROR: ",
    r"^fatal: ",
    r"^E: ",
    r"^FAILURE: ",
    // sanitizers and valgrind
    r"(ERROR|WARNING): [A-Za-z0-9_]*Sanitizer",
    r"runtime error: ",
    r"^==[0-9]+== (Invalid (read|write|free)|Mismatched free|Conditional jump|Use of uninitialised|Syscall param|Source and destination overlap|Process terminating)",
    r"definitely lost: [1-9]",
    // the process itself
    r"(?-u:\b)(Segmentation fault|Bus error|Illegal instruction|Aborted)( \(core dumped\))?$",
    r"^Killed$",
    r"[0-9]+ Killed(?-u:\b)",
    r": (command not found|Permission denied|No such file or directory)$",
    // containers
    r"(?-u:\b)(OOMKilled|CrashLoopBackOff|ImagePullBackOff|ErrImagePull)(?-u:\b)",
    // log levels
    r"(?-u:\b)(ERROR|FATAL|CRITICAL)(?-u:\b)",
    r"(?-u:\b)level=(error|fatal)(?-u:\b)",
];

/// Patterns for lines that restate a failure without its cause.
pub(super) const WEAK: &[&str] = &[
    r"\*\*\* ",
    r"^error: could not compile ",
    r"^npm (ERR!|error) A complete log of this run",
    r"^Traceback \(most recent call last\):",
    r"^FAIL[ \t]",
    r"^make(\[[0-9]+\])?: ",
    r"^test result: FAILED",
    r"^BUILD FAILED(?-u:\b)",
    r"(?-u:\b)Build failed(?-u:\b)",
    r"^\* What went wrong:",
];

/// What may come before a line's own start: indentation, and the prefixes other tools put
/// before the lines they pass on (a box's `│ ` or `║`, a `| ` or `> ` quote), in any mix. A
/// pattern anchored at a line's start matches after it, so a compiler error that pip prints
/// indented inside its output box is found as it is at column 0: the patterns are a prior on
/// what a line says, not on where a tool happens to print it.
pub(super) const LINE_PREFIX: &str = r"(?:[ \t]|[│┃║╎┆┊>|] ?)*";

/// The characters a [`LINE_PREFIX`] is made of: it matches any run of them.
const PREFIX_CHARS: [char; 10] = [' ', '\t', '│', '┃', '║', '╎', '┆', '┊', '>', '|'];

/// `line` after its [`LINE_PREFIX`], the longest: a pattern moved past the prefix by
/// [`after_prefix`] whose own text cannot begin with one of [`PREFIX_CHARS`] matches a line
/// exactly when the pattern itself, anchored, matches what this leaves. Stripping once and
/// matching anchored patterns costs a few instructions a line; the prefixed patterns, which
/// no literal starts, had their automaton walk every byte of every line.
pub(super) fn strip_line_prefix(line: &str) -> &str {
    line.trim_start_matches(PREFIX_CHARS)
}

/// `pattern` with its anchor at a line's start (a leading `^`) moved past a [`LINE_PREFIX`],
/// unless the prefilter only finds its line at column 0 (one of [`LINE_STARTS`]): a pattern
/// matched where the prefilter never looks would make whether a line is found depend on the
/// search, not on the line.
pub(super) fn after_prefix(pattern: &str) -> String {
    match pattern.strip_prefix('^') {
        Some(rest) if !found_at_column_zero_only(rest) => format!("^{LINE_PREFIX}(?:{rest})"),
        _ => pattern.to_string(),
    }
}

/// Whether an anchored pattern (its text after the `^`) needs one of [`LINE_STARTS`].
fn found_at_column_zero_only(rest: &str) -> bool {
    let literal = rest.replace(" {3}", "   ").replace('\\', "");
    LINE_STARTS.iter().any(|l| literal.starts_with(l))
}

impl Compiled {
    /// The regexes of the default patterns plus `extra`, each built when first needed.
    fn lazy(extra: &[String]) -> Compiled {
        Compiled {
            extra: extra.into(),
            any: OnceLock::new(),
            weak: OnceLock::new(),
            continuation: OnceLock::new(),
            frame: OnceLock::new(),
        }
    }

    /// The regexes of the default patterns plus the user's `extra`, built now, so that a
    /// bad one is told at once.
    fn now(extra: &[String]) -> Result<Compiled, BadPattern> {
        let compiled = Compiled::lazy(extra);
        let _ = compiled.any.set(any_regex(extra)?);
        let _ = compiled.weak.set(WeakSets::new(extra)?);
        compiled.continuation();
        compiled.frame();
        Ok(compiled)
    }

    /// The one regex of every pattern: whether a line matches at all.
    pub(super) fn any(&self) -> &Regex {
        self.any
            .get_or_init(|| any_regex(&self.extra).expect(CHECKED))
    }

    pub(super) fn weak(&self) -> &WeakSets {
        self.weak
            .get_or_init(|| WeakSets::new(&self.extra).expect(CHECKED))
    }

    pub(super) fn continuation(&self) -> &Regex {
        self.continuation
            .get_or_init(|| Regex::new(CONTINUATION).expect("the continuation pattern is valid"))
    }

    pub(super) fn frame(&self) -> &Regex {
        self.frame
            .get_or_init(|| Regex::new(FRAME).expect("the frame pattern is valid"))
    }
}

/// What a regex built when first needed expects of the user's patterns.
const CHECKED: &str = "the patterns were checked when they were made";

/// One regex of every default pattern and the user's `extra`, the alternatives in order.
fn any_regex(extra: &[String]) -> Result<Regex, BadPattern> {
    let all: Vec<String> = STRONG
        .iter()
        .chain(WEAK)
        .map(|p| format!("(?:{})", after_prefix(p)))
        .chain(extra.iter().map(|p| format!("(?:{p})")))
        .collect();
    RegexBuilder::new(&all.join("|"))
        .multi_line(true)
        .size_limit(PATTERN_SIZE_LIMIT * (1 + extra.len()))
        .dfa_size_limit(DFA_CACHE_BYTES)
        .build()
        .map_err(|e| BadPattern {
            pattern: all.join("|"),
            reason: e.to_string(),
        })
}

/// The sets that tell a weak match (a restatement) from a strong one.
#[derive(Debug)]
pub(super) struct WeakSets {
    /// The restatements matched on a whole line, and those [`after_prefix`] moves past a
    /// line's prefix, matched as written on the line after it ([`strip_line_prefix`]).
    pub(super) whole: RegexSet,
    pub(super) after_prefix: RegexSet,
    /// The user's patterns, which are strong wherever they match.
    pub(super) extra: RegexSet,
}

impl WeakSets {
    fn new(extra: &[String]) -> Result<WeakSets, BadPattern> {
        let build = |patterns: &[String]| {
            RegexSet::new(patterns.iter().map(|p| format!("(?m){p}"))).map_err(|e| BadPattern {
                pattern: patterns.join(" | "),
                reason: e.to_string(),
            })
        };
        let (after, whole): (Vec<&str>, Vec<&str>) =
            WEAK.iter().partition(|p| after_prefix(p) != **p);
        let as_strings = |p: &[&str]| p.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        Ok(WeakSets {
            whole: build(&as_strings(&whole))?,
            after_prefix: build(&as_strings(&after))?,
            extra: build(extra)?,
        })
    }
}

/// Cap on each thread's lazy-DFA cache for the patterns: every run's reader thread gets its
/// own, and the default (a few MiB) times 32 runs in flight would dominate the daemon's memory.
pub(super) const DFA_CACHE_BYTES: usize = 256 * 1024;

/// Most memory one user highlight pattern may compile to, as for `grep` patterns: a hostile
/// `--highlight` cannot take the daemon's memory (the regex crate's default is 10 MiB).
pub(super) const PATTERN_SIZE_LIMIT: usize = 4 << 20;

/// Which patterns to look for.
#[derive(Debug, Clone)]
pub struct Patterns {
    /// The [`Prefilter`], when only the default patterns are in use (shared by the clones: a
    /// run clones its patterns, and copying its tables was a tenth of a short run's launch).
    pub(super) prefilter: Option<Arc<Prefilter>>,
    /// The regexes, each compiled when a line first needs it: most outputs `spillway
    /// truncate` is given hold no candidate line, and compiling the default patterns was most
    /// of what truncating one line cost (12 M of its 15 M instructions); a log's error lines
    /// need only the weak sets (2 M), not the one regex of every pattern (8 M). Shared by the
    /// clones.
    compiled: Arc<Compiled>,
}

/// The regexes of a [`Patterns`], each built by its first caller (all at once when the user
/// gave patterns of their own).
#[derive(Debug)]
pub(super) struct Compiled {
    /// The user's patterns (`--highlight`).
    extra: Box<[String]>,
    any: OnceLock<Regex>,
    weak: OnceLock<WeakSets>,
    continuation: OnceLock<Regex>,
    frame: OnceLock<Regex>,
}

/// A pattern given by the user that is not a valid regular expression.
#[derive(Debug, thiserror::Error)]
#[error("bad highlight pattern {pattern:?}: {reason}")]
pub struct BadPattern {
    pub(super) pattern: String,
    pub(super) reason: String,
}

impl Patterns {
    /// The default patterns, made once per process, their regexes compiled once when first
    /// needed (compiling them costs milliseconds, too much for every run).
    pub fn defaults() -> Patterns {
        static DEFAULT: std::sync::OnceLock<Patterns> = std::sync::OnceLock::new();
        DEFAULT
            .get_or_init(|| Patterns::new(&[]).expect("the default highlight patterns are valid"))
            .clone()
    }

    /// The defaults when `extra` is empty, else the default patterns plus `extra`.
    pub fn with_extra(extra: &[String]) -> Result<Patterns, BadPattern> {
        if extra.is_empty() {
            Ok(Patterns::defaults())
        } else {
            Patterns::new(extra)
        }
    }

    /// The default patterns, plus `extra` (the user's `--highlight`), which count as strong.
    /// The user's are compiled now, so that a bad one is told at once; the defaults alone,
    /// which a test compiles, when first needed.
    pub fn new(extra: &[String]) -> Result<Patterns, BadPattern> {
        for pattern in extra {
            RegexBuilder::new(pattern)
                .size_limit(PATTERN_SIZE_LIMIT)
                .build()
                .map_err(|e| BadPattern {
                    pattern: pattern.clone(),
                    reason: e.to_string(),
                })?;
        }
        let compiled = if extra.is_empty() {
            Compiled::lazy(extra)
        } else {
            Compiled::now(extra)?
        };
        Ok(Patterns {
            // A user's pattern may need none of the literals: then every line is tried.
            prefilter: extra.is_empty().then(|| Arc::new(Prefilter::new())),
            compiled: Arc::new(compiled),
        })
    }

    /// The regexes, each compiled by its first caller.
    pub(super) fn compiled(&self) -> &Compiled {
        &self.compiled
    }

    /// Compiles the regexes now, where a process (the daemon, at its start) would rather not
    /// pay for them at the first line that needs them.
    pub fn compile_now(&self) {
        let compiled = self.compiled();
        compiled.any();
        compiled.weak();
        compiled.continuation();
        compiled.frame();
    }

    /// Whether `line` (one line, no newline needed) looks like an error: a candidate (see
    /// [`Patterns::candidate_lines`]) the patterns match, so that a line no literal makes a
    /// candidate costs no compiling of the regex of every pattern.
    pub fn is_match(&self, line: &str) -> bool {
        let line = line.strip_suffix('\n').unwrap_or(line);
        self.next_candidate(line, None)
            .is_some_and(|(_, hit)| self.matches(line, hit))
    }

    /// The lines of `text` (up to its last newline) worth trying against the patterns, in
    /// order. Finding them is most of the cost of scanning, and needs nothing but the text, so
    /// a caller may find them on one thread and scan on another
    /// ([`Highlighter::write_lines`]).
    pub fn candidate_lines(&self, text: &str) -> CandidateLines {
        // Room for a line in every 512 bytes, so a log's piece seldom grows the list: grown
        // from nothing, its copies cost 1.9 M instructions of the writer's for 64 MiB of the
        // truncate bench's log, one candidate line in five.
        let mut lines = Vec::with_capacity(text.len() / 512);
        let mut after = None;
        while let Some((start, hit)) = self.next_candidate(text, after) {
            // From the hit on: no literal holds a newline but at its start, before the hit.
            let Some(end) = prefilter::newline_from(self.prefilter.as_deref(), text, hit) else {
                break;
            };
            lines.push(CandidateLine { start, end, hit });
            after = Some(end);
        }
        CandidateLines(lines)
    }

    /// Where the next line of `text` worth trying against the patterns starts, `after` the
    /// line that ends at that newline (`None`: from the start): a line holding a prefilter
    /// literal or beginning with a [`LINE_STARTS`] one (or, with the user's patterns, one the
    /// patterns match). Each line is offered once, in order: where it starts, and where in it
    /// the literal (or the match) found starts.
    fn next_candidate(&self, text: &str, after: Option<usize>) -> Option<(usize, usize)> {
        let line_start = |at: usize| prefilter::line_start(self.prefilter.as_deref(), text, at);
        let Some(prefilter) = &self.prefilter else {
            let from = after.map_or(0, |end| end + 1);
            if from >= text.len() {
                return None;
            }
            return self
                .compiled()
                .any()
                .find_at(text, from)
                .map(|m| (line_start(m.start()), m.start()));
        };
        if after.is_none() && LINE_STARTS.iter().any(|l| text.starts_with(l)) {
            return Some((0, 0));
        }
        // From the newline on: a LINE_STARTS literal matches with the newline before it.
        let at = prefilter.find(text, after.unwrap_or(0))?;
        Some(if text.as_bytes()[at] == b'\n' {
            (at + 1, at + 1)
        } else {
            (line_start(at), at)
        })
    }

    /// Whether `line`, in which the search for candidate lines found something at byte
    /// `hit`, matches. A log level confirms a default-pattern line without the whole pattern
    /// set: in a log flood that is most candidates, and what was found is the level itself.
    pub(super) fn matches(&self, line: &str, hit: usize) -> bool {
        let confirmed =
            self.prefilter.is_some() && (log_level_at(line.as_bytes(), hit) || has_log_level(line));
        confirmed || self.compiled().any().is_match(line)
    }

    pub(super) fn is_weak(&self, line: &str) -> bool {
        let sets = self.compiled().weak();
        let weak = sets.whole.is_match(line) || sets.after_prefix.is_match(strip_line_prefix(line));
        weak && !sets.extra.is_match(line)
    }
}

/// The lines of a text worth trying against the patterns (see [`Patterns::candidate_lines`]).
#[derive(Debug, Default)]
pub struct CandidateLines(pub(super) Vec<CandidateLine>);

/// A line of a text worth trying: where it starts and ends (its newline), and where in it the
/// literal (or the match) that makes it worth trying starts.
#[derive(Debug, Clone, Copy)]
pub(super) struct CandidateLine {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) hit: usize,
}

/// The log levels the log-level pattern matches as words.
const LOG_LEVELS: [&str; 3] = ["ERROR", "FATAL", "CRITICAL"];

/// Searchers for the [`LOG_LEVELS`], built once: building one costs more than searching a
/// line with it.
static LOG_LEVEL_FINDERS: LazyLock<[memmem::Finder<'static>; 3]> =
    LazyLock::new(|| LOG_LEVELS.map(memmem::Finder::new));

/// Whether `line` holds one of the [`LOG_LEVELS`] as a word (what the log-level pattern
/// matches).
fn has_log_level(line: &str) -> bool {
    let bytes = line.as_bytes();
    LOG_LEVEL_FINDERS.iter().any(|level| {
        level
            .find_iter(bytes)
            .any(|at| is_word_at(bytes, at, at + level.needle().len()))
    })
}

/// Whether one of the [`LOG_LEVELS`] starts at byte `at` of `line`, as a word.
fn log_level_at(line: &[u8], at: usize) -> bool {
    LOG_LEVELS.iter().any(|level| {
        line[at..].starts_with(level.as_bytes()) && is_word_at(line, at, at + level.len())
    })
}

/// Whether bytes `start..end` of `line` are a word: no letter, digit or `_` on either side.
fn is_word_at(line: &[u8], start: usize, end: usize) -> bool {
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    (start == 0 || !is_word(line[start - 1])) && line.get(end).is_none_or(|&b| !is_word(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_regexes_compile_once_when_first_needed_and_a_bad_user_pattern_is_told_at_once() {
        let patterns = Patterns::new(&[]).expect("the defaults are valid");
        let built = |p: &Patterns| {
            let c = p.compiled();
            [
                c.any.get().is_some(),
                c.weak.get().is_some(),
                c.continuation.get().is_some(),
                c.frame.get().is_some(),
            ]
        };
        assert_eq!(
            built(&patterns),
            [false; 4],
            "compiled before a line needed it"
        );
        let clone = patterns.clone();
        assert!(clone.is_weak("make: *** [all] Error 2"));
        assert_eq!(
            built(&patterns),
            [false, true, false, false],
            "a clone's weak line built the weak sets, for every clone, and nothing else"
        );
        assert!(clone.is_match("error: linking failed"));
        assert_eq!(built(&patterns), [true, true, false, false]);
        patterns.compile_now();
        assert_eq!(built(&patterns), [true; 4]);
        let mine = Patterns::new(&["^boom".to_string(), "Error 2$".to_string()]).expect("valid");
        assert_eq!(
            built(&mine),
            [true; 4],
            "a user's patterns are compiled at once"
        );
        assert!(mine.is_match("boom goes the build"));
        assert!(
            !mine.is_weak("make: *** [all] Error 2"),
            "a weak line a user's pattern matches is strong"
        );
        let bad = Patterns::new(&["(unclosed".to_string()]).expect_err("invalid");
        assert_eq!(bad.pattern, "(unclosed");
    }

    fn prefixed_line() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let prefix = prop::collection::vec(
            prop::sample::select(vec![
                " ", "\t", "│ ", "┃", "║", "╎ ", "┆", "┊", "> ", "|", "x",
            ]),
            0..4,
        );
        let words = prop::collection::vec(
            prop::sample::select(vec![
                "error:",
                "could",
                "not",
                "compile",
                "FAIL",
                "FAIL\t",
                "test",
                "result:",
                "FAILED",
                "BUILD",
                "Build",
                "failed",
                "make:",
                "make[2]:",
                "***",
                "npm",
                "ERR!",
                "A",
                "complete",
                "log",
                "Traceback",
                "* What went wrong:",
                "|",
                ">",
                " ",
                "\t",
                "│",
                "ok",
                "x",
                "ERROR",
                "FATAL",
                "panicked",
                "at",
                "warning:",
            ]),
            0..6,
        );
        (prefix, words).prop_map(|(p, w)| format!("{}{}", p.concat(), w.join(" ")))
    }

    proptest::proptest! {
        /// A restatement found on the line after its prefix is one the prefixed patterns
        /// find on the whole line, and the other way round.
        #[test]
        fn weak_after_a_stripped_prefix_is_weak_after_any_prefix(line in prefixed_line()) {
            let prefixed = RegexSet::new(WEAK.iter().map(|p| format!("(?m){}", after_prefix(p))))
                .unwrap();
            let p = Patterns::defaults();
            proptest::prop_assert_eq!(p.is_weak(&line), prefixed.is_match(&line), "{:?}", line);
        }

        /// A line matches exactly when a log level or the regex of every pattern says so:
        /// asking the prefilter first only spares compiling that regex for a line it rules out.
        #[test]
        fn a_match_is_what_the_regex_of_every_pattern_finds(line in prefixed_line()) {
            let p = Patterns::defaults();
            let whole = has_log_level(&line) || p.compiled().any().is_match(&line);
            proptest::prop_assert_eq!(p.is_match(&line), whole, "{:?}", line);
        }

        /// The candidate lines of a text, found by one search through it, are its complete
        /// lines that are candidates on their own, each with where its first literal starts:
        /// no literal spans lines, and the search takes each line once.
        #[test]
        fn candidate_lines_are_the_lines_that_are_candidates_alone(
            lines in proptest::collection::vec(prefixed_line(), 0..12),
            last in prefixed_line(),
            user in proptest::bool::ANY,
        ) {
            let p = if user {
                Patterns::new(&["boom|F[A-Z]+".to_string()]).expect("valid")
            } else {
                Patterns::defaults()
            };
            let text: String = lines.iter().map(|l| format!("{l}\n")).chain([last]).collect();
            let mut alone = Vec::new();
            let mut start = 0;
            for line in &lines {
                let end = start + line.len();
                if let Some((0, hit)) = p.next_candidate(&format!("{line}\n"), None) {
                    alone.push((start, end, start + hit));
                }
                start = end + 1;
            }
            let found: Vec<_> =
                p.candidate_lines(&text).0.iter().map(|l| (l.start, l.end, l.hit)).collect();
            proptest::prop_assert_eq!(found, alone, "{:?}", text);
        }
    }
}
