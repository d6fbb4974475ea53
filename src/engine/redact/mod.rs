//! Credential redaction for text on its way to a model.
//!
//! spillway keeps every byte of a command's output on disk but hands a model only a bounded
//! preview, a page or grep matches. Those pieces are where a token printed by `env`, a
//! `kubectl get secret -o yaml` or a `git remote -v` would leak, so they pass through
//! [`Redactor::redact`] first. The file on disk is never touched: redaction is a view.
//!
//! The module owns one table of rules (`RULES` in `redact/rules.rs`), each naming the *kind*
//! that ends up in the marker `[redacted: KIND]`. A rule finds
//! candidates with a regex, a keyword assignment (`KEY=VALUE`, `"key": "value"`,
//! `--flag value`) whose key and value are then judged in code, or a small procedure for the
//! two shapes that span lines (private key blocks and the `data:` of a Kubernetes Secret). A
//! prefilter of trigger literals decides which rules run, and where. Overlapping candidates are
//! resolved so that each secret gets one marker, and the most specific rule names it.
//!
//! Guarantees the rest of spillway relies on:
//! * only the secret is replaced: keys, quotes and the rest of the line stay readable;
//! * line structure is kept: a span that covered line breaks is replaced by the marker followed
//!   by the same line breaks (so a private key becomes its marker and empty lines);
//! * redacting redacted text changes nothing (markers never match a rule, and a redaction is
//!   repeated until it is stable, as a marker can give its neighbour new context);
//! * text with no candidate is returned borrowed after one scan for trigger literals.
//!
//! False alarms cost the model information, so the generic rules are deliberately narrow: git
//! hashes, digests, UUIDs, integrity hashes and base64 blobs never match on their own, and a
//! keyword assignment is redacted only when its value looks like a secret: not a placeholder,
//! reference, path, version, type name or prose, and, where the syntax is ambiguous, with the
//! character mix and entropy of a secret.
//!
//! Private keys: the BEGIN line becomes the marker and the body and END lines stay as empty
//! lines. A block cut by a page boundary is still found: from a BEGIN line through the lines
//! that can be key material, and from a lone END line back over the base64 lines above it.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{LazyLock, OnceLock};

use regex::{Regex, RegexBuilder};

/// Compiled-size cap per regex: the built-in rules need far less, and a user pattern that needs
/// more is refused rather than allowed to make every redaction slow.
const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Lazy-DFA cache cap per regex, for the same reason.
const DFA_SIZE_LIMIT: usize = 2 << 20;
/// Passes of [`Redactor::redact`] at most (see there); two are the most real text needs.
const MAX_PASSES: usize = 4;
/// How every marker starts.
const MARKER: &[u8] = b"[redacted: ";
/// Trigger literals per prefilter regex (see `Compiled::triggers`).
const TRIGGER_GROUP: usize = 18;
/// How much of an invalid user pattern an error quotes, so a huge pattern cannot flood a log.
const ERROR_PATTERN_CHARS: usize = 80;

mod blocks;
mod keyword;
mod rules;
mod tally;

pub use tally::{Counts, notice_line, unkept_notice_line};

use blocks::{key_blocks, kube_secret};
use keyword::keyword_at;
use rules::{Find, RULES};

/// The kinds the built-in rules can report, each once, in table order (the test that
/// checks them unique). User patterns report the kind `custom`.
#[cfg(test)]
fn rule_names() -> impl Iterator<Item = &'static str> {
    RULES
        .iter()
        .enumerate()
        .filter(|(i, r)| !RULES[..*i].iter().any(|p| p.name == r.name))
        .map(|(_, r)| r.name)
}

/// Why [`Redactor::with_extra`] refused its patterns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedactError {
    /// A user pattern did not compile (or exceeded the size cap); `pattern` is at most its
    /// first 80 characters.
    InvalidPattern { pattern: String, message: String },
}

impl fmt::Display for RedactError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidPattern { pattern, message } => {
                write!(f, "invalid redaction pattern `{pattern}`: {message}")
            }
        }
    }
}

impl std::error::Error for RedactError {}

/// Built-in rules plus any extra user patterns.
pub struct Redactor {
    /// User patterns, redacted as kind `custom`: the group named `secret` if the pattern has
    /// one, else the whole match.
    extra: Vec<Regex>,
}

/// The output of [`Redactor::redact`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted<'a> {
    /// The text with each secret replaced by `[redacted: KIND]`; borrowed when nothing matched.
    pub text: Cow<'a, str>,
    /// How many secrets of each kind were replaced.
    pub counts: BTreeMap<&'static str, u64>,
}

impl Redacted<'_> {
    /// Secrets replaced, all kinds together.
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }
}

impl fmt::Debug for Redactor {
    /// Counts only: the patterns themselves may describe what a user considers secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("builtin_rules", &RULES.len())
            .field("extra_patterns", &self.extra.len())
            .finish()
    }
}

static BUILTIN: Redactor = Redactor { extra: Vec::new() };

/// A rule a trigger literal wakes: its row, and the offset and length of its trigger within
/// the literal (for keyword rules, where the keyword itself is the starting point).
type Wake = (usize, usize, usize);

/// The built-in rules compiled once, with the prefilter that decides which of them run.
struct Compiled {
    /// One regex per row of [`RULES`], compiled when the row first runs (never, for the rows
    /// that are procedures): see [`Warm`].
    regexes: Vec<OnceLock<Regex>>,
    /// Alternations of the trigger literals, run over the lower-cased text. A few groups of ~18
    /// literals each scan several times faster than one alternation of all of them, whose
    /// SIMD prefilter drowns in candidates.
    triggers: Vec<Regex>,
    /// Sorted trigger literals, each with the rules it wakes and where their trigger sits in it.
    literals: Vec<(String, Vec<Wake>)>,
}

fn build(pattern: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(DFA_SIZE_LIMIT)
        .build()
}

