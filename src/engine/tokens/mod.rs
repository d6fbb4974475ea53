//! Counting model tokens with a real BPE tokenizer (OpenAI's o200k vocabulary, which
//! `tiktoken-rs` carries inside the crate and `build.rs` lays out as static tables, so nothing
//! is fetched or built at run time), for previews
//! budgeted in tokens rather than bytes: bytes/4 is wrong by 2x on code and logs.
//!
//! It also measures what each run's output would have cost a model that read all of it, for
//! the token accounting of `spillway stats`. BPE is slow next to the engine (see
//! [`EXACT_MAX_BYTES`]), so an output is counted exactly only while that is cheap; past that,
//! its count is estimated from a bounded [`Sampler`] of it, and said to be an estimate.

pub mod floor;
mod pieces;

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use tiktoken_rs::Rank;

use crate::engine::o200k;

/// Largest text counted exactly; anything longer is estimated from a sample of it.
///
/// Measured with `cargo bench --bench tokens` on this project's 2-core machine (release
/// build): o200k counts 31-50 MB/s, its pieces found by hand in ASCII text ([`pieces`];
/// generated log text 49.9, source code 31.1, `seq` output 36.2; through the pattern alone
/// 10.5, 8.7 and 5.3, and `tiktoken-rs`'s own encoder 9.8, 10.3 and 6.5 in the same runs), so
/// 1 MiB takes 20-35 ms, and 100 MB would take 2-3 s. No run waits for the count: a
/// daemon's run counts after its `exit` has been sent (`crate::daemon`'s token counts), and
/// `spillway truncate` leaves it to a child process; but it is CPU a run's end spends, a few
/// ms for an ordinary run shown whole in a 50 KiB preview, and a few tens of ms for one that
/// printed up to 1 MiB. Past the bound the [`Sampler`]'s
/// 128 KiB cost a fixed 6-10 ms however long the output, and came within 0.7 % of the exact
/// count on all three texts: counting more of it exactly would buy little for a cost that
/// grows with it.
pub const EXACT_MAX_BYTES: usize = 1 << 20;

/// Bytes in each sample the [`Sampler`] keeps.
const SAMPLE_BYTES: usize = 4096;

/// Samples the [`Sampler`] keeps at most: 32 x 4 KiB = 128 KiB of text to count, held by
/// every run as it goes (32 runs in flight hold 4 MiB).
const MAX_SAMPLES: usize = 32;

/// A possible merge of the token at `start` with the next one, into a token of `rank`; the
/// heap of [`Counter::merged_tokens`] pops the lowest rank first, then the leftmost.
#[derive(PartialEq, Eq)]
struct Merge {
    start: usize,
    rank: Rank,
}

impl Ord for Merge {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.rank, other.start).cmp(&(self.rank, self.start))
    }
}

impl PartialOrd for Merge {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// The token that starts at a byte of a piece being merged (see [`Counter::merged_tokens`]).
struct Part {
    /// Where the token before it starts.
    prev: usize,
    /// Where it ends, and where the token after it ends.
    end: usize,
    next_end: usize,
    /// The rank of its merge with the next token (`Rank::MAX`: none, or given up).
    next_rank: Rank,
}

/// Cap on each thread's lazy-DFA cache for the pattern, as for the highlights'
/// (`crate::engine::highlight`): every thread that counts gets its own, and the default (a few MiB)
/// times 32 runs ending at once would dominate the daemon's memory.
const DFA_CACHE_BYTES: usize = 256 * 1024;

/// What counting needs of o200k besides its vocabulary (static tables, [`crate::engine::o200k`]):
/// the pattern that splits text into the pieces BPE merges, as `tiktoken-rs` encodes with it,
/// compiled once per process.
///
/// Counting is `CoreBPE::encode_ordinary`'s loop with `tiktoken`'s two merges (which
/// `tiktoken-rs` does not export for other maps), so the counts are the same: tests check them
/// against `encode_ordinary` on code, prose, Unicode and long pieces. `tiktoken-rs`'s own
/// `CoreBPE` held 44 MiB (a decoder, a sorted copy of the vocabulary and 128 clones of each
/// pattern besides the ranks), and even the ranks alone, read out of it into a map, held 9 MiB
/// of the daemon's heap for good after a 59 MiB peak while it was built.
struct Counter {
    pattern: fancy_regex::Regex,
}

impl Counter {
    /// Built once per process on first use (the pattern's compilation).
    fn get() -> Option<&'static Counter> {
        static COUNTER: OnceLock<Option<Counter>> = OnceLock::new();
        COUNTER.get_or_init(Counter::build).as_ref()
    }

