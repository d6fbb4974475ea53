//! Records of runs and of what the daemon did, as the protocol carries them. These are the
//! protocol's own: storage maps its rows and reports to them, so a change of schema changes
//! no answer unless the mapping says so.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::run_id::RunId;
use super::time::{rfc3339, rfc3339_opt};

/// One run as recorded: the `history`, `show` and `grep` answers carry it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: RunId,
    /// Program and arguments, for a run given as argv.
    pub argv: Option<Vec<String>>,
    /// The command line, for a run given as a shell string.
    pub shell: Option<String>,
    /// For display: argv shell-quoted and joined, or the shell string as is.
    pub command: String,
    pub cwd: String,
    pub tags: BTreeMap<String, String>,
    #[serde(with = "rfc3339")]
    pub started_at: DateTime<Utc>,
    /// `None` while the run is going.
    #[serde(with = "rfc3339_opt")]
    pub ended_at: Option<DateTime<Utc>>,
    pub status: RunStatus,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// Output counters; `None` until the run ends (and for interrupted runs).
    pub total_lines: Option<u64>,
    pub total_bytes: Option<u64>,
    pub truncated: Option<bool>,
    pub spill_path: Option<String>,
    /// The spill's size as last recorded.
    pub spill_bytes: u64,
    /// Every byte of output reached the spill.
    pub spill_complete: bool,
    /// The spill file was found gone (deleted by hand, or a purge crashed half-way); the row
    /// stays until the retention purge removes it.
    pub spill_missing: bool,
    /// The command's process id.
    pub pid: Option<u32>,
    /// The first line the spill lacks when it stopped at its cap (`--max-spill`).
    pub spill_capped_at_line: Option<u64>,
    /// Model tokens (o200k) of the whole output and of the preview the model was given; absent
    /// for runs that did not end (running, interrupted) and runs recorded before spillway
    /// counted tokens. Left out of the JSON then, so older readers see the rows they knew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview_tokens: Option<u64>,
    /// `output_tokens` was estimated from a sample of a long output rather than counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_estimated: Option<bool>,
}

/// Totals over the whole index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexStats {
    /// Number of runs per status (`exited`, `running`, ...); statuses with none are absent.
    pub runs_by_status: BTreeMap<String, u64>,
    /// Size of the spills not known to be missing: as recorded for finished runs, as on disk
    /// now for running ones.
    pub spill_bytes: u64,
    /// Start of the oldest and the newest run.
    #[serde(with = "rfc3339_opt")]
    pub oldest: Option<DateTime<Utc>>,
    #[serde(with = "rfc3339_opt")]
    pub newest: Option<DateTime<Utc>>,
    /// The database and its write-ahead log on disk.
    pub database_bytes: u64,
}

/// A run that was (or, in a dry run, would be) purged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PurgedRun {
    pub id: RunId,
    pub spill_path: Option<String>,
    /// Size of the spill file removed (0 when it was already gone).
    pub bytes: u64,
    #[serde(with = "rfc3339")]
    pub started_at: DateTime<Utc>,
}

/// A file in `spills/` that no run names, removed (or to be).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrphanFile {
    pub path: String,
    pub bytes: u64,
}

/// What one pass did, or in a dry run would do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PurgeReport {
    pub dry_run: bool,
    /// Runs past the retention, oldest first.
    pub expired: Vec<PurgedRun>,
    /// Runs evicted to get under the quota, oldest first.
    pub evicted: Vec<PurgedRun>,
    pub orphans: Vec<OrphanFile>,
    /// The run a `purge` with an `id` deleted (absent otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deleted: Vec<PurgedRun>,
    /// Runs whose spill file was found gone.
    pub marked_missing: Vec<RunId>,
    /// Bytes of files removed.
    pub freed_bytes: u64,
    /// The spills' total after the pass, as the quota counts it.
    pub spill_bytes_after: u64,
    pub max_disk: u64,
}

/// One reported line: a match or context around one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrepLine {
    /// 1-based line number in the spill.
    pub line: u64,
    /// The line, cut at a bounded number of characters with a marker when longer.
    pub text: String,
    /// A match (else context).
    pub matched: bool,
}

