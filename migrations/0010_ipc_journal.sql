-- The IPC journal replaces ipc_files and done_keys. A row is written in the
-- same transaction as the file's database effect (a message's outbox row,
-- a refusal's audit row and alert, a task change, a new group), so the
-- effect happens exactly when the row commits. What is left after the
-- commit (remove or quarantine the file, write its verdict) is safe to
-- repeat; done says it was carried out. AUTOINCREMENT: an id is never
-- handed out twice, even after old rows are pruned.
CREATE TABLE ipc_journal (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    folder     TEXT NOT NULL,          -- the directory's group
    sub        TEXT NOT NULL,          -- messages | tasks
    name       TEXT NOT NULL,
    hash       TEXT NOT NULL,          -- of the content, or of the object when it is not a regular file
    status     TEXT NOT NULL,          -- sent | refused (the verdict)
    type       TEXT NOT NULL,          -- the request's type; '' when refused
    task_id    TEXT NOT NULL,          -- schedule_task: the new task (told in the verdict)
    new_folder TEXT NOT NULL,          -- register_group: the folder to watch from now on
    reason     TEXT NOT NULL,          -- refused: why (written beside the quarantined file)
    attempts   INTEGER NOT NULL DEFAULT 0,
    done       INTEGER NOT NULL DEFAULT 0,
    decided_at INTEGER NOT NULL        -- unix ms
);
CREATE INDEX ipc_journal_open ON ipc_journal (id) WHERE done = 0;

-- Rows of ipc_files keep their ids. One decided but not carried out when
-- the old daemon stopped (a kill -9) owes its database effect unless its
-- key is in done_keys: a message is queued here, a refusal audited (an
-- alert it had is not raised: the audit row is the record), and a new
-- group, which needs the configuration, is refused with a reason to ask
-- again. The new watcher then removes or quarantines the files.
CREATE TEMP TABLE ipc_owed AS
    SELECT id FROM ipc_files
    WHERE state IN ('accepted', 'refused') AND 'ipc-' || id || '-' || decided_at NOT IN (SELECT key FROM done_keys);
INSERT INTO outbox (chat_jid, text, kind, created_at)
    SELECT json_extract(request, '$.chatJid'), json_extract(request, '$.text'), 'ipc', decided_at * 1000000
    FROM ipc_files
    WHERE id IN (SELECT id FROM ipc_owed) AND state = 'accepted' AND json_extract(request, '$.type') = 'message'
    ORDER BY id;
INSERT INTO violations (time, grp, kind, tool, target, detail, action)
    SELECT decided_at * 1000000, json_extract(violation, '$.group'), 'ipc', 'ipc',
           json_extract(violation, '$.target'), json_extract(violation, '$.detail'), 'blocked'
    FROM ipc_files
    WHERE id IN (SELECT id FROM ipc_owed) AND state = 'refused'
    ORDER BY id;
UPDATE ipc_files SET state = 'refused', request = NULL,
        violation = json_object('detail', 'the daemon was upgraded before it registered this group; ask again')
    WHERE id IN (SELECT id FROM ipc_owed) AND state = 'accepted' AND json_extract(request, '$.type') = 'register_group';
INSERT INTO ipc_journal (id, folder, sub, name, hash, status, type, task_id, new_folder, reason, attempts, done, decided_at)
    SELECT id, folder, sub, name, hash,
           CASE state WHEN 'refused' THEN 'refused' ELSE 'sent' END,
           COALESCE(json_extract(request, '$.type'), ''),
           COALESCE(json_extract(request, '$.taskId'), ''),
           CASE json_extract(request, '$.type') WHEN 'register_group' THEN json_extract(request, '$.folder') ELSE '' END,
           COALESCE(json_extract(violation, '$.detail'), ''),
           attempts, state IN ('done', 'failed'), decided_at
    FROM ipc_files ORDER BY id;
DROP TABLE ipc_owed;

DROP TABLE ipc_files;
DROP TABLE done_keys;
