-- Registered groups, the chats we have seen, their messages and each
-- group's agent session.
CREATE TABLE groups (
    jid              TEXT PRIMARY KEY,
    name             TEXT NOT NULL,
    folder           TEXT NOT NULL UNIQUE,
    trigger          TEXT NOT NULL,
    requires_trigger INTEGER NOT NULL DEFAULT 1,
    is_main          INTEGER NOT NULL DEFAULT 0,
    security         TEXT,               -- per-group override as JSON, or NULL
    added_at         TEXT NOT NULL       -- RFC 3339
);
-- At most one main group.
CREATE UNIQUE INDEX groups_one_main ON groups (is_main) WHERE is_main = 1;
