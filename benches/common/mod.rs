//! Code shared by the `truncate` and `run` benches, which both time spillway commands against
//! plain ones on the same generated input. Kept here, once, so the two measure and report the
//! same way: environment settings ([`env_number`]), the deterministic PTY-style log text
//! ([`prepare_input`]), timing and peak RSS of a child process ([`measure`], via `wait4`), and the
//! statistics of a series of runs ([`Series`]).
//!
//! It is a module of each bench (`mod common;`), not a target of its own: cargo does not treat
//! `benches/common/mod.rs` as a bench.

use std::error::Error;
use std::fs::File;
use std::io::{self, Write as _};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

pub type BenchResult<T> = Result<T, Box<dyn Error>>;

/// Reads an integer from the environment variable `name`, or `default` when unset.
pub fn env_number<T: std::str::FromStr>(name: &str, default: T) -> BenchResult<T> {
    match std::env::var(name) {
        Err(std::env::VarError::NotPresent) => Ok(default),
        Ok(text) => text
            .trim()
            .parse()
            .map_err(|_| format!("{name} must be a plain integer, got {text:?}").into()),
        Err(e) => Err(format!("{name}: {e}").into()),
    }
}

pub fn human(bytes: u64) -> String {
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

/// Produces log lines, each ended by `line_end`: `\r\n` as a PTY shows them, or `\n` as a
/// program writes them to a terminal (the PTY adds the `\r`).
struct LogGen {
    rng: XorShift,
    clock_ms: u64,
    line: Vec<u8>,
    line_end: &'static [u8],
}

impl LogGen {
    fn new(line_end: &'static [u8]) -> Self {
        let start_ms = ((9 * 60 + 51) * 60 + 14) * 1000 + 123;
        LogGen {
            rng: XorShift(0x9E37_79B9_7F4A_7C15),
            clock_ms: start_ms,
            line: Vec::new(),
            line_end,
        }
    }

    /// Appends one line, ending in `self.line_end`, to `out`.
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
        out.extend_from_slice(self.line_end);
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

/// Writes the bench input, `bytes` bytes of log text, to `path` (see [`generate`]), says how
/// long that took, and reads it once to warm the page cache.
pub fn prepare_input(
    path: &Path,
    bytes: u64,
    line_end: &'static [u8],
    chunk_bytes: usize,
) -> io::Result<()> {
    let start = Instant::now();
    let lines = generate(path, bytes, line_end, chunk_bytes)?;
    println!(
        "generated {lines} lines in {:.2} s",
        start.elapsed().as_secs_f64()
    );
    io::copy(&mut File::open(path)?, &mut io::sink())?; // warm the page cache
    Ok(())
}

/// Writes exactly `bytes` bytes of generated log text to `path`, with lines ended by
/// `line_end` (`b"\r\n"` or `b"\n"`), in writes of `chunk_bytes`; returns the lines begun.
/// The text depends only on `bytes` and `line_end`.
fn generate(
    path: &Path,
    bytes: u64,
    line_end: &'static [u8],
    chunk_bytes: usize,
) -> io::Result<u64> {
    let mut file = File::create(path)?;
    let mut logs = LogGen::new(line_end);
    let mut chunk = Vec::with_capacity(chunk_bytes + 4096);
    let (mut written, mut lines) = (0u64, 0u64);
    while written < bytes {
        let want = (bytes - written).min(chunk_bytes as u64) as usize;
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
pub struct Run {
    pub secs: f64,
    pub peak_rss_kib: u64,
}

impl AsRef<Run> for Run {
    fn as_ref(&self) -> &Run {
        self
    }
}

/// Runs `cmd` to completion, timing it from spawn to reap; fails unless it exits with 0.
pub fn measure(cmd: &mut Command) -> BenchResult<Run> {
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

/// The runs of one command. `R` is [`Run`], or a bench's own record that holds one and adds
/// figures of its own (a bench adds methods for those with `impl Series<ItsRun>`).
pub struct Series<R> {
    pub name: &'static str,
    pub runs: Vec<R>,
}

impl<R: AsRef<Run>> Series<R> {
    pub fn new(name: &'static str) -> Self {
        Series {
            name,
            runs: Vec::new(),
        }
    }

    pub fn push(&mut self, run: R) {
        self.runs.push(run);
    }

    pub fn median_secs(&self) -> f64 {
        median(self.runs.iter().map(|r| r.as_ref().secs).collect())
    }

    pub fn min_secs(&self) -> f64 {
        self.runs
            .iter()
            .map(|r| r.as_ref().secs)
            .fold(f64::INFINITY, f64::min)
    }

    /// The largest peak resident set over the runs, in MiB.
    pub fn max_rss_mib(&self) -> f64 {
        let kib = self
            .runs
            .iter()
            .map(|r| r.as_ref().peak_rss_kib)
            .max()
            .unwrap_or(0);
        kib as f64 / 1024.0
    }
}

/// The median of `values` (not empty).
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    (values[(n - 1) / 2] + values[n / 2]) / 2.0 // both middles are one when n is odd
}
