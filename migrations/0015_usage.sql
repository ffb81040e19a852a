-- Model usage counted at the relay: one row per model request that
-- reported usage, written when its answer has ended.
CREATE TABLE usage_requests (
    id                  INTEGER PRIMARY KEY,
    at                  INTEGER NOT NULL,   -- unix ms, when the answer ended
    group_folder        TEXT NOT NULL,
    run_id              TEXT NOT NULL,
    model               TEXT NOT NULL,
    input_tokens        INTEGER NOT NULL,
    output_tokens       INTEGER NOT NULL,
    cache_write_tokens  INTEGER NOT NULL,
    cache_read_tokens   INTEGER NOT NULL,
    cost_usd            REAL NOT NULL,
    priced              INTEGER NOT NULL    -- 0: the model has no price in usage.prices
);
CREATE INDEX usage_requests_group_at ON usage_requests (group_folder, at);
CREATE INDEX usage_requests_at ON usage_requests (at);

-- Notices sent to the main chat once per group and period (a budget's
-- 80 % warning, its [BUDGET] message): the row is written in the same
-- transaction that queues the notice, so a restart neither loses nor
-- repeats one.
CREATE TABLE usage_notices (
    group_folder TEXT NOT NULL,
    kind         TEXT NOT NULL,   -- e.g. daily-warn, monthly-over
    period       TEXT NOT NULL,   -- the day (2026-11-26) or month (2026-11), local time
    at           INTEGER NOT NULL,
    PRIMARY KEY (group_folder, kind, period)
);

-- What the model API last said about the daemon's access to it, while it
-- is a problem: kind 'credential' (401/403) until a request succeeds,
-- 'rate' (429/529) with the time to retry. doctor reads it too.
CREATE TABLE upstream_health (
    kind     TEXT PRIMARY KEY,
    status   INTEGER NOT NULL,
    detail   TEXT NOT NULL,
    since    INTEGER NOT NULL,   -- unix ms
    retry_at INTEGER NOT NULL DEFAULT 0
);
