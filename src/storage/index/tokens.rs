//! The token accounting: each run's tokens recorded, and summed over runs by command and by
//! day from the covering indexes of migrations 004 and 005, never the rows.

use chrono::{DateTime, Utc};
use rusqlite::{Row, params};

use crate::protocol::{CommandTokens, DayTokens, RunId, SavedBy, TokenStats, TokenTotals};

use super::records::{RunTokens, int, millis, to_time, unsigned};
use super::{Index, IndexError};

/// Commands the token accounting lists at most, by tokens saved: the daemon's `stats` answer
/// stays small however many distinct commands the index holds.
pub const TOKEN_STATS_COMMANDS: usize = 100;

/// Days (UTC) the token accounting lists at most, today's included.
pub const TOKEN_STATS_DAYS: u32 = 90;

/// The sums [`read_totals`] reads, in its order, over the runs [`HAS_TOKENS`] keeps.
/// The last three sum the split of the saving over the runs that recorded it (a NULL
/// `folded_tokens` leaves a run out of them).
const TOKEN_SUMS: &str = "count(*), coalesce(sum(output_tokens), 0), \
     coalesce(sum(preview_tokens), 0), coalesce(sum(output_tokens - preview_tokens), 0), \
     coalesce(sum(output_tokens_estimated), 0), count(folded_tokens), \
     coalesce(sum(folded_tokens), 0), \
     coalesce(sum(output_tokens - preview_tokens - folded_tokens), 0)";

/// The runs the token accounting sums; it implies the WHERE of migration 004's partial
/// indexes, so that SQLite reads them.
const HAS_TOKENS: &str = "output_tokens IS NOT NULL AND preview_tokens IS NOT NULL";

/// Milliseconds in a UTC day (Unix time has no leap seconds).
const DAY_MS: i64 = 86_400_000;

impl Index {
    /// Records a finished run's tokens, counted after its end was recorded (`spillway
    /// truncate` leaves them to a child process). An unknown id is an error
    /// (`QueryReturnedNoRows`).
    pub fn record_tokens(&mut self, id: &RunId, tokens: &RunTokens) -> Result<(), IndexError> {
        self.writable()?;
        let changed = self
            .conn
            .prepare_cached(
                "UPDATE runs SET output_tokens = ?2, preview_tokens = ?3, \
                 output_tokens_estimated = ?4, folded_tokens = ?5 WHERE id = ?1",
            )?
            .execute(params![
                id.as_str(),
                int(tokens.output),
                int(tokens.preview),
                tokens.output_estimated,
                int(tokens.folded)
            ])?;
        if changed == 0 {
            return Err(rusqlite::Error::QueryReturnedNoRows.into());
        }
        Ok(())
    }

    /// The token accounting: totals over every run with token counts, the `top` commands by
    /// tokens saved, and the days (UTC) of runs started at or after `since`, newest first.
    ///
    /// Each query reads one of migration 004's covering indexes, not the rows: 0.3 s at a
    /// million runs (`cargo bench --bench index`). The totals are the commands' sums, so the
    /// index is walked once for both; only the `top` commands are kept as it goes.
    pub fn token_stats(&self, top: usize, since: DateTime<Utc>) -> Result<TokenStats, IndexError> {
        let mut totals = TokenTotals::default();
        let mut by_command = Vec::new();
        let mut statement = self.conn.prepare_cached(&tokens_by_command_sql())?;
        let mut rows = statement.query([])?;
        while let Some(row) = rows.next()? {
            let group = CommandTokens {
                command: row.get::<_, Option<String>>(0)?.unwrap_or_default(),
                totals: read_totals(row, 1)?,
            };
            totals.add(&group.totals);
            by_command.push(group);
            if by_command.len() > top.saturating_mul(2).max(64) {
                keep_top(&mut by_command, top);
            }
        }
        keep_top(&mut by_command, top);
        let all: i64 = self
            .conn
            .query_row("SELECT count(*) FROM runs", [], |row| row.get(0))?;
        let mut by_day = self.conn.prepare_cached(&tokens_by_day_sql())?;
        let by_day = by_day
            .query_map([millis(since)], |row| {
                let day: i64 = row.get(0)?;
                Ok(DayTokens {
                    day: to_time(0, day.saturating_mul(DAY_MS))?
                        .format("%Y-%m-%d")
                        .to_string(),
                    totals: read_totals(row, 1)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(TokenStats {
            runs_without_tokens: unsigned(all).saturating_sub(totals.runs),
            totals,
            by_command,
            by_day,
        })
    }
}

/// The token sums by command key, in key order.
pub(super) fn tokens_by_command_sql() -> String {
    format!("SELECT command_key, {TOKEN_SUMS} FROM runs WHERE {HAS_TOKENS} GROUP BY command_key")
}

/// The token sums by UTC day (days since the epoch) of the runs started at or after `?1`,
/// newest first.
pub(super) fn tokens_by_day_sql() -> String {
    format!(
        "SELECT started_at / {DAY_MS} AS day, {TOKEN_SUMS} FROM runs \
         WHERE {HAS_TOKENS} AND started_at >= ?1 GROUP BY day ORDER BY day DESC"
    )
}

/// Keeps the `top` commands that saved the most tokens, most first (ties by name).
fn keep_top(commands: &mut Vec<CommandTokens>, top: usize) {
    commands.sort_by(|a, b| {
        (b.totals.saved_tokens.cmp(&a.totals.saved_tokens)).then_with(|| a.command.cmp(&b.command))
    });
    commands.truncate(top);
}

/// Reads the [`TOKEN_SUMS`] starting at `column`.
fn read_totals(row: &Row<'_>, column: usize) -> rusqlite::Result<TokenTotals> {
    Ok(TokenTotals {
        runs: unsigned(row.get(column)?),
        output_tokens: unsigned(row.get(column + 1)?),
        preview_tokens: unsigned(row.get(column + 2)?),
        saved_tokens: row.get(column + 3)?,
        estimated_runs: unsigned(row.get(column + 4)?),
        saved_by: match unsigned(row.get(column + 5)?) {
            0 => None,
            runs => Some(SavedBy {
                runs,
                folding: unsigned(row.get(column + 6)?),
                cutting: row.get(column + 7)?,
            }),
        },
    })
}
