//! The run index at a million runs: history queries, stats and purge. Not a timed test: it
//! prints figures.
//!
//! It builds an index of synthetic runs in one transaction (straight SQL, since `Index` inserts
//! one run per transaction as runs start): started_at spread over the last 30 days, ~5%
//! failed (exited non-zero, signaled, timed out, killed, interrupted), a few still running,
//! tags `agent` (3 values), `session` (500 consecutive runs each) and, on 30%, `repo`. Each run
//! names a spill under a spills directory that is empty (no files), and is marked missing, as
//! the first purge after the files went would have left it: so the TTL pays one `stat` per run
//! (where it pays one `unlink` with files), and the missing sweep scans but has nothing to mark.
//!
//! Then it times each query (median and best of several rounds, after one warm-up) through the
//! public API, a purge dry run, and one real purge with the retention at 23 days, which
//! expires the oldest ~7 days' worth of runs (quota off, so the figure is the TTL's).
//!
//! Run: `cargo bench --bench index`. Environment: `SPILLWAY_BENCH_RUNS` (default 1000000),
//! `SPILLWAY_BENCH_ROUNDS` (default 7); the database goes under `TMPDIR`.

use std::collections::BTreeMap;
use std::error::Error;
use std::path::Path;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use rusqlite::{Connection, params};
use spillway::protocol::RunStatus;
use spillway::protocol::StatusFilter;
use spillway::storage::command_key::command_key;
use spillway::storage::index::TOKEN_STATS_COMMANDS;
use spillway::storage::index::{HistoryFilter, INDEX_FILE, Index};
use spillway::storage::purge::{PurgePolicy, purge};

type BenchResult<T> = Result<T, Box<dyn Error>>;

const DEFAULT_RUNS: u64 = 1_000_000;
const DEFAULT_ROUNDS: usize = 7;
const DAYS: i64 = 30;
const SESSION_RUNS: u64 = 500;
const AGENTS: [&str; 3] = ["claude", "codex", "aider"];

fn main() -> BenchResult<()> {
    let runs = env_number("SPILLWAY_BENCH_RUNS", DEFAULT_RUNS)?;
    let rounds = usize::try_from(env_number("SPILLWAY_BENCH_ROUNDS", DEFAULT_ROUNDS as u64)?)?;
    let work = tempfile::TempDir::new()?;
    let path = work.path().join(INDEX_FILE);
    let spills = work.path().join("spills");
    std::fs::create_dir(&spills)?;
    let now = Utc::now();
    println!("run index: {runs} runs over {DAYS} days, {rounds} rounds per query");
    println!(
        "work dir: {} (set TMPDIR to move it)",
        work.path().display()
    );

    drop(Index::open(&path)?); // the schema
    let start = Instant::now();
    build(&path, &spills, runs, now)?;
    println!("built in {:.1} s", start.elapsed().as_secs_f64());
    let start = Instant::now();
    drop(Index::open(&path)?);
    println!(
        "first open (switches the bulk-loaded file to WAL) in {:.1} ms",
        ms(start.elapsed())
    );
    let start = Instant::now();
    let mut index = Index::open(&path)?;
    println!(
        "open (WAL, migrations checked) in {:.1} ms",
        ms(start.elapsed())
    );

    let mut table = Table::default();
    let recent_session = format!("s{}", runs.saturating_sub(1) / SESSION_RUNS);
    let queries = [
        ("history (newest 50)", HistoryFilter::default()),
        ("history --since 2h", since_hours(now, 2)),
        (
            "history --status failed --since 2h",
            HistoryFilter {
                status: Some(StatusFilter::Failed),
                ..since_hours(now, 2)
            },
        ),
        (
            "history --status failed",
            HistoryFilter {
                status: Some(StatusFilter::Failed),
                ..HistoryFilter::default()
            },
        ),
        (
            "history --status interrupted",
            HistoryFilter {
                status: Some(StatusFilter::Is(RunStatus::Interrupted)),
                ..HistoryFilter::default()
            },
        ),
        (
            "history --command 'pytest -x tests/test_mod7.py'",
            command("pytest -x tests/test_mod7.py"),
        ),
        (
            "history --command (matches nothing: full scan)",
            command("no-such-command"),
        ),
        (
            "history --tag session=<recent>",
            tag("session", &recent_session),
        ),
        ("history --tag agent=claude", tag("agent", "claude")),
        (
            "history --tag repo=r3 --status failed",
            HistoryFilter {
                status: Some(StatusFilter::Failed),
                ..tag("repo", "r3")
            },
        ),
    ];
    for (name, filter) in &queries {
        let mut found = 0;
        let times = repeat(rounds, || {
            found = index.history(filter)?.len();
            Ok(())
        })?;
        table.row(name, &found.to_string(), &times);
    }
    let mut stats = None;
    let times = repeat(rounds, || {
        stats = Some(index.stats()?);
        Ok(())
    })?;
    let runs_counted: u64 = stats.iter().flat_map(|s| s.runs_by_status.values()).sum();
    table.row("stats", &format!("{runs_counted} runs"), &times);
    let mut tokens = None;
    let since = now - TimeDelta::days(13);
    let times = repeat(rounds, || {
        tokens = Some(index.token_stats(TOKEN_STATS_COMMANDS, since)?);
        Ok(())
    })?;
    let summed = tokens.map_or(0, |t| t.totals.runs);
    table.row("stats: token accounting", &format!("{summed} runs"), &times);

    let policy = PurgePolicy {
        retention: Duration::from_secs(23 * 86_400),
        max_disk: u64::MAX,
        ..PurgePolicy::default()
    };
    let mut would = 0;
    let times = repeat(rounds.min(3), || {
        would = purge(&mut index, &spills, &policy, now, true)?
            .expired
            .len();
        Ok(())
    })?;
    table.row(
        "purge --dry-run (23 d)",
        &format!("{would} expired"),
        &times,
    );
    let start = Instant::now();
    let report = purge(&mut index, &spills, &policy, now, false)?;
    let real = start.elapsed();
    table.row(
        "purge (23 d), once",
        &format!("{} deleted", report.expired.len()),
        &[real],
    );
    let times = repeat(rounds, || {
        index.history(&HistoryFilter::default())?;
        Ok(())
    })?;
    table.row("history (newest 50) after purge", "50", &times);

    table.print();
    let size = std::fs::metadata(&path)?.len();
    println!(
        "\ndatabase: {:.0} MiB after the purge; {} runs left",
        size as f64 / f64::from(1 << 20),
        index.stats()?.runs_by_status.values().sum::<u64>()
    );
    println!("reproduce: cargo bench --bench index");
    Ok(())
}

