-- Runs are counted where a run's end is recorded (runner.RecordLastRun),
-- not by triggers on last_runs: that row is kept only while no later run
-- is there, and a run recorded out of order updates nothing, so its
-- trigger never fired and the run went uncounted.
DROP TRIGGER counters_runs_first;
DROP TRIGGER counters_runs;
