-- 004: token accounting. Each run records the model tokens (o200k) of its whole output, which a
-- model would have read without spillway, and of the preview it was given instead, so `stats`
-- can say what the previews saved, by command and by day. NULL for runs that never ended
-- (running, interrupted) and for runs recorded before this migration: stats count those apart.
ALTER TABLE runs ADD COLUMN output_tokens INTEGER;
ALTER TABLE runs ADD COLUMN preview_tokens INTEGER;
-- 1 when output_tokens was estimated from a sample of the output (outputs over 1 MiB), 0 when
-- it was counted exactly; NULL with the counts.
ALTER TABLE runs ADD COLUMN output_tokens_estimated INTEGER;
-- What `stats` groups by: the program's base name, plus its subcommand for programs that take
-- one (`cargo test`, `git log`, `pytest`), computed from argv or the shell string when the run
-- starts. NULL for runs recorded before this migration (they have no token counts either).
ALTER TABLE runs ADD COLUMN command_key TEXT;

-- The token accounting reads only these indexes, never the rows (about 50 bytes a run against
-- several hundred): at a million runs, by command without a sort, by day a range of the days
-- asked for (`cargo bench --bench index`). Partial: runs without counts are not in them. Each
-- command's entries are in start order, so the purge, deleting the oldest runs, and new runs
-- touch a page or two per command rather than pages all over the index.
CREATE INDEX runs_tokens_by_command
    ON runs (command_key, started_at, output_tokens, preview_tokens, output_tokens_estimated)
    WHERE output_tokens IS NOT NULL;
CREATE INDEX runs_tokens_by_start
    ON runs (started_at, output_tokens, preview_tokens, output_tokens_estimated)
    WHERE output_tokens IS NOT NULL;