fn since_hours(now: DateTime<Utc>, hours: i64) -> HistoryFilter {
    HistoryFilter {
        since: Some(now - TimeDelta::hours(hours)),
        ..HistoryFilter::default()
    }
}

fn command(text: &str) -> HistoryFilter {
    HistoryFilter {
        command_contains: Some(text.into()),
        ..HistoryFilter::default()
    }
}

fn tag(key: &str, value: &str) -> HistoryFilter {
    HistoryFilter {
        tags: vec![(key.into(), value.into())],
        ..HistoryFilter::default()
    }
}

/// Fills the index with `runs` synthetic runs in start order, in one transaction.
fn build(path: &Path, spills: &Path, runs: u64, now: DateTime<Utc>) -> BenchResult<()> {
    let mut conn = Connection::open(path)?;
    // Bulk load: no journal, no syncs; `Index::open` turns WAL back on.
    conn.pragma_update(None, "journal_mode", "OFF")?;
    conn.pragma_update(None, "synchronous", "OFF")?;
    conn.pragma_update(None, "cache_size", -262_144)?; // 256 MiB
    let tx = conn.transaction()?;
    {
        let mut run = tx.prepare(
            "INSERT INTO runs (id, argv, shell, command, cwd, tags, started_at, ended_at, status, \
             exit_code, signal, total_lines, total_bytes, truncated, spill_path, spill_name, \
             spill_bytes, spill_complete, spill_missing, pid, owner_pid, command_key, \
             output_tokens, preview_tokens, output_tokens_estimated) VALUES (?1, ?2, ?3, ?4, \
             '/home/me/src/project', ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, 1, \
             1, ?17, 4242, ?18, ?19, ?20, ?21)",
        )?;
        let mut tag = tx.prepare(
            "INSERT INTO run_tags (run_id, key, value, started_at) VALUES (?1, ?2, ?3, ?4)",
        )?;
        let mut random = Random(0x5eed);
        let span_ms = DAYS * 86_400_000;
        let first_ms = now.timestamp_millis() - span_ms;
        let step_ms = span_ms / i64::try_from(runs.max(1))?;
        for i in 0..runs {
            let started_ms = first_ms
                + i64::try_from(i)? * step_ms
                + i64::try_from(random.below(step_ms.max(1).unsigned_abs()))?;
            let started = DateTime::from_timestamp_millis(started_ms).ok_or("time out of range")?;
            let id = run_id(started, i);
            let running = i + 3 >= runs;
            let (status, exit_code, signal) = outcome(&mut random, running);
            let (argv, shell, command) = synthetic_command(&mut random);
            let lines = random.below(5000);
            let bytes = lines * (20 + random.below(100));
            let name = format!("{}-{i}.log", started.format("%Y%m%dT%H%M%S%.6fZ"));
            let spill_path = spills.join(&name).to_string_lossy().into_owned();
            let mut tags = BTreeMap::new();
            tags.insert(
                "agent",
                AGENTS[usize::try_from(random.below(3))?].to_string(),
            );
            tags.insert("session", format!("s{}", i / SESSION_RUNS));
            if random.below(10) < 3 {
                tags.insert("repo", format!("r{}", random.below(10)));
            }
            let ended_ms = (!running).then(|| started_ms + 100 + random.below(60_000) as i64);
            // Runs that ended record their tokens (about 4 bytes each; previews of 50 KiB).
            let ended = !matches!(status, "running" | "interrupted");
            let output_tokens = ended.then_some(bytes as i64 / 4);
            let preview_tokens = output_tokens.map(|n| n.min(12_800));
            let key = command_key(None, Some(&command));
            run.execute(params![
                id,
                argv,
                shell,
                command,
                serde_json::to_string(&tags)?,
                started_ms,
                ended_ms,
                status,
                exit_code,
                signal,
                lines as i64,
                bytes as i64,
                lines > 2000,
                spill_path,
                name,
                bytes as i64,
                4242 + i64::try_from(i % 30_000)?,
                key,
                output_tokens,
                preview_tokens,
                ended.then_some(false),
            ])?;
            for (key, value) in &tags {
                tag.execute(params![id, key, value, started_ms])?;
            }
        }
    }
    tx.commit()?;
    Ok(())
}