static COMPILED: LazyLock<Compiled> = LazyLock::new(|| {
    let regexes = RULES.iter().map(|_| OnceLock::new()).collect();
    let mut literals: Vec<&str> = RULES
        .iter()
        .flat_map(|r| r.triggers.iter().copied())
        .collect();
    literals.sort_unstable();
    literals.dedup();
    let literals: Vec<(String, Vec<Wake>)> = literals
        .iter()
        .map(|lit| {
            let wakes = RULES
                .iter()
                .enumerate()
                .filter_map(|(r, rule)| {
                    let t = rule.triggers.iter().find(|t| lit.contains(**t))?;
                    Some((r, lit.find(t)?, t.len()))
                })
                .collect();
            (lit.to_string(), wakes)
        })
        .collect();
    let triggers = literals
        .chunks(TRIGGER_GROUP)
        .map(|group| {
            let mut group: Vec<&str> = group.iter().map(|(l, _)| l.as_str()).collect();
            group.sort_by_key(|l| std::cmp::Reverse(l.len())); // longest first at one start
            let alternation: Vec<String> = group.iter().map(|l| regex::escape(l)).collect();
            build(&alternation.join("|")).expect("trigger regex compiles")
        })
        .collect();
    Compiled {
        regexes,
        triggers,
        literals,
    }
});

impl Compiled {
    /// Row `r`'s regex, `pattern`, compiled the first time it is asked for.
    fn regex(&self, r: usize, pattern: &str) -> &Regex {
        self.regexes[r].get_or_init(|| build(pattern).expect("built-in redaction regex compiles"))
    }

    /// Compiles every row's regex now.
    fn compile_all(&self) {
        for (r, rule) in RULES.iter().enumerate() {
            if let Find::Re(pattern) = rule.find {
                self.regex(r, pattern);
            }
        }
    }
}

/// What [`warm_up`] compiles ahead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warm {
    /// The prefilter (5 M instructions); each rule then compiles when a text first wakes it.
    /// For a process that redacts one short preview (`spillway truncate` of a short input),
    /// whose text wakes none or a few of the rules: compiling all 42 regexes costs 40 M
    /// instructions, more than the rest of such a run, and took CPU from its stream.
    Prefilter,
    /// The prefilter and the rules this sample of the text to redact wakes (by redacting it
    /// once): for a process that will redact one text of which it has seen a part
    /// (`spillway truncate` of a long input, whose preview folds lines like the sample's into
    /// templates). A rule only the rest of the text wakes compiles when it does.
    WokenBy(String),
    /// Every rule: a process whose redactions may need any of them (the daemon).
    EveryRule,
}

/// Compiles the built-in rules (`what` of them) on a thread of their own and returns at once:
/// a process that will redact (the daemon at its start, `spillway truncate` while its input
/// streams) then need not wait for them at the end. Without it, the first redaction compiles
/// the prefilter, and each rule compiles when first woken.
pub fn warm_up(what: Warm) {
    let _ = std::thread::Builder::new()
        .name("spillway-redaction".into())
        .spawn(move || {
            let compiled = LazyLock::force(&COMPILED);
            match what {
                Warm::Prefilter => {}
                Warm::WokenBy(sample) => {
                    let _ = BUILTIN.redact(&sample);
                }
                Warm::EveryRule => compiled.compile_all(),
            }
        });
}

/// One possible secret: byte span, precedence and kind.
#[derive(Clone, Copy)]
struct Candidate {
    start: usize,
    end: usize,
    class: u8,
    order: usize,
    kind: &'static str,
}

impl Redactor {
    /// The built-in rules (compiled once, shared).
    pub fn builtin() -> &'static Redactor {
        &BUILTIN
    }

    /// The built-in rules plus user regexes, each redacted as kind `custom`.
    ///
    /// A pattern with a group named `secret` redacts only that group, so `token: (?P<secret>\w+)`
    /// keeps the key. Fails on the first pattern that does not compile within the size cap,
    /// naming at most its first 80 characters.
    pub fn with_extra(patterns: &[String]) -> Result<Redactor, RedactError> {
        let extra = patterns
            .iter()
            .map(|p| {
                build(p).map_err(|e| RedactError::InvalidPattern {
                    pattern: p.chars().take(ERROR_PATTERN_CHARS).collect(),
                    message: e.to_string(),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Redactor { extra })
    }

    /// Redacts `text`. Returns the text unchanged (`Cow::Borrowed`) when nothing matched.
    pub fn redact<'a>(&self, text: &'a str) -> Redacted<'a> {
        let mut counts = BTreeMap::new();
        // No text holds no secret: not looking spares a command that printed nothing the
        // rules' compilation (1.5 ms of a `truncate` of no output, half its time).
        let first = (!text.is_empty())
            .then(|| self.redact_once(text, &mut counts))
            .flatten();
        let Some(mut current) = first else {
            return Redacted {
                text: Cow::Borrowed(text),
                counts,
            };
        };
        // A marker can give its neighbour new context (`…tokenPGPASSWORD=x` becomes
        // `[redacted: …]PGPASSWORD=x`), so repeat until nothing changes: then redacted text is
        // a fixed point. Each pass removes original text, so this ends; the cap is a backstop.
        for _ in 1..MAX_PASSES {
            match self.redact_once(&current, &mut counts) {
                Some(next) => current = next,
                None => break,
            }
        }
        Redacted {
            text: Cow::Owned(current),
            counts,
        }
    }

    /// One pass of every rule; `None` when nothing matched.
    fn redact_once(&self, text: &str, counts: &mut BTreeMap<&'static str, u64>) -> Option<String> {
        let mut found = Vec::new();
        scan_builtin(text, &mut found);
        if !self.extra.is_empty() {
            // User patterns may match our own markers (`redacted`); those are not secrets.
            let markers: Vec<(usize, usize)> = memchr::memmem::find_iter(text.as_bytes(), MARKER)
                .map(|s| (s, text[s..].find(']').map_or(text.len(), |e| s + e + 1)))
                .collect();
            for (i, re) in self.extra.iter().enumerate() {
                for caps in re.captures_iter(text) {
                    let Some(m) = caps.name("secret").or_else(|| caps.get(0)) else {
                        continue;
                    };
                    if m.is_empty() || markers.iter().any(|&(s, e)| m.start() < e && s < m.end()) {
                        continue;
                    }
                    found.push(Candidate {
                        start: m.start(),
                        end: m.end(),
                        class: 1,
                        order: RULES.len() + i,
                        kind: "custom",
                    });
                }
            }
        }
        if found.is_empty() {
            return None;
        }
        Some(render(text, resolve(found), counts))
    }
}

