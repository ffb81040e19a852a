-- A run the daemon's own shutdown ended is neither a success nor a
-- failure: status shows it as "stopped".
ALTER TABLE last_runs ADD COLUMN stopped INTEGER NOT NULL DEFAULT 0;
