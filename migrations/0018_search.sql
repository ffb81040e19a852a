-- Full-text search over what the chats said and what the assistant
-- answered (the search_history tool): an external-content FTS5 index over
-- messages, so the text lives once, in messages, and the index holds only
-- the words (media too: a voice note's marker carries its transcript).
-- columnsize=0: results are ordered by time, never ranked, so the index
-- keeps no per-message sizes.
--
-- Writing to FTS5 costs about 0.2 ms at every commit (it writes a new
-- segment), a third of storing an inbound message. So storing a message
-- writes nothing to the index: messages_fts_mark says how far the index
-- goes, every message with a seq up to it is indexed and none after it.
-- The daemon moves the mark over new messages in batches, indexing them
-- in the same transaction (so none is indexed twice or skipped, whatever
-- is killed when), and a search moves it to the end first. Deleting or
-- editing an indexed message changes the index in its own transaction.
--
-- This needs SQLite built with FTS5: go-sqlite3's build tag sqlite_fts5
-- (make passes it; without it this fails with "no such module: fts5").
CREATE VIRTUAL TABLE messages_fts USING fts5(
    text, media,
    content = 'messages', content_rowid = 'seq',
    columnsize = 0,
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TABLE messages_fts_mark (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL
);

-- Only an indexed message has words in the index to take out.
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
WHEN old.seq <= (SELECT seq FROM messages_fts_mark) BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, text, media) VALUES ('delete', old.seq, old.text, old.media);
END;

CREATE TRIGGER messages_fts_update AFTER UPDATE OF text, media ON messages
WHEN old.seq <= (SELECT seq FROM messages_fts_mark) BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, text, media) VALUES ('delete', old.seq, old.text, old.media);
    INSERT INTO messages_fts (rowid, text, media) VALUES (new.seq, new.text, new.media);
END;

-- The messages an existing database already holds.
INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');
INSERT INTO messages_fts_mark (id, seq) SELECT 1, COALESCE(max(seq), 0) FROM messages;
