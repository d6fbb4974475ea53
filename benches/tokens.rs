//! How fast the o200k tokenizer counts, and how close the sampled estimate of a large output's
//! tokens comes to the exact count: the figures behind `tokens::EXACT_MAX_BYTES`. Not a timed
//! test: it prints figures.
//!
//! Three texts: the `truncate` bench's generated log text (`\n` line ends), `seq 1 N`'s output
//! (numbers that grow from 1 to 7 digits, which a sample of the head and tail misjudges), and
//! this crate's own sources repeated (code). For each, the exact count's speed on the first
//! 1 MiB and on the whole text, and the sampled estimate's time and error on the whole text.
//!
//! It also says what building the tokenizer costs, in time and resident memory.
//!
//! Run: `cargo bench --bench tokens`. Environment: `SPILLWAY_BENCH_BYTES` (size of each text,
//! default 16 MiB), `SPILLWAY_BENCH_ROUNDS` (default 3; the best round is reported).

#[allow(dead_code)] // only the input and environment helpers of the shared bench code
mod common;

use std::path::Path;
use std::time::Instant;

use common::{BenchResult, env_number, human, prepare_input};
use spillway::engine::tokens::{self, Sampler};

const DEFAULT_BYTES: u64 = 16 << 20;
const DEFAULT_ROUNDS: usize = 3;

fn main() -> BenchResult<()> {
    let bytes = env_number("SPILLWAY_BENCH_BYTES", DEFAULT_BYTES)?;
    let rounds = env_number("SPILLWAY_BENCH_ROUNDS", DEFAULT_ROUNDS)?.max(1);
    let (start, before) = (Instant::now(), rss_mib());
    tokens::count("");
    println!(
        "tokenizer built in {:.0} ms, resident memory {before:.1} -> {:.1} MiB",
        start.elapsed().as_secs_f64() * 1000.0,
        rss_mib()
    );

    let (start, before) = (Instant::now(), rss_mib());
    let reference = tiktoken_rs::o200k_base()?;
    println!(
        "tiktoken-rs's own tokenizer (which holds more than counting needs) built in {:.0} ms, \
         resident memory {before:.1} -> {:.1} MiB",
        start.elapsed().as_secs_f64() * 1000.0,
        rss_mib()
    );
    let work = tempfile::TempDir::new()?;
    let log = work.path().join("log.txt");
    prepare_input(&log, bytes, b"\n", 256 << 10)?;
    let texts = [
        ("log text", std::fs::read_to_string(&log)?),
        ("seq output", seq_text(bytes)),
        ("source code", source_text(bytes)?),
    ];
    println!(
        "{:<12} {:>9} {:>16} {:>16} {:>13} {:>8}",
        "text", "size", "exact, 1 MiB", "exact, whole", "estimate", "error"
    );
    for (name, text) in &texts {
        let head = cut(text, tokens::EXACT_MAX_BYTES);
        let (head_secs, _) = best(rounds, || tokens::count(head) as u64);
        let (whole_secs, exact) = best(rounds, || tokens::count(text) as u64);
        let (estimate_secs, estimate) = best(rounds, || {
            let mut sampler = Sampler::new();
            for piece in text.as_bytes().chunks(64 << 10) {
                sampler.feed(piece);
            }
            sampler.estimate(text.len() as u64)
        });
        let rate = |n: usize, secs: f64| n as f64 / secs / 1e6;
        let (reference_secs, reference) =
            best(rounds, || reference.encode_ordinary(text).len() as u64);
        assert_eq!(
            reference, exact,
            "{name}: the counts differ from tiktoken-rs's"
        );
        println!(
            "  ({name}: tiktoken-rs's own encode_ordinary {:.1} MB/s)",
            rate(text.len(), reference_secs)
        );
        println!(
            "{name:<12} {:>9} {:>7.0} ms {:>4.1} MB/s {:>7.0} ms {:>4.1} MB/s {:>10.1} ms {:>+7.2}%",
            human(text.len() as u64),
            head_secs * 1000.0,
            rate(head.len(), head_secs),
            whole_secs * 1000.0,
            rate(text.len(), whole_secs),
            estimate_secs * 1000.0,
            (estimate as f64 - exact as f64) * 100.0 / exact as f64,
        );
    }
    Ok(())
}

/// This process's resident memory (Linux's `VmRSS`), in MiB; 0 where it cannot be read.
fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kib| kib.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

/// The best time of `rounds` calls of `f`, with its result.
fn best(rounds: usize, mut f: impl FnMut() -> u64) -> (f64, u64) {
    let mut fastest = f64::INFINITY;
    let mut result = 0;
    for _ in 0..rounds {
        let start = Instant::now();
        result = f();
        fastest = fastest.min(start.elapsed().as_secs_f64());
    }
    (fastest, result)
}

/// The first `bytes` bytes of `text` or fewer, cut at a char boundary.
fn cut(text: &str, bytes: usize) -> &str {
    let mut end = bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `seq 1 N`'s output, N the first to reach `bytes`.
fn seq_text(bytes: u64) -> String {
    let mut text = String::new();
    let mut n = 1u64;
    while (text.len() as u64) < bytes {
        text.push_str(&n.to_string());
        text.push('\n');
        n += 1;
    }
    text
}

/// This crate's `src/` files, concatenated and repeated to `bytes`.
fn source_text(bytes: u64) -> BenchResult<String> {
    let mut files = Vec::new();
    collect_sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    )?;
    files.sort();
    let mut once = String::new();
    for file in files {
        once.push_str(&std::fs::read_to_string(file)?);
    }
    let mut text = String::new();
    while (text.len() as u64) < bytes {
        text.push_str(&once);
    }
    Ok(cut(&text, usize::try_from(bytes)?).to_string())
}

fn collect_sources(dir: &Path, files: &mut Vec<std::path::PathBuf>) -> BenchResult<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_sources(&path, files)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    Ok(())
}
