-- Models and providers at the relay: each request's provider (as the
-- config names it; the model column holds the model as configured, or as
-- the answer named it when the group has none), the agent's own cost
-- estimate per run, and which group is served by a fallback since when.
ALTER TABLE usage_requests ADD COLUMN provider TEXT NOT NULL DEFAULT 'anthropic';

-- The SDK's total_cost_usd, as the agent reported it in its last result
-- frame of a run: kept beside the relay's own count, never summed into it.
CREATE TABLE usage_agent_costs (
    run_id       TEXT PRIMARY KEY,
    group_folder TEXT NOT NULL,
    at           INTEGER NOT NULL,   -- unix ms of the last report
    cost_usd     REAL NOT NULL
);
CREATE INDEX usage_agent_costs_group_at ON usage_agent_costs (group_folder, at);

-- A group whose last request was served by a fallback: which one, since
-- when, and whether the main chat was told (after 10 minutes). The row
-- goes when the chosen upstream answers again.
CREATE TABLE group_fallbacks (
    group_folder TEXT PRIMARY KEY,
    upstream     TEXT NOT NULL,      -- provider/model of the fallback
    since        INTEGER NOT NULL,   -- unix ms
    told         INTEGER NOT NULL DEFAULT 0
);