/// What a search found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrepResult {
    /// Matches and their context, in file order.
    pub lines: Vec<GrepLine>,
    /// Matches reported.
    pub matches: usize,
    /// The search stopped at `max_count` and at least one more line matches.
    pub limit_hit: bool,
    /// Some reported line was cut at [`MAX_LINE_CHARS`].
    pub lines_cut: bool,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Still going (only in the index and in live views).
    Running,
    /// Exited by itself; see `exit_code`.
    Exited,
    /// Killed by a signal it did not get from spillway; see `signal`.
    Signaled,
    /// Killed by spillway after its timeout.
    TimedOut,
    /// Killed on request, or by the daemon shutting down.
    Killed,
    /// The daemon died while it ran (found at the next start).
    Interrupted,
}

impl RunStatus {
    /// Every status, to map a stored or typed name back.
    pub const ALL: [RunStatus; 6] = [
        RunStatus::Running,
        RunStatus::Exited,
        RunStatus::Signaled,
        RunStatus::TimedOut,
        RunStatus::Killed,
        RunStatus::Interrupted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Exited => "exited",
            RunStatus::Signaled => "signaled",
            RunStatus::TimedOut => "timed_out",
            RunStatus::Killed => "killed",
            RunStatus::Interrupted => "interrupted",
        }
    }
}

/// Model tokens summed over runs (the index sums them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenTotals {
    /// Runs summed.
    pub runs: u64,
    /// Tokens of their whole outputs: what a model would have read without spillway.
    pub output_tokens: u64,
    /// Tokens of the previews the model was given instead.
    pub preview_tokens: u64,
    /// `output_tokens - preview_tokens`, summed run by run: what the previews kept out of the
    /// model's context. A run shown whole saves nothing, or less than nothing when its preview
    /// adds a note (what was stopped, a limit hit).
    pub saved_tokens: i64,
    /// Runs whose output tokens were estimated from a sample (outputs over
    /// a bound) rather than counted.
    pub estimated_runs: u64,
    /// Of `saved_tokens`, what template folds saved and what the cut saved, over the runs that
    /// recorded the split; absent when none did (runs recorded before spillway split it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_by: Option<SavedBy>,
}

/// A saving split by what made it, over the runs that recorded the split: `folding + cutting`
/// is their `output_tokens - preview_tokens`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedBy {
    /// Runs summed (those of the totals that recorded the split).
    pub runs: u64,
    /// Saved by template folds: the tokens of the lines folded less those of their markers;
    /// a run from which nothing else was left out gives all its saving to folding.
    pub folding: u64,
    /// Saved by the cut: the rest of the saving (the lines the limits left out and the
    /// outline's repeats, less their markers and the notice). Negative, as `saved_tokens`,
    /// when a preview cost more than its output (a note added to an output shown whole).
    pub cutting: i64,
}

impl SavedBy {
    /// Adds `other`'s sums to these.
    pub fn add(&mut self, other: &SavedBy) {
        self.runs += other.runs;
        self.folding += other.folding;
        self.cutting += other.cutting;
    }
}

impl TokenTotals {
    /// Adds `other`'s sums to these.
    pub fn add(&mut self, other: &TokenTotals) {
        self.runs += other.runs;
        self.output_tokens += other.output_tokens;
        self.preview_tokens += other.preview_tokens;
        self.saved_tokens += other.saved_tokens;
        self.estimated_runs += other.estimated_runs;
        if let Some(other) = &other.saved_by {
            self.saved_by.get_or_insert_default().add(other);
        }
    }
}

/// The token totals of the runs of one command (a short key such as `cargo test`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandTokens {
    /// Empty for runs recorded without a command.
    pub command: String,
    #[serde(flatten)]
    pub totals: TokenTotals,
}

/// The token totals of the runs started on one day.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DayTokens {
    /// `YYYY-MM-DD`, in UTC.
    pub day: String,
    #[serde(flatten)]
    pub totals: TokenTotals,
}

/// The token accounting: what runs' outputs and previews cost a model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenStats {
    /// Over every run with token counts.
    #[serde(flatten)]
    pub totals: TokenTotals,
    /// Runs without token counts (running, interrupted, or recorded before spillway counted
    /// tokens), left out of every sum.
    pub runs_without_tokens: u64,
    /// Commands by tokens saved, most first (ties by name), at most a
    /// bound the daemon sets.
    pub by_command: Vec<CommandTokens>,
    /// Days with runs, newest first, from the day asked for on.
    pub by_day: Vec<DayTokens>,
}