    fn build() -> Option<Counter> {
        let pattern = fancy_regex::RegexBuilder::new(tiktoken_rs::O200K_BASE_PAT_STR)
            .delegate_dfa_size_limit(DFA_CACHE_BYTES)
            .build()
            .ok()?;
        Some(Counter { pattern })
    }

    /// The tokens BPE merges a short `piece` (2 to 99 bytes) into: `tiktoken`'s
    /// `_byte_pair_merge` (MIT-licensed, copyright OpenAI), counting the tokens. Quadratic, and
    /// faster than the heap on short pieces.
    fn merged_tokens_short(&self, piece: &[u8]) -> usize {
        let rank = |range: std::ops::Range<usize>| o200k::rank(&piece[range]).unwrap_or(Rank::MAX);
        // (where a token starts, the rank of its merge with the next one)
        let mut parts: Vec<(usize, Rank)> = (0..piece.len() - 1)
            .map(|i| (i, rank(i..i + 2)))
            .chain([(piece.len() - 1, Rank::MAX), (piece.len(), Rank::MAX)])
            .collect();
        // The rank of merging the token at `i` with the next one, once the one after `i` is
        // gone (it is removed only after this is asked).
        let merged_rank = |parts: &[(usize, Rank)], i: usize| {
            if i + 3 < parts.len() {
                rank(parts[i].0..parts[i + 3].0)
            } else {
                Rank::MAX
            }
        };
        let lowest = |parts: &[(usize, Rank)]| {
            parts[..parts.len() - 1]
                .iter()
                .enumerate()
                .min_by_key(|&(i, &(_, rank))| (rank, i))
                .filter(|&(_, &(_, rank))| rank != Rank::MAX)
                .map(|(i, _)| i)
        };
        while let Some(i) = lowest(&parts) {
            if i > 0 {
                parts[i - 1].1 = merged_rank(&parts, i - 1);
            }
            parts[i].1 = merged_rank(&parts, i);
            parts.remove(i + 1);
        }
        parts.len() - 1
    }

    /// The tokens BPE merges a long `piece` into: `tiktoken`'s merge for pieces of 100 bytes
    /// and more (`_byte_pair_merge_large`, which `tiktoken-rs` does not export; MIT-licensed,
    /// copyright OpenAI), counting the tokens rather than listing them. A heap of merges,
    /// O(m log n): the simple merge is quadratic, and one piece can be a megabyte of letters.
    fn merged_tokens(&self, piece: &[u8]) -> usize {
        let rank = |range: std::ops::Range<usize>| o200k::rank(&piece[range]);
        let mut parts: Vec<Part> = (0..piece.len())
            .map(|i| Part {
                prev: i.wrapping_sub(1),
                end: i + 1,
                next_end: i + 2,
                next_rank: Rank::MAX,
            })
            .collect();
        let mut heap = std::collections::BinaryHeap::with_capacity(piece.len());
        for (i, part) in parts.iter_mut().enumerate().take(piece.len() - 1) {
            if let Some(rank) = rank(i..i + 2) {
                heap.push(Merge { start: i, rank });
                part.next_rank = rank;
            }
        }
        // The token at `start` may merge with the one ending at `next_end`.
        let offer = |parts: &mut Vec<Part>,
                     heap: &mut std::collections::BinaryHeap<Merge>,
                     start: usize,
                     next_end: usize| {
            parts[start].next_end = next_end;
            parts[start].next_rank = Rank::MAX;
            if next_end <= piece.len()
                && let Some(rank) = rank(start..next_end)
            {
                heap.push(Merge { start, rank });
                parts[start].next_rank = rank;
            }
        };
        while let Some(left) = heap.pop() {
            if left.rank != parts[left.start].next_rank {
                continue; // superseded by a merge since
            }
            let left_start = left.start;
            let right_start = parts[left_start].end;
            let right_end = parts[left_start].next_end;
            let right_next_end = parts[right_start].next_end;
            parts[left_start].end = right_end;
            offer(&mut parts, &mut heap, left_start, right_next_end);
            if right_end < parts.len() {
                parts[right_end].prev = left_start;
            }
            if left_start > 0 {
                let prev_start = parts[left_start].prev;
                offer(&mut parts, &mut heap, prev_start, right_end);
            }
            parts[right_start].next_rank = Rank::MAX;
        }
        let (mut tokens, mut i) = (0, 0);
        while i < parts.len() {
            tokens += 1;
            i = parts[i].end;
        }
        tokens
    }

