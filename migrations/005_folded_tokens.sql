-- 005: what folding saved. Of the tokens a run's preview kept out of the model's context
-- (output_tokens - preview_tokens), the part its template folds saved (issue 27: lines alike
-- folded into one marker); the rest is what the cut saved. NULL for runs without token counts
-- and for runs recorded before this migration, whose saving is not split: stats count those
-- apart rather than call their folding 0.
ALTER TABLE runs ADD COLUMN folded_tokens INTEGER;

-- The token accounting reads only covering indexes (migration 004): they are made again with
-- the new column, so the sums still never read the rows.
DROP INDEX runs_tokens_by_command;
DROP INDEX runs_tokens_by_start;
CREATE INDEX runs_tokens_by_command
    ON runs (command_key, started_at, output_tokens, preview_tokens, output_tokens_estimated,
             folded_tokens)
    WHERE output_tokens IS NOT NULL;
CREATE INDEX runs_tokens_by_start
    ON runs (started_at, output_tokens, preview_tokens, output_tokens_estimated, folded_tokens)
    WHERE output_tokens IS NOT NULL;
