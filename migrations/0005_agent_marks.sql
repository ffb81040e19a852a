-- The process group of every agent running now, so that after a kill -9
-- of the daemon the next start can end what the agents left behind.
CREATE TABLE agent_marks (
    pgid    INTEGER PRIMARY KEY,
    folder  TEXT NOT NULL,
    start   INTEGER NOT NULL,   -- the leader's start time, clock ticks since boot
    boot_id TEXT NOT NULL
);
