-- Full-text search over what the chats said and what the assistant
-- answered (the search_history tool): an external-content FTS5 index over
-- messages, so the text lives once, in messages, and the index holds only
-- the words (media too: a voice note's marker carries its transcript).
-- columnsize=0: results are ordered by time, never ranked, so the index
-- keeps no per-message sizes.
--
-- Writing to FTS5 costs about 0.2 ms at every commit (it writes a new
-- segment), a third of storing an inbound message. So a message's
-- transaction writes only its seq into messages_fts_pending, by trigger:
-- nothing is stored without its place in the index being stored with it.
-- The daemon folds the pending rows into messages_fts in batches, each
-- batch one transaction that indexes and forgets them together (so none
-- is indexed twice, whatever is killed when), and a search folds what is
-- pending first. Deleting or editing a message takes its old words out of
-- the index in its own transaction.
--
-- This needs SQLite built with FTS5: go-sqlite3's build tag sqlite_fts5
-- (make passes it; without it this fails with "no such module: fts5").
CREATE VIRTUAL TABLE messages_fts USING fts5(
    text, media,
    content = 'messages', content_rowid = 'seq',
    columnsize = 0,
    tokenize = 'unicode61 remove_diacritics 2'
);

-- Messages stored but not yet in messages_fts.
CREATE TABLE messages_fts_pending (seq INTEGER PRIMARY KEY);

CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts_pending (seq) VALUES (new.seq);
END;

-- Only words that are in the index may be deleted from it: a message
-- still pending has none there yet.
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, text, media)
        SELECT 'delete', old.seq, old.text, old.media
        WHERE NOT EXISTS (SELECT 1 FROM messages_fts_pending WHERE seq = old.seq);
    DELETE FROM messages_fts_pending WHERE seq = old.seq;
END;

-- An edit (or a voice note's transcript) takes the old words out and
-- queues the message again, to be indexed with its new ones.
CREATE TRIGGER messages_fts_update AFTER UPDATE OF text, media ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, text, media)
        SELECT 'delete', old.seq, old.text, old.media
        WHERE NOT EXISTS (SELECT 1 FROM messages_fts_pending WHERE seq = old.seq);
    INSERT OR IGNORE INTO messages_fts_pending (seq) VALUES (new.seq);
END;

-- The messages an existing database already holds.
INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');
