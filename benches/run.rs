//! `spillway run` against plain commands, measured on the same machine in the same run. Not a
//! timed test: it prints figures.
//!
//! It starts a private daemon (`spillway daemon --socket W/s.sock --data-dir W/data`, logs in
//! `W/daemon.log`), generates PTY-style log text (timestamps, levels, ~5% SGR colour, ~1% `\r`
//! progress redraws, `\n` line ends as a program writes them) deterministically into a temp file,
//! reads it once to warm the page cache, and measures:
//!
//! 1. PTY throughput: `spillway run -- cat FILE > /dev/null` against
//!    `script -qec 'cat FILE' /dev/null > /dev/null`, rounds alternating which goes first.
//! 2. Pipe throughput: `spillway run --no-tty -- cat FILE > /dev/null` against
//!    `sh -c 'cat FILE | cat > OUT'`, likewise: a pipe into a file, as the issue's target
//!    reads, with OUT in the work dir beside the spills (on the same file system), so that
//!    both write the same bytes to the same disk; OUT is deleted after every run, as the
//!    spills are.
//! 3. Per-run overhead: `spillway run -- true` against `sh -c true`, interleaved, one by one.
//! 4. Daemon memory with many runs in flight: chatty `--no-tty` runs started at once, while the
//!    daemon's `VmRSS` is sampled every 50 ms (and `VmHWM`, reset first, read at the end).
//!
//! Times run from spawn to reap of the client; client peak RSS comes from `wait4`'s
//! `ru_maxrss`, daemon CPU from `/proc/<pid>/stat`. Spill files are deleted after every run.
//!
//! Run: `cargo bench --bench run`. Environment: `SPILLWAY_BENCH_BYTES` (input size in bytes,
//! default 1 GiB), `SPILLWAY_BENCH_ROUNDS` (throughput rounds, default 3), `SPILLWAY_BENCH_RUNS`
//! (short runs, default 200), `SPILLWAY_BENCH_CONCURRENT` (runs in flight, default 16); temp
//! files go under `TMPDIR`. Linux only (`/proc`, util-linux `script`).

mod common;
mod daemon;

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use common::{BenchResult, Series, env_number, human, measure, median, prepare_input};
use daemon::{Daemon, SPILLWAY, proc_status_kib};

const DEFAULT_BYTES: u64 = 1 << 30;
const DEFAULT_ROUNDS: usize = 3;
const DEFAULT_RUNS: usize = 200;
const DEFAULT_CONCURRENT: usize = 16;
/// Generated text (`\n` line ends, as a program writes them: the PTY adds the `\r`) is written
/// in chunks of this size.
const CHUNK_BYTES: usize = 4 << 20;
/// How often the daemon's resident set is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(50);
/// What each of the concurrent runs of the memory check does: ~20 MB of 100-byte lines, then
/// stays alive a moment.
const CHATTY: &str = r"head -c 20000000 /dev/zero | tr '\0' x | fold -w 100; sleep 2";

// Targets from the issue.
const PTY_TARGET: f64 = 1.1;
const PIPE_TARGET: f64 = 1.2;
const OVERHEAD_TARGET_MS: f64 = 3.0;
const MEMORY_TARGET_MIB: f64 = 40.0;

