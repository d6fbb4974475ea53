//! Purging spills: the retention TTL, the disk quota, and the sweep for orphan files and
//! missing spills.
//!
//! This module owns the policy and every file deletion; the rows and their SQL are the index's
//! (`crate::storage::index`). One pass ([`purge`]) goes:
//!
//! 1. **TTL**: finished runs started before `now - retention` go.
//! 2. **Missing**: rows whose spill file is gone are kept, marked `spill_missing`. This comes
//!    before the quota so that spills deleted by hand do not count, and real ones are not
//!    evicted in their place.
//! 3. **Quota**: while the spills (finished runs' recorded sizes plus the running runs' files as
//!    they are now) exceed `max_disk`, the oldest finished runs go. Running runs never go.
//! 4. **Orphans**: files in `spills/` that no row names, untouched for the grace period (a run's
//!    file exists a moment before its row does), are removed.
//!
//! A run goes **file first, row after** (rows in batches, one transaction each). A crash in
//! between leaves rows whose files are gone, which the next pass deletes (or marks missing) as
//! it would any such row; the other order would leave files no row accounts for, invisible to
//! history and the quota until the orphan sweep guessed, from their age, that they were garbage.
//!
//! A row is data, not a trusted path: only a file directly inside the (canonical) spills
//! directory is ever deleted, and never the index. A path elsewhere is refused and logged, and
//! its run keeps its row, as does any run whose file cannot be removed: one bad file never
//! aborts a pass.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use chrono::{DateTime, TimeDelta, Utc};

use crate::protocol::{OrphanFile, PurgeReport, PurgedRun, RunId};
use crate::storage::index::{INDEX_FILE, Index, IndexError, PageStart, SpillRecord};

/// Finished runs older than this (by start) are purged: 7 days.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// The spills may take this much disk: 10 GiB.
pub const DEFAULT_MAX_DISK: u64 = 10 << 30;
/// A file in `spills/` no run names is removed once untouched this long: 1 hour.
pub const DEFAULT_ORPHAN_GRACE: Duration = Duration::from_secs(60 * 60);

/// Runs read, and rows deleted in one transaction, at a time.
const PAGE: usize = 1000;

/// What a purge keeps.
#[derive(Debug, Clone)]
pub struct PurgePolicy {
    /// Finished runs started longer ago than this go (`--older-than` overrides it).
    pub retention: Duration,
    /// Most bytes of spills to keep; the oldest finished runs go first.
    pub max_disk: u64,
    /// How long an unnamed file in `spills/` must be untouched before it is removed.
    pub orphan_grace: Duration,
}

impl Default for PurgePolicy {
    fn default() -> Self {
        PurgePolicy {
            retention: DEFAULT_RETENTION,
            max_disk: DEFAULT_MAX_DISK,
            orphan_grace: DEFAULT_ORPHAN_GRACE,
        }
    }
}

/// One purge pass: TTL, then missing files, then quota, then orphans. Errors removing one file
/// are logged and skipped (that run keeps its row), never abort the pass.
///
/// `spills_dir` must exist. `now` is the pass's clock (tests inject one); a dry run reports
/// what would go and changes nothing, neither files nor rows. `--older-than` is
/// `policy.retention`.
pub fn purge(
    index: &mut Index,
    spills_dir: &Path,
    policy: &PurgePolicy,
    now: DateTime<Utc>,
    dry_run: bool,
) -> Result<PurgeReport, IndexError> {
    let spills = Spills::open(spills_dir, dry_run)?;
    let mut report = PurgeReport {
        dry_run,
        expired: Vec::new(),
        evicted: Vec::new(),
        orphans: Vec::new(),
        deleted: Vec::new(),
        marked_missing: Vec::new(),
        freed_bytes: 0,
        spill_bytes_after: 0,
        max_disk: policy.max_disk,
    };
    let cutoff = earlier(now, policy.retention);
    let kept_bytes = expire(index, &spills, cutoff, &mut report)?;
    let unmarked = mark_missing(index, &spills, &mut report)?;
    let quota = Quota {
        cutoff,
        max_disk: policy.max_disk,
        kept_bytes,
        unmarked,
    };
    evict(index, &spills, &quota, &mut report)?;
    remove_orphans(
        index,
        &spills,
        earlier(now, policy.orphan_grace),
        &mut report,
    )?;
    Ok(report)
}

