-- Everything people send: a message's file (its marker for the prompt,
-- e.g. "[voice note 0:42, media/ID.ogg] transcript: …", kept apart from
-- the caption so a caption's trigger still counts), the id of the message
-- a reply quotes, and a reaction's target (text is then its emoji).
ALTER TABLE messages ADD COLUMN media TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN quoted_id TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN react_to TEXT NOT NULL DEFAULT '';

-- A reaction an agent gives (the `reaction` IPC file): the outbox row's
-- text is the emoji, react_to the message's id and react_sender who wrote
-- that message (WhatsApp names both in a reaction). NULL for a message.
ALTER TABLE outbox ADD COLUMN react_to TEXT;
ALTER TABLE outbox ADD COLUMN react_sender TEXT;

-- The local channel shows a reaction it sent as such in GET /sent.
ALTER TABLE local_sent ADD COLUMN react_to TEXT;