fn main() -> BenchResult<()> {
    let bytes = env_number("SPILLWAY_BENCH_BYTES", DEFAULT_BYTES)?;
    let rounds = env_number("SPILLWAY_BENCH_ROUNDS", DEFAULT_ROUNDS)?.max(1);
    let runs = env_number("SPILLWAY_BENCH_RUNS", DEFAULT_RUNS)?.max(1);
    let concurrent = env_number("SPILLWAY_BENCH_CONCURRENT", DEFAULT_CONCURRENT)?.max(1);
    let work = tempfile::TempDir::new()?;
    let input = work.path().join("input.log");
    let quoted = shlex::try_quote(input.to_str().ok_or("TMPDIR must be UTF-8")?)?.into_owned();
    println!(
        "spillway run vs plain commands: {bytes} bytes ({}), {rounds} rounds, {runs} short runs, \
         {concurrent} runs in flight",
        human(bytes)
    );
    println!(
        "work dir: {} (set TMPDIR to move it)",
        work.path().display()
    );
    println!("binary: {SPILLWAY}");
    let load_before = load_average();
    println!("load average before: {load_before}");

    prepare_input(&input, bytes, b"\n", CHUNK_BYTES)?;

    let daemon = Daemon::start(work.path())?;
    let sampler = Sampler::start(daemon.pid);
    println!(
        "daemon pid {} ready, idle VmRSS {:.1} MiB",
        daemon.pid,
        kib_to_mib(proc_status_kib(daemon.pid, "VmRSS:").unwrap_or(0))
    );

    // One untimed pipe run each: the first runs pay one-off costs (allocation, cache, the spill
    // directory). The PTY rounds are long enough (seconds) for such costs not to matter.
    let pipe_out = work.path().join("pipe-out.log");
    let quoted_out =
        shlex::try_quote(pipe_out.to_str().ok_or("TMPDIR must be UTF-8")?)?.into_owned();
    pipe_baseline(&quoted, &quoted_out, &pipe_out)?;
    daemon.measure(daemon.client(["--no-tty", "--"]).arg("cat").arg(&input))?;
    println!("warm-up runs done");

    // 1. PTY throughput.
    println!(
        "\n[1/4] PTY throughput: {rounds} rounds of {}",
        human(bytes)
    );
    sampler.reset();
    let (pty_base, pty_spill) = throughput(
        rounds,
        Series::new("script -qec 'cat FILE' /dev/null"),
        || pty_baseline(&quoted),
        Series::new("spillway run -- cat FILE"),
        || daemon.measure(daemon.client(["--"]).arg("cat").arg(&input)),
    )?;
    let pty_peak = sampler.reset();

    // 2. Pipe throughput.
    println!(
        "\n[2/4] pipe throughput: {rounds} rounds of {}",
        human(bytes)
    );
    let (pipe_base, pipe_spill) = throughput(
        rounds,
        Series::new("sh -c 'cat FILE | cat > OUT'"),
        || pipe_baseline(&quoted, &quoted_out, &pipe_out),
        Series::new("spillway run --no-tty -- cat FILE"),
        || daemon.measure(daemon.client(["--no-tty", "--"]).arg("cat").arg(&input)),
    )?;
    let pipe_peak = sampler.reset();

    // 3. Per-run overhead.
    println!("\n[3/4] per-run overhead: {runs} short runs each, interleaved");
    let (short_base, short_spill) = overhead(runs, &daemon)?;
    let short_peak = sampler.reset();
    let hwm_before = proc_status_kib(daemon.pid, "VmHWM:").unwrap_or(0);

    // 4. Memory with runs in flight.
    println!("\n[4/4] daemon memory: {concurrent} runs in flight, each `{CHATTY}`");
    let memory = memory(concurrent, &daemon, &sampler)?;

    sampler.stop();
    daemon.stop()?;
    let load_after = load_average();

    let mb = bytes as f64 / 1e6;
    println!();
    print_throughput(mb, &[&pty_base, &pty_spill, &pipe_base, &pipe_spill]);
    println!(
        "daemon peak VmRSS (sampled): PTY {:.1} MiB, pipe {:.1} MiB, short runs {:.1} MiB; \
         VmHWM over steps 1-3 {:.1} MiB",
        kib_to_mib(pty_peak),
        kib_to_mib(pipe_peak),
        kib_to_mib(short_peak),
        kib_to_mib(hwm_before)
    );
    println!();
    print_overhead(&short_base, &short_spill);
    println!();
    print_memory(concurrent, &memory);
    println!();
    let pty_ratio = pty_spill.median_secs() / pty_base.median_secs();
    let pipe_ratio = pipe_spill.median_secs() / pipe_base.median_secs();
    let added_ms = (short_spill.median_secs() - short_base.median_secs()) * 1e3;
    let memory_mib = kib_to_mib(memory.sampled_peak_kib.max(memory.hwm_kib.unwrap_or(0)));
    println!(
        "{:<46} {:>10} {:>10} {:>5}",
        "check", "measured", "target", "met"
    );
    for (name, measured, target, met) in [
        (
            "PTY: spillway / script (median time)".to_string(),
            format!("{pty_ratio:.2}x"),
            format!("<= {PTY_TARGET}x"),
            pty_ratio <= PTY_TARGET,
        ),
        (
            "pipe: spillway --no-tty / pipe into a file".to_string(),
            format!("{pipe_ratio:.2}x"),
            format!("<= {PIPE_TARGET}x"),
            pipe_ratio <= PIPE_TARGET,
        ),
        (
            "added per short run (median)".to_string(),
            format!("{added_ms:.2} ms"),
            format!("< {OVERHEAD_TARGET_MS} ms"),
            added_ms < OVERHEAD_TARGET_MS,
        ),
        (
            format!("daemon peak RSS, {concurrent} runs in flight"),
            format!("{memory_mib:.1} MiB"),
            format!("< {MEMORY_TARGET_MIB} MiB"),
            memory_mib < MEMORY_TARGET_MIB,
        ),
    ] {
        let met = if met { "yes" } else { "NO" };
        println!("{name:<46} {measured:>10} {target:>10} {met:>5}");
    }
    println!("(MB = 10^6 bytes; ratios and the difference are of medians; the memory figure is");
    println!(" the larger of the sampled VmRSS peak and VmHWM)");
    println!("load average before: {load_before}; after: {load_after}");
    println!();
    println!("reproduce: cargo bench --bench run");
    println!(
        "       or: SPILLWAY_BENCH_BYTES={bytes} SPILLWAY_BENCH_ROUNDS={rounds} \
         SPILLWAY_BENCH_RUNS={runs} SPILLWAY_BENCH_CONCURRENT={concurrent} cargo bench --bench run"
    );
    work.close()?;
    Ok(())
}

