//! Counting model tokens with a real BPE tokenizer (OpenAI's o200k vocabulary, which
//! `tiktoken-rs` carries inside the crate, so nothing is fetched at run time), for previews
//! budgeted in tokens rather than bytes: bytes/4 is wrong by 2x on code and logs.
//!
//! It also measures what each run's output would have cost a model that read all of it, for
//! the token accounting of `spillway stats`. BPE is slow next to the engine (see
//! [`EXACT_MAX_BYTES`]), so an output is counted exactly only while that is cheap; past that,
//! its count is estimated from a bounded [`Sampler`] of it, and said to be an estimate.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use tiktoken_rs::CoreBPE;

/// Largest text counted exactly; anything longer is estimated from a sample of it.
///
/// Measured with `cargo bench --bench tokens` on this project's 2-core machine (release
/// build, other builds running): o200k counts 14-23 MB/s (generated log text 22.5, source
/// code 20.6, `seq` output 13.5), so 1 MiB takes 45-75 ms, and 100 MB would take 5-7 s. The
/// count is paid where a run ends, before its `exit` is sent and before `spillway truncate`
/// exits: ordinary runs, shown whole in a 50 KiB preview, pay at most a few ms, and a run
/// that printed up to 1 MiB at most ~75 ms. Past the bound the [`Sampler`]'s 256 KiB cost a
/// fixed 13-19 ms however long the output, and came within 1 % of the exact count on all
/// three texts: counting more of it exactly would buy little for a cost that grows with it.
pub const EXACT_MAX_BYTES: usize = 1 << 20;

/// Bytes in each sample the [`Sampler`] keeps.
const SAMPLE_BYTES: usize = 4096;

/// Samples the [`Sampler`] keeps at most: 64 x 4 KiB = 256 KiB of text to count.
const MAX_SAMPLES: usize = 64;

/// The tokenizer, built once per process on first use (about 120 ms).
fn tokenizer() -> Option<&'static CoreBPE> {
    static BPE: OnceLock<Option<CoreBPE>> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::o200k_base().ok()).as_ref()
}

/// Builds the tokenizer on a thread of its own and returns at once, so that the first count
/// need not wait for it: the daemon calls it at start (its first run's end is not delayed),
/// `spillway truncate` once its output overflows the preview (the build overlaps the rest of
/// the stream). Without a thread, the first count builds it.
pub fn warm_up() {
    let _ = std::thread::Builder::new()
        .name("spillway-tokenizer".into())
        .spawn(|| {
            tokenizer();
        });
}

/// Tokens in `text` under o200k; if the tokenizer cannot be built, a conservative estimate
/// (one token per 2 bytes) so a budget is still never exceeded.
pub fn count(text: &str) -> usize {
    match tokenizer() {
        Some(bpe) => bpe.encode_ordinary(text).len(),
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
/// sample's size (the first 256 KiB are kept whole) and doubles whenever more than
/// [`MAX_SAMPLES`] would be kept, dropping every other sample, so the samples stay evenly
/// spread over the whole stream whatever its length. Spread rather than taken from the head
/// and tail only: output changes as it goes (`seq`'s numbers grow from 1 to 7 digits, a build
/// log turns into a test log), and the ends alone misjudge it by 20 % and more.
///
/// Feeding costs a comparison per call, and copies at most 128 KiB each time the stream
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
        self.samples().estimate(total_bytes)
    }

    /// The samples as text, to be counted later or elsewhere.
    pub fn samples(&self) -> Samples {
        Samples {
            texts: self
                .samples
                .iter()
                .map(|sample| String::from_utf8_lossy(sample).into_owned())
                .collect(),
            bytes: self.sampled_bytes() as u64,
        }
    }

    /// Bytes held in samples.
    pub fn sampled_bytes(&self) -> usize {
        self.samples.iter().map(Vec::len).sum()
    }
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
        let tokens: u64 = self.texts.iter().map(|text| count(text) as u64).sum();
        if self.bytes == 0 {
            return 0;
        }
        (u128::from(tokens) * u128::from(total_bytes) / u128::from(self.bytes))
            .try_into()
            .unwrap_or(u64::MAX)
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
        // 10 MB in at most 64 samples: the stride reached 256 KiB, and sample k starts at
        // k * stride, so the last starts within one stride of the end.
        assert_eq!(sampler.stride, 256 * 1024);
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
        let output = OutputText::Sampled {
            samples: sampler.samples(),
            total_bytes: text.len() as u64,
        };
        let json = serde_json::to_string(&output).unwrap();
        let back: OutputText = serde_json::from_str(&json).unwrap();
        assert_eq!(
            back.count(),
            Count {
                tokens: sampler.estimate(text.len() as u64),
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
