-- The flood cap: whatever the cooldown and however many distinct targets,
-- at most ten alert messages of one group reach the main chat in any
-- minute. alert_sent holds when each of a group's alert messages of the
-- last minute was queued; alert_capped counts what the cap held back
-- since (files: how many of those were refused IPC files), said in one
-- summary once the group's minute has room again.
CREATE TABLE alert_sent (
    grp TEXT NOT NULL,
    at  INTEGER NOT NULL
);
CREATE INDEX alert_sent_grp_at ON alert_sent (grp, at);

CREATE TABLE alert_capped (
    grp   TEXT PRIMARY KEY,
    n     INTEGER NOT NULL DEFAULT 0,
    files INTEGER NOT NULL DEFAULT 0
);
