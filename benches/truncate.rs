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
//! bytes, default 1 GiB), `SPILLWAY_BENCH_ROUNDS` (default 5); temp files go under `TMPDIR`.

use std::error::Error;
use std::fs::{self, File};
use std::io::{self, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

type BenchResult<T> = Result<T, Box<dyn Error>>;

const DEFAULT_BYTES: u64 = 1 << 30;
const DEFAULT_ROUNDS: usize = 5;
/// Generated text is written in chunks of this size.
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

    let start = Instant::now();
    let lines = generate(&input, bytes)?;
    println!(
        "generated {lines} lines in {:.2} s",
        start.elapsed().as_secs_f64()
    );
    io::copy(&mut File::open(&input)?, &mut io::sink())?; // warm the page cache

    // One untimed run each: the first writes of a run pay one-off costs (allocation, cache).
    run_cat(&input, work.path())?;
    run_spillway(&input, work.path())?;
    println!("warm-up runs done");

    let mut cat = Series::new("cat > file");
    let mut spillway = Series::new("spillway truncate");
    for round in 0..rounds {
        // Alternate which goes first, to spread drift (caches, clocks) over both.
        let (c, (s, spilled)) = if round % 2 == 0 {
            let c = run_cat(&input, work.path())?;
            (c, run_spillway(&input, work.path())?)
        } else {
            let s = run_spillway(&input, work.path())?;
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
    }
    print_table(bytes, &cat, &spillway);
    println!("reproduce: cargo bench --bench truncate");
    println!(
        "       or: SPILLWAY_BENCH_BYTES={bytes} SPILLWAY_BENCH_ROUNDS={rounds} cargo bench --bench truncate"
    );
    work.close()?;
    Ok(())
}

/// Reads an integer from the environment variable `name`, or `default` when unset.
fn env_number<T: std::str::FromStr>(name: &str, default: T) -> BenchResult<T> {
    match std::env::var(name) {
        Err(std::env::VarError::NotPresent) => Ok(default),
        Ok(text) => text
            .trim()
            .parse()
            .map_err(|_| format!("{name} must be a plain integer, got {text:?}").into()),
        Err(e) => Err(format!("{name}: {e}").into()),
    }
}

fn human(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

// ---------------------------------------------------------------------------------------
// Input generation

/// xorshift64: tiny, deterministic, good enough to vary log lines.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const LEVELS: [&str; 5] = ["INFO ", "DEBUG", "WARN ", "ERROR", "TRACE"];
const COLOURS: [&str; 5] = ["32", "34", "33", "31", "90"];
const VERBS: [&str; 6] = [
    "compiled",
    "fetched",
    "checked",
    "linked",
    "tested",
    "documented",
];
const WORDS: [&str; 16] = [
    "request", "handler", "queue", "retry", "shard", "token", "buffer", "commit", "span", "cache",
    "hit", "miss", "ok", "done", "upstream", "latency",
];

/// Produces log lines as a PTY shows them.
struct LogGen {
    rng: XorShift,
    clock_ms: u64,
    line: Vec<u8>,
}

impl LogGen {
    fn new() -> Self {
        let start_ms = ((9 * 60 + 51) * 60 + 14) * 1000 + 123;
        LogGen {
            rng: XorShift(0x9E37_79B9_7F4A_7C15),
            clock_ms: start_ms,
            line: Vec::new(),
        }
    }

    /// Appends one line, ending in `\r\n`, to `out`.
    fn push_line(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        if self.rng.below(100) == 0 {
            self.push_progress(out)?;
        }
        self.fill_plain_line()?;
        if self.rng.below(20) == 0 {
            // Colour the level field, which starts after the 24-byte timestamp and a space.
            let colour = self.rng.pick(&COLOURS);
            out.extend_from_slice(&self.line[..25]);
            write!(out, "\x1b[{colour}m")?;
            out.extend_from_slice(&self.line[25..30]);
            out.extend_from_slice(b"\x1b[0m");
            out.extend_from_slice(&self.line[30..]);
        } else {
            out.extend_from_slice(&self.line);
        }
        out.extend_from_slice(b"\r\n");
        Ok(())
    }

    /// Several cargo-style progress redraws, each ended by `\r`.
    fn push_progress(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        let total = 50 + self.rng.below(400);
        let mut done = self.rng.below(total / 2);
        for _ in 0..2 + self.rng.below(5) {
            let filled = (done * 25 / total) as usize;
            let bar = format!("{}>{}", "=".repeat(filled), " ".repeat(25 - filled));
            let krate = self.rng.below(300);
            write!(
                out,
                "    Building [{bar}] {done}/{total}: foo_{krate}(build)\r"
            )?;
            done += 1 + self.rng.below(5);
        }
        Ok(())
    }

    /// Builds the visible text of a line (40..=200 bytes, ASCII) in `self.line`.
    fn fill_plain_line(&mut self) -> io::Result<()> {
        let target = 40 + self.rng.below(161) as usize;
        self.clock_ms += self.rng.below(50);
        let ms = self.clock_ms;
        let (h, m, s, milli) = (
            (ms / 3_600_000) % 24,
            (ms / 60_000) % 60,
            (ms / 1000) % 60,
            ms % 1000,
        );
        let level = self.rng.pick(&LEVELS);
        let worker = self.rng.below(8);
        let verb = self.rng.pick(&VERBS);
        let krate = self.rng.below(300);
        let took = self.rng.below(2000);
        self.line.clear();
        write!(
            self.line,
            "2026-11-21T{h:02}:{m:02}:{s:02}.{milli:03}Z {level} worker-{worker} {verb} crate foo_{krate} in {took}ms"
        )?;
        while self.line.len() < target {
            let word = self.rng.pick(&WORDS);
            self.line.push(b' ');
            self.line.extend_from_slice(word.as_bytes());
        }
        self.line.truncate(target);
        Ok(())
    }
}

/// Writes exactly `bytes` bytes of generated log text to `path`; returns the lines begun.
fn generate(path: &Path, bytes: u64) -> io::Result<u64> {
    let mut file = File::create(path)?;
    let mut logs = LogGen::new();
    let mut chunk = Vec::with_capacity(CHUNK_BYTES + 4096);
    let (mut written, mut lines) = (0u64, 0u64);
    while written < bytes {
        let want = (bytes - written).min(CHUNK_BYTES as u64) as usize;
        while chunk.len() < want {
            logs.push_line(&mut chunk)?;
            lines += 1;
        }
        file.write_all(&chunk[..want])?;
        chunk.drain(..want); // carry the rest of the last line into the next chunk
        written += want as u64;
    }
    file.sync_all()?;
    Ok(lines)
}

// ---------------------------------------------------------------------------------------
// Runs

/// One measured run: wall time and peak resident set.
struct Run {
    secs: f64,
    peak_rss_kib: u64,
}

fn run_cat(input: &Path, work: &Path) -> BenchResult<Run> {
    let out = work.join("out.txt");
    let mut cmd = Command::new("cat");
    cmd.stdin(File::open(input)?).stdout(File::create(&out)?);
    let run = measure(cmd)?;
    fs::remove_file(&out)?;
    Ok(run)
}

/// Runs `spillway truncate`; returns the run and the bytes it spilled (0 if no spill).
fn run_spillway(input: &Path, work: &Path) -> BenchResult<(Run, u64)> {
    let data = work.join("data");
    let mut cmd = Command::new(SPILLWAY);
    cmd.arg("truncate").arg("--data-dir").arg(&data);
    cmd.stdin(File::open(input)?).stdout(Stdio::null());
    let run = measure(cmd)?;
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

/// Runs `cmd` to completion, timing it from spawn to reap; fails unless it exits with 0.
fn measure(mut cmd: Command) -> BenchResult<Run> {
    let start = Instant::now();
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    let (status, usage) = wait4(child.id())?;
    let secs = start.elapsed().as_secs_f64();
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        return Err(format!("{cmd:?} failed (wait status {status:#x})").into());
    }
    Ok(Run {
        secs,
        peak_rss_kib: peak_rss_kib(&usage),
    })
}

/// Reaps child `pid`, returning its wait status and resource usage.
fn wait4(pid: u32) -> io::Result<(libc::c_int, libc::rusage)> {
    let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
    let mut status = 0;
    // SAFETY: rusage is a plain struct of integers, for which all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: both pointers are to live, writable locals of the right types.
        let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if reaped == pid {
            return Ok((status, usage));
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// `ru_maxrss` in KiB: Linux reports KiB, macOS bytes.
fn peak_rss_kib(usage: &libc::rusage) -> u64 {
    let raw = u64::try_from(usage.ru_maxrss).unwrap_or(0);
    if cfg!(target_os = "macos") {
        raw / 1024
    } else {
        raw
    }
}

// ---------------------------------------------------------------------------------------
// Report

/// The runs of one command.
struct Series {
    name: &'static str,
    runs: Vec<Run>,
}

impl Series {
    fn new(name: &'static str) -> Self {
        Series {
            name,
            runs: Vec::new(),
        }
    }

    fn push(&mut self, run: Run) {
        self.runs.push(run);
    }

    fn median_secs(&self) -> f64 {
        let mut secs: Vec<f64> = self.runs.iter().map(|r| r.secs).collect();
        secs.sort_by(f64::total_cmp);
        let n = secs.len();
        (secs[(n - 1) / 2] + secs[n / 2]) / 2.0 // both middles are one when n is odd
    }

    fn min_secs(&self) -> f64 {
        self.runs
            .iter()
            .map(|r| r.secs)
            .fold(f64::INFINITY, f64::min)
    }

    fn max_rss_mib(&self) -> f64 {
        let kib = self.runs.iter().map(|r| r.peak_rss_kib).max().unwrap_or(0);
        kib as f64 / 1024.0
    }
}

fn print_table(bytes: u64, cat: &Series, spillway: &Series) {
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
        "ratio spillway/cat (median time): {:.2}x\n\
         (MB = 10^6 bytes; peak RSS is the max over runs, cat's is the measurement floor)",
        spillway.median_secs() / cat.median_secs()
    );
    println!();
}
