//! Load and soak: many runs in flight against one daemon for minutes, every run's spill checked
//! byte for byte, and the daemon watched for memory, open files or zombie children that grow.
//! Not a timed test: it prints figures, and exits non-zero when a check fails.
//!
//! It starts a private daemon (as the `run` bench does), writes deterministic text of plain
//! `\n`-ended ASCII lines (which the normaliser leaves as they are, so a run's spill must be
//! exactly the text it printed), then keeps `SPILLWAY_SOAK_RUNS` runs in flight until
//! `SPILLWAY_SOAK_SECS` have passed. Run `i` is `tail -c +K FILE | head -c N` (N =
//! `SPILLWAY_SOAK_BYTES`, K varies with `i`), under a PTY when `i` is even and `--no-tty`
//! when odd, sent as a `run` request on a fresh socket connection (the protocol a client
//! speaks, with spillway's own types). Each run must end `exited` with code 0, its
//! `total_bytes` must be N and its spill file the very N bytes; the spill is then deleted.
//!
//! Every [`SAMPLE_EVERY`] it samples the daemon's `VmRSS`, its open file descriptors and its
//! zombie children. At the end it waits for the runs in flight, prints the first minute
//! against the last (the maxima of each) and the overall maxima, and fails if a run failed a
//! check, if RSS or descriptors grew materially from the first minute to the last (or the
//! idle descriptors from before the first run to after the last), or if zombies remain.
//!
//! Run: `cargo bench --bench soak`. Environment: `SPILLWAY_SOAK_SECS` (default 300),
//! `SPILLWAY_SOAK_RUNS` (runs in flight, default 64), `SPILLWAY_SOAK_BYTES` (bytes per run,
//! default 10 MB); temp files go under `TMPDIR`. Linux only (`/proc`).

#[allow(dead_code)] // the soak uses only the environment helpers of the shared bench code
mod common;
mod daemon;

