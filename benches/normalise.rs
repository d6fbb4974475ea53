//! The normaliser alone, on one thread: how long it takes to turn the truncate bench's
//! generated log into plain text, fed 256 KiB at a time as `truncate` reads it, with the line
//! ends a PTY gives (`\r\n`) and those a pipe gives (`\n`). Not a timed test: it prints
//! figures.
//!
//! The normaliser is most of the work of the thread that reads a command's output, and a
//! change to it is hard to see in the whole command's time on a noisy machine: the writer
//! thread, the kernel's copies and the disk are in that too. Here it is alone.
//!
//! Run: `cargo bench --bench normalise`. Environment: `SPILLWAY_BENCH_BYTES` (input size in
//! bytes, default 64 MiB), `SPILLWAY_BENCH_ROUNDS` (default 21); `SPILLWAY_SIMD=avx2` (or
//! `sse2`) caps the vector instructions the normaliser uses. To compare two commits, run it
//! on each in turn, more than once: the machine's drift is as large as most changes.

#[allow(dead_code)] // The generator and the statistics are what this bench takes from it.
mod common;

use std::time::Instant;

use common::{BenchResult, env_number, human, median, prepare_input};
use spillway::engine::normalise::{NormaliseOptions, Normaliser};

const DEFAULT_BYTES: u64 = 64 << 20;
const DEFAULT_ROUNDS: usize = 21;
/// Bytes fed at a time: `truncate`'s read size.
const READ_BYTES: usize = 256 << 10;

fn main() -> BenchResult<()> {
    let bytes = env_number("SPILLWAY_BENCH_BYTES", DEFAULT_BYTES)?;
    let rounds = env_number("SPILLWAY_BENCH_ROUNDS", DEFAULT_ROUNDS)?.max(1);
    let work = tempfile::TempDir::new()?;
    println!(
        "the normaliser alone: {bytes} bytes ({}) of generated log, {rounds} rounds",
        human(bytes)
    );
    let ends: [(&str, &'static [u8]); 2] =
        [("\\r\\n (a PTY's)", b"\r\n"), ("\\n (a pipe's)", b"\n")];
    for (name, line_end) in ends {
        let path = work.path().join("input.log");
        prepare_input(&path, bytes, line_end, READ_BYTES)?;
        let input = std::fs::read(&path)?;
        let times: Vec<f64> = (0..rounds).map(|_| normalise_ms(&input)).collect();
        let fastest = times.iter().copied().fold(f64::INFINITY, f64::min);
        let median = median(times);
        println!(
            "lines ended by {name}: median {median:.2} ms, fastest {fastest:.2} ms ({:.2} GB/s at the median)",
            bytes as f64 / median / 1e6
        );
    }
    println!("reproduce: cargo bench --bench normalise");
    Ok(())
}

/// Milliseconds to normalise `input` fed in reads of [`READ_BYTES`], the text taken out after
/// each, as the capture takes it.
fn normalise_ms(input: &[u8]) -> f64 {
    let mut normaliser = Normaliser::new(NormaliseOptions::default());
    let mut out = String::with_capacity(2 * READ_BYTES);
    let start = Instant::now();
    for chunk in input.chunks(READ_BYTES) {
        normaliser.feed(chunk, &mut out);
        out.clear();
    }
    normaliser.finish(&mut out);
    start.elapsed().as_secs_f64() * 1e3
}
