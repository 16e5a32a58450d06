-- Agent runs (SPEC S13): one per agent sandbox that ran a runner, with the
-- telemetry its agent reported and what came out.

-- +goose Up
CREATE TABLE runs (
    sandbox_id  TEXT    NOT NULL PRIMARY KEY REFERENCES sandboxes (id) ON DELETE CASCADE,
    runner      TEXT    NOT NULL,
    model       TEXT    NOT NULL DEFAULT '',
    state       TEXT    NOT NULL,
    exit_code   INTEGER NOT NULL DEFAULT 0,
    error       TEXT    NOT NULL DEFAULT '',
    branch      TEXT    NOT NULL DEFAULT '',
    commit_id   TEXT    NOT NULL DEFAULT '',
    telemetry   TEXT    NOT NULL DEFAULT '{}',
    lines       INTEGER NOT NULL DEFAULT 0,
    ignored     INTEGER NOT NULL DEFAULT 0,
    started_at  INTEGER NOT NULL,
    ended_at    INTEGER
);

-- +goose Down
DROP TABLE runs;