/// `YYYYMMDD-HHMMSS-xxxx`, the suffix unique per run.
fn run_id(started: DateTime<Utc>, i: u64) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let suffix: String = (0..4)
        .rev()
        .map(|k| char::from(ALPHABET[((i >> (5 * k)) & 31) as usize]))
        .collect();
    format!("{}-{suffix}", started.format("%Y%m%d-%H%M%S"))
}

/// Status, exit code and signal: ~95% exit 0, the rest spread over the ways to fail.
fn outcome(random: &mut Random, running: bool) -> (&'static str, Option<i64>, Option<i64>) {
    if running {
        return ("running", None, None);
    }
    match random.below(1000) {
        0..950 => ("exited", Some(0), None),
        950..980 => ("exited", Some(1 + random.below(3) as i64), None),
        980..985 => ("signaled", None, Some(11)),
        985..990 => ("timed_out", None, Some(15)),
        990..995 => ("killed", None, Some(15)),
        _ => ("interrupted", None, None),
    }
}

/// A plausible agent command: (argv JSON, shell, display command).
fn synthetic_command(random: &mut Random) -> (Option<String>, Option<String>, String) {
    let k = random.below(50);
    let argv: Vec<String> = match random.below(8) {
        0 => vec![
            "cargo".into(),
            "test".into(),
            "-p".into(),
            format!("crate{k}"),
        ],
        1 => vec!["cargo".into(), "build".into(), "--release".into()],
        2 => vec!["git".into(), "diff".into(), format!("HEAD~{k}")],
        3 => vec![
            "npm".into(),
            "test".into(),
            "--".into(),
            format!("--grep=case{k}"),
        ],
        4 => vec![
            "pytest".into(),
            "-x".into(),
            format!("tests/test_mod{k}.py"),
        ],
        5 => vec!["ls".into(), "-la".into(), format!("src/dir{k}")],
        6 => vec!["make".into(), "-j2".into(), format!("target{k}")],
        _ => {
            let shell = format!("grep -rn 'TODO' src | head -{k}");
            return (None, Some(shell.clone()), shell);
        }
    };
    let display = argv.join(" ");
    (serde_json::to_string(&argv).ok(), None, display)
}

/// splitmix64: deterministic and dependency-free.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Runs `f` once to warm up, then `rounds` times, timing each.
fn repeat(rounds: usize, mut f: impl FnMut() -> BenchResult<()>) -> BenchResult<Vec<Duration>> {
    f()?;
    (0..rounds.max(1))
        .map(|_| {
            let start = Instant::now();
            f()?;
            Ok(start.elapsed())
        })
        .collect()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[derive(Default)]
struct Table {
    rows: Vec<[String; 4]>,
}

impl Table {
    fn row(&mut self, name: &str, result: &str, times: &[Duration]) {
        let mut sorted = times.to_vec();
        sorted.sort();
        let median = sorted.get(sorted.len() / 2).copied().unwrap_or_default();
        let best = sorted.first().copied().unwrap_or_default();
        self.rows.push([
            name.to_string(),
            result.to_string(),
            format!("{:.2}", ms(median)),
            format!("{:.2}", ms(best)),
        ]);
    }

    fn print(&self) {
        println!("\n| query | result | median ms | min ms |\n|---|---:|---:|---:|");
        for [name, result, median, best] in &self.rows {
            println!("| {name} | {result} | {median} | {best} |");
        }
    }
}

fn env_number(name: &str, default: u64) -> BenchResult<u64> {
    match std::env::var(name) {
        Ok(v) => Ok(v.parse().map_err(|e| format!("{name}={v:?}: {e}"))?),
        Err(_) => Ok(default),
    }
}
