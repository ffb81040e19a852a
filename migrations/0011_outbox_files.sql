-- A message an agent sent with a file (send_message's "file") carries the
-- daemon's copy of it: the path under <dataDir>/outgoing/, the name the
-- chat shows and its MIME type. NULL for a text message. The copy is
-- removed once the message is sent or given up.
ALTER TABLE outbox ADD COLUMN file_path TEXT;
ALTER TABLE outbox ADD COLUMN file_name TEXT;
ALTER TABLE outbox ADD COLUMN file_mime TEXT;

-- The local channel keeps what it sent; a file's bytes are kept with it,
-- for GET /files/SEQ.
ALTER TABLE local_sent ADD COLUMN file_name TEXT;
ALTER TABLE local_sent ADD COLUMN file_mime TEXT;
ALTER TABLE local_sent ADD COLUMN file_data BLOB;