fn kib_to_mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The 1, 5 and 15 minute load averages and runnable/all tasks, from `/proc/loadavg`.
fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(4)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".into())
}

// ---------------------------------------------------------------------------------------
// The daemon

/// What this bench does with the daemon beyond starting and stopping it.
impl Daemon {
    /// `spillway run --socket S --data-dir D ARGS...`, with stdin and stdout `/dev/null`.
    fn client<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(&self, args: I) -> Command {
        let mut cmd = Command::new(SPILLWAY);
        cmd.arg("run")
            .arg("--socket")
            .arg(&self.socket)
            .arg("--data-dir")
            .arg(&self.data)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        cmd
    }

    /// Runs a client to completion, with the daemon's CPU time over it and the spill it left
    /// (then deleted).
    fn measure(&self, cmd: &mut Command) -> BenchResult<Run> {
        let cpu_before = proc_cpu_secs(self.pid);
        let mut run = Run::from(measure(cmd)?);
        run.daemon_cpu = proc_cpu_secs(self.pid)
            .zip(cpu_before)
            .map(|(after, before)| after - before);
        run.spilled = Some(self.clear_spills()?);
        Ok(run)
    }

    /// Deletes every spill file; returns the bytes they held.
    fn clear_spills(&self) -> io::Result<u64> {
        let spills = self.data.join("spills");
        let mut bytes = 0;
        if spills.is_dir() {
            for entry in fs::read_dir(&spills)? {
                let entry = entry?;
                bytes += entry.metadata()?.len();
                fs::remove_file(entry.path())?;
            }
        }
        Ok(bytes)
    }
}

/// User plus system CPU seconds of `pid`, all threads, from `/proc/<pid>/stat`.
fn proc_cpu_secs(pid: u32) -> Option<f64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at field 3, `state`;
    // utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let ticks: u64 = fields.next()?.parse::<u64>().ok()? + fields.next()?.parse::<u64>().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (per_sec > 0).then(|| ticks as f64 / per_sec as f64)
}

/// Samples the daemon's `VmRSS` every [`SAMPLE_EVERY`] on a thread, keeping the peak.
struct Sampler {
    peak_kib: Arc<AtomicU64>,
    samples: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Sampler {
    fn start(pid: u32) -> Self {
        let peak_kib = Arc::new(AtomicU64::new(0));
        let samples = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = thread::spawn({
            let (peak_kib, samples, stop) = (peak_kib.clone(), samples.clone(), stop.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(kib) = proc_status_kib(pid, "VmRSS:") {
                        peak_kib.fetch_max(kib, Ordering::Relaxed);
                        samples.fetch_add(1, Ordering::Relaxed);
                    }
                    thread::sleep(SAMPLE_EVERY);
                }
            }
        });
        Sampler {
            peak_kib,
            samples,
            stop,
            thread,
        }
    }

    /// The peak since the last reset (KiB), starting a new one.
    fn reset(&self) -> u64 {
        self.samples.store(0, Ordering::Relaxed);
        self.peak_kib.swap(0, Ordering::Relaxed)
    }

    fn samples(&self) -> u64 {
        self.samples.load(Ordering::Relaxed)
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }
}

// ---------------------------------------------------------------------------------------
// Runs

/// One measured run: the client's wall time and peak resident set, and for spillway runs the
/// daemon's CPU time and the spill size.
struct Run {
    client: common::Run,
    daemon_cpu: Option<f64>,
    spilled: Option<u64>,
}

impl From<common::Run> for Run {
    /// A run with no daemon figures (a baseline, or a spillway run before they are added).
    fn from(client: common::Run) -> Self {
        Run {
            client,
            daemon_cpu: None,
            spilled: None,
        }
    }
}

impl AsRef<common::Run> for Run {
    fn as_ref(&self) -> &common::Run {
        &self.client
    }
}