use std::fmt::Write as _;
use std::fs;
use std::io::{BufRead, BufReader, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{BenchResult, env_number, human};
use daemon::{Daemon, proc_status_kib};
use spillway::protocol::{Event, ExitEvent, Request, RunRequest, RunStatus};

const DEFAULT_SECS: u64 = 300;
const DEFAULT_RUNS: usize = 64;
const DEFAULT_BYTES: usize = 10_000_000;
/// How often the daemon is sampled.
const SAMPLE_EVERY: Duration = Duration::from_secs(15);
/// The windows compared: the first and the last minute of samples (a third of the time
/// sampled, in shorter soaks).
const WINDOW: Duration = Duration::from_secs(60);
/// Runs start at offsets spread over this many bytes of the text.
const OFFSET_SPAN: usize = 1 << 20;
/// A run that takes longer is killed by the daemon and counted as failed.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);
/// Material growth: the last minute's peak RSS above the first minute's by this ratio plus
/// [`RSS_SLACK_KIB`] (allocators keep some memory after a burst).
const RSS_GROWTH: f64 = 1.25;
const RSS_SLACK_KIB: u64 = 16 << 10;
/// Descriptors beyond the first minute's peak, per run in flight, that count as a leak: a run
/// holds 3 to 6 (its terminal or pipe, wake-up pipe, spill file, socket) depending on the
/// moment of its life a sample catches, so peaks of 64 runs move by dozens between windows
/// (one 5-minute soak peaked at 274, then 345, and was back to 17 once idle). A leak shows
/// for certain in the idle count after the runs, held to [`IDLE_FD_SLACK`] over the count
/// before them.
const FD_SLACK_PER_RUN: u64 = 2;
const IDLE_FD_SLACK: u64 = 4;

fn main() -> BenchResult<()> {
    let secs = env_number("SPILLWAY_SOAK_SECS", DEFAULT_SECS)?;
    let runs = env_number("SPILLWAY_SOAK_RUNS", DEFAULT_RUNS)?.max(1);
    let bytes = env_number("SPILLWAY_SOAK_BYTES", DEFAULT_BYTES)?;
    let work = tempfile::TempDir::new()?;
    println!(
        "soak: {secs} s, {runs} runs in flight, {bytes} bytes ({}) per run",
        human(bytes as u64)
    );
    println!(
        "work dir: {} (set TMPDIR to move it)",
        work.path().display()
    );
    let text = Arc::new(plain_lines(bytes + OFFSET_SPAN));
    let file = work.path().join("text.txt");
    fs::write(&file, text.as_slice())?;
    let file = shlex::try_quote(file.to_str().ok_or("TMPDIR must be UTF-8")?)?.into_owned();

    let daemon = Daemon::start(work.path())?;
    println!(
        "daemon pid {}, data dir {}",
        daemon.pid,
        daemon.data.display()
    );
    let idle_before = sample(daemon.pid, Duration::ZERO);
    let soak = Arc::new(Soak {
        socket: daemon.socket.clone(),
        file,
        text,
        bytes,
        deadline: Instant::now() + Duration::from_secs(secs),
        next: AtomicU64::new(0),
        passed: AtomicU64::new(0),
        failures: Mutex::new(Vec::new()),
    });
    let start = Instant::now();
    let workers: Vec<_> = (0..runs)
        .map(|_| {
            let soak = soak.clone();
            thread::spawn(move || soak.work())
        })
        .collect();
    let mut samples = Vec::new();
    while Instant::now() < soak.deadline {
        thread::sleep(SAMPLE_EVERY.min(soak.deadline.saturating_duration_since(Instant::now())));
        let s = sample(daemon.pid, start.elapsed());
        println!(
            "  {:>4.0} s: VmRSS {:.1} MiB, {} fds, {} zombies, {} runs passed, {} failed",
            s.at.as_secs_f64(),
            s.rss_kib as f64 / 1024.0,
            s.fds,
            s.zombies,
            soak.passed.load(Ordering::Relaxed),
            soak.failures.lock().map_or(0, |f| f.len())
        );
        samples.push(s);
    }
    for worker in workers {
        worker.join().map_err(|_| "a worker panicked")?;
    }
    let elapsed = start.elapsed();
    thread::sleep(Duration::from_secs(2)); // let the last runs' processes be reaped
    let idle_after = sample(daemon.pid, elapsed);
    daemon.stop()?;

    let failures = soak.failures.lock().map_err(|_| "poisoned")?.clone();
    let verdict = report(&Report {
        samples: &samples,
        idle_before,
        idle_after,
        passed: soak.passed.load(Ordering::Relaxed),
        failures: &failures,
        bytes,
        elapsed,
        runs,
    });
    println!();
    println!(
        "reproduce: SPILLWAY_SOAK_SECS={secs} SPILLWAY_SOAK_RUNS={runs} \
         SPILLWAY_SOAK_BYTES={bytes} cargo bench --bench soak"
    );
    work.close()?;
    verdict
}

/// `len` bytes of numbered ASCII lines, each ended by `\n`, of varying lengths.
fn plain_lines(len: usize) -> Vec<u8> {
    const FILL: &str = "the quick brown fox jumps over the lazy dog 0123456789 ";
    let mut text = String::with_capacity(len + 256);
    let mut i = 0usize;
    while text.len() < len {
        let width = (i * 37) % 150;
        let _ = write!(text, "{i:09} ");
        text.extend(FILL.chars().cycle().skip(i % FILL.len()).take(width));
        text.push('\n');
        i += 1;
    }
    text.truncate(len);
    text.into_bytes()
}

// ---------------------------------------------------------------------------------------
// Runs

/// What the workers share.
struct Soak {
    socket: PathBuf,
    /// The text's file, quoted for the shell.
    file: String,
    text: Arc<Vec<u8>>,
    bytes: usize,
    deadline: Instant,
    next: AtomicU64,
    passed: AtomicU64,
    failures: Mutex<Vec<String>>,
}

impl Soak {
    /// Runs one run after another until the deadline.
    fn work(&self) {
        while Instant::now() < self.deadline {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            match self.run(i) {
                Ok(()) => {
                    self.passed.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    if let Ok(mut failures) = self.failures.lock() {
                        failures.push(format!("run {i}: {e}"));
                    }
                }
            }
        }
    }

    /// Run `i`: starts it, waits for its `exit` event and checks it.
    fn run(&self, i: u64) -> BenchResult<()> {
        let offset = (i as usize).wrapping_mul(7919) % OFFSET_SPAN;
        let request = RunRequest {
            shell: Some(format!(
                "tail -c +{} {} | head -c {}",
                offset + 1,
                self.file,
                self.bytes
            )),
            tty: Some(i.is_multiple_of(2)),
            timeout_ms: Some(RUN_TIMEOUT.as_millis() as u64),
            ..RunRequest::default()
        };
        let mut stream = UnixStream::connect(&self.socket)?;
        stream.set_read_timeout(Some(RUN_TIMEOUT * 2))?;
        stream.write_all(Request::Run(Box::new(request.clone())).to_line().as_bytes())?;
        for line in BufReader::new(stream).lines() {
            match serde_json::from_str::<Event>(&line?)? {
                Event::Started(_) => {}
                Event::Exit(exit) => {
                    return self.check(&exit, &self.text[offset..offset + self.bytes]);
                }
                other => return Err(format!("unexpected event {other:?}").into()),
            }
        }
        Err("the connection closed before the exit event".into())
    }

    /// A run must exit 0 with all its bytes counted and spilled exactly; its spill is then
    /// deleted, so the disk holds only the runs in flight.
    fn check(&self, exit: &ExitEvent, expected: &[u8]) -> BenchResult<()> {
        let path = exit.preview.spill_path.as_deref().ok_or("no spill file")?;
        let spill = fs::read(path);
        fs::remove_file(path)?;
        if exit.status != RunStatus::Exited || exit.exit_code != Some(0) {
            return Err(format!("ended {:?} with code {:?}", exit.status, exit.exit_code).into());
        }
        if exit.preview.total_bytes != expected.len() as u64 {
            return Err(format!("total_bytes {}", exit.preview.total_bytes).into());
        }
        let spill = spill?;
        if spill != expected {
            let at = spill
                .iter()
                .zip(expected)
                .take_while(|(a, b)| a == b)
                .count();
            return Err(format!(
                "spill of {} bytes differs from the output at byte {at}",
                spill.len()
            )
            .into());
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// The daemon's resources

/// One look at the daemon.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Duration,
    rss_kib: u64,
    fds: u64,
    zombies: u64,
}

fn sample(pid: u32, at: Duration) -> Sample {
    Sample {
        at,
        rss_kib: proc_status_kib(pid, "VmRSS:").unwrap_or(0),
        fds: fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64),
        zombies: zombie_children(pid),
    }
}

/// Children of `pid` that have exited and not been reaped.
fn zombie_children(pid: u32) -> u64 {
    let Ok(procs) = fs::read_dir("/proc") else {
        return 0;
    };
    procs
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter(|entry| is_zombie_child_of(&entry.path(), pid))
        .count() as u64
}

/// Whether `/proc/N` is a zombie whose parent is `pid`.
fn is_zombie_child_of(proc_dir: &Path, pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(proc_dir.join("stat")) else {
        return false; // gone already
    };
    // After the command name (which may hold spaces): state, then the parent's pid.
    let Some(rest) = stat.rfind(')').map(|at| &stat[at + 1..]) else {
        return false;
    };
    let mut fields = rest.split_whitespace();
    let state = fields.next();
    let parent = fields.next().and_then(|p| p.parse::<u32>().ok());
    state == Some("Z") && parent == Some(pid)
}

// ---------------------------------------------------------------------------------------
// Report

struct Report<'a> {
    samples: &'a [Sample],
    idle_before: Sample,
    idle_after: Sample,
    passed: u64,
    failures: &'a [String],
    bytes: usize,
    elapsed: Duration,
    /// Runs kept in flight.
    runs: usize,
}

/// The peaks of the samples `keep` selects (zero when none).
fn peaks(samples: &[Sample], keep: impl Fn(&Sample) -> bool) -> Sample {
    samples
        .iter()
        .filter(|s| keep(s))
        .fold(sample_of_zeroes(), |max, s| Sample {
            at: max.at.max(s.at),
            rss_kib: max.rss_kib.max(s.rss_kib),
            fds: max.fds.max(s.fds),
            zombies: max.zombies.max(s.zombies),
        })
}

fn sample_of_zeroes() -> Sample {
    Sample {
        at: Duration::ZERO,
        rss_kib: 0,
        fds: 0,
        zombies: 0,
    }
}

/// How a row of the table shows a sample.
type Figure = fn(&Sample) -> String;

/// Prints the figures; an error names every check that failed.
fn report(r: &Report<'_>) -> BenchResult<()> {
    let start = r.samples.first().map_or(Duration::ZERO, |s| s.at);
    let end = r.samples.last().map_or(Duration::ZERO, |s| s.at);
    let window = WINDOW.min((end - start) / 3);
    let first = peaks(r.samples, |s| s.at <= start + window);
    let last = peaks(r.samples, |s| s.at + window >= end);
    let max = peaks(r.samples, |_| true);
    println!();
    println!(
        "{:<18} {:>12} {:>12} {:>12} {:>12} {:>12}",
        "daemon", "idle before", "first window", "last window", "max", "idle after"
    );
    let rows: [(&str, Figure); 3] = [
        ("VmRSS (MiB)", |s| {
            format!("{:.1}", s.rss_kib as f64 / 1024.0)
        }),
        ("open fds", |s| s.fds.to_string()),
        ("zombie children", |s| s.zombies.to_string()),
    ];
    for (name, value) in rows {
        println!(
            "{name:<18} {:>12} {:>12} {:>12} {:>12} {:>12}",
            value(&r.idle_before),
            value(&first),
            value(&last),
            value(&max),
            value(&r.idle_after)
        );
    }
    println!(
        "(windows: the first and last {} s of the {} samples, taken every {} s; figures are \
         peaks)",
        window.as_secs(),
        r.samples.len(),
        SAMPLE_EVERY.as_secs()
    );
    let total = r.passed + r.failures.len() as u64;
    let moved = r.passed * r.bytes as u64;
    println!(
        "runs: {total} ended, {} passed, {} failed; {} checked byte for byte in {:.0} s \
         ({:.1} MB/s, {:.2} runs/s)",
        r.passed,
        r.failures.len(),
        human(moved),
        r.elapsed.as_secs_f64(),
        moved as f64 / 1e6 / r.elapsed.as_secs_f64(),
        total as f64 / r.elapsed.as_secs_f64()
    );
    for failure in r.failures.iter().take(10) {
        println!("  FAILED {failure}");
    }
    let problems = problems(r, first, last);
    for problem in &problems {
        println!("FAIL: {problem}");
    }
    if problems.is_empty() {
        println!("all checks passed");
        Ok(())
    } else {
        Err(problems.join("; ").into())
    }
}

/// Every check that failed, in words.
fn problems(r: &Report<'_>, first: Sample, last: Sample) -> Vec<String> {
    let mut problems = Vec::new();
    if !r.failures.is_empty() {
        problems.push(format!("{} runs failed their checks", r.failures.len()));
    }
    if r.passed == 0 {
        problems.push("no run passed".into());
    }
    if last.rss_kib as f64 > first.rss_kib as f64 * RSS_GROWTH + RSS_SLACK_KIB as f64 {
        problems.push(format!(
            "VmRSS grew from {} KiB to {} KiB",
            first.rss_kib, last.rss_kib
        ));
    }
    if last.fds > first.fds + FD_SLACK_PER_RUN * r.runs as u64 {
        problems.push(format!("open fds grew from {} to {}", first.fds, last.fds));
    }
    if r.idle_after.fds > r.idle_before.fds + IDLE_FD_SLACK {
        problems.push(format!(
            "idle open fds grew from {} to {}",
            r.idle_before.fds, r.idle_after.fds
        ));
    }
    if r.idle_after.zombies > 0 {
        problems.push(format!("{} zombie children remain", r.idle_after.zombies));
    }
    problems
}