/// Runs the prefilter, then every rule it woke up. Regex rules run only on the lines that hold
/// one of their triggers (all of them match within a line) and keyword rules only around the
/// keyword itself, so text with many lines and one `token=` costs one scan and one key.
fn scan_builtin(text: &str, found: &mut Vec<Candidate>) {
    let compiled = &*COMPILED;
    let lower = text.to_ascii_lowercase();
    let bytes = text.as_bytes();
    // Per rule: the line spans (regex rules) or keyword spans (keyword rules) to look at, or
    // `None` when the rule did not wake up.
    let mut spans: Vec<Option<Vec<(usize, usize)>>> = vec![None; RULES.len()];
    let mut keyword_hits: Vec<(usize, usize)> = Vec::new();
    for trigger in &compiled.triggers {
        let mut line: Option<(usize, usize)> = None;
        let mut pos = 0;
        while let Some(m) = trigger.find_at(&lower, pos) {
            let current = match line {
                Some((s, e)) if m.start() >= s && m.start() < e => (s, e),
                _ => {
                    // Search back only to the previous hit's line: a long line costs one pass.
                    let from = line.map_or(0, |(_, e)| e);
                    let start = memchr::memrchr(b'\n', &bytes[from..m.start()])
                        .map_or(from, |i| from + i + 1);
                    let end = memchr::memchr(b'\n', &bytes[m.end()..])
                        .map_or(text.len(), |i| m.end() + i);
                    (start, end)
                }
            };
            line = Some(current);
            let wakes = compiled
                .literals
                .binary_search_by(|(l, _)| l.as_str().cmp(m.as_str()))
                .map_or(&[][..], |i| compiled.literals[i].1.as_slice());
            for &(r, offset, len) in wakes {
                if let Find::Keyword(_) = RULES[r].find {
                    keyword_hits.push((m.start() + offset, m.start() + offset + len));
                } else {
                    spans[r].get_or_insert_with(Vec::new).push(current);
                }
            }
            // Step one byte (triggers are ASCII) so overlapping literals are seen too.
            pos = m.start() + 1;
        }
    }
    // One pass over the keys for all keyword families: each key is judged once.
    keyword_hits.sort_unstable();
    let mut last_key = (0, 0);
    for (at, end) in keyword_hits {
        if let Some((r, s, e)) = keyword_at(text, at, end, &mut last_key) {
            let rule = &RULES[r];
            found.push(Candidate {
                start: s,
                end: e,
                class: rule.class,
                order: r,
                kind: rule.name,
            });
        }
    }
    for (r, rule) in RULES.iter().enumerate() {
        let spans = match spans[r].take() {
            _ if rule.triggers.is_empty() => vec![(0, text.len())],
            Some(mut spans) => {
                spans.sort_unstable();
                spans.dedup();
                spans
            }
            None => continue,
        };
        let mut push = |start: usize, end: usize| {
            found.push(Candidate {
                start,
                end,
                class: rule.class,
                order: r,
                kind: rule.name,
            });
        };
        match rule.find {
            Find::KeyBlock => key_blocks(text, &mut push),
            Find::KubeSecret => kube_secret(text, &mut push),
            Find::Keyword(_) => {}
            Find::Re(pattern) => {
                let re = compiled.regex(r, pattern);
                for &(ls, le) in &spans {
                    for caps in re.captures_iter(&text[ls..le]) {
                        let Some(m) = caps.iter().skip(1).flatten().next().or_else(|| caps.get(0))
                        else {
                            continue;
                        };
                        if !m.is_empty() && rule.check.is_none_or(|check| check(m.as_str())) {
                            push(ls + m.start(), ls + m.end());
                        }
                    }
                }
            }
        }
    }
}

/// Picks one candidate per secret: the best class first, then the longer span, then table
/// order. A candidate inside an accepted one is dropped; one that overlaps accepted ones is
/// merged into them (the union gets one marker, named by the best of them), so a secret is
/// never half-shown.
fn resolve(mut found: Vec<Candidate>) -> Vec<Candidate> {
    found.sort_by_key(|c| {
        (
            c.class,
            std::cmp::Reverse(c.end - c.start),
            c.order,
            c.start,
        )
    });
    let mut accepted: BTreeMap<usize, Candidate> = BTreeMap::new();
    for cand in found {
        let overlapping: Vec<usize> = accepted
            .range(..cand.end)
            .rev()
            .take_while(|(_, a)| a.end > cand.start)
            .map(|(&s, _)| s)
            .collect();
        let Some(best) = overlapping
            .iter()
            .filter_map(|s| accepted.get(s))
            .min_by_key(|a| (a.class, a.order))
            .copied()
        else {
            accepted.insert(cand.start, cand);
            continue;
        };
        let mut merged = Candidate {
            start: cand.start,
            end: cand.end,
            ..best
        };
        for s in overlapping {
            if let Some(a) = accepted.remove(&s) {
                merged.start = merged.start.min(a.start);
                merged.end = merged.end.max(a.end);
            }
        }
        accepted.insert(merged.start, merged);
    }
    accepted.into_values().collect()
}