fn pty_baseline(quoted: &str) -> BenchResult<Run> {
    let mut cmd = Command::new("script");
    cmd.arg("-qec")
        .arg(format!("cat {quoted}"))
        .arg("/dev/null")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    measure(&mut cmd).map(Run::from)
}

/// `cat FILE | cat > OUT` (`quoted_out` is `out`, quoted for the shell); deletes `out` after.
fn pipe_baseline(quoted: &str, quoted_out: &str, out: &Path) -> BenchResult<Run> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("cat {quoted} | cat > {quoted_out}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let run = measure(&mut cmd).map(Run::from)?;
    fs::remove_file(out)?;
    Ok(run)
}

/// `rounds` rounds of both commands, alternating which goes first.
fn throughput(
    rounds: usize,
    mut base: Series<Run>,
    mut run_base: impl FnMut() -> BenchResult<Run>,
    mut spill: Series<Run>,
    mut run_spill: impl FnMut() -> BenchResult<Run>,
) -> BenchResult<(Series<Run>, Series<Run>)> {
    for round in 0..rounds {
        // Alternate which goes first, to spread drift (caches, clocks) over both.
        let (b, s) = if round % 2 == 0 {
            let b = run_base()?;
            (b, run_spill()?)
        } else {
            let s = run_spill()?;
            (run_base()?, s)
        };
        println!(
            "  round {}/{rounds}: baseline {:.3} s, spillway {:.3} s ({:.2}x; daemon CPU {:.2} s, \
             spilled {})",
            round + 1,
            b.client.secs,
            s.client.secs,
            s.client.secs / b.client.secs,
            s.daemon_cpu.unwrap_or(f64::NAN),
            human(s.spilled.unwrap_or(0))
        );
        base.push(b);
        spill.push(s);
    }
    Ok((base, spill))
}

/// `runs` short runs of each, interleaved, after a few untimed ones.
fn overhead(runs: usize, daemon: &Daemon) -> BenchResult<(Series<Run>, Series<Run>)> {
    let sh_true = || {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "true"])
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        measure(&mut cmd).map(Run::from)
    };
    let spill_true = || daemon.measure(&mut daemon.client(["--", "true"]));
    for _ in 0..5 {
        sh_true()?;
        spill_true()?;
    }
    let mut base = Series::new("sh -c true");
    let mut spill = Series::new("spillway run -- true");
    for i in 0..runs {
        if i % 2 == 0 {
            base.push(sh_true()?);
            spill.push(spill_true()?);
        } else {
            spill.push(spill_true()?);
            base.push(sh_true()?);
        }
        if (i + 1) % 50 == 0 || i + 1 == runs {
            println!(
                "  {}/{runs}: median so far sh {:.2} ms, spillway {:.2} ms",
                i + 1,
                base.median_secs() * 1e3,
                spill.median_secs() * 1e3
            );
        }
    }
    Ok((base, spill))
}

/// What the memory check saw.
struct Memory {
    secs: f64,
    idle_kib: u64,
    sampled_peak_kib: u64,
    samples: u64,
    /// `None` when `VmHWM` could not be reset (it then covers the whole bench).
    hwm_kib: Option<u64>,
    after_kib: u64,
    spilled: u64,
}

