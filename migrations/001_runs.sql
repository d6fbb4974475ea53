-- 001: the first schema. One row per run, inserted when the run starts and completed when it
-- ends, so history, stats and the purge can find every run and its spill file without reading
-- spills/. Times are INTEGER Unix milliseconds (UTC); argv and tags are JSON text.
CREATE TABLE runs (
    id             TEXT PRIMARY KEY NOT NULL,    -- YYYYMMDD-HHMMSS-xxxx
    argv           TEXT,                         -- JSON array of strings, or NULL for a shell command
    shell          TEXT,                         -- the `sh -c` command line, or NULL for argv
    command        TEXT NOT NULL DEFAULT '',     -- argv shell-quoted and joined, or the shell string
    cwd            TEXT NOT NULL DEFAULT '',
    tags           TEXT NOT NULL DEFAULT '{}',   -- JSON object of strings
    started_at     INTEGER NOT NULL,
    ended_at       INTEGER,                      -- NULL while running
    status         TEXT NOT NULL,                -- running, exited, signaled, timed_out, killed, interrupted
    exit_code      INTEGER,
    signal         INTEGER,
    total_lines    INTEGER,                      -- NULL until the run ends
    total_bytes    INTEGER,
    truncated      INTEGER,                      -- 0 or 1; NULL until the run ends
    spill_path     TEXT,                         -- absolute path, or NULL when there is no spill
    spill_bytes    INTEGER NOT NULL DEFAULT 0,
    spill_complete INTEGER NOT NULL DEFAULT 0,   -- 1 when every byte of output reached the spill
    spill_missing  INTEGER NOT NULL DEFAULT 0,   -- 1 once the spill file was found gone
    pid            INTEGER,                      -- the command's process
    owner_pid      INTEGER                       -- the process that wrote the row (daemon or truncate);
                                                 -- NULL: unknown, taken for gone
);
