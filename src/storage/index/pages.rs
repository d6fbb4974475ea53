//! The purge's view of the index: runs paged in start order with their spills, and the
//! writes it makes (deleting runs, marking spills missing).

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use rusqlite::{Row, params};

use crate::protocol::RunId;

use super::records::{bad_column, int, millis, read_id, read_time, unsigned};
use super::{Index, IndexError, running_runs};

/// A finished run as the purge sees it.
#[derive(Debug, Clone)]
pub(crate) struct SpillRecord {
    pub id: RunId,
    pub started_at: DateTime<Utc>,
    pub spill_path: Option<String>,
    /// What the run adds to the quota: its recorded spill size, or 0 when the spill is missing.
    pub counted_bytes: u64,
}

/// Where a page of runs in start order begins: strictly after `(started_at, id)`.
#[derive(Debug, Clone)]
pub(crate) struct PageStart {
    started_ms: i64,
    id: String,
}

impl PageStart {
    /// Before every run.
    pub fn start() -> PageStart {
        PageStart {
            started_ms: i64::MIN,
            id: String::new(),
        }
    }

    /// Before the first run started at or after `t`.
    pub fn at(t: DateTime<Utc>) -> PageStart {
        PageStart {
            started_ms: millis(t),
            id: String::new(),
        }
    }

    /// Just after `run`.
    pub fn after(run: &SpillRecord) -> PageStart {
        PageStart {
            started_ms: millis(run.started_at),
            id: run.id.as_str().to_string(),
        }
    }
}

/// The columns [`read_spill_record`] reads.
const SPILL_COLUMNS: &str = "id, started_at, spill_path, \
     CASE WHEN spill_missing THEN 0 ELSE spill_bytes END";

/// What the purge needs: pages of runs in start order, sizes, deletions. The purge decides;
/// these only query and write.
impl Index {
    /// Finished runs started before `before`, oldest first, after `cursor`.
    pub(crate) fn expired_page(
        &self,
        before: DateTime<Utc>,
        cursor: &PageStart,
        limit: usize,
    ) -> Result<Vec<SpillRecord>, IndexError> {
        let sql = format!(
            "SELECT {SPILL_COLUMNS} FROM runs WHERE status <> 'running' AND started_at < ?1 \
             AND (started_at, id) > (?2, ?3) ORDER BY started_at, id LIMIT ?4"
        );
        let mut statement = self.conn.prepare_cached(&sql)?;
        let rows = statement.query_map(
            params![millis(before), cursor.started_ms, cursor.id, int(limit)],
            read_spill_record,
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Finished runs whose spill counts toward the quota, oldest first, after `cursor`.
    pub(crate) fn evictable_page(
        &self,
        cursor: &PageStart,
        limit: usize,
    ) -> Result<Vec<SpillRecord>, IndexError> {
        let sql = format!(
            "SELECT {SPILL_COLUMNS} FROM runs WHERE status <> 'running' AND spill_missing = 0 \
             AND spill_bytes > 0 AND (started_at, id) > (?1, ?2) ORDER BY started_at, id LIMIT ?3"
        );
        let mut statement = self.conn.prepare_cached(&sql)?;
        let rows = statement.query_map(
            params![cursor.started_ms, cursor.id, int(limit)],
            read_spill_record,
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Recorded spill bytes of the finished runs started at or after `since`, missing spills
    /// excluded.
    pub(crate) fn counted_spill_bytes(&self, since: DateTime<Utc>) -> Result<u64, IndexError> {
        let sum: i64 = self.conn.query_row(
            "SELECT coalesce(sum(spill_bytes), 0) FROM runs \
             WHERE status <> 'running' AND spill_missing = 0 AND started_at >= ?1",
            [millis(since)],
            |row| row.get(0),
        )?;
        Ok(unsigned(sum))
    }

    /// The spill paths of the runs still going.
    pub(crate) fn running_spill_paths(&self) -> Result<Vec<String>, IndexError> {
        Ok(running_runs(&self.conn)?
            .into_iter()
            .filter_map(|run| run.spill_path)
            .collect())
    }

    /// Deletes these runs' rows (and their tags), in one transaction.
    pub(crate) fn delete_runs(&mut self, ids: &[RunId]) -> Result<(), IndexError> {
        self.for_each_id(ids, "DELETE FROM runs WHERE id = ?1")
    }

    /// Marks these runs' spills missing, in one transaction.
    pub(crate) fn mark_missing(&mut self, ids: &[RunId]) -> Result<(), IndexError> {
        self.for_each_id(ids, "UPDATE runs SET spill_missing = 1 WHERE id = ?1")
    }

    fn for_each_id(&mut self, ids: &[RunId], sql: &str) -> Result<(), IndexError> {
        if ids.is_empty() {
            return Ok(());
        }
        self.writable()?;
        let tx = self.conn.transaction()?;
        {
            let mut statement = tx.prepare_cached(sql)?;
            for id in ids {
                statement.execute([id.as_str()])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Whether some run's spill file has this name.
    pub(crate) fn names_spill(&self, name: &str) -> Result<bool, IndexError> {
        let found = self
            .conn
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM runs WHERE spill_name = ?1)")?
            .query_row([name], |row| row.get(0))?;
        Ok(found)
    }

    /// Finished runs with a spill not yet known missing whose file name is not in `listed`,
    /// as (id, spill path, counted bytes): the spills that may be gone.
    pub(crate) fn spills_not_listed(
        &self,
        listed: &HashSet<&str>,
    ) -> Result<Vec<(RunId, String, u64)>, IndexError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT spill_name, id, spill_path, spill_bytes FROM runs \
             WHERE spill_path IS NOT NULL AND spill_missing = 0 AND status <> 'running'",
        )?;
        let mut rows = statement.query([])?;
        let mut unlisted = Vec::new();
        while let Some(row) = rows.next()? {
            let name = row
                .get_ref(0)?
                .as_str_or_null()
                .map_err(|e| bad_column(0, e))?;
            if name.is_some_and(|name| listed.contains(name)) {
                continue;
            }
            unlisted.push((read_id(row, 1)?, row.get(2)?, unsigned(row.get(3)?)));
        }
        Ok(unlisted)
    }
}

/// Reads a row selected with [`SPILL_COLUMNS`].
fn read_spill_record(row: &Row<'_>) -> rusqlite::Result<SpillRecord> {
    Ok(SpillRecord {
        id: read_id(row, 0)?,
        started_at: read_time(row, 1)?,
        spill_path: row.get(2)?,
        counted_bytes: unsigned(row.get(3)?),
    })
}