/// Writes the markers. Line breaks inside a span are kept after the marker (as `\r\n` where
/// the original had one) so line numbers stay valid for the pages a model asks for next.
fn render(text: &str, spans: Vec<Candidate>, counts: &mut BTreeMap<&'static str, u64>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for span in spans {
        out.push_str(&text[last..span.start]);
        out.push_str("[redacted: ");
        out.push_str(span.kind);
        out.push(']');
        let inner = &text.as_bytes()[span.start..span.end];
        for i in memchr::memchr_iter(b'\n', inner) {
            out.push_str(if i > 0 && inner[i - 1] == b'\r' {
                "\r\n"
            } else {
                "\n"
            });
        }
        *counts.entry(span.kind).or_insert(0) += 1;
        last = span.end;
    }
    out.push_str(&text[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn red(text: &str) -> String {
        Redactor::builtin().redact(text).text.into_owned()
    }

    fn kinds(text: &str) -> Vec<(&'static str, u64)> {
        Redactor::builtin()
            .redact(text)
            .counts
            .into_iter()
            .collect()
    }

    /// Fake secrets of every format, built at run time so the source holds no token-shaped
    /// literal for scanners to trip over.
    fn fake(prefix: &str, alphabet: &str, n: usize) -> String {
        let a = alphabet.as_bytes();
        let body: String = (0..n)
            .map(|i| a[(i * 7 + i / 3) % a.len()] as char)
            .collect();
        format!("{prefix}{body}")
    }
    const ALNUM: &str = "aB3dE5fG7hJ9kLmN2pQ4rS6tU8vWxYz";
    const HEX: &str = "0123456789abcdef";
    const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

    fn b64(data: &[u8]) -> String {
        const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in data.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |acc, (i, &b)| acc | u32::from(b) << (16 - 8 * i));
            for i in 0..4 {
                out.push(if i <= chunk.len() {
                    T[(n >> (18 - 6 * i) & 63) as usize] as char
                } else {
                    '='
                });
            }
        }
        out
    }

    fn pem(label: &str, lines: usize) -> String {
        let mut s = format!("-----BEGIN {label}-----\n");
        for i in 0..lines {
            s.push_str(&fake("MII", "ABCDEFGHabcdefgh0123456789+/", 61 + i % 2));
            s.push('\n');
        }
        s.push_str(&format!("-----END {label}-----"));
        s
    }

    /// (kind, line with the secret, expected line) for every token format.
    fn cases() -> Vec<(&'static str, String, String)> {
        let jwt = format!(
            "{}.{}.{}",
            b64(br#"{"alg":"HS256","typ":"JWT"}"#).trim_end_matches('='),
            b64(br#"{"sub":"1234567890","iat":1516239022}"#).trim_end_matches('='),
            fake("", ALNUM, 43)
        );
        let discord = format!(
            "{}.{}.{}",
            b64(b"123456789012345678"),
            fake("", ALNUM, 6),
            fake("", ALNUM, 27)
        );
        let docker = b64(b"deploy:s3cr3t-pass");
        let basic = b64(b"svc:Passw0rd!");
        let mut v = vec![
            (
                "aws-access-key-id",
                format!("AWS_ACCESS_KEY_ID={}", fake("AKIA", UPPER, 16)),
            ),
            (
                "aws-access-key-id",
                format!("\"AccessKeyId\": \"{}\",", fake("ASIA", UPPER, 16)),
            ),
            (
                "aws-secret-access-key",
                format!("aws_secret_access_key = {}", fake("", ALNUM, 40)),
            ),
            (
                "aws-secret-access-key",
                format!("AWS_SECRET_ACCESS_KEY={}", fake("", ALNUM, 40)),
            ),
            (
                "aws-secret-access-key",
                format!("  \"SecretAccessKey\": \"{}\",", fake("", ALNUM, 40)),
            ),
            (
                "aws-session-token",
                format!(
                    "aws_session_token = {}",
                    fake("IQoJb3JpZ2luX2Vj", ALNUM, 200)
                ),
            ),
            (
                "aws-session-token",
                format!(
                    "  \"SessionToken\": \"{}\",",
                    fake("FwoGZXIvYXdz", ALNUM, 300)
                ),
            ),
            (
                "google-api-key",
                format!("key: {}", fake("AIza", ALNUM, 35)),
            ),
            (
                "google-oauth",
                format!("client_secret={}", fake("GOCSPX-", ALNUM, 28)),
            ),
            (
                "azure-storage-key",
                format!(
                    "DefaultEndpointsProtocol=https;AccountName=x;AccountKey={}==;EndpointSuffix=core.windows.net",
                    fake("", ALNUM, 86)
                ),
            ),
            (
                "azure-connection-string",
                format!(
                    "Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey={}=",
                    fake("", ALNUM, 43)
                ),
            ),
            (
                "github-token",
                format!("GITHUB_TOKEN={}", fake("ghp_", ALNUM, 36)),
            ),
            ("github-token", format!("token {}", fake("gho_", ALNUM, 36))),
            (
                "github-token",
                format!("GH_PAT={}", fake("github_pat_", ALNUM, 82)),
            ),
            (
                "gitlab-token",
                format!("PRIVATE-TOKEN: {}", fake("glpat-", ALNUM, 20)),
            ),
            (
                "slack-token",
                format!(
                    "SLACK_BOT_TOKEN={}",
                    fake("xoxb-123456789012-1234567890123-", ALNUM, 24)
                ),
            ),
            ("slack-token", format!("token {}", fake("xoxp-", ALNUM, 40))),
            (
                "stripe-key",
                format!("Stripe::api_key = {}", fake("sk_live_", ALNUM, 24)),
            ),
            ("stripe-key", format!("key={}", fake("rk_test_", ALNUM, 30))),
            (
                "npm-token",
                format!("NPM_TOKEN={}", fake("npm_", ALNUM, 36)),
            ),
            (
                "npm-token",
                format!("//registry.npmjs.org/:_authToken={}", fake("", HEX, 32)),
            ),
            (
                "pypi-token",
                format!("password = {}", fake("pypi-AgEIcHlwaS5vcmc", ALNUM, 100)),
            ),
            (
                "openai-key",
                format!("OPENAI_API_KEY={}", fake("sk-", ALNUM, 48)),
            ),
            (
                "openai-key",
                format!("OPENAI_API_KEY={}", fake("sk-proj-", ALNUM, 60)),
            ),
            (
                "openai-key",
                format!("key {}", fake("sk-svcacct-", ALNUM, 60)),
            ),
            (
                "anthropic-key",
                format!("x-api-key: {}", fake("sk-ant-api03-", ALNUM, 95)),
            ),
            (
                "anthropic-key",
                format!("ANTHROPIC_ADMIN_KEY={}", fake("sk-ant-admin01-", ALNUM, 95)),
            ),
            ("jwt", format!("id_token={jwt}")),
            ("twilio-key", format!("sid {}", fake("AC", HEX, 32))),
            (
                "sendgrid-key",
                format!("apikey {}", fake("SG.", ALNUM, 22) + &fake(".", ALNUM, 43)),
            ),
            ("mailchimp-key", format!("mc {}-us12", fake("", HEX, 32))),
            ("discord-token", format!("bot {discord}")),
            (
                "telegram-bot-token",
                format!(
                    "https://api.telegram.org/bot{}/getMe",
                    fake("123456789:AA", ALNUM, 33)
                ),
            ),
            ("square-token", format!("sq {}", fake("sq0csp-", ALNUM, 43))),
            ("shopify-token", format!("shop {}", fake("shpat_", HEX, 32))),
            (
                "heroku-api-key",
                "HEROKU_API_KEY=01234567-89ab-cdef-0123-456789abcdef".to_string(),
            ),
            (
                "digitalocean-token",
                format!("do {}", fake("dop_v1_", HEX, 64)),
            ),
            ("vault-token", format!("vault {}", fake("hvs.", ALNUM, 90))),
            (
                "huggingface-token",
                format!("hf {}", fake("hf_", "abcDEFghiJKLmno", 34)),
            ),
            ("docker-auth", format!("      \"auth\": \"{docker}\"")),
            ("basic-auth", format!("> Authorization: Basic {basic}")),
            (
                "basic-auth",
                "curl -u admin:Adm1nPass! https://x".to_string(),
            ),
            (
                "bearer-token",
                format!("Authorization: Bearer {}", fake("", ALNUM, 40)),
            ),
            (
                "url-password",
                "postgres://app:Sup3rS3cret@db:5432/app".to_string(),
            ),
            (
                "url-password",
                "redis://:p4ssw0rd@localhost:6379/0".to_string(),
            ),
            ("password", "DB_PASSWORD=hunter2".to_string()),
            ("password", "password: hunter2".to_string()),
            ("password", "\"password\": \"hunter\",".to_string()),
            ("password", "PGPASSWORD=sunshine psql".to_string()),
            ("password", "mysql --password=Xyz123abc".to_string()),
            (
                "password",
                "machine api.example.com login bot password Tr0ub4dor".to_string(),
            ),
            ("password", "  \"POSTGRES_PASSWORD=s3cret99\",".to_string()),
            (
                "password",
                "User(name='alice', password='Xk29fj3k')".to_string(),
            ),
            ("secret", "CLIENT_SECRET=kdgK7FI0b4iiLl3E".to_string()),
            ("secret", "clientSecret: \"f00ba7-q\"".to_string()),
            ("secret", "SECRET_KEY='django-insecure-abc123'".to_string()),
            ("token", "AUTH_TOKEN=5962fd301a84cc84".to_string()),
            ("token", "gh auth login --token abc123def456ghi".to_string()),
            (
                "token",
                "https://example.com/cb?access_token=a1b2c3d4e5&x=1".to_string(),
            ),
            (
                "url-password",
                r#"{"url":"https:\/\/admin:Qm7Tz9xLp2Kw@db.example.com\/x"}"#.to_string(),
            ),
            (
                "url-password",
                r#"dsn := "admin:Qm7Tz9xLp2Kw@tcp(127.0.0.1:3306)/db""#.to_string(),
            ),
            (
                "url-credential",
                "https://x.blob.core.windows.net/c?sv=2022-11-02&ss=b&sig=Zx81kLmP0qRtAb%2Bcd"
                    .to_string(),
            ),
            (
                "url-credential",
                "curl https://maps.example.com/x?key=Qm7Tz9xLp2KwAbCd".to_string(),
            ),
            (
                "cookie",
                "Cookie: session=a8f5f167f44f4964e6c998dee827110c; theme=dark".to_string(),
            ),
            (
                "cookie",
                "< Set-Cookie: sid=Yh7Kp2Lq9Xw3Rt5Z; Path=/; HttpOnly".to_string(),
            ),
            ("password", "mysql -u root -pQm7Tz9xLp2Kw mydb".to_string()),
            ("password", "sshpass -p Qm7Tz9xLp2Kw ssh host".to_string()),
            (
                "password",
                "redis-cli -h h -a Qm7Tz9xLp2Kw ping".to_string(),
            ),
            (
                "password",
                "docker login -u me -p Qm7Tz9xLp2Kw registry.io".to_string(),
            ),
            ("api-key", "API_KEY=GJH2TqzACMNeetmU".to_string()),
            ("api-key", "apiKey: 'x9Yz8wVu7t'".to_string()),
            (
                "private-key",
                format!("PRIVATE_KEY=0x{}", fake("", HEX, 64)),
            ),
        ];
        v.push((
            "private-key",
            format!(
                "\"private_key\": \"{}\\n\",",
                pem("PRIVATE KEY", 3).replace('\n', "\\n")
            ),
        ));
        v.into_iter()
            .map(|(kind, line)| {
                let expected = match kind {
                    "private-key" if line.starts_with('"') => {
                        "\"private_key\": \"[redacted: private-key]\\n\",".to_string()
                    }
                    _ => String::new(),
                };
                (kind, line, expected)
            })
            .collect()
    }

    #[test]
    fn every_rule_compiles() {
        COMPILED.compile_all();
        for (r, rule) in RULES.iter().enumerate() {
            assert_eq!(
                COMPILED.regexes[r].get().is_some(),
                matches!(rule.find, Find::Re(_)),
                "{}",
                rule.name
            );
        }
    }

    #[test]
    fn every_format_is_redacted_once_with_its_kind() {
        for (kind, line, expected) in cases() {
            let out = Redactor::builtin().redact(&line);
            assert_eq!(
                out.counts.iter().collect::<Vec<_>>(),
                vec![(&kind, &1)],
                "{line}\n-> {}",
                out.text
            );
            assert!(
                out.text.contains(&format!("[redacted: {kind}]")),
                "{line} -> {}",
                out.text
            );
            if !expected.is_empty() {
                assert_eq!(out.text, expected);
            }
        }
    }

    #[test]
    fn keys_and_the_rest_of_the_line_stay() {
        let token = fake("ghp_", ALNUM, 36);
        assert_eq!(
            red(&format!("GITHUB_TOKEN={token}")),
            "GITHUB_TOKEN=[redacted: github-token]"
        );
        assert_eq!(red("password: hunter2"), "password: [redacted: password]");
        assert_eq!(
            red("  \"password\": \"hunter2\", \"user\": \"bob\""),
            "  \"password\": \"[redacted: password]\", \"user\": \"bob\""
        );
        assert_eq!(
            red("--password=Xyz123abc --verbose"),
            "--password=[redacted: password] --verbose"
        );
        assert_eq!(
            red("origin\thttps://u:Passw0rd@github.com/a/b.git (fetch)"),
            "origin\thttps://u:[redacted: url-password]@github.com/a/b.git (fetch)"
        );
        assert_eq!(
            red(&format!(
                "origin https://x-access-token:{token}@github.com/a/b.git"
            )),
            "origin https://x-access-token:[redacted: github-token]@github.com/a/b.git"
        );
    }

    #[test]
    fn most_specific_rule_wins_and_counts_are_exact() {
        let key = fake("AKIA", UPPER, 16);
        let secret = fake("", ALNUM, 40);
        let text = format!(
            "AWS_ACCESS_KEY_ID={key}\nAWS_SECRET_ACCESS_KEY={secret}\nGITHUB_TOKEN={}\n",
            fake("ghp_", ALNUM, 36)
        );
        assert_eq!(
            kinds(&text),
            vec![
                ("aws-access-key-id", 1),
                ("aws-secret-access-key", 1),
                ("github-token", 1)
            ]
        );
        let bearer = cases()
            .into_iter()
            .find(|c| c.0 == "jwt")
            .map(|c| c.1)
            .unwrap_or_default();
        let header = format!(
            "Authorization: Bearer {}",
            bearer.trim_start_matches("id_token=")
        );
        assert_eq!(kinds(&header), vec![("jwt", 1)]);
        // Two secrets on one line, and the same secret twice.
        let line = format!("{key} {key} {}", fake("sk_live_", ALNUM, 24));
        assert_eq!(
            kinds(&line),
            vec![("aws-access-key-id", 2), ("stripe-key", 1)]
        );
        assert_eq!(Redactor::builtin().redact(&line).total(), 3);
    }

    #[test]
    fn private_key_blocks_become_one_marker_and_keep_their_lines() {
        let key = pem("RSA PRIVATE KEY", 5);
        for text in [
            format!("$ cat id_rsa\n{key}\n$ echo done\n"),
            format!(
                "$ cat id_rsa\r\n{}\r\n$ echo done\r\n",
                key.replace('\n', "\r\n")
            ),
            key.clone(),
            format!(
                "  tls.key: |\n    {}\n  tls.crt: abc\n",
                key.replace('\n', "\n    ")
            ),
        ] {
            let out = red(&text);
            assert_eq!(
                out.matches('\n').count(),
                text.matches('\n').count(),
                "{out}"
            );
            assert_eq!(kinds(&text), vec![("private-key", 1)]);
            assert!(!out.contains("MII") && !out.contains("-----END"), "{out}");
            assert!(out.contains("[redacted: private-key]"));
            assert!(!text.contains("echo done") || out.contains("$ echo done"));
        }
        for label in [
            "EC PRIVATE KEY",
            "DSA PRIVATE KEY",
            "OPENSSH PRIVATE KEY",
            "ENCRYPTED PRIVATE KEY",
            "PGP PRIVATE KEY BLOCK",
            "PRIVATE KEY",
        ] {
            let block = pem(label, 3).replacen('\n', "\nVersion: x\n\n", 1);
            assert_eq!(
                red(&block),
                "[redacted: private-key]\n\n\n\n\n\n",
                "{label}"
            );
        }
        let putty = "PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nComment: k\nPublic-Lines: 1\nAAAAB3NzaC1yc2EAAAABJQAAAQEA\nPrivate-Lines: 1\nAAABAQCTgVU7Zkq8Z3Bz8YWhCmh\nPrivate-MAC: 0123456789abcdef0123\n";
        assert_eq!(red(putty), "[redacted: private-key]\n\n\n\n\n\n\n\n");
    }

    #[test]
    fn private_key_cut_by_a_page_boundary() {
        let key = pem("PRIVATE KEY", 6);
        let lines: Vec<&str> = key.lines().collect();
        // BEGIN and no END: from BEGIN to the end of the text.
        let head = format!("$ cat key.pem\n{}", lines[..4].join("\n"));
        assert_eq!(red(&head), "$ cat key.pem\n[redacted: private-key]\n\n\n");
        // Body lines and END, no BEGIN: back to the start.
        let tail = format!("{}\n$ ls\n", lines[3..].join("\n"));
        assert_eq!(red(&tail), "[redacted: private-key]\n\n\n\n\n$ ls\n");
        // One-line JSON form cut either side.
        let json = key.replace('\n', "\\n");
        assert_eq!(
            red(&format!("\"private_key\": \"{}", &json[..120])),
            "\"private_key\": \"[redacted: private-key]"
        );
        assert_eq!(
            red(&format!("{}\\n\",", &json[100..])),
            "[redacted: private-key]\\n\","
        );
        // A BEGIN line with no key material after it is code or grep output, not a key.
        for text in [
            "src/pem.rs:12:    if line.starts_with(\"-----BEGIN RSA PRIVATE KEY-----\") {",
            "keys/a.pem:1:-----BEGIN RSA PRIVATE KEY-----\nkeys/b.pem:1:-----BEGIN EC PRIVATE KEY-----\n",
            "-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n",
        ] {
            assert_eq!(red(text), text);
        }
    }

    #[test]
    fn kubernetes_secret_data_is_redacted_but_not_config_maps() {
        let secret = "apiVersion: v1\ndata:\n  password: cGFzc3dvcmQxMjM=\n  username: YWRtaW4=\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\n";
        assert_eq!(
            red(secret),
            "apiVersion: v1\ndata:\n  password: [redacted: kubernetes-secret]\n  username: [redacted: kubernetes-secret]\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\n"
        );
        let list = "items:\n- apiVersion: v1\n  data:\n    ca.crt: TFMwdExTMUNSVWRKVGlCRA==\n  kind: ConfigMap\n- apiVersion: v1\n  kind: Secret\n  stringData:\n    token: |\n      line-one-Zx81\n";
        assert_eq!(
            red(list),
            "items:\n- apiVersion: v1\n  data:\n    ca.crt: TFMwdExTMUNSVWRKVGlCRA==\n  kind: ConfigMap\n- apiVersion: v1\n  kind: Secret\n  stringData:\n    token: |\n      [redacted: kubernetes-secret]\n"
        );
    }

    #[test]
    fn no_false_alarms_on_known_look_alikes() {
        let sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b";
        let lines = [
            format!("commit {sha}"),
            format!("Merge: {} {}", &sha[..7], &sha[..12]),
            "    fix: handle unexpected token '}' in the tokenizer".to_string(),
            "error: unexpected token: `}`".to_string(),
            "password: (not set)".to_string(),
            "Password: ********".to_string(),
            "secret_key_base is missing".to_string(),
            "tests/test_token.py::test_token_clamp_00 PASSED    [ 95%]".to_string(),
            "use tiktoken_rs::CoreBPE;".to_string(),
            "let token = self.next_token()?;".to_string(),
            "    password: String,".to_string(),
            "fn login(password: &str, token: Option<Token>) -> bool".to_string(),
            "  --> src/lexer.rs:12:9 | let token_count = tokens.len();".to_string(),
            "TOKENIZERS_PARALLELISM=false".to_string(),
            "PWD=/home/dev/src/app".to_string(),
            "OLDPWD=/home/dev".to_string(),
            "max_tokens: 4096".to_string(),
            "\"usage\": {\"prompt_tokens\": 12, \"total_tokens\": 40}".to_string(),
            "token_type: bearer".to_string(),
            "\"token_type\": \"Bearer\", \"expires_in\": 3599".to_string(),
            "SECRET_NAME=db-credentials".to_string(),
            "password_file=/run/secrets/db_password".to_string(),
            "docker login --password-stdin < token.txt".to_string(),
            "Authorization: Bearer <token>".to_string(),
            "Authorization: Bearer $GITHUB_TOKEN".to_string(),
            "-H \"Authorization: Bearer ${TOKEN}\"".to_string(),
            "Authorization: Basic YOUR_BASE64_CREDENTIALS".to_string(),
            "api_key = os.environ[\"API_KEY\"]".to_string(),
            "api_key: ${{ secrets.API_KEY }}".to_string(),
            "password = \"{{ vault_password }}\"".to_string(),
            "password: \"%s\"".to_string(),
            "token: null".to_string(),
            "PASSWORD=changeme_later_REDACTED".to_string(),
            "password = [redacted: password]".to_string(),
            "  \"js-tokens\": \"^4.0.0\",".to_string(),
            "\"node_modules/js-tokens\": {".to_string(),
            "   Compiling tokenizers v0.15.0".to_string(),
            "   Compiling secret-service v3.0.1".to_string(),
            "--extern password_hash=/work/target/debug/deps/libpassword_hash-1f2e.rlib".to_string(),
            "5 passed; 0 failed; PASS: test_login".to_string(),
            "\"password\"===a.type||\"textarea\"===b".to_string(),
            "const DATA_API_KEY = '.data-api'".to_string(),
            "{password:e.password,token:t.token,apiKey:n.apiKey}".to_string(),
            "input[type=password]{border:0}".to_string(),
            "https://example.com/docs/api-keys#rotating-your-secret".to_string(),
            "git@github.com:acme/secret-tool.git".to_string(),
            "ssh://git@github.com:22/acme/repo".to_string(),
            "docker run -u 1000:1000 app".to_string(),
            "git push -u origin main".to_string(),
            "See https://user@example.com:8080/path".to_string(),
        ];
        for line in lines {
            assert_eq!(red(&line), line);
        }
    }

    /// Deterministic pseudo-random bytes (xorshift), so generated fixtures are reproducible.
    fn noise(seed: u64, n: usize) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Hashes, digests, UUIDs, base64 blobs, data URIs, minified code and log lines, generated.
    fn look_alikes(seed: u64) -> String {
        let r = noise(seed, 4096);
        let h = hex(&r[..64]);
        let uuid = format!(
            "{}-{}-{}-{}-{}",
            &h[..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        );
        let blob = b64(&r[64..1024]);
        [
            format!("commit {}\nAuthor: Dev <dev@example.com>\nDate:   Tue Jun 11 09:12:44 2024 +0000\n\n    Bump deps ({})\n", &h[..40], &h[..7]),
            format!(" {} | 12 ++++--\n 3 files changed, 9 insertions(+), 3 deletions(-)\n", "src/token.rs"),
            format!("\"integrity\": \"sha512-{}==\",\n\"resolved\": \"https://registry.npmjs.org/js-tokens/-/js-tokens-4.0.0.tgz\",\n", &blob[..86]),
            format!("integrity sha1-{}=\n", &blob[100..127]),
            format!("Digest: sha256:{}\nStatus: Downloaded newer image for app:latest\n", &h[..64]),
            format!("request_id={uuid} trace_id={} span_id={}\n", &h[..32], &h[32..48]),
            format!("checksum = \"{}\"\n", &h[..64]),
            format!("    --hash=sha256:{} \\\n", &h[..64]),
            format!("data:image/png;base64,{blob}\n"),
            format!("const FIXTURE = \"{}\";\nassert_eq!(decode(\"{}\"), expected);\n", &blob[..200], &blob[200..300]),
            format!("thread 'main' panicked at src/main.rs:10:5: left: {} right: {}\n", &h[..40], &blob[300..340]),
            format!("!function(e,t){{\"object\"==typeof exports?module.exports=t():e.lib=t()}}(this,function(){{var n=\"{}\";return{{key:n,token:function(e){{return e.token}},secret:void 0}}}});\n", &blob[400..460]),
            format!(".btn{{background-image:url(\"data:image/svg+xml;base64,{}\")}}\n", &blob[500..700]),
            format!("{{\"version\":3,\"mappings\":\"{}\",\"sources\":[\"src/token.ts\"]}}\n", blob[700..900].replace('/', ";")),
            format!("2024-06-11T09:12:44.{:03}Z INFO worker{} finished job {uuid} in {}ms\n", r[1], r[2] % 8, r[3]),
            format!("test result: ok. {} passed; 0 failed; 0 ignored; finished in 0.{}s\n", r[4], r[5]),
        ]
        .concat()
    }

    #[test]
    fn generated_look_alikes_are_never_redacted() {
        let mut total = 0;
        for seed in 1..400u64 {
            let text = look_alikes(seed * 7919);
            let out = Redactor::builtin().redact(&text);
            assert_eq!(out.total(), 0, "seed {seed}: {text}\n->\n{}", out.text);
            assert!(matches!(out.text, Cow::Borrowed(_)));
            total += text.len();
        }
        assert!(total > 400_000);
    }

    #[test]
    fn prefilter_lets_clean_text_through_borrowed() {
        let text = "   Compiling serde v1.0.200\nwarning: unused variable `x`\n".repeat(900);
        assert!(text.len() > 50_000);
        assert!(matches!(
            Redactor::builtin().redact(&text).text,
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn edges_of_text_crlf_utf8_and_long_lines() {
        let t = fake("ghp_", ALNUM, 36);
        assert_eq!(red(&t), "[redacted: github-token]");
        assert_eq!(
            red(&format!("{t}\r\nnext\r\n")),
            "[redacted: github-token]\r\nnext\r\n"
        );
        assert_eq!(
            red(&format!("prev\r\n{t}")),
            "prev\r\n[redacted: github-token]"
        );
        assert_eq!(red(&format!("clé→{t}←ü")), "clé→[redacted: github-token]←ü");
        assert_eq!(
            red("mot de passe: x, password: pässwörd1"),
            "mot de passe: x, password: [redacted: password]"
        );
        let long = format!("{}{t} {}", "é".repeat(300_000), "x=1 ".repeat(100_000));
        assert!(long.len() > 1_000_000);
        let out = red(&long);
        assert_eq!(
            out.len(),
            long.len() - t.len() + "[redacted: github-token]".len()
        );
        for adversarial in [
            "password=x ".repeat(20_000),
            "token ".repeat(20_000),
            "-----BEGIN RSA PRIVATE KEY-----\n".repeat(2_000),
            "a".repeat(1_000_000),
        ] {
            assert_eq!(red(&adversarial), adversarial);
        }
    }

    #[test]
    fn user_patterns_and_errors() {
        let r = Redactor::with_extra(&[
            "internal-[0-9]{6}".into(),
            "pin: (?P<secret>[0-9]{4})".into(),
        ])
        .expect("valid");
        let out = r.redact("id internal-123456 and pin: 1234");
        assert_eq!(
            out.text,
            "id [redacted: custom] and pin: [redacted: custom]"
        );
        assert_eq!(out.counts.get("custom"), Some(&2));
        assert!(!format!("{r:?}").contains("internal"));
        let long_bad = format!("({}", "a".repeat(200));
        match Redactor::with_extra(&[long_bad]) {
            Err(RedactError::InvalidPattern { pattern, .. }) => {
                assert_eq!(pattern.chars().count(), 80)
            }
            other => panic!("expected an error, got {other:?}"),
        }
        let huge = "(?:a{1000}){1000}".to_string();
        assert!(Redactor::with_extra(&[huge]).is_err());
    }

    #[test]
    fn rule_names_are_unique_and_cover_the_table() {
        let names: Vec<&str> = rule_names().collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
        assert!(RULES.iter().all(|r| names.contains(&r.name)));
        for (kind, ..) in cases() {
            assert!(names.contains(&kind), "{kind}");
        }
    }

    /// Fragments that proptest strings together: secrets, their look-alikes, keywords, PEM
    /// pieces, line breaks and Unicode.
    fn fragment() -> impl Strategy<Value = String> {
        let mut pool: Vec<String> = cases().into_iter().map(|c| c.1).collect();
        pool.extend(look_alikes(3).lines().map(String::from));
        pool.extend(pem("RSA PRIVATE KEY", 4).lines().map(String::from));
        pool.extend(
            [
                "\n",
                "\r\n",
                " ",
                "password",
                "token=",
                ": ",
                "\"",
                "'",
                "=",
                "é✓",
                "[redacted: x]",
                "-----END PRIVATE KEY-----",
                "kind: Secret",
                "data:",
                "  key: dmFsdWUx",
            ]
            .map(String::from),
        );
        prop_oneof![
            proptest::sample::select(pool),
            "[ -~]{0,12}",
            any::<String>(),
        ]
    }

    fn text() -> impl Strategy<Value = String> {
        proptest::collection::vec(fragment(), 0..24).prop_map(|v| v.concat())
    }

    proptest! {
        // 400 cases by default; PROPTEST_CASES=N for a longer hunt.
        #![proptest_config(ProptestConfig {
            cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(400),
            ..ProptestConfig::default()
        })]

        #[test]
        fn redaction_is_a_fixed_point(t in text()) {
            let once = red(&t);
            prop_assert_eq!(red(&once), once.clone());
        }

        #[test]
        fn only_secret_spans_change_and_lines_are_kept(t in text()) {
            let out = Redactor::builtin().redact(&t);
            prop_assert_eq!(out.text.matches('\n').count(), t.matches('\n').count());
            // Rebuild the output from the spans each pass reports: every byte outside them is
            // kept, each span becomes one marker plus its line breaks.
            let (mut expected, mut total) = (t.clone(), 0);
            loop {
                let mut found = Vec::new();
                scan_builtin(&expected, &mut found);
                let spans = resolve(found);
                if spans.is_empty() {
                    break;
                }
                let mut next = String::new();
                let mut last = 0;
                for c in &spans {
                    prop_assert!(last <= c.start && c.start < c.end);
                    next.push_str(&expected[last..c.start]);
                    next.push_str(&format!("[redacted: {}]", c.kind));
                    for (i, _) in expected[c.start..c.end].match_indices('\n') {
                        let crlf = expected[c.start..c.start + i].ends_with('\r');
                        next.push_str(if crlf { "\r\n" } else { "\n" });
                    }
                    last = c.end;
                }
                next.push_str(&expected[last..]);
                total += spans.len() as u64;
                expected = next;
            }
            prop_assert_eq!(out.text.as_ref(), expected.as_str());
            prop_assert_eq!(out.total(), total);
        }

        #[test]
        fn generated_look_alikes_stay(seed in any::<u64>()) {
            let text = look_alikes(seed);
            prop_assert_eq!(Redactor::builtin().redact(&text).total(), 0);
        }
    }
}
