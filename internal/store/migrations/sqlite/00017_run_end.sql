-- How a run ended (SPEC S13): exited says its machine exited and
-- exit_code is its code; a run that did not exit (its sandbox ended under
-- it, its machine never started or vanished) has no exit code. ended is
-- the state its sandbox was moved to under it, ended_by the user who did
-- it ('' for berth itself: the sweep).

-- +goose Up
ALTER TABLE runs ADD COLUMN exited INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN ended TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN ended_by TEXT NOT NULL DEFAULT '';
-- The runs before this said how they ended only in their error.
UPDATE runs SET exited = 1
    WHERE state <> 'running' AND exit_code <> -1 AND error NOT LIKE 'the sandbox ended (%';
UPDATE runs SET exit_code = 0 WHERE exited = 0;

-- +goose Down
ALTER TABLE runs DROP COLUMN ended_by;
ALTER TABLE runs DROP COLUMN ended;
ALTER TABLE runs DROP COLUMN exited;
