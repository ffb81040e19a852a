-- The last finished agent run of each group, for `nanoclawd status`; kept
-- across restarts so a failure before a crash is still shown after it.
CREATE TABLE last_runs (
    folder      TEXT PRIMARY KEY,
    started_at  INTEGER NOT NULL,   -- unix ms
    finished_at INTEGER NOT NULL,   -- unix ms
    ok          INTEGER NOT NULL,
    error       TEXT NOT NULL DEFAULT '',
    task_id     TEXT NOT NULL DEFAULT ''
);
