//! How fast the template learner (`engine::template`) learns, and what it holds: the figures
//! behind where it may run, inside capture over every line (one pass, bounded) or only over
//! the head and tail a preview keeps. Not a timed test: it prints figures.
//!
//! Four texts, each `SPILLWAY_BENCH_BYTES` long: the `truncate` bench's generated log text
//! (normalised first, as capture hands lines on), a `cargo test` run's lines (few templates,
//! long runs), lines that are all different in their words (every line a new template: the
//! learner at its caps, evicting), and 2 KiB lines (the longest it learns). For each: the
//! learner's speed in MB/s and lines/s, the templates and bytes it holds at the end, and the
//! process's resident memory before and after. For scale, the same text's normalisation and a
//! bare split into lines are timed too: capture already does both for every byte.
//!
//! Run: `cargo bench --bench template`. Environment: `SPILLWAY_BENCH_BYTES` (default 64 MiB),
//! `SPILLWAY_BENCH_ROUNDS` (default 3; the best round is reported), `SPILLWAY_BENCH_ONLY` (learn
//! only the texts whose name contains it: for instruction counts under callgrind, e.g.
//! `valgrind --tool=callgrind --toggle-collect='*Learner*learn*' target/release/deps/template-*`).

#[allow(dead_code)] // only the input and environment helpers of the shared bench code
mod common;

use std::time::Instant;

use common::{BenchResult, env_number, human, prepare_input};
use spillway::engine::normalise::{NormaliseOptions, normalise};
use spillway::engine::template::{Learner, Limits};

const DEFAULT_BYTES: u64 = 64 << 20;
const DEFAULT_ROUNDS: usize = 3;

fn main() -> BenchResult<()> {
    let bytes = env_number("SPILLWAY_BENCH_BYTES", DEFAULT_BYTES)?;
    let rounds = env_number("SPILLWAY_BENCH_ROUNDS", DEFAULT_ROUNDS)?.max(1);
    let work = tempfile::TempDir::new()?;
    let log = work.path().join("log.txt");
    prepare_input(&log, bytes, b"\r\n", 256 << 10)?;
    let raw = std::fs::read(&log)?;
    let (normalise_secs, log_text) = best(rounds, || normalise(&raw, NormaliseOptions::default()));
    drop(raw);
    let size = usize::try_from(bytes)?;
    let texts = [
        ("log text", log_text),
        ("cargo test", repeat_lines(size, cargo_test_line)),
        ("all distinct", repeat_lines(size, distinct_line)),
        ("2 KiB lines", repeat_lines(size, long_line)),
    ];
    println!(
        "normalising the log text (capture's own pass): {:.1} MB/s",
        texts[0].1.len() as f64 / normalise_secs / 1e6
    );
    println!(
        "{:<13} {:>9} {:>11} {:>12} {:>13} {:>10} {:>11} {:>15}",
        "text",
        "size",
        "split MB/s",
        "learn MB/s",
        "learn lines/s",
        "templates",
        "held",
        "resident MiB"
    );
    let only = std::env::var("SPILLWAY_BENCH_ONLY").unwrap_or_default();
    for (name, text) in texts
        .iter()
        .filter(|(name, _)| name.contains(only.as_str()))
    {
        let (split_secs, lines) = best(rounds, || text.lines().count());
        let before = rss_mib();
        let (learn_secs, learner) = best(rounds, || {
            let mut learner = Learner::new(Limits::default());
            for line in text.lines() {
                std::hint::black_box(learner.learn(line));
            }
            learner
        });
        println!(
            "{name:<13} {:>9} {:>11.1} {:>12.1} {:>13.0} {:>10} {:>11} {:>6.1} -> {:>5.1}",
            human(text.len() as u64),
            text.len() as f64 / split_secs / 1e6,
            text.len() as f64 / learn_secs / 1e6,
            lines as f64 / learn_secs,
            learner.templates().count(),
            format!("{} KiB", learner.held_bytes() >> 10),
            before,
            rss_mib(),
        );
    }
    Ok(())
}

/// Lines made by `line(i)`, for `i` from 0, until the text reaches `bytes`.
fn repeat_lines(bytes: usize, line: fn(u64) -> String) -> String {
    let mut text = String::with_capacity(bytes + 4096);
    let mut i = 0;
    while text.len() < bytes {
        text.push_str(&line(i));
        text.push('\n');
        i += 1;
    }
    text
}

fn cargo_test_line(i: u64) -> String {
    let verdict = if i.is_multiple_of(997) {
        "FAILED"
    } else {
        "ok"
    };
    format!("test module_{}::tests::case_{i} ... {verdict}", i % 13)
}

/// Words of letters only, different on every line: no two lines share a template.
fn distinct_line(i: u64) -> String {
    let mut state = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut words = Vec::new();
    for _ in 0..8 {
        let mut word = String::new();
        for _ in 0..6 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            word.push(char::from(b'a' + (state % 26) as u8));
        }
        words.push(word);
    }
    words.join(" ")
}

fn long_line(i: u64) -> String {
    let mut line = format!("record {i}:");
    while line.len() + 31 < 2048 {
        line.push_str(" field_value_with_a_longer_name");
    }
    line
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

/// The best time of `rounds` calls of `f`, with the last result.
fn best<T>(rounds: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut fastest = f64::INFINITY;
    let mut result = None;
    for _ in 0..rounds {
        let start = Instant::now();
        let value = f();
        fastest = fastest.min(start.elapsed().as_secs_f64());
        result = Some(value);
    }
    (fastest, result.expect("at least one round"))
}