    /// The tokens of `text`: its pieces found by hand where it is all ASCII, by the pattern
    /// elsewhere ([`pieces`]), each merged by BPE.
    fn count(&self, text: &str) -> usize {
        pieces::segments(text)
            .map(|segment| {
                if segment.is_ascii() {
                    self.count_ascii(segment.as_bytes())
                } else {
                    self.count_by_pattern(segment)
                }
            })
            .sum()
    }

    fn count_ascii(&self, text: &[u8]) -> usize {
        let (mut tokens, mut start) = (0, 0);
        while start < text.len() {
            let end = pieces::piece_end(text, start);
            tokens += self.piece_tokens(&text[start..end]);
            start = end;
        }
        tokens
    }

    fn count_by_pattern(&self, text: &str) -> usize {
        let mut tokens = 0;
        let mut counted_to = 0;
        for piece in self.pattern.find_iter(text) {
            let Ok(piece) = piece else {
                // The pattern gave up (its backtracking limit), where `encode_ordinary` would
                // panic: the rest is counted at the conservative rate.
                return tokens + text.len().saturating_sub(counted_to).div_ceil(2);
            };
            tokens += self.piece_tokens(piece.as_str().as_bytes());
            counted_to = piece.end();
        }
        tokens
    }

    /// The tokens of one piece.
    fn piece_tokens(&self, bytes: &[u8]) -> usize {
        match bytes.len() {
            _ if o200k::rank(bytes).is_some() => 1,
            // Every single byte is a token of o200k.
            0 | 1 => 1,
            // As `byte_pair_encode`: short pieces the simple way, long ones with a heap.
            2..100 => self.merged_tokens_short(bytes),
            _ => self.merged_tokens(bytes),
        }
    }
}

/// Compiles the tokenizer's split pattern on a thread of its own and returns at once, so that
/// the first count need not wait for it: the daemon calls it at start, so that its first run's
/// end is not delayed. Without a thread, the first count compiles it.
pub fn warm_up() {
    let _ = std::thread::Builder::new()
        .name("spillway-tokenizer".into())
        .spawn(|| {
            Counter::get();
        });
}

/// Tokens in `text` under o200k; if the tokenizer cannot be built, a conservative estimate
/// (one token per 2 bytes) so a budget is still never exceeded.
pub fn count(text: &str) -> usize {
    match Counter::get() {
        Some(counter) => counter.count(text),
        None => text.len().div_ceil(2),
    }
}

/// A number of tokens, and whether it was estimated from a sample rather than counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    pub tokens: u64,
    pub estimated: bool,
}

