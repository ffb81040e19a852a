-- The owner's answers to alerts from the main chat: the short codes that
-- alerts offer, each change made with one (so /undo can take it back), the
-- command messages already handled (so a redelivery does nothing twice),
-- and whether a group is paused.

CREATE TABLE allow_codes (
    code       TEXT PRIMARY KEY,
    grp        TEXT NOT NULL,
    key        TEXT NOT NULL,    -- network.allowedDomains | allowRead | allowWrite
    value      TEXT NOT NULL,    -- the domain or path to add
    created_at INTEGER NOT NULL, -- unix ms; valid for 24 hours
    used_at    INTEGER           -- unix ms, NULL until used
);

CREATE TABLE owner_changes (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    grp       TEXT NOT NULL,
    code      TEXT NOT NULL,
    who       TEXT NOT NULL,
    key       TEXT NOT NULL,
    value     TEXT NOT NULL,
    before    TEXT,             -- the override before the change (JSON), NULL for none
    after     TEXT NOT NULL,    -- the override the change wrote
    at        INTEGER NOT NULL, -- unix ms
    undone_at INTEGER
);

CREATE TABLE owner_commands (
    chat_jid TEXT NOT NULL,
    msg_id   TEXT NOT NULL,
    at       INTEGER NOT NULL,
    PRIMARY KEY (chat_jid, msg_id)
);

ALTER TABLE groups ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