/// Starts `concurrent` chatty runs at once and watches the daemon's memory until all end.
fn memory(concurrent: usize, daemon: &Daemon, sampler: &Sampler) -> BenchResult<Memory> {
    // Writing 5 to clear_refs resets VmHWM to the current RSS (Linux 4.0+).
    let hwm_reset = fs::write(format!("/proc/{}/clear_refs", daemon.pid), "5").is_ok();
    if !hwm_reset {
        println!("  (cannot reset VmHWM: it covers the whole bench)");
    }
    let idle_kib = proc_status_kib(daemon.pid, "VmRSS:").unwrap_or(0);
    sampler.reset();
    let start = Instant::now();
    let mut children = Vec::with_capacity(concurrent);
    for _ in 0..concurrent {
        let child = daemon
            .client(["--no-tty", "-c", CHATTY])
            .spawn()
            .map_err(|e| format!("cannot start spillway run: {e}"))?;
        children.push(child);
    }
    println!("  {concurrent} clients started");
    let mut failed = 0;
    for mut child in children {
        if !child.wait()?.success() {
            failed += 1;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    thread::sleep(SAMPLE_EVERY * 2); // one more sample of the end state
    let samples = sampler.samples();
    let sampled_peak_kib = sampler.reset();
    let hwm_kib = proc_status_kib(daemon.pid, "VmHWM:").filter(|_| hwm_reset);
    thread::sleep(Duration::from_millis(500));
    let after_kib = proc_status_kib(daemon.pid, "VmRSS:").unwrap_or(0);
    let spilled = daemon.clear_spills()?;
    println!(
        "  all ended in {secs:.2} s, {failed} failed; peak VmRSS {:.1} MiB over {samples} samples",
        kib_to_mib(sampled_peak_kib)
    );
    if failed > 0 {
        return Err(format!("{failed} of {concurrent} runs failed").into());
    }
    Ok(Memory {
        secs,
        idle_kib,
        sampled_peak_kib,
        samples,
        hwm_kib,
        after_kib,
        spilled,
    })
}

// ---------------------------------------------------------------------------------------
// Report

/// What `run` reports beyond [`Series`]'s common figures.
impl Series<Run> {
    fn mean_secs(&self) -> f64 {
        self.runs.iter().map(|r| r.client.secs).sum::<f64>() / self.runs.len() as f64
    }

    /// The median daemon CPU seconds per run, if these are spillway runs.
    fn median_daemon_cpu(&self) -> Option<f64> {
        let cpu: Vec<f64> = self.runs.iter().filter_map(|r| r.daemon_cpu).collect();
        (!cpu.is_empty()).then(|| median(cpu))
    }

    /// The mean daemon CPU seconds per run, if these are spillway runs: for short runs, whose
    /// CPU time is below the clock tick (10 ms), only the mean is meaningful.
    fn mean_daemon_cpu(&self) -> Option<f64> {
        let cpu: Vec<f64> = self.runs.iter().filter_map(|r| r.daemon_cpu).collect();
        (!cpu.is_empty()).then(|| cpu.iter().sum::<f64>() / cpu.len() as f64)
    }
}

fn print_throughput(mb: f64, series: &[&Series<Run>]) {
    println!(
        "{:<36} {:>9} {:>9} {:>9} {:>13} {:>13}",
        "command (FILE = input)", "median s", "min s", "MB/s", "daemon CPU s", "client maxrss"
    );
    for s in series {
        let cpu = s
            .median_daemon_cpu()
            .map_or_else(|| "-".into(), |c| format!("{c:.2}"));
        println!(
            "{:<36} {:>9.3} {:>9.3} {:>9.1} {:>13} {:>9.1} MiB",
            s.name,
            s.median_secs(),
            s.min_secs(),
            mb / s.median_secs(),
            cpu,
            s.max_rss_mib()
        );
    }
    println!("(MB/s from the median; daemon CPU is its median per run; client maxrss is the max");
    println!(" of wait4's ru_maxrss, which counts the client's reaped children and, on Linux,");
    println!(" this bench's own RSS at fork: ~6 MiB is the floor)");
}

fn print_overhead(base: &Series<Run>, spill: &Series<Run>) {
    println!(
        "{:<36} {:>9} {:>9} {:>9} {:>13}",
        "short runs", "median ms", "mean ms", "min ms", "daemon CPU ms"
    );
    for s in [base, spill] {
        let cpu = s
            .mean_daemon_cpu()
            .map_or_else(|| "-".into(), |c| format!("{:.2}", c * 1e3));
        println!(
            "{:<36} {:>9.2} {:>9.2} {:>9.2} {:>13}",
            format!("{} (x{})", s.name, s.runs.len()),
            s.median_secs() * 1e3,
            s.mean_secs() * 1e3,
            s.min_secs() * 1e3,
            cpu
        );
    }
    println!(
        "added per run: {:.2} ms (medians), {:.2} ms (means); daemon CPU is the mean per run",
        (spill.median_secs() - base.median_secs()) * 1e3,
        (spill.mean_secs() - base.mean_secs()) * 1e3
    );
}

fn print_memory(concurrent: usize, m: &Memory) {
    let hwm = m
        .hwm_kib
        .map_or_else(|| "n/a".into(), |k| format!("{:.1} MiB", kib_to_mib(k)));
    println!(
        "{concurrent} runs in flight (--no-tty, ~20 MB each): all ended in {:.2} s, {} spilled",
        m.secs,
        human(m.spilled)
    );
    println!(
        "daemon VmRSS: idle before {:.1} MiB, sampled peak {:.1} MiB ({} samples, every {} ms), \
         VmHWM {hwm}, 0.5 s after {:.1} MiB",
        kib_to_mib(m.idle_kib),
        kib_to_mib(m.sampled_peak_kib),
        m.samples,
        SAMPLE_EVERY.as_millis(),
        kib_to_mib(m.after_kib)
    );
}
