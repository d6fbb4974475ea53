-- 002: history filters and purge at a million rows. Tags get a table of their own, one row per
-- (run, key), so `--tag K=V` is an index lookup rather than a JSON parse of every row; runs get
-- spill_name (the spill file's name) so the purge can ask whether a file in spills/ belongs to a
-- run without loading every path; and the indexes the history and purge queries walk.
CREATE TABLE run_tags (
    run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    started_at INTEGER NOT NULL,   -- copied from runs (never changes), so tag lookups come out newest first
    PRIMARY KEY (run_id, key)
) WITHOUT ROWID;

INSERT INTO run_tags (run_id, key, value, started_at)
    SELECT runs.id, tag.key, tag.value, runs.started_at
    FROM runs, json_each(runs.tags) AS tag;

CREATE INDEX run_tags_by_value ON run_tags (key, value, started_at, run_id);

ALTER TABLE runs ADD COLUMN spill_name TEXT;

-- The part of spill_path after its last '/'.
UPDATE runs
    SET spill_name = substr(spill_path, length(rtrim(spill_path, replace(spill_path, '/', ''))) + 1)
    WHERE spill_path IS NOT NULL;

-- History in start order (ties by id), with or without --since/--until; purge pages through it.
CREATE INDEX runs_by_start ON runs (started_at, id);
-- --status S, and finding the runs left `running`.
CREATE INDEX runs_by_status ON runs (status, started_at, id);
-- --status failed: only the few runs that did not exit 0. The query repeats this WHERE verbatim.
CREATE INDEX runs_failed ON runs (started_at, id)
    WHERE status IN ('signaled', 'timed_out', 'killed', 'interrupted')
       OR (status = 'exited' AND exit_code <> 0);
-- Is this file in spills/ some run's spill?
CREATE INDEX runs_by_spill_name ON runs (spill_name) WHERE spill_name IS NOT NULL;
