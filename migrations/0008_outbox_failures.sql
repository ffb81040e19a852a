-- Outbox rows that can never be delivered (the chat is gone, the bot is not
-- in it, the address is wrong) or kept failing for too long are marked
-- failed_at instead of blocking every later message to their chat.
-- first_error_at is when the current run of failures began; the outbox gives
-- up on an unexplained error once it is older than its give-up time.
ALTER TABLE outbox ADD COLUMN failed_at INTEGER;
ALTER TABLE outbox ADD COLUMN first_error_at INTEGER;
DROP INDEX outbox_unsent;
CREATE INDEX outbox_unsent ON outbox (chat_jid, id) WHERE sent_at IS NULL AND failed_at IS NULL;

-- One random id per install (per nanoclaw.db), mixed into the ids of sent
-- messages so that a reset database never reuses the ids of an old one.
CREATE TABLE install (
    id TEXT NOT NULL
);
INSERT INTO install (id) VALUES (lower(hex(randomblob(16))));