/// The tokens of `text`: counted exactly up to [`EXACT_MAX_BYTES`], estimated from evenly
/// spaced samples beyond.
pub fn measure(text: &str) -> Count {
    if text.len() <= EXACT_MAX_BYTES {
        return Count {
            tokens: count(text) as u64,
            estimated: false,
        };
    }
    let mut sampler = Sampler::new();
    sampler.feed(text.as_bytes());
    Count {
        tokens: sampler.estimate(text.len() as u64),
        estimated: true,
    }
}

/// Evenly spaced samples of a stream of text, in bounded memory, to estimate its tokens
/// without counting all of it.
///
/// A sample of [`SAMPLE_BYTES`] starts every `stride` bytes. The stride starts at one
/// sample's size (the first 128 KiB are kept whole) and doubles whenever more than
/// [`MAX_SAMPLES`] would be kept, dropping every other sample, so the samples stay evenly
/// spread over the whole stream whatever its length. Spread rather than taken from the head
/// and tail only: output changes as it goes (`seq`'s numbers grow from 1 to 7 digits, a build
/// log turns into a test log), and the ends alone misjudge it by 20 % and more.
///
/// Feeding costs a comparison per call, and copies at most 64 KiB each time the stream
/// doubles: nothing on the engine's hot path. The counting happens in [`Sampler::estimate`].
#[derive(Debug, Clone)]
pub struct Sampler {
    /// The samples, in stream order, each of `SAMPLE_BYTES` but the last maybe.
    samples: Vec<Vec<u8>>,
    /// Bytes fed so far.
    seen: u64,
    /// Bytes between the starts of two samples.
    stride: u64,
}

impl Default for Sampler {
    fn default() -> Self {
        Sampler::new()
    }
}

impl Sampler {
    pub fn new() -> Sampler {
        Sampler {
            samples: Vec::new(),
            seen: 0,
            stride: SAMPLE_BYTES as u64,
        }
    }

    /// Takes the next piece of the stream.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            // The last sample still filling takes what it lacks.
            if let Some(last) = self.samples.last_mut()
                && last.len() < SAMPLE_BYTES
            {
                let take = (SAMPLE_BYTES - last.len()).min(bytes.len());
                last.extend_from_slice(&bytes[..take]);
                self.advance(&mut bytes, take);
                continue;
            }
            let next = self.samples.len() as u64 * self.stride;
            if next > self.seen {
                // Up to the next sample's start, nothing is kept.
                let skip = usize::try_from(next - self.seen)
                    .unwrap_or(usize::MAX)
                    .min(bytes.len());
                self.advance(&mut bytes, skip);
                continue;
            }
            if self.samples.len() == MAX_SAMPLES {
                self.thin();
                continue;
            }
            self.samples.push(Vec::with_capacity(SAMPLE_BYTES));
        }
    }

    fn advance(&mut self, bytes: &mut &[u8], n: usize) {
        *bytes = &bytes[n..];
        self.seen += n as u64;
    }

    /// Keeps every other sample (those at multiples of the doubled stride).
    fn thin(&mut self) {
        let mut index = 0;
        self.samples.retain(|_| {
            index += 1;
            index % 2 == 1
        });
        self.stride *= 2;
    }

    /// The tokens of a stream of `total_bytes` bytes, the samples' tokens per byte scaled up
    /// (the tokens themselves when the samples hold the whole stream).
    pub fn estimate(&self, total_bytes: u64) -> u64 {
        let tokens = self
            .samples
            .iter()
            .map(|sample| count(&String::from_utf8_lossy(sample)) as u64)
            .sum();
        scale(tokens, self.sampled_bytes() as u64, total_bytes)
    }

    /// The samples as text, to be counted later or elsewhere; the sampler is left empty (the
    /// stream has ended), and samples of valid UTF-8 become text without a copy.
    pub fn take_samples(&mut self) -> Samples {
        let bytes = self.sampled_bytes() as u64;
        let texts = std::mem::take(&mut self.samples)
            .into_iter()
            .map(|sample| {
                String::from_utf8(sample)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
            })
            .collect();
        Samples { texts, bytes }
    }

    /// Bytes held in samples.
    pub fn sampled_bytes(&self) -> usize {
        self.samples.iter().map(Vec::len).sum()
    }
}

