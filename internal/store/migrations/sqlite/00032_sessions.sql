-- Agent sessions (SPEC S13, sessions): a session sandbox stays after each
-- task and is given the next, so a sandbox has runs 1, 2, …, numbered by
-- seq (1 for every run before this, and for an agent sandbox that is not a
-- session); task is the task a run was given ('' for a run before this:
-- its sandbox's task), onto the commit its branch was at when it started
-- ('' for a first run). sandboxes.session says a sandbox is a session.
--
-- The key of runs becomes (sandbox_id, seq), which SQLite changes only by
-- rebuilding the table: make the new one, copy, drop, rename. The foreign
-- keys stay on (PRAGMA foreign_keys cannot change inside goose's
-- transaction), which is safe: no table references runs, so dropping it
-- deletes nothing else, and the new table's rows reference sandboxes as
-- the old ones did.

-- +goose Up
CREATE TABLE runs_new (
    sandbox_id     TEXT    NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    seq            INTEGER NOT NULL DEFAULT 1,
    task           TEXT    NOT NULL DEFAULT '',
    onto           TEXT    NOT NULL DEFAULT '',
    runner         TEXT    NOT NULL,
    model          TEXT    NOT NULL DEFAULT '',
    state          TEXT    NOT NULL,
    exit_code      INTEGER NOT NULL DEFAULT 0,
    error          TEXT    NOT NULL DEFAULT '',
    branch         TEXT    NOT NULL DEFAULT '',
    commit_id      TEXT    NOT NULL DEFAULT '',
    telemetry      TEXT    NOT NULL DEFAULT '{}',
    lines          INTEGER NOT NULL DEFAULT 0,
    ignored        INTEGER NOT NULL DEFAULT 0,
    started_at     INTEGER NOT NULL,
    ended_at       INTEGER,
    review_outcome TEXT    NOT NULL DEFAULT '',
    review_summary TEXT    NOT NULL DEFAULT '',
    review_sha256  TEXT    NOT NULL DEFAULT '',
    review_reason  TEXT    NOT NULL DEFAULT '',
    review_file    TEXT    NOT NULL DEFAULT '',
    outputs        TEXT,
    results        TEXT,
    exited         INTEGER NOT NULL DEFAULT 0,
    ended          TEXT    NOT NULL DEFAULT '',
    ended_by       TEXT    NOT NULL DEFAULT '',
    kelos_setup    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (sandbox_id, seq)
);
INSERT INTO runs_new (sandbox_id, seq, runner, model, state, exit_code, error, branch, commit_id, telemetry, lines, ignored,
        started_at, ended_at, review_outcome, review_summary, review_sha256, review_reason, review_file, outputs, results,
        exited, ended, ended_by, kelos_setup)
    SELECT sandbox_id, 1, runner, model, state, exit_code, error, branch, commit_id, telemetry, lines, ignored,
        started_at, ended_at, review_outcome, review_summary, review_sha256, review_reason, review_file, outputs, results,
        exited, ended, ended_by, kelos_setup
    FROM runs;
DROP TABLE runs;
ALTER TABLE runs_new RENAME TO runs;
ALTER TABLE sandboxes ADD COLUMN session INTEGER NOT NULL DEFAULT 0;

-- +goose Down
-- A sandbox keeps its latest run alone, the one it was read by before
-- sessions.
ALTER TABLE sandboxes DROP COLUMN session;
CREATE TABLE runs_old (
    sandbox_id     TEXT    NOT NULL PRIMARY KEY REFERENCES sandboxes (id) ON DELETE CASCADE,
    runner         TEXT    NOT NULL,
    model          TEXT    NOT NULL DEFAULT '',
    state          TEXT    NOT NULL,
    exit_code      INTEGER NOT NULL DEFAULT 0,
    error          TEXT    NOT NULL DEFAULT '',
    branch         TEXT    NOT NULL DEFAULT '',
    commit_id      TEXT    NOT NULL DEFAULT '',
    telemetry      TEXT    NOT NULL DEFAULT '{}',
    lines          INTEGER NOT NULL DEFAULT 0,
    ignored        INTEGER NOT NULL DEFAULT 0,
    started_at     INTEGER NOT NULL,
    ended_at       INTEGER,
    review_outcome TEXT    NOT NULL DEFAULT '',
    review_summary TEXT    NOT NULL DEFAULT '',
    review_sha256  TEXT    NOT NULL DEFAULT '',
    review_reason  TEXT    NOT NULL DEFAULT '',
    review_file    TEXT    NOT NULL DEFAULT '',
    outputs        TEXT,
    results        TEXT,
    exited         INTEGER NOT NULL DEFAULT 0,
    ended          TEXT    NOT NULL DEFAULT '',
    ended_by       TEXT    NOT NULL DEFAULT '',
    kelos_setup    INTEGER NOT NULL DEFAULT 0
);
INSERT INTO runs_old (sandbox_id, runner, model, state, exit_code, error, branch, commit_id, telemetry, lines, ignored,
        started_at, ended_at, review_outcome, review_summary, review_sha256, review_reason, review_file, outputs, results,
        exited, ended, ended_by, kelos_setup)
    SELECT sandbox_id, runner, model, state, exit_code, error, branch, commit_id, telemetry, lines, ignored,
        started_at, ended_at, review_outcome, review_summary, review_sha256, review_reason, review_file, outputs, results,
        exited, ended, ended_by, kelos_setup
    FROM runs r
    WHERE seq = (SELECT MAX(seq) FROM runs l WHERE l.sandbox_id = r.sandbox_id);
DROP TABLE runs;
ALTER TABLE runs_old RENAME TO runs;
