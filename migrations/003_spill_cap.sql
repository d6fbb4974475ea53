-- 003: runaway output. A spill file stops growing at its cap (--max-spill); the run records the
-- first line the file lacks, so `show` and the history can say the spill is cut and where.
ALTER TABLE runs ADD COLUMN spill_capped_at_line INTEGER;   -- NULL: the spill was not capped
