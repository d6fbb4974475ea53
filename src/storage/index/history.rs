//! The SQL of `history`: the filter's conditions, the walk it starts from and its order.

use rusqlite::types::Value;

use super::records::{HistoryFilter, RUN_COLUMNS, int, millis};
use crate::protocol::StatusFilter;

/// Rows `history` returns when the filter's limit is 0.
const DEFAULT_HISTORY_LIMIT: usize = 50;

/// Runs that did not simply succeed; the same text as `runs_failed`'s WHERE in migration 002,
/// so that SQLite can use that partial index.
const FAILED: &str = "(status IN ('signaled', 'timed_out', 'killed', 'interrupted') \
                      OR (status = 'exited' AND exit_code <> 0))";

/// The SQL and parameters for `history`. With a tag, the walk starts from `run_tags` (newest
/// first for that tag) instead of from every run.
pub(super) fn history_query(filter: &HistoryFilter) -> (String, Vec<Value>) {
    let mut values = Vec::new();
    let mut conditions = Vec::new();
    let mut tags = filter.tags.iter();
    let (from, order) = match tags.next() {
        Some((key, value)) => {
            conditions.push("t.key = ? AND t.value = ?".to_string());
            values.extend([Value::from(key.clone()), Value::from(value.clone())]);
            (
                "run_tags t CROSS JOIN runs r ON r.id = t.run_id",
                ("t.started_at", "t.run_id"),
            )
        }
        // Left to itself, SQLite ORs two searches of runs_by_status together and sorts the
        // result; the partial index already holds just the failed runs, in order.
        None if matches!(filter.status, Some(StatusFilter::Failed)) => {
            ("runs r INDEXED BY runs_failed", ("r.started_at", "r.id"))
        }
        None => ("runs r", ("r.started_at", "r.id")),
    };
    for (key, value) in tags {
        conditions.push(
            "EXISTS (SELECT 1 FROM run_tags x WHERE x.run_id = r.id AND x.key = ? AND x.value = ?)"
                .to_string(),
        );
        values.extend([Value::from(key.clone()), Value::from(value.clone())]);
    }
    let (start, id) = order;
    if let Some(since) = filter.since {
        conditions.push(format!("{start} >= ?"));
        values.push(Value::from(millis(since)));
    }
    if let Some(until) = filter.until {
        conditions.push(format!("{start} <= ?"));
        values.push(Value::from(millis(until)));
    }
    match &filter.status {
        Some(StatusFilter::Is(status)) => {
            conditions.push("r.status = ?".to_string());
            values.push(Value::from(status.as_str().to_string()));
        }
        Some(StatusFilter::Failed) => conditions.push(FAILED.to_string()),
        None => {}
    }
    if let Some(text) = &filter.command_contains {
        conditions.push("instr(r.command, ?) > 0".to_string());
        values.push(Value::from(text.clone()));
    }
    let limit = match filter.limit {
        0 => DEFAULT_HISTORY_LIMIT,
        n => n,
    };
    values.push(Value::from(int(limit)));
    let conditions = if conditions.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", conditions.join(" AND "))
    };
    let sql = format!(
        "SELECT {RUN_COLUMNS} FROM {from} {conditions} ORDER BY {start} DESC, {id} DESC LIMIT ?"
    );
    (sql, values)
}
