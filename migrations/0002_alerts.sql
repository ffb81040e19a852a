-- The audit trail of blocked actions, the durable outbox every outgoing
-- message goes through, and the per-(group, kind, target) alert cooldowns.

-- One row per violation. time is Unix nanoseconds so ORDER BY and range
-- filters are plain integer comparisons. logged says whether the row has
-- reached <groupsDir>/<group>/logs/security.jsonl yet; rows left at 0 by a
-- crash are written there on the next start.
CREATE TABLE violations (
    id     INTEGER PRIMARY KEY,
    time   INTEGER NOT NULL,
    grp    TEXT NOT NULL,
    kind   TEXT NOT NULL,
    tool   TEXT NOT NULL,
    target TEXT NOT NULL,
    detail TEXT NOT NULL,
    action TEXT NOT NULL,
    logged INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX violations_time ON violations (time);
CREATE INDEX violations_grp_time ON violations (grp, time);
CREATE INDEX violations_unlogged ON violations (id) WHERE logged = 0;

-- Every outgoing message. chat_jid is NULL for an alert raised while no
-- main group exists; it is filled in once one does. A row is sent when
-- sent_at is set, which happens only after the channel accepted it.
-- AUTOINCREMENT keeps ids (the channel's idempotency key) from being reused.
CREATE TABLE outbox (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    chat_jid   TEXT,
    text       TEXT NOT NULL,
    kind       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    sent_at    INTEGER,
    attempts   INTEGER NOT NULL DEFAULT 0,
    last_error TEXT
);
CREATE INDEX outbox_unsent ON outbox (chat_jid, id) WHERE sent_at IS NULL;

-- An open cooldown window: the first violation of a (group, kind, target)
-- was alerted; repeats until window_end are counted in pending and sent as
-- one summary when the window ends. last_* describe the latest repeat.
CREATE TABLE alert_cooldowns (
    grp         TEXT NOT NULL,
    kind        TEXT NOT NULL,
    target      TEXT NOT NULL,
    window_end  INTEGER NOT NULL,
    pending     INTEGER NOT NULL DEFAULT 0,
    last_tool   TEXT NOT NULL DEFAULT '',
    last_detail TEXT NOT NULL DEFAULT '',
    last_time   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (grp, kind, target)
);
CREATE INDEX alert_cooldowns_due ON alert_cooldowns (window_end) WHERE pending > 0;
