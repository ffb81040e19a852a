-- IPC run tokens, the record of every IPC file handled, and scheduled tasks.
-- IF NOT EXISTS because this file may be applied before 0002 on a
-- development database; re-applying it then is harmless.

-- One row per agent run. Only the SHA-256 of the token is kept.
CREATE TABLE IF NOT EXISTS ipc_tokens (
    hash        BLOB PRIMARY KEY,
    folder      TEXT NOT NULL,
    issued_at   INTEGER NOT NULL,      -- unix ms
    finished_at INTEGER                -- unix ms; NULL while the run lives
);

-- One row per IPC file seen (folder, name, content hash). It is written in
-- the same transaction as the decision, before any side effect, so a crash
-- never acts twice and a restart finishes what was decided.
CREATE TABLE IF NOT EXISTS ipc_files (
    id          INTEGER PRIMARY KEY,
    folder      TEXT NOT NULL,         -- the directory's group
    sub         TEXT NOT NULL,         -- messages | tasks
    name        TEXT NOT NULL,
    hash        TEXT NOT NULL,
    state       TEXT NOT NULL,         -- accepted | refused | done | failed
    request     TEXT,                  -- the decoded request (accepted)
    violation   TEXT,                  -- the violation to report (refused)
    alert       INTEGER NOT NULL DEFAULT 0,
    attempts    INTEGER NOT NULL DEFAULT 0,
    decided_at  INTEGER NOT NULL,      -- unix ms
    UNIQUE (folder, sub, name, hash)
);
CREATE INDEX IF NOT EXISTS ipc_files_pending ON ipc_files (state) WHERE state IN ('accepted', 'refused');

CREATE TABLE IF NOT EXISTS scheduled_tasks (
    id             TEXT PRIMARY KEY,
    group_folder   TEXT NOT NULL,
    chat_jid       TEXT NOT NULL,
    prompt         TEXT NOT NULL,
    schedule_type  TEXT NOT NULL,      -- cron | interval | once
    schedule_value TEXT NOT NULL,
    context_mode   TEXT NOT NULL,      -- group | isolated
    status         TEXT NOT NULL,      -- active | paused | completed | cancelled
    next_run       INTEGER,            -- unix ms; NULL when nothing is due
    last_run       INTEGER,
    last_result    TEXT,
    created_at     INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS scheduled_tasks_due ON scheduled_tasks (next_run) WHERE status = 'active';

CREATE TABLE IF NOT EXISTS task_run_logs (
    id          INTEGER PRIMARY KEY,
    task_id     TEXT NOT NULL,
    started_at  INTEGER NOT NULL,      -- unix ms
    finished_at INTEGER,
    status      TEXT NOT NULL,         -- running | success | error
    result      TEXT,
    error       TEXT
);
CREATE INDEX IF NOT EXISTS task_run_logs_task ON task_run_logs (task_id, id);
