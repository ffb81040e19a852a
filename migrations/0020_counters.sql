-- Running totals for /metrics. A Prometheus counter must never go down,
-- but retention, the outbox and the IPC journal delete old rows, so a
-- count(*) of those tables does. These totals are kept by triggers as rows
-- are written: every writer counts (the daemon and a command alike), a
-- delete changes nothing, and a scrape reads these few rows instead of
-- counting whole tables. They start from what the tables hold now.

-- name and key: received (a chat's JID: messages from people stored),
-- sent (a chat's JID, '' while an alert has no main chat: messages the
-- channel took), ipc (handled or refused: IPC files decided), violations
-- (a kind: records of the audit trail), runs (ok or error: agent runs
-- that ended, from 0 at this migration: no table held them all).
CREATE TABLE counters (
    name TEXT NOT NULL,
    key  TEXT NOT NULL,
    n    INTEGER NOT NULL,
    PRIMARY KEY (name, key)
) WITHOUT ROWID;

INSERT INTO counters (name, key, n)
    SELECT 'received', chat_jid, count(*) FROM messages WHERE is_bot = 0 AND from_me = 0 GROUP BY chat_jid;
INSERT INTO counters (name, key, n)
    SELECT 'sent', coalesce(chat_jid, ''), count(*) FROM outbox WHERE sent_at IS NOT NULL AND last_error IS NULL GROUP BY coalesce(chat_jid, '');
INSERT INTO counters (name, key, n)
    SELECT 'ipc', CASE status WHEN 'refused' THEN 'refused' ELSE 'handled' END, count(*) FROM ipc_journal
    GROUP BY CASE status WHEN 'refused' THEN 'refused' ELSE 'handled' END;
INSERT INTO counters (name, key, n)
    SELECT 'violations', kind, count(*) FROM violations GROUP BY kind;

CREATE TRIGGER counters_received AFTER INSERT ON messages WHEN new.is_bot = 0 AND new.from_me = 0 BEGIN
    INSERT INTO counters (name, key, n) VALUES ('received', new.chat_jid, 1)
    ON CONFLICT (name, key) DO UPDATE SET n = n + 1;
END;

-- Sent: sent_at set with no error. A message folded into another is marked
-- sent with a last_error saying so; it was never sent itself.
CREATE TRIGGER counters_sent AFTER UPDATE OF sent_at ON outbox
WHEN old.sent_at IS NULL AND new.sent_at IS NOT NULL AND new.last_error IS NULL BEGIN
    INSERT INTO counters (name, key, n) VALUES ('sent', coalesce(new.chat_jid, ''), 1)
    ON CONFLICT (name, key) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER counters_ipc AFTER INSERT ON ipc_journal BEGIN
    INSERT INTO counters (name, key, n) VALUES ('ipc', CASE new.status WHEN 'refused' THEN 'refused' ELSE 'handled' END, 1)
    ON CONFLICT (name, key) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER counters_violations AFTER INSERT ON violations BEGIN
    INSERT INTO counters (name, key, n) VALUES ('violations', new.kind, 1)
    ON CONFLICT (name, key) DO UPDATE SET n = n + 1;
END;

-- A run's end replaces its group's row in last_runs (an insert the first
-- time, an update after).
CREATE TRIGGER counters_runs_first AFTER INSERT ON last_runs BEGIN
    INSERT INTO counters (name, key, n) VALUES ('runs', CASE WHEN new.ok THEN 'ok' ELSE 'error' END, 1)
    ON CONFLICT (name, key) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER counters_runs AFTER UPDATE ON last_runs BEGIN
    INSERT INTO counters (name, key, n) VALUES ('runs', CASE WHEN new.ok THEN 'ok' ELSE 'error' END, 1)
    ON CONFLICT (name, key) DO UPDATE SET n = n + 1;
END;

-- Model usage since the start, per group, provider and model: what
-- usage_requests would sum to had retention.usage never pruned it.
CREATE TABLE usage_totals (
    group_folder       TEXT NOT NULL,
    provider           TEXT NOT NULL,
    model              TEXT NOT NULL,
    requests           INTEGER NOT NULL,
    input_tokens       INTEGER NOT NULL,
    output_tokens      INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL,
    cache_read_tokens  INTEGER NOT NULL,
    cost_usd           REAL NOT NULL,
    priced             INTEGER NOT NULL,   -- 0 once a request of the model had no price
    PRIMARY KEY (group_folder, provider, model)
) WITHOUT ROWID;

INSERT INTO usage_totals
    SELECT group_folder, provider, model, count(*), sum(input_tokens), sum(output_tokens), sum(cache_write_tokens),
           sum(cache_read_tokens), sum(cost_usd), min(priced)
    FROM usage_requests GROUP BY group_folder, provider, model;

CREATE TRIGGER usage_totals_add AFTER INSERT ON usage_requests BEGIN
    INSERT INTO usage_totals VALUES (new.group_folder, new.provider, new.model, 1, new.input_tokens, new.output_tokens,
        new.cache_write_tokens, new.cache_read_tokens, new.cost_usd, new.priced)
    ON CONFLICT (group_folder, provider, model) DO UPDATE SET
        requests = requests + 1,
        input_tokens = input_tokens + excluded.input_tokens,
        output_tokens = output_tokens + excluded.output_tokens,
        cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
        cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
        cost_usd = cost_usd + excluded.cost_usd,
        priced = min(priced, excluded.priced);
END;
