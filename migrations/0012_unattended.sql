-- Alerts handed to alerts.fallback, the command run when WhatsApp cannot
-- carry alerts to the main chat (logged out, or down longer than
-- alerts.cooldown), so each goes to it once, also across restarts. The
-- outbox row itself stays queued and reaches the main chat once it is back.
CREATE TABLE alert_fallbacks (
    outbox_id INTEGER PRIMARY KEY,
    sent_at   INTEGER NOT NULL
);

-- Agent runs per group and hour (unix hours), counted when each run ends,
-- for the daily summary (alerts.daily): runs and failures of the last day.
CREATE TABLE run_hours (
    folder   TEXT NOT NULL,
    hour     INTEGER NOT NULL,
    runs     INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (folder, hour)
);
