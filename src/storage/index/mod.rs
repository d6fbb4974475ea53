//! The run index: one SQLite row per run, in `<data-dir>/index.sqlite3`.
//!
//! This module owns the database: its schema (the numbered files in `migrations/`, embedded in
//! the binary and applied by [`Index::open`]), every SQL statement, and the mapping between rows
//! and [`RunRow`]. The daemon inserts a row when a run starts and completes it when the run
//! ends; `spillway truncate` registers its spills the same way, so history, stats and the purge
//! (`crate::storage::purge`, which owns the files) see every spill.
//!
//! Durability: WAL mode and one transaction per change, so a daemon killed with `kill -9`
//! mid-run leaves a database that opens cleanly; the runs it had going stay `running` until
//! [`Index::recover_interrupted`] marks them `interrupted` at the next start. WAL also lets
//! readers work while one process writes; writers queue behind each other for up to the 5 s
//! busy timeout, and take the write lock when their transaction begins (`IMMEDIATE`), so two
//! processes never deadlock upgrading a read to a write. Past the timeout a write fails with
//! an error [`IndexError::is_busy`] recognises; the daemon then keeps its runs' records and
//! tries again (`daemon::recorder`).
//!
//! Migrations are only ever appended, never edited: `PRAGMA user_version` counts those applied,
//! an older database is migrated in place at open, and a newer one (from a later spillway) is
//! refused with [`IndexError::TooNew`] rather than guessed at.
//!
//! A file that is not ours is never written to: before the first write (switching to WAL
//! changes the file's header) [`Index::open`] refuses a symlink, a file that is not an SQLite
//! database or is damaged ([`IndexError::NotADatabase`]), another program's database
//! ([`IndexError::Foreign`]) and a newer spillway's, each with a message that says what to do.
//!
//! Times are stored as INTEGER Unix milliseconds (UTC), so time ranges are index ranges; they
//! come back at millisecond precision.

use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, Transaction, params, params_from_iter};

use crate::protocol::{IndexStats, RunId};
use crate::storage::command_key::command_key;

mod history;
mod open;
mod pages;
mod records;
mod tokens;

use history::history_query;

pub(crate) use pages::PageStart;
pub(crate) use pages::SpillRecord;
pub use records::Ending;
pub use records::HistoryFilter;
pub use records::NewRun;
pub use records::RECOVERED_COMMAND;
use records::RUN_COLUMNS;
pub use records::RecoveredRun;
pub use records::RunEnd;
pub use records::RunRow;
pub use records::RunTokens;
pub(crate) use records::display_command;
use records::int;
use records::millis;
use records::read_id;
use records::read_run;
use records::read_time;
use records::to_json;
use records::unsigned;
pub use tokens::TOKEN_STATS_COMMANDS;
pub use tokens::TOKEN_STATS_DAYS;

/// The index's file name; it lives in the data directory.
pub const INDEX_FILE: &str = "index.sqlite3";