/// `tokens` found in `sampled` bytes, scaled to `total` bytes.
fn scale(tokens: u64, sampled: u64, total: u64) -> u64 {
    if sampled == 0 {
        return 0;
    }
    (u128::from(tokens) * u128::from(total) / u128::from(sampled))
        .try_into()
        .unwrap_or(u64::MAX)
}

/// A [`Sampler`]'s samples: their text (a sample may begin or end inside a character, which
/// then reads as U+FFFD) and how many bytes of output they hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Samples {
    texts: Vec<String>,
    bytes: u64,
}

impl Samples {
    /// See [`Sampler::estimate`].
    pub fn estimate(&self, total_bytes: u64) -> u64 {
        let tokens = self.texts.iter().map(|text| count(text) as u64).sum();
        scale(tokens, self.bytes, total_bytes)
    }
}

/// What counting an output's tokens takes, gathered where the output was captured, without
/// counting anything: the counting (the slow part) may then happen later or in another
/// process (`spillway truncate` leaves it to a child, so that it exits as soon as before).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputText {
    /// The whole output, at most [`EXACT_MAX_BYTES`] (more is [`measure`]d from a sample).
    Whole(String),
    /// Samples of an output of `total_bytes` bytes.
    Sampled { samples: Samples, total_bytes: u64 },
}

