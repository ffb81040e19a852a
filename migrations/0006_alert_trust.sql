-- Alerts the owner can trust: a violation says which rule refused it, and
-- flood control is per group. In one alerts.cooldown window a group raises
-- at most alerts.maxPerGroup alerts, one per distinct (kind, tool, target);
-- everything else is counted in alert_pending and sent as one summary per
-- group when the window ends.

ALTER TABLE violations ADD COLUMN rule TEXT NOT NULL DEFAULT '';

CREATE TABLE alert_windows (
    grp        TEXT PRIMARY KEY,
    window_end INTEGER NOT NULL,
    sent       INTEGER NOT NULL DEFAULT 0 -- alerts raised in this window
);

-- alerted: this (kind, tool, target) had its own alert in the window;
-- n: violations folded into the window's summary.
CREATE TABLE alert_pending (
    grp     TEXT NOT NULL,
    kind    TEXT NOT NULL,
    tool    TEXT NOT NULL,
    target  TEXT NOT NULL,
    alerted INTEGER NOT NULL DEFAULT 0,
    n       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (grp, kind, tool, target)
);

-- Open windows and repeats counted before the upgrade carry over.
INSERT INTO alert_windows (grp, window_end, sent)
    SELECT grp, max(window_end), count(*) FROM alert_cooldowns GROUP BY grp;
INSERT INTO alert_pending (grp, kind, tool, target, alerted, n)
    SELECT grp, kind, last_tool, target, 1, pending FROM alert_cooldowns WHERE true
    ON CONFLICT (grp, kind, tool, target) DO UPDATE SET n = n + excluded.n;
DROP TABLE alert_cooldowns;
