-- Agent sessions (SPEC S13, sessions): a session sandbox stays after each
-- task and is given the next, so a sandbox has runs 1, 2, …, numbered by
-- seq (1 for every run before this, and for an agent sandbox that is not a
-- session); task is the task a run was given ('' for a run before this:
-- its sandbox's task), onto the commit its branch was at when it started
-- ('' for a first run). sandboxes.session says a sandbox is a session.
-- The key of runs becomes (sandbox_id, seq).

-- +goose Up
ALTER TABLE runs ADD COLUMN seq INTEGER NOT NULL DEFAULT 1;
ALTER TABLE runs ADD COLUMN task TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN onto TEXT NOT NULL DEFAULT '';
ALTER TABLE runs DROP CONSTRAINT runs_pkey;
ALTER TABLE runs ADD PRIMARY KEY (sandbox_id, seq);
ALTER TABLE sandboxes ADD COLUMN session INTEGER NOT NULL DEFAULT 0;

-- +goose Down
-- A sandbox keeps its latest run alone, the one it was read by before
-- sessions.
ALTER TABLE sandboxes DROP COLUMN session;
DELETE FROM runs r WHERE seq < (SELECT MAX(seq) FROM runs l WHERE l.sandbox_id = r.sandbox_id);
ALTER TABLE runs DROP CONSTRAINT runs_pkey;
ALTER TABLE runs ADD PRIMARY KEY (sandbox_id);
ALTER TABLE runs DROP COLUMN onto;
ALTER TABLE runs DROP COLUMN task;
ALTER TABLE runs DROP COLUMN seq;
