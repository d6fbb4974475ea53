//! Throughput and peak memory of `spillway truncate` against `cat > file`, measured on the
//! same machine in the same run. Not a timed test: it prints figures.
//!
//! It generates realistic PTY log text (timestamps, levels, ~5% SGR colour, ~1% cargo-style
//! `\r` progress redraws, `\r\n` line ends) deterministically into a temp file, reads it once
//! to warm the page cache, then alternates `cat < in > out.txt` and
//! `spillway truncate --data-dir D < in > /dev/null`, deleting outputs between runs. Peak RSS
//! comes from `wait4`'s `ru_maxrss`.
//!
//! Run: `cargo bench --bench truncate`. Environment: `SPILLWAY_BENCH_BYTES` (input size in
//! bytes, default 1 GiB), `SPILLWAY_BENCH_ROUNDS` (default 5), `SPILLWAY_BENCH_OTHER` (the path
//! of another `spillway` build, say an older commit's, timed in the same rounds: on a noisy
//! machine that is the only fair comparison of two builds); temp files go under `TMPDIR`.
//! `SPILLWAY_SIMD=avx2` (or `sse2`) is passed on to the builds timed: it caps the vector
//! instructions their normaliser uses, to time the AVX2 form on a CPU with AVX-512.

mod common;

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{BenchResult, Run, Series, env_number, human, measure, prepare_input};

const DEFAULT_BYTES: u64 = 1 << 30;
const DEFAULT_ROUNDS: usize = 5;
/// Generated text (`\r\n` line ends, as a PTY shows them) is written in chunks of this size.
const CHUNK_BYTES: usize = 256 << 10;
const SPILLWAY: &str = env!("CARGO_BIN_EXE_spillway");

fn main() -> BenchResult<()> {
    let bytes = env_number("SPILLWAY_BENCH_BYTES", DEFAULT_BYTES)?;
    let rounds = env_number("SPILLWAY_BENCH_ROUNDS", DEFAULT_ROUNDS)?.max(1);
    let work = tempfile::TempDir::new()?;
    let input = work.path().join("input.log");
    println!(
        "spillway truncate vs cat: {bytes} bytes ({}), {rounds} rounds",
        human(bytes)
    );
    println!(
        "work dir: {} (set TMPDIR to move it)",
        work.path().display()
    );
    println!("binary: {SPILLWAY}");
    match std::env::var("SPILLWAY_SIMD") {
        Ok(cap) => println!("vector instructions capped at SPILLWAY_SIMD={cap}"),
        Err(_) => println!("vector instructions: the widest this CPU has (SPILLWAY_SIMD unset)"),
    }

    prepare_input(&input, bytes, b"\r\n", CHUNK_BYTES)?;

    let (ours, theirs) = (work.path().join("data"), work.path().join("data-other"));
    // One untimed run each: the first writes of a run pay one-off costs (allocation, cache).
    run_cat(&input, work.path())?;
    run_spillway(SPILLWAY.as_ref(), &input, &ours)?;
    println!("warm-up runs done");

    let other = std::env::var_os("SPILLWAY_BENCH_OTHER").map(PathBuf::from);
    let mut cat = Series::new("cat > file");
    let mut spillway = Series::new("spillway truncate");
    let mut others = Series::new("other build");
    for round in 0..rounds {
        // Alternate which goes first, to spread drift (caches, clocks) over both.
        let (c, (s, spilled)) = if round % 2 == 0 {
            let c = run_cat(&input, work.path())?;
            (c, run_spillway(SPILLWAY.as_ref(), &input, &ours)?)
        } else {
            let s = run_spillway(SPILLWAY.as_ref(), &input, &ours)?;
            (run_cat(&input, work.path())?, s)
        };
        println!(
            "round {}/{rounds}: cat {:.3} s, spillway {:.3} s ({:.1} MiB peak, {spilled} bytes spilled)",
            round + 1,
            c.secs,
            s.secs,
            s.peak_rss_kib as f64 / 1024.0
        );
        cat.push(c);
        spillway.push(s);
        if let Some(other) = &other {
            let (o, _) = run_spillway(other, &input, &theirs)?;
            println!("        other build {:.3} s", o.secs);
            others.push(o);
        }
    }
    print_table(bytes, &cat, &spillway);
    if other.is_some() {
        print_table(bytes, &cat, &others);
    }
    println!("reproduce: cargo bench --bench truncate (SPILLWAY_SIMD=avx2 for the AVX2 form)");
    println!(
        "       or: SPILLWAY_BENCH_BYTES={bytes} SPILLWAY_BENCH_ROUNDS={rounds} cargo bench --bench truncate"
    );
    work.close()?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Runs

fn run_cat(input: &Path, work: &Path) -> BenchResult<Run> {
    let out = work.join("out.txt");
    let mut cmd = Command::new("cat");
    cmd.stdin(File::open(input)?).stdout(File::create(&out)?);
    let run = measure(&mut cmd)?;
    fs::remove_file(&out)?;
    Ok(run)
}

/// Runs `binary truncate` with the data dir `data`; returns the run and the bytes it spilled
/// (0 if no spill). Each build has a data dir of its own: an older build refuses an index a
/// newer one has migrated, and must not be timed on that refusal.
fn run_spillway(binary: &Path, input: &Path, data: &Path) -> BenchResult<(Run, u64)> {
    let mut cmd = Command::new(binary);
    cmd.arg("truncate").arg("--data-dir").arg(data);
    cmd.stdin(File::open(input)?).stdout(Stdio::null());
    let run = measure(&mut cmd)?;
    let spills = data.join("spills");
    let mut spilled = 0;
    if spills.is_dir() {
        for entry in fs::read_dir(&spills)? {
            spilled += entry?.metadata()?.len();
        }
        fs::remove_dir_all(&spills)?;
    }
    Ok((run, spilled))
}

// ---------------------------------------------------------------------------------------
// Report

fn print_table(bytes: u64, cat: &Series<Run>, spillway: &Series<Run>) {
    let mb = bytes as f64 / 1e6;
    println!();
    println!(
        "{:<18} {:>10} {:>10} {:>14} {:>14}",
        "command", "median s", "min s", "MB/s (median)", "peak RSS MiB"
    );
    for s in [cat, spillway] {
        println!(
            "{:<18} {:>10.3} {:>10.3} {:>14.1} {:>14.1}",
            s.name,
            s.median_secs(),
            s.min_secs(),
            mb / s.median_secs(),
            s.max_rss_mib()
        );
    }
    println!(
        "ratio {} / cat: {:.2}x of the medians, {:.2}x of the fastest rounds\n\
         (on a shared machine the fastest rounds are the least disturbed; MB = 10^6 bytes; peak\n\
         RSS is the max over runs, cat's is the measurement floor)",
        spillway.name,
        spillway.median_secs() / cat.median_secs(),
        spillway.min_secs() / cat.min_secs()
    );
    println!();
}