/// Why `purge ID` deleted nothing.
#[derive(Debug, thiserror::Error)]
pub enum PurgeRunError {
    #[error("no run with id {0}")]
    Unknown(RunId),
    #[error("run {0} is running: stop it first ({sw} kill {0}), then purge it", sw = crate::program::program())]
    Running(RunId),
    #[error("the spill of run {0} could not be deleted (see the daemon's log); its record stays")]
    Kept(RunId),
    #[error(transparent)]
    Index(#[from] IndexError),
}

/// Deletes one finished run, its spill file and its record, now (a run whose output held a
/// secret, say); a dry run only reports it.
pub fn purge_run(
    index: &mut Index,
    spills_dir: &Path,
    id: &RunId,
    max_disk: u64,
    dry_run: bool,
) -> Result<PurgeReport, PurgeRunError> {
    let run = index
        .get(id)?
        .ok_or_else(|| PurgeRunError::Unknown(id.clone()))?;
    if run.status == crate::protocol::RunStatus::Running {
        return Err(PurgeRunError::Running(id.clone()));
    }
    let spills = Spills::open(spills_dir, dry_run)?;
    let bytes = spills
        .remove_run_spill(run.spill_path.as_deref())
        .ok_or_else(|| PurgeRunError::Kept(id.clone()))?;
    let gone = PurgedRun {
        id: run.id,
        spill_path: run.spill_path,
        bytes,
        started_at: run.started_at,
    };
    spills.delete_rows(index, std::slice::from_ref(&gone))?;
    Ok(PurgeReport {
        dry_run,
        expired: Vec::new(),
        evicted: Vec::new(),
        orphans: Vec::new(),
        deleted: vec![gone],
        marked_missing: Vec::new(),
        freed_bytes: bytes,
        spill_bytes_after: (index.counted_spill_bytes(DateTime::<Utc>::MIN_UTC)?
            + running_bytes(index)?)
        .saturating_sub(if dry_run { bytes } else { 0 }),
        max_disk,
    })
}

/// The TTL: removes the finished runs started before `cutoff`. Returns the counted bytes of
/// those that had to stay (their file could not be removed).
fn expire(
    index: &mut Index,
    spills: &Spills,
    cutoff: DateTime<Utc>,
    report: &mut PurgeReport,
) -> Result<u64, IndexError> {
    let mut kept_bytes = 0;
    let mut cursor = PageStart::start();
    loop {
        let page = index.expired_page(cutoff, &cursor, PAGE)?;
        let Some(last) = page.last() else {
            return Ok(kept_bytes);
        };
        cursor = PageStart::after(last);
        let mut gone = Vec::new();
        for run in page {
            match spills.remove_run_spill(run.spill_path.as_deref()) {
                Some(bytes) => {
                    report.freed_bytes += bytes;
                    gone.push(purged(run, bytes));
                }
                None => kept_bytes += run.counted_bytes,
            }
        }
        spills.delete_rows(index, &gone)?;
        report.expired.extend(gone);
    }
}

/// What the quota pass starts from.
struct Quota {
    /// The TTL's cutoff: every finished run before it has gone, or is in `kept_bytes`.
    cutoff: DateTime<Utc>,
    max_disk: u64,
    /// Counted bytes of expired runs whose file could not be removed.
    kept_bytes: u64,
    /// Runs found missing that a dry run did not mark: not counted, not evicted.
    unmarked: Unmarked,
}

/// Runs a dry run found missing but left unmarked, with their counted bytes.
#[derive(Default)]
struct Unmarked {
    ids: HashSet<RunId>,
    bytes: u64,
}

/// The quota: evicts the oldest finished runs not expired until the spills fit in `max_disk`.
fn evict(
    index: &mut Index,
    spills: &Spills,
    quota: &Quota,
    report: &mut PurgeReport,
) -> Result<(), IndexError> {
    let mut total =
        (index.counted_spill_bytes(quota.cutoff)? + quota.kept_bytes + running_bytes(index)?)
            .saturating_sub(quota.unmarked.bytes);
    let mut cursor = PageStart::at(quota.cutoff);
    while total > quota.max_disk {
        let page = index.evictable_page(&cursor, PAGE)?;
        let Some(last) = page.last() else {
            break;
        };
        cursor = PageStart::after(last);
        let mut gone = Vec::new();
        for run in page {
            if total <= quota.max_disk {
                break;
            }
            if quota.unmarked.ids.contains(&run.id) {
                continue;
            }
            if let Some(bytes) = spills.remove_run_spill(run.spill_path.as_deref()) {
                total = total.saturating_sub(run.counted_bytes);
                report.freed_bytes += bytes;
                gone.push(purged(run, bytes));
            }
        }
        spills.delete_rows(index, &gone)?;
        report.evicted.extend(gone);
    }
    report.spill_bytes_after = total;
    Ok(())
}

/// The running runs' spills as they are now: they count toward the quota but never go.
fn running_bytes(index: &Index) -> Result<u64, IndexError> {
    Ok(index
        .running_spill_paths()?
        .iter()
        .filter_map(|path| fs::metadata(path).ok())
        .map(|meta| meta.len())
        .sum())
}

/// Removes the regular files in `spills/` that no run names and that nobody has touched since
/// `untouched_since`.
fn remove_orphans(
    index: &Index,
    spills: &Spills,
    untouched_since: DateTime<Utc>,
    report: &mut PurgeReport,
) -> Result<(), IndexError> {
    let untouched_since = SystemTime::from(untouched_since);
    for entry in spills.list()? {
        if !entry.is_file || entry.modified.is_none_or(|m| m >= untouched_since) {
            continue;
        }
        let named = match entry.name.to_str() {
            Some(name) => index.names_spill(name)?,
            None => false, // no row can name a file whose name is not UTF-8
        };
        if named {
            continue;
        }
        if let Some(bytes) = spills.remove_entry(&entry.name) {
            report.freed_bytes += bytes;
            report.orphans.push(OrphanFile {
                path: spills.dir.join(&entry.name).to_string_lossy().into_owned(),
                bytes,
            });
        }
    }
    Ok(())
}

/// Marks the finished runs whose spill file is gone. A listing of `spills/` rules most runs
/// out at once; the rest are looked at one by one (their spill may live elsewhere, or have
/// appeared since). In a dry run, returns what was found but left unmarked.
fn mark_missing(
    index: &mut Index,
    spills: &Spills,
    report: &mut PurgeReport,
) -> Result<Unmarked, IndexError> {
    let listing = spills.list()?;
    let listed: HashSet<&str> = listing.iter().filter_map(|e| e.name.to_str()).collect();
    // In a dry run the expired runs are still there; they would not be marked.
    let expired: HashSet<&RunId> = report.expired.iter().map(|run| &run.id).collect();
    let missing: Vec<(RunId, u64)> = index
        .spills_not_listed(&listed)?
        .into_iter()
        .filter(|(id, path, _)| !expired.contains(id) && is_gone(Path::new(path)))
        .map(|(id, _, bytes)| (id, bytes))
        .collect();
    let ids: Vec<RunId> = missing.iter().map(|(id, _)| id.clone()).collect();
    let unmarked = if spills.dry_run {
        Unmarked {
            ids: ids.iter().cloned().collect(),
            bytes: missing.iter().map(|(_, bytes)| bytes).sum(),
        }
    } else {
        index.mark_missing(&ids)?;
        Unmarked::default()
    };
    report.marked_missing = ids;
    Ok(unmarked)
}

/// Whether nothing is at `path` (an error other than "not found" is not proof).
fn is_gone(path: &Path) -> bool {
    matches!(fs::symlink_metadata(path), Err(e) if e.kind() == io::ErrorKind::NotFound)
}

fn purged(run: SpillRecord, bytes: u64) -> PurgedRun {
    PurgedRun {
        id: run.id,
        spill_path: run.spill_path,
        bytes,
        started_at: run.started_at,
    }
}

/// `now - d`, saturating.
fn earlier(now: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(d)
        .ok()
        .and_then(|d| now.checked_sub_signed(d))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// One file in `spills/`.
#[derive(Debug)]
struct Entry {
    name: OsString,
    is_file: bool,
    modified: Option<SystemTime>,
}

/// The spills directory, canonical: the only place files are deleted from.
#[derive(Debug)]
struct Spills {
    dir: PathBuf,
    dry_run: bool,
}

impl Spills {
    fn open(dir: &Path, dry_run: bool) -> Result<Spills, IndexError> {
        let canonical = fs::canonicalize(dir).map_err(|source| IndexError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(Spills {
            dir: canonical,
            dry_run,
        })
    }

    /// What is in the directory now.
    fn list(&self) -> Result<Vec<Entry>, IndexError> {
        let io_error = |source| IndexError::Io {
            path: self.dir.clone(),
            source,
        };
        let mut entries = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(io_error)? {
            let entry = entry.map_err(io_error)?;
            // A file removed since the listing began is simply not there.
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            entries.push(Entry {
                name: entry.file_name(),
                is_file: meta.is_file(),
                modified: meta.modified().ok(),
            });
        }
        Ok(entries)
    }

    /// Removes a run's spill. `Some(bytes freed)` when the run may go: the file is removed (or
    /// would be, in a dry run), was already gone, or the run has none; `None` when it must stay
    /// (refused or failed; logged).
    fn remove_run_spill(&self, path: Option<&str>) -> Option<u64> {
        let Some(path) = path else {
            return Some(0);
        };
        let path = Path::new(path);
        match fs::symlink_metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Some(0),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot look at a spill; keeping its run");
                return None;
            }
            Ok(_) => {}
        }
        match self.name_inside(path) {
            Some(name) => self.remove_entry(name),
            None => {
                tracing::warn!(
                    path = %path.display(),
                    spills = %self.dir.display(),
                    "refusing to delete a spill outside the spills directory; keeping its run"
                );
                None
            }
        }
    }

    /// The file name of `path` if it is directly inside the spills directory.
    fn name_inside<'p>(&self, path: &'p Path) -> Option<&'p OsStr> {
        if !path.is_absolute() {
            return None;
        }
        let name = path.file_name()?;
        // `file_name` is None for a path ending in `..` and skips a trailing `.`, so `name` is
        // a plain name, and the canonical parent says where it really is.
        let parent = fs::canonicalize(path.parent()?).ok()?;
        (parent == self.dir).then_some(name)
    }

    /// Removes `spills/<name>`: `Some(bytes freed)` (0 if it was already gone), or `None` if it
    /// is not a plain file or a symbolic link, is the index, or cannot be removed (logged).
    fn remove_entry(&self, name: &OsStr) -> Option<u64> {
        let path = self.dir.join(name);
        if name.to_string_lossy().starts_with(INDEX_FILE) {
            tracing::warn!(path = %path.display(), "refusing to delete the run index as a spill");
            return None;
        }
        let meta = match fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Some(0),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot look at a spill; keeping it");
                return None;
            }
        };
        // A symbolic link goes itself, never what it points to.
        if !meta.is_file() && !meta.is_symlink() {
            tracing::warn!(path = %path.display(), "not a plain file; not deleting it");
            return None;
        }
        if self.dry_run {
            return Some(meta.len());
        }
        match fs::remove_file(&path) {
            Ok(()) => Some(meta.len()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Some(0),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot delete a spill; keeping it");
                None
            }
        }
    }

    /// Deletes the rows of runs whose files went (nothing in a dry run).
    fn delete_rows(&self, index: &mut Index, gone: &[PurgedRun]) -> Result<(), IndexError> {
        if self.dry_run {
            return Ok(());
        }
        let ids: Vec<RunId> = gone.iter().map(|run| run.id.clone()).collect();
        index.delete_runs(&ids)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::fs::File;

    use chrono::TimeDelta;

    use super::*;
    use crate::protocol::RunStatus;
    use crate::storage::index::tests::{at, end, id, new_run};
    use crate::storage::index::{HistoryFilter, NewRun, RunRow};

    /// The injected clock: 30 days after the test epoch.
    fn now() -> DateTime<Utc> {
        at(30 * 86_400)
    }

    fn ago(hours: i64) -> DateTime<Utc> {
        now() - TimeDelta::hours(hours)
    }

    const DAY: i64 = 24;

    struct Data {
        dir: tempfile::TempDir,
        spills: PathBuf,
        index: Index,
    }

    impl Data {
        fn new() -> Data {
            let dir = tempfile::tempdir().unwrap();
            let spills = dir.path().join("spills");
            fs::create_dir(&spills).unwrap();
            let index = Index::open(&dir.path().join(INDEX_FILE)).unwrap();
            Data { dir, spills, index }
        }

        /// A file of `bytes` bytes in spills/; its path.
        fn file(&self, name: &str, bytes: usize) -> String {
            let path = self.spills.join(name);
            fs::write(&path, vec![b'x'; bytes]).unwrap();
            path.to_string_lossy().into_owned()
        }

        /// Run `n`, started at `started`, with a spill of `bytes` (none if 0), finished with
        /// exit 0 unless `running`.
        fn run(&mut self, n: u32, started: DateTime<Utc>, bytes: usize, running: bool) -> String {
            let spill = (bytes > 0).then(|| self.file(&format!("run-{n}.log"), bytes));
            self.record(n, started, spill.clone(), bytes as u64, running);
            spill.unwrap_or_default()
        }

        fn record(
            &mut self,
            n: u32,
            started: DateTime<Utc>,
            spill_path: Option<String>,
            bytes: u64,
            running: bool,
        ) {
            let run = NewRun {
                spill_path,
                tags: [("t".to_string(), "v".to_string())].into(),
                ..new_run(n, started)
            };
            assert!(self.index.insert_run(&run).unwrap());
            if !running {
                let done = end(RunStatus::Exited, Some(0), bytes);
                self.index.finish_run(&id(n), &done).unwrap();
            }
        }

        fn purge(&mut self, policy: &PurgePolicy, dry_run: bool) -> PurgeReport {
            purge(&mut self.index, &self.spills, policy, now(), dry_run).unwrap()
        }

        fn rows(&self) -> Vec<RunRow> {
            let all = HistoryFilter {
                limit: 1000,
                ..HistoryFilter::default()
            };
            self.index.history(&all).unwrap()
        }

        fn ids(&self) -> Vec<RunId> {
            self.rows().into_iter().map(|r| r.id).collect()
        }

        /// Every file in the data directory, with its size.
        fn files(&self) -> BTreeMap<PathBuf, u64> {
            let mut files = BTreeMap::new();
            for dir in [self.dir.path(), &self.spills] {
                for entry in fs::read_dir(dir).unwrap() {
                    let entry = entry.unwrap();
                    files.insert(entry.path(), entry.metadata().unwrap().len());
                }
            }
            files
        }
    }

    fn set_mtime(path: &Path, t: DateTime<Utc>) {
        File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(SystemTime::from(t))
            .unwrap();
    }

    fn purged_ids(runs: &[PurgedRun]) -> Vec<RunId> {
        runs.iter().map(|r| r.id.clone()).collect()
    }

    /// Only the TTL applies.
    fn ttl_only(retention: Duration) -> PurgePolicy {
        PurgePolicy {
            retention,
            max_disk: u64::MAX,
            orphan_grace: DEFAULT_ORPHAN_GRACE,
        }
    }

    #[test]
    fn defaults() {
        let policy = PurgePolicy::default();
        assert_eq!(policy.retention, Duration::from_secs(604_800));
        assert_eq!(policy.max_disk, 10 * 1024 * 1024 * 1024);
        assert_eq!(policy.orphan_grace, Duration::from_secs(3600));
    }

    #[test]
    fn ttl_removes_old_finished_runs_file_first_then_row() {
        let mut data = Data::new();
        let old = data.run(1, ago(9 * DAY), 100, false);
        data.run(2, ago(8 * DAY), 0, false); // no spill at all
        let recent = data.run(3, ago(DAY), 50, false);
        let old_running = data.run(4, ago(10 * DAY), 70, true);

        let report = data.purge(&PurgePolicy::default(), false);
        assert!(!report.dry_run);
        assert_eq!(purged_ids(&report.expired), [id(1), id(2)]);
        assert_eq!(report.expired[0].spill_path.as_deref(), Some(old.as_str()));
        assert_eq!(report.expired[0].bytes, 100);
        assert_eq!(report.expired[0].started_at, ago(9 * DAY));
        assert_eq!(report.freed_bytes, 100);
        assert!(report.evicted.is_empty() && report.orphans.is_empty());
        assert_eq!(report.spill_bytes_after, 50 + 70);

        assert!(!Path::new(&old).exists());
        assert!(Path::new(&recent).exists() && Path::new(&old_running).exists());
        assert_eq!(data.ids(), [id(3), id(4)]);
        // The tags went with the rows.
        let tagged = HistoryFilter {
            tags: vec![("t".into(), "v".into())],
            ..HistoryFilter::default()
        };
        assert_eq!(data.index.history(&tagged).unwrap().len(), 2);
    }

    #[test]
    fn a_row_whose_file_already_went_is_handled() {
        let mut data = Data::new();
        // A crash between deleting the file and deleting the row leaves this.
        let old = data.run(1, ago(9 * DAY), 100, false);
        fs::remove_file(&old).unwrap();
        // Not expired yet: marked missing meanwhile, then expired like any other.
        let young = data.run(2, ago(3 * DAY), 100, false);
        fs::remove_file(&young).unwrap();

        let report = data.purge(&PurgePolicy::default(), false);
        assert_eq!(purged_ids(&report.expired), [id(1)]);
        assert_eq!(report.expired[0].bytes, 0);
        assert_eq!(report.marked_missing, [id(2)]);
        assert_eq!(report.spill_bytes_after, 0);
        assert_eq!(data.ids(), [id(2)]);
        assert!(data.index.get(&id(2)).unwrap().unwrap().spill_missing);

        let later = purge(
            &mut data.index,
            &data.spills,
            &PurgePolicy::default(),
            now() + TimeDelta::days(5),
            false,
        )
        .unwrap();
        assert_eq!(purged_ids(&later.expired), [id(2)]);
        assert!(later.marked_missing.is_empty());
        assert!(data.ids().is_empty());
    }

    #[test]
    fn a_purge_on_an_index_opened_read_only_deletes_files_then_rows() {
        let mut data = Data::new();
        let old = data.run(1, ago(9 * DAY), 100, false);
        data.run(2, ago(DAY), 50, false);
        // As a daemon on a full disk has it: read-only, made writable by the first write.
        let path = data.dir.path().join(INDEX_FILE);
        data.index = Index::open_read_only(&path).unwrap();
        let report = data.purge(&PurgePolicy::default(), false);
        assert_eq!(purged_ids(&report.expired), [id(1)]);
        assert!(!Path::new(&old).exists());
        assert!(!data.index.is_read_only());
        assert_eq!(data.ids(), [id(2)]);
    }

    #[test]
    fn older_than_overrides_the_retention() {
        let mut data = Data::new();
        data.run(1, ago(2), 10, false);
        data.run(2, now() - TimeDelta::minutes(30), 10, false);
        let report = data.purge(&ttl_only(Duration::from_secs(3600)), false);
        assert_eq!(purged_ids(&report.expired), [id(1)]);
        assert_eq!(data.ids(), [id(2)]);
    }

    #[test]
    fn the_quota_evicts_the_oldest_finished_runs_and_never_a_running_one() {
        let mut data = Data::new();
        let running = data.run(1, ago(6), 100, true);
        for (n, hours) in (2..).zip([5, 4, 3, 2, 1]) {
            data.run(n, ago(hours), 100, false);
        }
        let policy = PurgePolicy {
            max_disk: 350,
            ..PurgePolicy::default()
        };
        let report = data.purge(&policy, false);
        assert!(report.expired.is_empty());
        assert_eq!(purged_ids(&report.evicted), [id(2), id(3), id(4)]);
        assert_eq!(report.freed_bytes, 300);
        assert_eq!(report.spill_bytes_after, 300);
        assert_eq!(report.max_disk, 350);
        assert_eq!(data.ids(), [id(6), id(5), id(1)]);
        assert!(!data.spills.join("run-2.log").exists());
        assert!(data.spills.join("run-5.log").exists());

        // Even with no room at all, the running run stays, and its file counts.
        let none = PurgePolicy {
            max_disk: 0,
            ..PurgePolicy::default()
        };
        let report = data.purge(&none, false);
        assert_eq!(purged_ids(&report.evicted), [id(5), id(6)]);
        assert_eq!(report.spill_bytes_after, 100);
        assert_eq!(data.ids(), [id(1)]);
        assert!(Path::new(&running).exists());
    }

    #[test]
    fn the_running_runs_files_count_as_they_are_now() {
        let mut data = Data::new();
        let running = data.run(1, ago(6), 10, true);
        data.run(2, ago(5), 100, false);
        fs::write(&running, vec![b'y'; 500]).unwrap(); // it grew
        let policy = PurgePolicy {
            max_disk: 550,
            ..PurgePolicy::default()
        };
        let report = data.purge(&policy, false);
        assert_eq!(purged_ids(&report.evicted), [id(2)]);
        assert_eq!(report.spill_bytes_after, 500);
    }

    #[test]
    fn orphans_go_only_after_the_grace_period() {
        let mut data = Data::new();
        let old_orphan = data.file("old-orphan.log", 40);
        set_mtime(Path::new(&old_orphan), ago(2));
        let young_orphan = data.file("young-orphan.log", 40);
        set_mtime(Path::new(&young_orphan), now() - TimeDelta::minutes(10));
        let named = data.run(1, ago(3), 40, false);
        set_mtime(Path::new(&named), ago(3));
        fs::create_dir(data.spills.join("a-directory")).unwrap();

        let report = data.purge(&PurgePolicy::default(), false);
        assert_eq!(report.orphans.len(), 1, "{:?}", report.orphans);
        let canonical = fs::canonicalize(&data.spills).unwrap();
        assert_eq!(
            Path::new(&report.orphans[0].path),
            canonical.join("old-orphan.log")
        );
        assert_eq!(report.orphans[0].bytes, 40);
        assert_eq!(report.freed_bytes, 40);
        assert!(!Path::new(&old_orphan).exists());
        assert!(Path::new(&young_orphan).exists());
        assert!(Path::new(&named).exists());
        assert!(data.spills.join("a-directory").is_dir());

        // Once the grace has passed, the young one goes too.
        let later = purge(
            &mut data.index,
            &data.spills,
            &PurgePolicy::default(),
            now() + TimeDelta::hours(1),
            false,
        )
        .unwrap();
        assert_eq!(later.orphans.len(), 1);
        assert!(!Path::new(&young_orphan).exists());
    }

    #[test]
    fn rows_whose_spill_is_gone_are_kept_and_marked_missing() {
        let mut data = Data::new();
        let gone = data.run(1, ago(2), 30, false);
        let gone_running = data.run(2, ago(2), 30, true);
        data.run(3, ago(1), 30, false);
        fs::remove_file(&gone).unwrap();
        fs::remove_file(&gone_running).unwrap();

        let report = data.purge(&PurgePolicy::default(), false);
        assert_eq!(report.marked_missing, [id(1)]);
        let row = data.index.get(&id(1)).unwrap().unwrap();
        assert!(row.spill_missing);
        assert_eq!(row.spill_path.as_deref(), Some(gone.as_str()));
        assert!(!data.index.get(&id(2)).unwrap().unwrap().spill_missing);
        assert_eq!(data.index.stats().unwrap().spill_bytes, 30);

        let again = data.purge(&PurgePolicy::default(), false);
        assert!(again.marked_missing.is_empty());
    }

    #[test]
    fn a_spill_outside_the_spills_directory_is_counted_present() {
        let mut data = Data::new();
        let elsewhere = data.dir.path().join("elsewhere.log");
        fs::write(&elsewhere, b"x").unwrap();
        let path = elsewhere.to_string_lossy().into_owned();
        data.record(1, ago(1), Some(path), 1, false);
        let report = data.purge(&PurgePolicy::default(), false);
        assert!(report.marked_missing.is_empty());
    }

    #[test]
    fn a_dry_run_reports_everything_and_touches_nothing() {
        let mut data = Data::new();
        data.run(1, ago(10 * DAY), 100, false); // expired
        data.run(2, ago(5), 100, false); // evicted
        data.run(3, ago(4), 100, false); // kept
        let gone = data.run(4, ago(3), 100, false); // missing
        fs::remove_file(&gone).unwrap();
        let orphan = data.file("orphan.log", 25);
        set_mtime(Path::new(&orphan), ago(5));
        let policy = PurgePolicy {
            max_disk: 150,
            ..PurgePolicy::default()
        };
        let rows = data.rows();
        let files = data.files();

        let dry = data.purge(&policy, true);
        assert!(dry.dry_run);
        assert_eq!(purged_ids(&dry.expired), [id(1)]);
        assert_eq!(purged_ids(&dry.evicted), [id(2)]);
        assert_eq!(dry.orphans.len(), 1);
        assert_eq!(dry.marked_missing, [id(4)]);
        assert_eq!(dry.freed_bytes, 225);
        assert_eq!(dry.spill_bytes_after, 100);
        assert_eq!(data.rows(), rows, "no row changed");
        assert_eq!(data.files(), files, "no file changed");

        let real = data.purge(&policy, false);
        assert!(!real.dry_run);
        assert_eq!(
            PurgeReport {
                dry_run: true,
                ..real
            },
            dry,
            "the real pass does what the dry run said"
        );
        assert_eq!(data.ids(), [id(4), id(3)]);
    }

    #[test]
    fn paths_outside_the_spills_directory_are_never_deleted() {
        let mut data = Data::new();
        let root = data.dir.path().to_path_buf();
        let precious = |name: &str| {
            let path = root.join(name);
            fs::write(&path, b"keep me").unwrap();
            path
        };
        let outside = precious("outside.log");
        let dotdot = precious("dotdot.log");
        let target = precious("target.log");
        std::os::unix::fs::symlink(&target, data.spills.join("link.log")).unwrap();
        std::os::unix::fs::symlink(&root, data.spills.join("escape")).unwrap();
        let index_file = root.join(INDEX_FILE);
        let paths = [
            outside.to_string_lossy().into_owned(),
            format!("{}/../dotdot.log", data.spills.display()),
            format!("{}/escape/outside.log", data.spills.display()),
            index_file.to_string_lossy().into_owned(),
            format!("{}/..", data.spills.display()),
        ];
        for (n, path) in (1..).zip(paths) {
            data.record(n, ago(10 * DAY + i64::from(n)), Some(path), 7, false);
        }
        // A symlink inside spills/: the link goes, never what it points to.
        let link = data.spills.join("link.log").to_string_lossy().into_owned();
        data.record(9, ago(10 * DAY), Some(link), 7, false);

        let report = data.purge(&PurgePolicy::default(), false);
        assert_eq!(purged_ids(&report.expired), [id(9)]);
        for path in [&outside, &dotdot, &target, &index_file] {
            assert!(path.exists(), "{} was deleted", path.display());
        }
        assert!(data.spills.exists());
        assert!(fs::symlink_metadata(data.spills.join("link.log")).is_err());
        assert_eq!(data.ids().len(), 5, "refused runs keep their rows");

        // Nor by the quota.
        let none = PurgePolicy {
            max_disk: 0,
            retention: Duration::from_secs(u64::MAX),
            ..PurgePolicy::default()
        };
        let report = data.purge(&none, false);
        assert!(report.evicted.is_empty() && report.expired.is_empty());
        assert!(outside.exists() && dotdot.exists() && index_file.exists());
    }

    #[test]
    fn the_orphan_sweep_never_takes_the_index() {
        let mut data = Data::new();
        let root = data.dir.path().to_path_buf();
        let index_file = root.join(INDEX_FILE);
        set_mtime(&index_file, ago(100));
        // A mistaken caller points the purge at the data directory itself.
        let report = purge(
            &mut data.index,
            &root,
            &PurgePolicy::default(),
            now(),
            false,
        )
        .unwrap();
        assert!(report.orphans.is_empty(), "{:?}", report.orphans);
        assert!(index_file.exists());
        data.index.stats().unwrap();
    }

    #[test]
    fn a_file_that_cannot_go_keeps_its_run_and_the_pass_goes_on() {
        let mut data = Data::new();
        // Not a plain file, so it is not deleted.
        let stuck = data.spills.join("stuck.log");
        fs::create_dir(&stuck).unwrap();
        let stuck = stuck.to_string_lossy().into_owned();
        data.record(1, ago(10 * DAY), Some(stuck), 10, false);
        data.run(2, ago(9 * DAY), 10, false);
        let report = data.purge(&PurgePolicy::default(), false);
        assert_eq!(purged_ids(&report.expired), [id(2)]);
        assert_eq!(data.ids(), [id(1)]);
        assert_eq!(report.spill_bytes_after, 10, "the stuck spill still counts");
    }

    #[test]
    fn many_runs_go_in_several_pages() {
        let mut data = Data::new();
        let count = u32::try_from(PAGE).unwrap() * 2 + 5;
        for n in 0..count {
            data.record(
                n,
                ago(10 * DAY) + TimeDelta::seconds(i64::from(n % 7)),
                None,
                0,
                false,
            );
        }
        data.run(count, ago(1), 10, false);
        let report = data.purge(&PurgePolicy::default(), false);
        assert_eq!(report.expired.len(), PAGE * 2 + 5);
        let mut expired = purged_ids(&report.expired);
        expired.dedup();
        assert_eq!(expired.len(), PAGE * 2 + 5, "each once");
        assert_eq!(data.ids(), [id(count)]);
    }

    #[test]
    fn a_missing_spills_directory_is_an_error() {
        let mut data = Data::new();
        let nowhere = data.dir.path().join("nowhere");
        let error = purge(
            &mut data.index,
            &nowhere,
            &PurgePolicy::default(),
            now(),
            false,
        )
        .unwrap_err();
        assert!(matches!(error, IndexError::Io { .. }), "{error:?}");
    }

    #[test]
    fn the_report_serialises_times_as_rfc3339() {
        let mut data = Data::new();
        data.run(1, ago(10 * DAY), 10, false);
        let report = data.purge(&PurgePolicy::default(), true);
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["expired"][0]["started_at"], "2026-01-21T00:00:00.000Z");
        let back: PurgeReport = serde_json::from_value(json).unwrap();
        assert_eq!(back, report);
    }
}