impl OutputText {
    pub fn count(&self) -> Count {
        match self {
            OutputText::Whole(text) => measure(text),
            OutputText::Sampled {
                samples,
                total_bytes,
            } => Count {
                tokens: samples.estimate(*total_bytes),
                estimated: true,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_real_tokens_not_bytes() {
        assert_eq!(count(""), 0);
        assert_eq!(count("hello world"), 2);
        let code = "error[E0308]: mismatched types\n  --> src/lib.rs:34:18\n";
        let n = count(code);
        assert!(n > 5 && n < code.len() / 2, "{n}");
    }

    /// `tiktoken-rs`'s own tokenizer, which the counts must match.
    fn reference() -> &'static tiktoken_rs::CoreBPE {
        static BPE: OnceLock<tiktoken_rs::CoreBPE> = OnceLock::new();
        BPE.get_or_init(|| tiktoken_rs::o200k_base().unwrap())
    }

    #[test]
    fn counts_are_tiktokens() {
        let bpe = reference();
        let mut sources = String::new();
        for file in [
            "src/engine/tokens/mod.rs",
            "src/engine/preview/mod.rs",
            "README.md",
            "docs/protocol.md",
        ] {
            sources.push_str(&std::fs::read_to_string(file).unwrap());
        }
        let texts = [
            sources.as_str(),
            "",
            " ",
            "\n\n\n   \t\r\n",
            "héllo wörld ünïcödé 日本語のテキスト 🚀🚀 émojis",
            "error[E0308]: mismatched types\n  --> src/lib.rs:34:18\n",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "<|endoftext|> is text here, not a special token",
        ];
        for text in texts {
            assert_eq!(count(text), bpe.encode_ordinary(text).len(), "{text:.80?}");
        }
        // Pieces of 100 bytes and more take the heap merge.
        let mut state = 0x9E37_79B9u32;
        let letters: String = (0..20_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                char::from(
                    b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[state as usize % 52],
                )
            })
            .collect();
        for text in [
            "x".repeat(5000) + &" ".repeat(3000) + "y",
            letters.clone(),
            letters[..100].to_string(),
            format!("{letters} {}", &letters[..150]),
            "é".repeat(400),
        ] {
            assert_eq!(count(&text), bpe.encode_ordinary(&text).len(), "{text:.80}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        #[test]
        fn counts_are_tiktokens_for_any_text(text in "\\PC{0,300}") {
            proptest::prop_assert_eq!(count(&text), reference().encode_ordinary(&text).len());
        }

        /// Output as it mostly is: ASCII lines (their pieces found by hand), now and then one
        /// with other characters (its pieces found by the pattern).
        #[test]
        fn counts_are_tiktokens_for_mostly_ascii_text(
            text in "[a-zA-Z0-9 \t\n\r'/.,:_()-]{0,200}([é日 \u{a0}\n][a-zA-Z \n'/]{0,40}){0,3}"
        ) {
            proptest::prop_assert_eq!(count(&text), reference().encode_ordinary(&text).len());
        }
    }

    #[test]
    fn small_texts_are_counted_exactly() {
        let text = "warning: unused variable `x`\n".repeat(100);
        assert_eq!(
            measure(&text),
            Count {
                tokens: count(&text) as u64,
                estimated: false
            }
        );
    }

    /// `seq 1 n` with its lines ended by `\n`.
    fn seq(n: u64) -> String {
        (1..=n).map(|i| format!("{i}\n")).collect()
    }

    #[test]
    fn a_sampler_that_holds_the_whole_stream_counts_it() {
        let text = seq(1000);
        let mut sampler = Sampler::new();
        for piece in text.as_bytes().chunks(333) {
            sampler.feed(piece);
        }
        assert_eq!(sampler.sampled_bytes(), text.len());
        assert_eq!(sampler.estimate(text.len() as u64), count(&text) as u64);
    }

    #[test]
    fn samples_stay_bounded_and_evenly_spread() {
        let mut sampler = Sampler::new();
        let chunk = vec![b'x'; 10_000];
        for _ in 0..1000 {
            sampler.feed(&chunk);
        }
        assert!(sampler.samples.len() <= MAX_SAMPLES);
        assert!(sampler.sampled_bytes() <= MAX_SAMPLES * SAMPLE_BYTES);
        // 10 MB in at most 32 samples: the stride reached 512 KiB, and sample k starts at
        // k * stride, so the last starts within one stride of the end.
        assert_eq!(sampler.stride, 512 * 1024);
        let last_start = (sampler.samples.len() as u64 - 1) * sampler.stride;
        assert!(10_000_000 - last_start <= sampler.stride, "{last_start}");
        assert_eq!(sampler.seen, 10_000_000);
        // Fed in one piece or in many, the samples are the same.
        let mut whole = Sampler::new();
        whole.feed(&vec![b'x'; 10_000_000]);
        assert_eq!(whole.samples, sampler.samples);
    }

    #[test]
    fn a_growing_output_is_estimated_within_a_few_percent() {
        // Numbers grow from 1 to 7 digits: the head and tail alone are 20 % off.
        let text = seq(2_000_000);
        let estimate = measure(&text);
        assert!(estimate.estimated);
        let exact = count(&text) as f64;
        let error = (estimate.tokens as f64 - exact).abs() / exact;
        assert!(error < 0.03, "{} vs {exact}: {error}", estimate.tokens);
    }

    #[test]
    fn samples_counted_elsewhere_give_the_same_estimate() {
        let text = format!("é{}", seq(300_000));
        let mut sampler = Sampler::new();
        for piece in text.as_bytes().chunks(1000) {
            sampler.feed(piece);
        }
        let here = sampler.estimate(text.len() as u64);
        let output = OutputText::Sampled {
            samples: sampler.take_samples(),
            total_bytes: text.len() as u64,
        };
        let json = serde_json::to_string(&output).unwrap();
        let back: OutputText = serde_json::from_str(&json).unwrap();
        assert_eq!(
            back.count(),
            Count {
                tokens: here,
                estimated: true
            }
        );
    }

    #[test]
    fn nothing_is_no_tokens() {
        assert_eq!(Sampler::new().estimate(0), 0);
        assert_eq!(Sampler::new().estimate(100), 0);
        assert_eq!(
            measure(""),
            Count {
                tokens: 0,
                estimated: false
            }
        );
    }
}