/// What can go wrong with the index.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The file could not be opened or set up (not a database, no permission, locked).
    #[error("cannot open the run index {path}: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    /// The index's path is a symbolic link: it is never followed, so that nobody can point the
    /// daemon's writes at another file.
    #[error(
        "the run index {path} is a symbolic link; refusing to follow it: \
         replace it with the file itself, or use another data directory"
    )]
    Symlink { path: PathBuf },
    /// The file is not an SQLite database, or is damaged; it is left as it was.
    #[error(
        "the run index {path} is not an SQLite database or is damaged ({reason}); it was not \
         touched: move it away (spillway then starts a new, empty index) or use another data \
         directory"
    )]
    NotADatabase { path: PathBuf, reason: String },
    /// An SQLite database of some other program; it is left as it was.
    #[error(
        "{path} is an SQLite database but not a spillway run index (its tables: {tables}); it \
         was not touched: move it away (spillway then starts a new, empty index) or use \
         another data directory"
    )]
    Foreign { path: PathBuf, tables: String },
    /// The database has more migrations applied than this build knows.
    #[error(
        "{path} was written by a newer spillway (schema {found}, this build knows {supported}); \
         it was not touched: upgrade spillway, or move it away (spillway then starts a new, \
         empty index)"
    )]
    TooNew {
        path: PathBuf,
        found: usize,
        supported: usize,
    },
    /// Applying the migrations failed; the database is left as it was.
    #[error("cannot bring the run index {path} up to this build's schema: {reason}")]
    Migrate { path: PathBuf, reason: String },
    /// A query failed.
    #[error("run index: {0}")]
    Sql(#[from] rusqlite::Error),
    /// A file or directory the index or the purge needed could not be read.
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

impl IndexError {
    /// SQLite found no room to write (`SQLITE_FULL`): the disk is full, and the same write
    /// succeeds once there is space.
    pub fn is_full(&self) -> bool {
        let failure = match self {
            IndexError::Sql(rusqlite::Error::SqliteFailure(failure, _))
            | IndexError::Open {
                source: rusqlite::Error::SqliteFailure(failure, _),
                ..
            } => failure,
            _ => return false,
        };
        failure.code == rusqlite::ErrorCode::DiskFull
    }

    /// SQLite could not read or write its files (`SQLITE_IOERR`, `SQLITE_CANTOPEN`): on a
    /// nearly full disk, that is for want of space too (growing the shared-memory file fails
    /// so).
    pub fn is_io_failure(&self) -> bool {
        matches!(
            self,
            IndexError::Sql(rusqlite::Error::SqliteFailure(failure, _))
                | IndexError::Open {
                    source: rusqlite::Error::SqliteFailure(failure, _),
                    ..
                }
                if matches!(
                    failure.code,
                    rusqlite::ErrorCode::SystemIoFailure | rusqlite::ErrorCode::CannotOpen
                )
        )
    }

    /// Another connection held the write lock past the busy timeout: the same write may well
    /// succeed later.
    pub fn is_busy(&self) -> bool {
        matches!(
            self,
            IndexError::Sql(rusqlite::Error::SqliteFailure(failure, _))
                if matches!(
                    failure.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                )
        )
    }
}

/// The run index: one connection to `index.sqlite3`. `Send`, not `Sync`: share it behind a
/// mutex.
#[derive(Debug)]
pub struct Index {
    conn: Connection,
    path: PathBuf,
    /// Opened read-only on a full disk ([`Index::open_read_only`]): the first write tries to
    /// open it for writing again.
    read_only: bool,
    /// The busy timeout set on this connection, kept for a connection that replaces it.
    busy_timeout: Duration,
    /// Whether this connection leaves the write-ahead log to the next when it closes
    /// ([`Index::keep_log_on_close`]).
    keeps_log: bool,
}

impl Index {
    /// Inserts a run at its start; Ok(false) if the id already exists (the caller picks another).
    pub fn insert_run(&mut self, run: &NewRun) -> Result<bool, IndexError> {
        self.writable()?;
        let tx = self.conn.transaction()?;
        let inserted = insert_row(&tx, run)?;
        if inserted {
            insert_tags(&tx, run)?;
        }
        tx.commit()?;
        Ok(inserted)
    }

    /// Records how a run ended. An id that was never inserted is an error
    /// (`QueryReturnedNoRows`).
    pub fn finish_run(&mut self, id: &RunId, end: &RunEnd) -> Result<(), IndexError> {
        self.writable()?;
        let changed = self
            .conn
            .prepare_cached(
                "UPDATE runs SET ended_at = ?2, status = ?3, exit_code = ?4, signal = ?5, \
                 total_lines = ?6, total_bytes = ?7, truncated = ?8, spill_bytes = ?9, \
                 spill_complete = ?10, spill_capped_at_line = ?11, output_tokens = ?12, \
                 preview_tokens = ?13, output_tokens_estimated = ?14, folded_tokens = ?15 \
                 WHERE id = ?1",
            )?
            .execute(params![
                id.as_str(),
                millis(end.ended_at),
                end.status.as_str(),
                end.exit_code,
                end.signal,
                int(end.total_lines),
                int(end.total_bytes),
                end.truncated,
                int(end.spill_bytes),
                end.spill_complete,
                end.spill_capped_at_line.map(int),
                end.tokens.map(|t| int(t.output)),
                end.tokens.map(|t| int(t.preview)),
                end.tokens.map(|t| t.output_estimated),
                end.tokens.map(|t| int(t.folded)),
            ])?;
        if changed == 0 {
            return Err(rusqlite::Error::QueryReturnedNoRows.into());
        }
        Ok(())
    }

    /// The run with this id, if it is recorded.
    pub fn get(&self, id: &RunId) -> Result<Option<RunRow>, IndexError> {
        let sql = format!("SELECT {RUN_COLUMNS} FROM runs r WHERE r.id = ?1");
        let row = self
            .conn
            .prepare_cached(&sql)?
            .query_row([id.as_str()], read_run)
            .optional()?;
        Ok(row)
    }

    /// The runs `filter` keeps, newest first (ties by id, descending).
    pub fn history(&self, filter: &HistoryFilter) -> Result<Vec<RunRow>, IndexError> {
        let (sql, values) = history_query(filter);
        let mut statement = self.conn.prepare_cached(&sql)?;
        let rows = statement.query_map(params_from_iter(values), read_run)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Marks `interrupted` the runs left `running` by a process that is gone, and returns
    /// their ids. Call it holding the data directory's daemon lock (`crate::daemon`): every
    /// run a daemon started (one with a command pid) then belongs to a dead daemon. A run of
    /// another writer (`spillway truncate`, which records no command pid) is taken for gone
    /// when `owner_lives` says its `owner_pid` is not alive, or no owner was recorded.
    ///
    /// A run ends when it was last known alive: the latest of its start, its spill's last
    /// write and `last_alive` (its daemon's last sign of life), never after `now`. Its spill
    /// is kept: its size is taken from the file, or it is marked missing if the file is gone.
    pub fn recover_interrupted(
        &mut self,
        now: DateTime<Utc>,
        last_alive: Option<DateTime<Utc>>,
        owner_lives: impl Fn(u32) -> bool,
    ) -> Result<Vec<RunId>, IndexError> {
        self.writable()?;
        let tx = self.conn.transaction()?;
        let orphaned = running_runs(&tx)?
            .into_iter()
            .filter(|run| run.pid.is_some() || run.owner_pid.is_none_or(|pid| !owner_lives(pid)));
        let mut recovered = Vec::new();
        for run in orphaned {
            let spill = spill_on_disk(run.spill_path.as_deref());
            let ended = [Some(run.started_at), spill.modified, last_alive]
                .into_iter()
                .flatten()
                .max()
                .unwrap_or(now)
                .min(now)
                .max(run.started_at);
            tx.prepare_cached(
                "UPDATE runs SET status = 'interrupted', ended_at = ?2, spill_complete = 0, \
                 spill_bytes = coalesce(?3, spill_bytes), spill_missing = ?4 \
                 WHERE id = ?1 AND status = 'running'",
            )?
            .execute(params![
                run.id.as_str(),
                millis(ended),
                spill.bytes.map(int),
                spill.missing
            ])?;
            recovered.push(run.id);
        }
        tx.commit()?;
        Ok(recovered)
    }

    /// Records, as `interrupted`, a run known only by its spill file: its daemon died after
    /// starting it and before recording it. Ok(false) if the id is taken (pick another).
    pub fn insert_recovered(&mut self, run: &RecoveredRun) -> Result<bool, IndexError> {
        self.writable()?;
        let spill_name = Path::new(&run.spill_path)
            .file_name()
            .and_then(OsStr::to_str);
        let changed = self
            .conn
            .prepare_cached(
                "INSERT INTO runs (id, command, started_at, ended_at, status, spill_path, \
                 spill_name, spill_bytes, spill_complete) \
                 VALUES (?1, ?2, ?3, ?4, 'interrupted', ?5, ?6, ?7, 0) \
                 ON CONFLICT (id) DO NOTHING",
            )?
            .execute(params![
                run.id.as_str(),
                RECOVERED_COMMAND,
                millis(run.started_at),
                millis(run.ended_at),
                run.spill_path,
                spill_name,
                int(run.spill_bytes),
            ])?;
        Ok(changed == 1)
    }

    /// Counts by status, spill total, time span and the database's size.
    pub fn stats(&self) -> Result<IndexStats, IndexError> {
        let mut by_status = self
            .conn
            .prepare("SELECT status, count(*) FROM runs GROUP BY status")?;
        let runs_by_status = by_status
            .query_map([], |row| Ok((row.get(0)?, unsigned(row.get(1)?))))?
            .collect::<Result<_, _>>()?;
        let recorded: i64 = self.conn.query_row(
            "SELECT coalesce(sum(spill_bytes), 0) FROM runs \
             WHERE spill_missing = 0 AND status <> 'running'",
            [],
            |row| row.get(0),
        )?;
        // A running run's size is recorded when it ends: until then, its file as it is now.
        let running: u64 = running_runs(&self.conn)?
            .iter()
            .filter_map(|run| spill_on_disk(run.spill_path.as_deref()).bytes)
            .sum();
        Ok(IndexStats {
            runs_by_status,
            spill_bytes: unsigned(recorded) + running,
            oldest: self.time_query("SELECT min(started_at) FROM runs")?,
            newest: self.time_query("SELECT max(started_at) FROM runs")?,
            database_bytes: self.database_bytes()?,
        })
    }

    fn time_query(&self, sql: &str) -> Result<Option<DateTime<Utc>>, IndexError> {
        let ms: Option<i64> = self.conn.query_row(sql, [], |row| row.get(0))?;
        Ok(ms.and_then(DateTime::from_timestamp_millis))
    }

    /// The database file plus its write-ahead log (absent when no one has it open).
    fn database_bytes(&self) -> Result<u64, IndexError> {
        let mut total = 0;
        for (path, required) in [(self.path.clone(), true), (self.log_path(), false)] {
            match std::fs::metadata(&path) {
                Ok(meta) => total += meta.len(),
                Err(e) if !required && e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => return Err(IndexError::Io { path, source }),
            }
        }
        Ok(total)
    }
}

/// Inserts the run's row; false if its id is taken.
fn insert_row(tx: &Transaction<'_>, run: &NewRun) -> rusqlite::Result<bool> {
    let argv = run.argv.as_ref().map(to_json).transpose()?;
    let spill_name = run
        .spill_path
        .as_deref()
        .and_then(|p| Path::new(p).file_name())
        .and_then(OsStr::to_str);
    let changed = tx
        .prepare_cached(
            "INSERT INTO runs (id, argv, shell, command, cwd, tags, started_at, status, \
             spill_path, spill_name, pid, owner_pid, command_key) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'running', ?8, ?9, ?10, ?11, ?12) \
             ON CONFLICT (id) DO NOTHING",
        )?
        .execute(params![
            run.id.as_str(),
            argv,
            run.shell,
            display_command(run.argv.as_deref(), run.shell.as_deref()),
            run.cwd,
            to_json(&run.tags)?,
            millis(run.started_at),
            run.spill_path,
            spill_name,
            run.pid,
            run.owner_pid,
            command_key(run.argv.as_deref(), run.shell.as_deref()),
        ])?;
    Ok(changed == 1)
}

fn insert_tags(tx: &Transaction<'_>, run: &NewRun) -> rusqlite::Result<()> {
    let mut statement = tx.prepare_cached(
        "INSERT INTO run_tags (run_id, key, value, started_at) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for (key, value) in &run.tags {
        statement.execute(params![run.id.as_str(), key, value, millis(run.started_at)])?;
    }
    Ok(())
}

/// A run still `running`.
struct Running {
    id: RunId,
    started_at: DateTime<Utc>,
    /// The command's pid: set for a daemon's runs, not for `spillway truncate`'s.
    pid: Option<u32>,
    /// `None` when no owner was recorded: taken for gone.
    owner_pid: Option<u32>,
    spill_path: Option<String>,
}

fn running_runs(conn: &Connection) -> rusqlite::Result<Vec<Running>> {
    let mut statement = conn.prepare_cached(
        "SELECT id, started_at, pid, owner_pid, spill_path FROM runs WHERE status = 'running' \
         ORDER BY started_at",
    )?;
    let rows = statement.query_map([], |row| {
        Ok(Running {
            id: read_id(row, 0)?,
            started_at: read_time(row, 1)?,
            pid: row.get(2)?,
            owner_pid: row.get(3)?,
            spill_path: row.get(4)?,
        })
    })?;
    rows.collect()
}

/// A spill file as it is on disk now.
#[derive(Debug, Default)]
struct OnDisk {
    bytes: Option<u64>,
    modified: Option<DateTime<Utc>>,
    /// The file is gone.
    missing: bool,
}

/// The spill's current size and last write, and whether it is gone.
fn spill_on_disk(path: Option<&str>) -> OnDisk {
    let Some(path) = path else {
        return OnDisk::default();
    };
    match std::fs::metadata(path) {
        Ok(meta) => OnDisk {
            bytes: Some(meta.len()),
            modified: meta.modified().ok().map(DateTime::<Utc>::from),
            missing: false,
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => OnDisk {
            missing: true,
            ..OnDisk::default()
        },
        Err(e) => {
            tracing::warn!(path, error = %e, "cannot read the size of an interrupted run's spill");
            OnDisk::default()
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;
    use std::os::unix::process::ExitStatusExt;

    use chrono::TimeZone;
    use rusqlite_migration::{M, Migrations};

    use super::open::{MIGRATIONS, schema_version};
    use super::tokens::{tokens_by_command_sql, tokens_by_day_sql};
    use super::*;
    use crate::protocol::{RunRecord, RunStatus, SavedBy, StatusFilter, TokenStats, TokenTotals};

    /// A run id, distinct for each `n`.
    pub(crate) fn id(n: u32) -> RunId {
        let alphabet = b"abcdefghijklmnopqrstuvwxyz234567";
        let suffix: String = (0..4)
            .rev()
            .map(|i| char::from(alphabet[((n >> (5 * i)) & 31) as usize]))
            .collect();
        RunId::try_from(format!("20260101-000000-{suffix}")).unwrap()
    }

    /// `secs` after 2026-01-01 00:00 UTC.
    pub(crate) fn at(secs: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + chrono::TimeDelta::seconds(secs)
    }

    pub(crate) fn new_run(n: u32, started_at: DateTime<Utc>) -> NewRun {
        NewRun {
            id: id(n),
            argv: Some(vec!["echo".into(), format!("run {n}")]),
            shell: None,
            cwd: "/work".into(),
            tags: BTreeMap::new(),
            started_at,
            spill_path: None,
            pid: Some(4242),
            owner_pid: 1,
        }
    }

    pub(crate) fn end(status: RunStatus, exit_code: Option<i32>, spill_bytes: u64) -> RunEnd {
        RunEnd {
            ended_at: at(86_400 * 365),
            status,
            exit_code,
            signal: None,
            total_lines: 3,
            total_bytes: spill_bytes,
            truncated: false,
            spill_bytes,
            spill_complete: true,
            spill_capped_at_line: None,
            tokens: None,
        }
    }

    /// Caps the database at the pages it has: any write that needs another fails as on a
    /// full disk (`SQLITE_FULL`), for tests of what a full disk does to writers.
    pub(crate) fn cap_at_current_size(index: &Index) {
        let pages: i64 = index
            .conn
            .pragma_query_value(None, "page_count", |row| row.get(0))
            .unwrap();
        index
            .conn
            .pragma_update(None, "max_page_count", pages)
            .unwrap();
    }

    #[test]
    fn a_full_disk_is_told_apart_from_other_failures() {
        let (_dir, mut index) = open_temp();
        cap_at_current_size(&index);
        let mut big = new_run(1, at(0));
        big.argv = Some(vec!["x".repeat(1 << 20)]);
        let e = index.insert_run(&big).unwrap_err();
        assert!(e.is_full() && !e.is_busy(), "{e}");
        assert!(
            index.insert_run(&new_run(2, at(1))).unwrap(),
            "small rows still fit"
        );
    }

    #[test]
    fn an_index_opened_read_only_reads_and_becomes_writable_at_its_first_write() {
        let dir = tempfile::tempdir().unwrap();
        // A directory whose name an SQLite URI would misread.
        let root = dir.path().join("a?b#c%d e");
        std::fs::create_dir(&root).unwrap();
        let path = root.join(INDEX_FILE);
        let mut writer = Index::open(&path).unwrap();
        writer.insert_run(&new_run(1, at(0))).unwrap();
        drop(writer); // the last connection: the write-ahead log is folded in and removed

        let mut index = Index::open_read_only(&path).unwrap();
        assert!(index.is_read_only());
        assert_eq!(index.get(&id(1)).unwrap().unwrap().id, id(1));
        assert_eq!(history(&index, HistoryFilter::default()), [id(1)]);
        index.insert_run(&new_run(2, at(1))).unwrap();
        assert!(!index.is_read_only());
        assert_eq!(history(&index, HistoryFilter::default()), [id(2), id(1)]);

        // With a write-ahead log in use (another connection open), too.
        let mut reader = Index::open_read_only(&path).unwrap();
        assert_eq!(history(&reader, HistoryFilter::default()), [id(2), id(1)]);
        reader.writable().unwrap();
        assert!(!reader.is_read_only());
    }

    #[test]
    fn read_only_opening_refuses_what_it_could_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.sqlite3");
        std::fs::write(&empty, b"").unwrap();
        assert!(matches!(
            Index::open_read_only(&empty),
            Err(IndexError::Migrate { .. })
        ));
        let missing = dir.path().join("missing.sqlite3");
        assert!(Index::open_read_only(&missing).is_err());
        assert!(!missing.exists(), "nothing is created");
        let text = dir.path().join("text.sqlite3");
        std::fs::write(&text, vec![b'x'; 4096]).unwrap();
        assert!(matches!(
            Index::open_read_only(&text),
            Err(IndexError::NotADatabase { .. })
        ));
    }

    pub(crate) fn open_temp() -> (tempfile::TempDir, Index) {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(&dir.path().join(INDEX_FILE)).unwrap();
        (dir, index)
    }

    fn ids(rows: &[RunRow]) -> Vec<RunId> {
        rows.iter().map(|r| r.id.clone()).collect()
    }

    fn history(index: &Index, filter: HistoryFilter) -> Vec<RunId> {
        ids(&index.history(&filter).unwrap())
    }

    fn user_version(index: &Index) -> usize {
        schema_version(&index.conn).unwrap()
    }

    #[test]
    fn migrations_build_an_empty_database() {
        let (_dir, index) = open_temp();
        assert_eq!(user_version(&index), MIGRATIONS.len());
        let mode: String = index
            .conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let fk: bool = index
            .conn
            .pragma_query_value(None, "foreign_keys", |r| r.get(0))
            .unwrap();
        assert!(fk);
        assert!(index.history(&HistoryFilter::default()).unwrap().is_empty());
    }

    #[test]
    fn every_migration_starts_with_a_comment_giving_its_reason() {
        for sql in MIGRATIONS {
            let first = sql.lines().next().unwrap_or_default();
            assert!(first.starts_with("-- "), "{first:?}");
        }
    }

    #[test]
    fn reopening_an_up_to_date_database_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(INDEX_FILE);
        let mut index = Index::open(&path).unwrap();
        index.insert_run(&new_run(1, at(0))).unwrap();
        drop(index);
        let index = Index::open(&path).unwrap();
        assert_eq!(user_version(&index), MIGRATIONS.len());
        assert!(index.get(&id(1)).unwrap().is_some());
    }

    #[test]
    fn a_first_schema_database_is_migrated_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(INDEX_FILE);
        let mut conn = Connection::open(&path).unwrap();
        Migrations::new(vec![M::up(MIGRATIONS[0])])
            .to_latest(&mut conn)
            .unwrap();
        conn.execute(
            "INSERT INTO runs (id, argv, shell, command, cwd, tags, started_at, ended_at, status, \
             exit_code, total_lines, total_bytes, truncated, spill_path, spill_bytes, \
             spill_complete, pid, owner_pid) VALUES (?1, '[\"cargo\",\"test\"]', NULL, \
             'cargo test', '/src', '{\"session\":\"s1\",\"agent\":\"a\"}', ?2, ?3, 'exited', \
             101, 40, 1200, 0, '/data/spills/20260101T000000.000000Z-7-000000.log', 1200, 1, \
             77, 70)",
            params![id(1).as_str(), millis(at(0)), millis(at(5))],
        )
        .unwrap();
        // The least a first-schema row can hold: a running run whose owner nobody recorded.
        conn.execute(
            "INSERT INTO runs (id, started_at, status) VALUES (?1, ?2, 'running')",
            params![id(2).as_str(), millis(at(9))],
        )
        .unwrap();
        drop(conn);

        let mut index = Index::open(&path).unwrap();
        assert_eq!(user_version(&index), MIGRATIONS.len());
        let row = index.get(&id(1)).unwrap().unwrap();
        assert_eq!(
            row.argv,
            Some(vec!["cargo".to_string(), "test".to_string()])
        );
        assert_eq!(row.tags["session"], "s1");
        assert_eq!(row.status, RunStatus::Exited);
        assert_eq!(row.exit_code, Some(101));
        assert_eq!(row.ended_at, Some(at(5)));
        assert_eq!(row.spill_bytes, 1200);
        // 002's backfills: the tags are searchable, the spill file is known by name.
        let tagged = HistoryFilter {
            tags: vec![("agent".into(), "a".into())],
            status: Some(StatusFilter::Failed),
            ..HistoryFilter::default()
        };
        assert_eq!(history(&index, tagged), [id(1)]);
        assert!(
            index
                .names_spill("20260101T000000.000000Z-7-000000.log")
                .unwrap()
        );
        let bare = index.get(&id(2)).unwrap().unwrap();
        assert_eq!((bare.command.as_str(), bare.tags.len()), ("", 0));
        // An unknown owner is taken for gone, even when every process is alive.
        assert_eq!(
            index.recover_interrupted(at(10), None, |_| true).unwrap(),
            [id(2)]
        );
    }

    #[test]
    fn a_database_from_a_newer_spillway_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(INDEX_FILE);
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 6).unwrap();
        drop(conn);
        let before = std::fs::read(&path).unwrap();
        let error = Index::open(&path).unwrap_err();
        let IndexError::TooNew {
            found, supported, ..
        } = &error
        else {
            panic!("expected TooNew, got {error:?}");
        };
        assert_eq!((*found, *supported), (6, 5));
        let message = error.to_string();
        assert!(
            message.contains(
                "index.sqlite3 was written by a newer spillway (schema 6, this build knows 5); \
                 it was not touched: upgrade spillway, or move it away"
            ),
            "{message}"
        );
        // Refused, not touched (not even switched to WAL).
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn a_file_that_is_not_a_database_is_refused_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(INDEX_FILE);
        std::fs::write(&path, vec![b'x'; 4096]).unwrap();
        let error = Index::open(&path).unwrap_err();
        assert!(
            matches!(error, IndexError::NotADatabase { .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains("move it away"), "{error}");
        assert_eq!(std::fs::read(&path).unwrap(), vec![b'x'; 4096]);
    }

    #[test]
    fn another_programs_database_is_refused_untouched() {
        let dir = tempfile::tempdir().unwrap();
        for version in [0, 3] {
            let path = dir.path().join(format!("{version}.sqlite3"));
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch("CREATE TABLE notes (body TEXT); CREATE TABLE tags (name TEXT);")
                .unwrap();
            conn.pragma_update(None, "user_version", version).unwrap();
            drop(conn);
            let before = std::fs::read(&path).unwrap();
            let error = Index::open(&path).unwrap_err();
            let IndexError::Foreign { tables, .. } = &error else {
                panic!("expected Foreign, got {error:?}");
            };
            assert_eq!(tables, "notes, tags");
            assert_eq!(std::fs::read(&path).unwrap(), before, "version {version}");
        }
    }

    #[test]
    fn the_database_and_its_wal_and_shm_are_private() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        let mode = |path: &Path| std::fs::metadata(path).unwrap().mode() & 0o777;
        let files = |path: &Path| {
            ["", "-wal", "-shm"].map(|suffix| {
                let mut name = path.as_os_str().to_owned();
                name.push(suffix);
                PathBuf::from(name)
            })
        };
        let fresh = dir.path().join("fresh.sqlite3");
        let mut index = Index::open(&fresh).unwrap();
        index.insert_run(&new_run(1, at(0))).unwrap();
        for file in files(&fresh) {
            assert_eq!(mode(&file), 0o600, "{}", file.display());
        }
        // An index an older spillway left readable by others.
        let old = dir.path().join("old.sqlite3");
        drop(Index::open(&old).unwrap());
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
        let mut index = Index::open(&old).unwrap();
        index.insert_run(&new_run(1, at(0))).unwrap();
        for file in files(&old) {
            assert_eq!(mode(&file), 0o600, "{}", file.display());
        }
    }

    #[test]
    fn a_kept_log_is_read_by_the_next_connection_and_checkpointed_by_one_that_does_not_keep_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(INDEX_FILE);
        let wal = dir.path().join(format!("{INDEX_FILE}-wal"));
        let wal_len = || std::fs::metadata(&wal).map(|m| m.len()).ok();
        for n in 1..=3 {
            let mut index = Index::open(&path).unwrap();
            index.keep_log_on_close().unwrap();
            index.insert_run(&new_run(n, at(0))).unwrap();
            drop(index);
            assert!(wal_len().unwrap() > 0, "run {n}: the log was not kept");
        }
        let read_only = Index::open_read_only(&path).unwrap();
        for n in 1..=3 {
            assert!(read_only.get(&id(n)).unwrap().is_some(), "run {n}");
        }
        drop(read_only);
        drop(Index::open(&path).unwrap());
        assert_eq!(
            wal_len(),
            None,
            "the last connection to close checkpoints the log"
        );
        let index = Index::open(&path).unwrap();
        for n in 1..=3 {
            assert!(index.get(&id(n)).unwrap().is_some(), "run {n}");
        }
    }

    #[test]
    fn a_kept_log_stays_short_however_many_connections_keep_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(INDEX_FILE);
        let wal = dir.path().join(format!("{INDEX_FILE}-wal"));
        // Each insert writes a page or more: some 1,700 in all.
        let runs = 400;
        let mut longest = 0;
        for n in 1..=runs {
            let mut index = Index::open(&path).unwrap();
            index.keep_log_on_close().unwrap();
            index.insert_run(&new_run(n, at(0))).unwrap();
            drop(index);
            longest = longest.max(std::fs::metadata(&wal).map_or(0, |m| m.len()));
        }
        // The last transaction's pages (a page's frame: a 24-byte header and 4 KiB) may come
        // on top of the limit.
        let most = open::KEPT_LOG_MOST + 16 * (24 + 4096);
        assert!(
            longest <= most,
            "the kept log reached {longest} bytes, more than {most}"
        );
        let index = Index::open_read_only(&path).unwrap();
        for n in 1..=runs {
            assert!(index.get(&id(n)).unwrap().is_some(), "run {n}");
        }
    }

    #[test]
    fn a_symlinked_index_is_refused_and_its_target_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, b"").unwrap();
        let path = dir.path().join(INDEX_FILE);
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let error = Index::open(&path).unwrap_err();
        assert!(matches!(error, IndexError::Symlink { .. }), "{error:?}");
        assert_eq!(std::fs::read(&target).unwrap(), b"");
    }

    #[test]
    fn insert_finish_get_round_trip() {
        let (_dir, mut index) = open_temp();
        let start = Utc.timestamp_millis_opt(1_767_225_600_123).unwrap();
        let run = NewRun {
            argv: Some(vec![
                "grep".into(),
                "-r".into(),
                "two words".into(),
                "it's".into(),
            ]),
            tags: [
                ("session".to_string(), "s1".to_string()),
                ("k".into(), "v w".into()),
            ]
            .into(),
            spill_path: Some("/data/spills/x.log".into()),
            owner_pid: 99,
            ..new_run(1, start)
        };
        assert!(index.insert_run(&run).unwrap());
        let running = index.get(&id(1)).unwrap().unwrap();
        assert_eq!(
            running,
            RunRow {
                id: id(1),
                argv: run.argv.clone(),
                shell: None,
                command: r#"grep -r 'two words' "it's""#.into(),
                cwd: "/work".into(),
                tags: run.tags.clone(),
                started_at: start,
                ended_at: None,
                status: RunStatus::Running,
                exit_code: None,
                signal: None,
                total_lines: None,
                total_bytes: None,
                truncated: None,
                spill_path: Some("/data/spills/x.log".into()),
                spill_bytes: 0,
                spill_complete: false,
                spill_missing: false,
                pid: Some(4242),
                spill_capped_at_line: None,
                output_tokens: None,
                preview_tokens: None,
                output_tokens_estimated: None,
                folded_tokens: None,
            }
        );
        let finish = RunEnd {
            ended_at: start + chrono::TimeDelta::milliseconds(1500),
            status: RunStatus::Signaled,
            exit_code: None,
            signal: Some(9),
            total_lines: 10,
            total_bytes: 5_000_000_000,
            truncated: true,
            spill_bytes: 5_000_000_000,
            spill_complete: false,
            spill_capped_at_line: Some(7),
            tokens: Some(RunTokens {
                output: 1_200_000_000,
                preview: 9_000,
                output_estimated: true,
                folded: 4_000,
            }),
        };
        index.finish_run(&id(1), &finish).unwrap();
        let done = index.get(&id(1)).unwrap().unwrap();
        assert_eq!(done.ended_at, Some(finish.ended_at));
        assert_eq!(done.status, RunStatus::Signaled);
        assert_eq!((done.exit_code, done.signal), (None, Some(9)));
        assert_eq!(done.total_lines, Some(10));
        assert_eq!(done.total_bytes, Some(5_000_000_000));
        assert_eq!(done.truncated, Some(true));
        assert_eq!(done.spill_bytes, 5_000_000_000);
        assert!(!done.spill_complete);
        assert_eq!(done.spill_capped_at_line, Some(7));
        assert_eq!(
            (
                done.output_tokens,
                done.preview_tokens,
                done.output_tokens_estimated
            ),
            (Some(1_200_000_000), Some(9_000), Some(true))
        );
        assert_eq!(done.folded_tokens, Some(4_000));
        assert_eq!(done.tags, run.tags);

        let shell = NewRun {
            argv: None,
            shell: Some("ls | wc -l".into()),
            ..new_run(2, start)
        };
        index.insert_run(&shell).unwrap();
        let row = index.get(&id(2)).unwrap().unwrap();
        assert_eq!((row.argv, row.command.as_str()), (None, "ls | wc -l"));
        assert_eq!(index.get(&id(3)).unwrap(), None);
    }

    #[test]
    fn a_taken_id_is_reported_not_overwritten() {
        let (_dir, mut index) = open_temp();
        assert!(index.insert_run(&new_run(1, at(0))).unwrap());
        let again = NewRun {
            cwd: "/elsewhere".into(),
            tags: [("a".to_string(), "b".to_string())].into(),
            ..new_run(1, at(9))
        };
        assert!(!index.insert_run(&again).unwrap());
        let row = index.get(&id(1)).unwrap().unwrap();
        assert_eq!((row.cwd.as_str(), row.started_at), ("/work", at(0)));
        assert!(row.tags.is_empty());
    }

    #[test]
    fn finishing_an_unknown_run_is_an_error() {
        let (_dir, mut index) = open_temp();
        let error = index
            .finish_run(&id(7), &end(RunStatus::Exited, Some(0), 0))
            .unwrap_err();
        assert!(matches!(
            error,
            IndexError::Sql(rusqlite::Error::QueryReturnedNoRows)
        ));
    }

    #[test]
    fn records_serialise_times_as_rfc3339() {
        let (_dir, mut index) = open_temp();
        index.insert_run(&new_run(1, at(0))).unwrap();
        let row = RunRecord::from(index.get(&id(1)).unwrap().unwrap());
        let json = serde_json::to_value(&row).unwrap();
        assert_eq!(json["started_at"], "2026-01-01T00:00:00.000Z");
        assert_eq!(json["ended_at"], serde_json::Value::Null);
        assert_eq!(json["status"], "running");
        let back: RunRecord = serde_json::from_value(json).unwrap();
        assert_eq!(back, row);
    }

    /// Runs 1..=6, a minute apart, newest last: 1 exited 0, 2 exited 1, 3 signaled, 4 running,
    /// 5 exited without a code, 6 timed out.
    fn varied(index: &mut Index) {
        let outcomes = [
            (RunStatus::Exited, Some(0)),
            (RunStatus::Exited, Some(1)),
            (RunStatus::Signaled, None),
            (RunStatus::Running, None),
            (RunStatus::Exited, None),
            (RunStatus::TimedOut, None),
        ];
        for (n, (status, code)) in (1..).zip(outcomes) {
            let tags = [
                ("session".to_string(), format!("s{}", n % 2)),
                ("agent".to_string(), "claude".to_string()),
            ];
            let run = NewRun {
                argv: Some(vec![
                    if n % 3 == 0 { "cargo" } else { "npm" }.into(),
                    "test".into(),
                ]),
                tags: tags.into(),
                ..new_run(n, at(i64::from(n) * 60))
            };
            index.insert_run(&run).unwrap();
            if status != RunStatus::Running {
                index.finish_run(&id(n), &end(status, code, 10)).unwrap();
            }
        }
    }

    #[test]
    fn history_is_newest_first_and_limited() {
        let (_dir, mut index) = open_temp();
        for n in 0..60 {
            index.insert_run(&new_run(n, at(i64::from(n)))).unwrap();
        }
        // Same start time: ties go by id, descending.
        index.insert_run(&new_run(100, at(59))).unwrap();
        let all = history(&index, HistoryFilter::default());
        assert_eq!(all.len(), 50, "0 means the default limit");
        assert_eq!(all[..3], [id(100), id(59), id(58)]);
        let three = HistoryFilter {
            limit: 3,
            ..HistoryFilter::default()
        };
        assert_eq!(history(&index, three), [id(100), id(59), id(58)]);
        let many = HistoryFilter {
            limit: 1000,
            ..HistoryFilter::default()
        };
        assert_eq!(history(&index, many).len(), 61);
    }

    #[test]
    fn history_filters_by_time() {
        let (_dir, mut index) = open_temp();
        varied(&mut index);
        let since = HistoryFilter {
            since: Some(at(4 * 60)),
            ..HistoryFilter::default()
        };
        assert_eq!(history(&index, since), [id(6), id(5), id(4)]);
        let until = HistoryFilter {
            until: Some(at(2 * 60)),
            ..HistoryFilter::default()
        };
        assert_eq!(history(&index, until), [id(2), id(1)]);
        let between = HistoryFilter {
            since: Some(at(2 * 60 + 1)),
            until: Some(at(5 * 60 - 1)),
            ..HistoryFilter::default()
        };
        assert_eq!(history(&index, between), [id(4), id(3)]);
    }

    #[test]
    fn history_filters_by_status() {
        let (_dir, mut index) = open_temp();
        varied(&mut index);
        let status = |s| HistoryFilter {
            status: Some(s),
            ..HistoryFilter::default()
        };
        assert_eq!(
            history(&index, status(StatusFilter::Failed)),
            [id(6), id(3), id(2)]
        );
        assert_eq!(
            history(&index, status(StatusFilter::Is(RunStatus::Exited))),
            [id(5), id(2), id(1)]
        );
        assert_eq!(
            history(&index, status(StatusFilter::Is(RunStatus::Running))),
            [id(4)]
        );
        assert!(history(&index, status(StatusFilter::Is(RunStatus::Killed))).is_empty());
        let failed_since = HistoryFilter {
            since: Some(at(3 * 60)),
            ..status(StatusFilter::Failed)
        };
        assert_eq!(history(&index, failed_since), [id(6), id(3)]);
    }

    #[test]
    fn history_filters_by_command_and_tags() {
        let (_dir, mut index) = open_temp();
        varied(&mut index);
        let command = |text: &str| HistoryFilter {
            command_contains: Some(text.into()),
            ..HistoryFilter::default()
        };
        assert_eq!(history(&index, command("cargo")), [id(6), id(3)]);
        assert_eq!(history(&index, command("npm t")).len(), 4);
        assert!(history(&index, command("NPM")).is_empty(), "case-sensitive");
        assert!(history(&index, command("%")).is_empty(), "no wildcards");

        let tags = |pairs: &[(&str, &str)]| HistoryFilter {
            tags: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..HistoryFilter::default()
        };
        assert_eq!(
            history(&index, tags(&[("session", "s1")])),
            [id(5), id(3), id(1)]
        );
        assert_eq!(
            history(&index, tags(&[("agent", "claude"), ("session", "s0")])),
            [id(6), id(4), id(2)]
        );
        assert!(history(&index, tags(&[("session", "s2")])).is_empty());
        assert!(history(&index, tags(&[("agent", "s1")])).is_empty());
        let everything = HistoryFilter {
            since: Some(at(2 * 60)),
            until: Some(at(6 * 60)),
            status: Some(StatusFilter::Failed),
            command_contains: Some("test".into()),
            limit: 1,
            ..tags(&[("session", "s0"), ("agent", "claude")])
        };
        assert_eq!(history(&index, everything), [id(6)]);
    }

    /// The plans SQLite picks for history, one line per step.
    fn plan(index: &Index, filter: &HistoryFilter) -> String {
        let (sql, values) = history_query(filter);
        let mut statement = index
            .conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .unwrap();
        let details = statement
            .query_map(params_from_iter(values), |row| row.get::<_, String>(3))
            .unwrap();
        details.map(Result::unwrap).collect::<Vec<_>>().join("; ")
    }

    #[test]
    fn history_walks_indexes_and_never_sorts() {
        let (_dir, mut index) = open_temp();
        varied(&mut index);
        let filters = [
            HistoryFilter::default(),
            HistoryFilter {
                since: Some(at(0)),
                ..HistoryFilter::default()
            },
            HistoryFilter {
                since: Some(at(0)),
                status: Some(StatusFilter::Failed),
                ..HistoryFilter::default()
            },
            HistoryFilter {
                status: Some(StatusFilter::Is(RunStatus::Killed)),
                ..HistoryFilter::default()
            },
            HistoryFilter {
                command_contains: Some("x".into()),
                ..HistoryFilter::default()
            },
            HistoryFilter {
                tags: vec![("a".into(), "b".into()), ("c".into(), "d".into())],
                since: Some(at(0)),
                ..HistoryFilter::default()
            },
        ];
        for filter in &filters {
            let plan = plan(&index, filter);
            assert!(!plan.contains("TEMP B-TREE"), "sorts: {plan}");
            assert!(plan.contains("USING"), "scans the table: {plan}");
        }
        let failed = plan(&index, &filters[2]);
        assert!(failed.contains("runs_failed"), "{failed}");
        let tagged = plan(&index, &filters[5]);
        assert!(tagged.starts_with("SEARCH t USING"), "{tagged}");
    }

    #[test]
    fn recovery_marks_every_daemon_run_and_the_runs_of_dead_writers() {
        let (dir, mut index) = open_temp();
        let spill = dir.path().join("live.log");
        std::fs::write(&spill, b"partial output\n").unwrap();
        let runs = [
            // A daemon's run (it has a command pid): its daemon is dead, its spill is kept
            // and measured.
            NewRun {
                owner_pid: 10,
                spill_path: Some(spill.to_string_lossy().into_owned()),
                ..new_run(1, at(0))
            },
            // A daemon's run, spill file gone; its owner's pid now belongs to a live process.
            NewRun {
                owner_pid: 20,
                spill_path: Some(dir.path().join("gone.log").to_string_lossy().into_owned()),
                ..new_run(2, at(1))
            },
            // A `spillway truncate` (no command pid) whose process, 20, is alive.
            NewRun {
                owner_pid: 20,
                pid: None,
                ..new_run(3, at(2))
            },
            // Finished long ago: not running, not touched.
            NewRun {
                owner_pid: 10,
                ..new_run(4, at(3))
            },
            // A `spillway truncate` whose process, 10, is gone.
            NewRun {
                owner_pid: 10,
                pid: None,
                ..new_run(5, at(4))
            },
        ];
        for run in &runs {
            index.insert_run(run).unwrap();
        }
        index
            .finish_run(&id(4), &end(RunStatus::Exited, Some(0), 0))
            .unwrap();
        let now = at(1000);
        let last_alive = Some(at(600));
        let recovered = index
            .recover_interrupted(now, last_alive, |pid| pid == 20)
            .unwrap();
        assert_eq!(recovered, [id(1), id(2), id(5)]);

        let one = index.get(&id(1)).unwrap().unwrap();
        assert_eq!(one.status, RunStatus::Interrupted);
        // Its spill was written after `now` (this test's clock is in the past): never later
        // than now.
        assert_eq!(one.ended_at, Some(now));
        // Without a spill, it ended when its daemon was last known alive.
        let five = index.get(&id(5)).unwrap().unwrap();
        assert_eq!(five.ended_at, last_alive);
        assert_eq!(one.spill_bytes, 15);
        assert!(!one.spill_missing && !one.spill_complete);
        assert!(spill.exists(), "the spill is kept");
        let two = index.get(&id(2)).unwrap().unwrap();
        assert_eq!(two.status, RunStatus::Interrupted);
        assert!(two.spill_missing);
        assert_eq!(
            index.get(&id(3)).unwrap().unwrap().status,
            RunStatus::Running
        );
        assert_eq!(
            index.get(&id(4)).unwrap().unwrap().status,
            RunStatus::Exited
        );
        // Interrupted runs are failures.
        let failed = HistoryFilter {
            status: Some(StatusFilter::Failed),
            ..HistoryFilter::default()
        };
        assert_eq!(history(&index, failed), [id(5), id(2), id(1)]);
        // Once its writer is gone, the truncate's run goes too; nothing is left.
        assert!(index.recover_interrupted(now, None, |_| false).unwrap() == [id(3)]);
        assert_eq!(
            index.get(&id(3)).unwrap().unwrap().ended_at,
            Some(at(2)),
            "known alive only at its start"
        );
    }

    #[test]
    fn a_run_left_unfinished_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(INDEX_FILE);
        let mut index = Index::open(&path).unwrap();
        index.insert_run(&new_run(1, at(0))).unwrap();
        drop(index);
        let mut index = Index::open(&path).unwrap();
        assert_eq!(
            index.get(&id(1)).unwrap().unwrap().status,
            RunStatus::Running
        );
        assert_eq!(
            index.recover_interrupted(at(5), None, |_| false).unwrap(),
            [id(1)]
        );
    }

    const CRASH_DB: &str = "SPILLWAY_TEST_CRASH_DB";

    /// Not a test by itself: the child process of the next test. It records a run, then dies by
    /// SIGKILL in the middle of a big transaction whose pages have already spilled to the WAL.
    #[test]
    fn killed_mid_transaction_child() {
        let Some(path) = std::env::var_os(CRASH_DB) else {
            return;
        };
        let mut index = Index::open(Path::new(&path)).unwrap();
        index.insert_run(&new_run(1, at(0))).unwrap();
        index.conn.pragma_update(None, "cache_size", 10).unwrap();
        let tx = index.conn.transaction().unwrap();
        for n in 2..20_000 {
            insert_row(&tx, &new_run(n, at(i64::from(n)))).unwrap();
        }
        nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL).unwrap();
    }

    #[test]
    fn kill_9_mid_transaction_leaves_a_database_that_opens_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(INDEX_FILE);
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "storage::index::tests::killed_mid_transaction_child",
            ])
            .args(["--test-threads=1", "--quiet"])
            .env(CRASH_DB, &path)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert_eq!(status.signal(), Some(9), "the child was to die by SIGKILL");
        let wal = dir.path().join(format!("{INDEX_FILE}-wal"));
        assert!(
            std::fs::metadata(wal).unwrap().len() > 0,
            "the WAL holds the crash"
        );

        let mut index = Index::open(&path).unwrap();
        let check: String = index
            .conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
        let all = HistoryFilter {
            limit: 100,
            ..HistoryFilter::default()
        };
        assert_eq!(
            history(&index, all),
            [id(1)],
            "committed kept, the rest gone"
        );
        assert_eq!(
            index.recover_interrupted(at(9), None, |_| false).unwrap(),
            [id(1)]
        );
    }

    #[test]
    fn stats_count_by_status_and_span() {
        let (_dir, mut index) = open_temp();
        let empty = index.stats().unwrap();
        assert!(empty.runs_by_status.is_empty());
        assert_eq!(
            (empty.oldest, empty.newest, empty.spill_bytes),
            (None, None, 0)
        );
        varied(&mut index);
        index.mark_missing(&[id(1)]).unwrap();
        let stats = index.stats().unwrap();
        let expected: BTreeMap<String, u64> = [
            ("exited", 3),
            ("running", 1),
            ("signaled", 1),
            ("timed_out", 1),
        ]
        .into_iter()
        .map(|(s, n)| (s.to_string(), n))
        .collect();
        assert_eq!(stats.runs_by_status, expected);
        assert_eq!(
            stats.spill_bytes, 40,
            "4 finished spills of 10, one missing"
        );
        assert_eq!((stats.oldest, stats.newest), (Some(at(60)), Some(at(360))));
        assert!(stats.database_bytes > 0);
        let json = serde_json::to_value(&stats).unwrap();
        assert_eq!(json["oldest"], "2026-01-01T00:01:00.000Z");
    }

    /// Finishes run `n` with these token counts.
    fn finish_with_tokens(index: &mut Index, n: u32, output: u64, preview: u64, estimated: bool) {
        let end = RunEnd {
            tokens: Some(RunTokens {
                output,
                preview,
                output_estimated: estimated,
                folded: 0,
            }),
            ..end(RunStatus::Exited, Some(0), 10)
        };
        index.finish_run(&id(n), &end).unwrap();
    }

    fn totals(runs: u64, output: u64, preview: u64, estimated: u64) -> TokenTotals {
        TokenTotals {
            runs,
            output_tokens: output,
            preview_tokens: preview,
            saved_tokens: output as i64 - preview as i64,
            estimated_runs: estimated,
            // Every run here recorded its split, all of it cut.
            saved_by: (runs > 0).then_some(SavedBy {
                runs,
                folding: 0,
                cutting: output as i64 - preview as i64,
            }),
        }
    }

    #[test]
    fn token_stats_sum_by_command_and_day() {
        let (_dir, mut index) = open_temp();
        let day = |d: i64, secs: i64| at(86_400 * d + secs);
        let argv = |words: &[&str]| Some(words.iter().map(|w| w.to_string()).collect());
        let runs = [
            (1, day(0, 10), argv(&["cargo", "test"]), None),
            (2, day(1, 10), argv(&["cargo", "test", "-q"]), None),
            (3, day(1, 20), argv(&["git", "log"]), None),
            (4, day(2, 10), None, Some("cd /src && pytest -q")),
            (5, day(2, 86_399), argv(&["make", "all"]), None),
            (6, day(2, 30), argv(&["cargo", "test"]), None),
            (7, day(2, 40), argv(&["cargo", "test"]), None),
        ];
        for (n, started, argv, shell) in runs {
            let run = NewRun {
                argv,
                shell: shell.map(String::from),
                ..new_run(n, started)
            };
            index.insert_run(&run).unwrap();
        }
        finish_with_tokens(&mut index, 1, 1_000, 200, false);
        finish_with_tokens(&mut index, 2, 5_000, 300, true);
        finish_with_tokens(&mut index, 3, 50, 50, false);
        finish_with_tokens(&mut index, 4, 20_000, 1_000, false);
        // A small output whose preview added a note: it cost more than it saved.
        finish_with_tokens(&mut index, 5, 10, 25, false);
        // 6 is still running; 7 ended without token counts.
        index
            .finish_run(&id(7), &end(RunStatus::Exited, Some(0), 10))
            .unwrap();

        let stats = index.token_stats(10, at(0)).unwrap();
        assert_eq!(stats.totals, totals(5, 26_060, 1_575, 1));
        assert_eq!(stats.totals.saved_tokens, 24_485);
        assert_eq!(stats.runs_without_tokens, 2);
        // The saved total is the sum over runs of output - preview.
        let rows = index
            .history(&HistoryFilter {
                limit: 100,
                ..HistoryFilter::default()
            })
            .unwrap();
        let per_run: i64 = rows
            .iter()
            .filter_map(|r| Some(r.output_tokens? as i64 - r.preview_tokens? as i64))
            .sum();
        assert_eq!(per_run, stats.totals.saved_tokens);

        let by_command: Vec<(&str, TokenTotals)> = stats
            .by_command
            .iter()
            .map(|c| (c.command.as_str(), c.totals))
            .collect();
        assert_eq!(
            by_command,
            [
                ("pytest", totals(1, 20_000, 1_000, 0)),
                ("cargo test", totals(2, 6_000, 500, 1)),
                ("git log", totals(1, 50, 50, 0)),
                ("make", totals(1, 10, 25, 0)),
            ]
        );
        let by_day: Vec<(&str, TokenTotals)> = stats
            .by_day
            .iter()
            .map(|d| (d.day.as_str(), d.totals))
            .collect();
        assert_eq!(
            by_day,
            [
                ("2026-01-03", totals(2, 20_010, 1_025, 0)),
                ("2026-01-02", totals(2, 5_050, 350, 1)),
                ("2026-01-01", totals(1, 1_000, 200, 0)),
            ]
        );

        // The top commands only, and the days from the one asked for.
        let some = index.token_stats(2, day(1, 0)).unwrap();
        assert_eq!(some.totals, stats.totals, "the totals cover every run");
        let names: Vec<&str> = some.by_command.iter().map(|c| c.command.as_str()).collect();
        assert_eq!(names, ["pytest", "cargo test"]);
        let days: Vec<&str> = some.by_day.iter().map(|d| d.day.as_str()).collect();
        assert_eq!(days, ["2026-01-03", "2026-01-02"]);

        let json = serde_json::to_value(&stats).unwrap();
        assert_eq!(json["saved_tokens"], 24_485);
        assert_eq!(json["by_command"][1]["command"], "cargo test");
        assert_eq!(json["by_command"][1]["estimated_runs"], 1);
        assert_eq!(json["by_day"][0]["day"], "2026-01-03");
        let back: TokenStats = serde_json::from_value(json).unwrap();
        assert_eq!(back, stats);
    }

    #[test]
    fn token_stats_keep_the_top_commands_of_many_and_read_only_indexes() {
        let (_dir, mut index) = open_temp();
        for n in 1..=300 {
            let run = NewRun {
                argv: Some(vec![format!("tool{n}")]),
                ..new_run(n, at(i64::from(n)))
            };
            index.insert_run(&run).unwrap();
            finish_with_tokens(&mut index, n, u64::from(n) * 10, 5, false);
        }
        let stats = index.token_stats(3, at(0)).unwrap();
        let names: Vec<&str> = stats
            .by_command
            .iter()
            .map(|c| c.command.as_str())
            .collect();
        assert_eq!(names, ["tool300", "tool299", "tool298"]);
        assert_eq!(stats.totals, totals(300, 10 * 300 * 301 / 2, 1500, 0));

        for (sql, index_name) in [
            (tokens_by_command_sql(), "runs_tokens_by_command"),
            (tokens_by_day_sql(), "runs_tokens_by_start"),
        ] {
            let mut statement = index
                .conn
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .unwrap();
            let zeros = vec![0; statement.parameter_count()];
            let plan: Vec<String> = statement
                .query_map(params_from_iter(zeros), |row| row.get(3))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            let plan = plan.join("; ");
            assert!(
                plan.contains(&format!("USING COVERING INDEX {index_name}")),
                "{plan}"
            );
        }
    }

    #[test]
    fn tokens_counted_after_the_end_are_recorded() {
        let (_dir, mut index) = open_temp();
        index.insert_run(&new_run(1, at(0))).unwrap();
        index
            .finish_run(&id(1), &end(RunStatus::Exited, None, 10))
            .unwrap();
        assert_eq!(index.token_stats(10, at(0)).unwrap().runs_without_tokens, 1);
        let tokens = RunTokens {
            output: 70,
            preview: 20,
            output_estimated: false,
            folded: 0,
        };
        index.record_tokens(&id(1), &tokens).unwrap();
        let row = index.get(&id(1)).unwrap().unwrap();
        assert_eq!(
            (
                row.output_tokens,
                row.preview_tokens,
                row.output_tokens_estimated
            ),
            (Some(70), Some(20), Some(false))
        );
        assert_eq!(
            index.token_stats(10, at(0)).unwrap().totals,
            totals(1, 70, 20, 0)
        );
        let error = index.record_tokens(&id(2), &tokens).unwrap_err();
        assert!(matches!(
            error,
            IndexError::Sql(rusqlite::Error::QueryReturnedNoRows)
        ));
    }

    #[test]
    fn an_empty_index_has_no_token_figures() {
        let (_dir, index) = open_temp();
        assert_eq!(index.token_stats(10, at(0)).unwrap(), TokenStats::default());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

        /// Whatever the runs, the saved total is the sum over runs of output - preview, and
        /// the by-command and by-day tables add up to the totals.
        #[test]
        fn token_sums_add_up(
            runs in proptest::collection::vec(
                (0usize..5, 0i64..4 * 86_400, 0u64..1_000_000, 0u64..50_000, proptest::bool::ANY),
                0..40,
            )
        ) {
            let (_dir, mut index) = open_temp();
            let programs = ["cargo", "git", "pytest", "make", "npm"];
            let mut expected: i64 = 0;
            for (n, &(program, secs, output, preview, estimated)) in (1..).zip(&runs) {
                let run = NewRun {
                    argv: Some(vec![programs[program].into(), "test".into()]),
                    ..new_run(n, at(secs))
                };
                index.insert_run(&run).unwrap();
                finish_with_tokens(&mut index, n, output, preview, estimated);
                expected += output as i64 - preview as i64;
            }
            let stats = index.token_stats(TOKEN_STATS_COMMANDS, at(0)).unwrap();
            proptest::prop_assert_eq!(stats.totals.saved_tokens, expected);
            proptest::prop_assert_eq!(stats.totals.runs, runs.len() as u64);
            for parts in [
                stats.by_command.iter().map(|c| c.totals).collect::<Vec<_>>(),
                stats.by_day.iter().map(|d| d.totals).collect::<Vec<_>>(),
            ] {
                let mut sum = TokenTotals::default();
                parts.iter().for_each(|t| sum.add(t));
                proptest::prop_assert_eq!(sum, stats.totals);
            }
        }
    }

    #[test]
    fn a_schema_3_database_gains_token_columns_and_keeps_its_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(INDEX_FILE);
        let mut conn = Connection::open(&path).unwrap();
        Migrations::new(MIGRATIONS[..3].iter().map(|sql| M::up(sql)).collect())
            .to_latest(&mut conn)
            .unwrap();
        conn.execute(
            "INSERT INTO runs (id, argv, command, cwd, tags, started_at, ended_at, status, \
             exit_code, total_lines, total_bytes, truncated, spill_path, spill_name, \
             spill_bytes, spill_complete, pid, owner_pid, spill_capped_at_line) VALUES (?1, \
             '[\"cargo\",\"test\"]', 'cargo test', '/src', '{}', ?2, ?3, 'exited', 0, 40, \
             1200, 1, '/data/spills/a.log', 'a.log', 1000, 0, 77, 70, 31)",
            params![id(1).as_str(), millis(at(0)), millis(at(5))],
        )
        .unwrap();
        drop(conn);

        let mut index = Index::open(&path).unwrap();
        assert_eq!(user_version(&index), MIGRATIONS.len());
        let old = index.get(&id(1)).unwrap().unwrap();
        assert_eq!(old.command, "cargo test");
        assert_eq!((old.total_lines, old.total_bytes), (Some(40), Some(1200)));
        assert_eq!(old.spill_capped_at_line, Some(31));
        assert_eq!(
            (
                old.output_tokens,
                old.preview_tokens,
                old.output_tokens_estimated
            ),
            (None, None, None)
        );
        let json = serde_json::to_value(RunRecord::from(old)).unwrap();
        assert!(json.get("output_tokens").is_none(), "{json}");
        let key: Option<String> = index
            .conn
            .query_row(
                "SELECT command_key FROM runs WHERE id = ?1",
                [id(1).as_str()],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(key, None);

        // The old row is counted apart; a run recorded now is summed.
        index.insert_run(&new_run(2, at(60))).unwrap();
        finish_with_tokens(&mut index, 2, 300, 100, false);
        let stats = index.token_stats(10, at(0)).unwrap();
        assert_eq!(stats.runs_without_tokens, 1);
        assert_eq!(stats.totals, totals(1, 300, 100, 0));
        assert_eq!(stats.by_command[0].command, "echo");
    }

    #[test]
    fn the_saving_is_split_over_the_runs_that_recorded_it() {
        let (_dir, mut index) = open_temp();
        let argv = |words: &[&str]| Some(words.iter().map(|w| w.to_string()).collect());
        for (n, words) in [
            (1, ["cargo", "test"]),
            (2, ["cargo", "test"]),
            (3, ["git", "log"]),
        ] {
            let run = NewRun {
                argv: argv(&words),
                ..new_run(n, at(i64::from(n)))
            };
            index.insert_run(&run).unwrap();
        }
        let finish = |index: &mut Index, n, output, preview, folded| {
            let end = RunEnd {
                tokens: Some(RunTokens {
                    output,
                    preview,
                    output_estimated: false,
                    folded,
                }),
                ..end(RunStatus::Exited, Some(0), 10)
            };
            index.finish_run(&id(n), &end).unwrap();
        };
        finish(&mut index, 1, 4_000, 300, 3_700);
        finish(&mut index, 2, 90_000, 2_000, 1_500);
        finish(&mut index, 3, 800, 800, 0);
        // Run 3 as a run recorded before the split: its counts, no folding figure.
        index
            .conn
            .execute(
                "UPDATE runs SET folded_tokens = NULL WHERE id = ?1",
                [id(3).as_str()],
            )
            .unwrap();
        let stats = index.token_stats(10, at(0)).unwrap();
        assert_eq!(stats.totals.runs, 3);
        assert_eq!(stats.totals.saved_tokens, 3_700 + 88_000);
        let split = SavedBy {
            runs: 2,
            folding: 5_200,
            cutting: 86_500,
        };
        assert_eq!(stats.totals.saved_by, Some(split));
        assert_eq!(stats.by_command[0].command, "cargo test");
        assert_eq!(stats.by_command[0].totals.saved_by, Some(split));
        assert_eq!(stats.by_command[1].command, "git log");
        assert_eq!(stats.by_command[1].totals.saved_by, None, "unknown, not 0");
        assert_eq!(stats.by_day[0].totals.saved_by, Some(split));
        let json = serde_json::to_value(&stats).unwrap();
        assert_eq!(
            json["saved_by"],
            serde_json::json!({"runs": 2, "folding": 5_200, "cutting": 86_500})
        );
        assert!(json["by_command"][1].get("saved_by").is_none(), "{json}");
    }

    #[test]
    fn a_schema_4_database_gains_the_folded_column_and_its_runs_stay_unsplit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(INDEX_FILE);
        let mut conn = Connection::open(&path).unwrap();
        Migrations::new(MIGRATIONS[..4].iter().map(|sql| M::up(sql)).collect())
            .to_latest(&mut conn)
            .unwrap();
        conn.execute(
            "INSERT INTO runs (id, argv, command, cwd, tags, started_at, ended_at, status, \
             exit_code, total_lines, total_bytes, truncated, spill_path, spill_name, \
             spill_bytes, spill_complete, pid, owner_pid, output_tokens, preview_tokens, \
             output_tokens_estimated, command_key) VALUES (?1, '[\"cargo\",\"test\"]', \
             'cargo test', '/src', '{}', ?2, ?3, 'exited', 0, 40, 1200, 1, \
             '/data/spills/a.log', 'a.log', 1200, 1, 77, 70, 900, 100, 0, 'cargo test')",
            params![id(1).as_str(), millis(at(0)), millis(at(5))],
        )
        .unwrap();
        drop(conn);

        let mut index = Index::open(&path).unwrap();
        assert_eq!(user_version(&index), 5);
        let old = index.get(&id(1)).unwrap().unwrap();
        assert_eq!(
            (old.output_tokens, old.preview_tokens),
            (Some(900), Some(100))
        );
        assert_eq!(old.folded_tokens, None);
        index.insert_run(&new_run(2, at(60))).unwrap();
        finish_with_tokens(&mut index, 2, 300, 100, false);
        let stats = index.token_stats(10, at(0)).unwrap();
        assert_eq!(stats.totals.runs, 2);
        assert_eq!(stats.totals.saved_tokens, 1_000);
        assert_eq!(
            stats.totals.saved_by,
            Some(SavedBy {
                runs: 1,
                folding: 0,
                cutting: 200
            }),
            "the old run's saving is in the total, not in the split"
        );
        let cargo = stats.by_command.iter().find(|c| c.command == "cargo test");
        assert_eq!(cargo.unwrap().totals.saved_by, None);
    }

    #[test]
    fn the_index_can_move_between_threads() {
        fn is_send<T: Send>() {}
        is_send::<Index>();
    }
}
