-- Chats seen on any channel, the messages of registered groups, each
-- group's answered position and agent session, and what the local channel
-- has sent.

CREATE TABLE chats (
    jid           TEXT PRIMARY KEY,
    name          TEXT NOT NULL DEFAULT '',
    is_group      INTEGER NOT NULL DEFAULT 0,
    last_activity INTEGER NOT NULL DEFAULT 0   -- unix ms
);

-- seq is the arrival order; (chat_jid, id) makes a redelivered message a
-- no-op. time is the chat's own timestamp (unix ms), used to order a prompt.
CREATE TABLE messages (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    chat_jid    TEXT NOT NULL,
    id          TEXT NOT NULL,
    sender      TEXT NOT NULL DEFAULT '',
    sender_name TEXT NOT NULL DEFAULT '',
    text        TEXT NOT NULL,
    time        INTEGER NOT NULL,
    from_me     INTEGER NOT NULL DEFAULT 0,
    is_bot      INTEGER NOT NULL DEFAULT 0,
    UNIQUE (chat_jid, id)
);
CREATE INDEX messages_chat_seq ON messages (chat_jid, seq);

-- answered_seq: every message of the chat with seq <= it has been answered
-- (the answer is in the outbox). It moves only together with that answer.
CREATE TABLE cursors (
    chat_jid     TEXT PRIMARY KEY,
    answered_seq INTEGER NOT NULL
);

CREATE TABLE sessions (
    folder     TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);

-- The local channel's sent log: seq is what GET /sent pages by; out_id (the
-- outbox row) makes a retried send a no-op.
CREATE TABLE local_sent (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    out_id   TEXT NOT NULL UNIQUE,
    chat_jid TEXT NOT NULL,
    text     TEXT NOT NULL,
    time     INTEGER NOT NULL   -- unix ns
);

-- Keys of IPC side effects already carried out, so that an action repeated
-- after a crash does nothing new.
CREATE TABLE done_keys (
    key     TEXT PRIMARY KEY,
    done_at INTEGER NOT NULL
);
