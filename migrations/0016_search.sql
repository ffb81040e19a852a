-- Full-text search over what the chats said and what the assistant
-- answered (the search_history tool). An external-content FTS5 index over
-- messages: the text lives once, in messages, and the index holds only the
-- words. Triggers keep it in the same transaction as every insert, edit and
-- delete of a message, so no message is stored unindexed, none is indexed
-- twice (a redelivery is ignored before the trigger fires), and pruning old
-- messages prunes their words. media is indexed too: a voice note's marker
-- carries its transcript.
--
-- This needs SQLite built with FTS5: go-sqlite3's build tag sqlite_fts5
-- (make does it; a plain go build fails here with "no such module: fts5").
CREATE VIRTUAL TABLE messages_fts USING fts5(
    text, media,
    content = 'messages', content_rowid = 'seq',
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, text, media) VALUES (new.seq, new.text, new.media);
END;

CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, text, media) VALUES ('delete', old.seq, old.text, old.media);
END;

CREATE TRIGGER messages_fts_update AFTER UPDATE OF text, media ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, text, media) VALUES ('delete', old.seq, old.text, old.media);
    INSERT INTO messages_fts (rowid, text, media) VALUES (new.seq, new.text, new.media);
END;

-- The messages an existing database already holds.
INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');
