-- Agent runs (SPEC S13).

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
    lines       BIGINT  NOT NULL DEFAULT 0,
    ignored     BIGINT  NOT NULL DEFAULT 0,
    started_at  BIGINT  NOT NULL,
    ended_at    BIGINT
);

-- +goose Down
DROP TABLE runs;
