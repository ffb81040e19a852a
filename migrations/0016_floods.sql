-- The flood cap: whatever the cooldown and however many distinct targets,
-- at most ten alert messages of one group reach the main chat in any
-- minute. alert_sent names the outbox rows of a group's alert messages
-- that are unsent or were sent within the last minute; alert_capped counts
-- what the cap held back since (files: how many of those were refused IPC
-- files), said in one summary once the group's minute has room again.
CREATE TABLE alert_sent (
    grp       TEXT NOT NULL,
    outbox_id INTEGER NOT NULL
);
CREATE INDEX alert_sent_grp ON alert_sent (grp);

-- note: a notice of the group's state (its IPC paused) that found the
-- minute full, sent first in that summary.
CREATE TABLE alert_capped (
    grp   TEXT PRIMARY KEY,
    n     INTEGER NOT NULL DEFAULT 0,
    files INTEGER NOT NULL DEFAULT 0,
    note  TEXT NOT NULL DEFAULT ''
);
