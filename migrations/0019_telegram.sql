-- The Telegram channel's own state. telegram_chats: every chat the bot has
-- seen (nanoclawd telegram chats lists it, to register with groups add);
-- id is Telegram's chat id (negative for groups), type private, group,
-- supergroup or channel. telegram_state: single values by name — "owner",
-- the user id of whoever sent the setup code (the default approver).
CREATE TABLE telegram_chats (
    id         INTEGER PRIMARY KEY,
    title      TEXT NOT NULL DEFAULT '',
    type       TEXT NOT NULL DEFAULT '',
    username   TEXT NOT NULL DEFAULT '',
    last_seen  INTEGER NOT NULL DEFAULT 0   -- unix ms
);

CREATE TABLE telegram_state (
    name   TEXT PRIMARY KEY,
    value  TEXT NOT NULL
);
