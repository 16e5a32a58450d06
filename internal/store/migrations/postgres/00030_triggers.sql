-- The agent work loop (issue 23): a project's triggers (a schedule's
-- with its next firing), the deliveries
-- each was handed (once each: a redelivery starts nothing), and the
-- reports runs owe their forge (a draft change, a comment), kept until
-- the forge takes them.

-- +goose Up
CREATE TABLE triggers (
    id           TEXT    PRIMARY KEY,
    org_id       TEXT    NOT NULL,
    project_id   TEXT    NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name         TEXT    NOT NULL,
    source       TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    label        TEXT    NOT NULL,
    command      TEXT    NOT NULL,
    schedule     TEXT    NOT NULL,
    next_at      BIGINT  NOT NULL,
    repo         TEXT    NOT NULL,
    base         TEXT    NOT NULL,
    class        TEXT    NOT NULL,
    runner       TEXT    NOT NULL,
    model        TEXT    NOT NULL,
    role         TEXT    NOT NULL,
    task         TEXT    NOT NULL,
    concurrency  INTEGER NOT NULL,
    daily_tokens BIGINT  NOT NULL,
    daily_usd    DOUBLE PRECISION NOT NULL,
    open_pr      INTEGER NOT NULL,
    owner_id     TEXT    NOT NULL,
    created_at   BIGINT  NOT NULL,
    updated_at   BIGINT  NOT NULL,
    UNIQUE (project_id, name)
);
CREATE INDEX triggers_on ON triggers (source, repo);
CREATE INDEX triggers_due ON triggers (source, next_at);

CREATE TABLE trigger_deliveries (
    trigger_id    TEXT    NOT NULL REFERENCES triggers (id) ON DELETE CASCADE,
    delivery_id   TEXT    NOT NULL,
    at            BIGINT  NOT NULL,
    outcome       TEXT    NOT NULL,
    reason        TEXT    NOT NULL,
    sandbox_id    TEXT    NOT NULL,
    thread_kind   TEXT    NOT NULL,
    thread_number INTEGER NOT NULL,
    url           TEXT    NOT NULL,
    PRIMARY KEY (trigger_id, delivery_id)
);
CREATE INDEX trigger_deliveries_at ON trigger_deliveries (trigger_id, at);

CREATE TABLE run_reports (
    sandbox_id    TEXT    PRIMARY KEY REFERENCES sandboxes (id) ON DELETE CASCADE,
    org_id        TEXT    NOT NULL,
    repo          TEXT    NOT NULL,
    base          TEXT    NOT NULL,
    trigger_id    TEXT    NOT NULL,
    thread_kind   TEXT    NOT NULL,
    thread_number INTEGER NOT NULL,
    open_pr       INTEGER NOT NULL,
    comment       INTEGER NOT NULL,
    state         TEXT    NOT NULL,
    change_number INTEGER NOT NULL,
    change_url    TEXT    NOT NULL,
    change_existed INTEGER NOT NULL,
    comments      TEXT    NOT NULL,
    error         TEXT    NOT NULL,
    attempts      INTEGER NOT NULL,
    next_at       BIGINT  NOT NULL
);
CREATE INDEX run_reports_due ON run_reports (state, next_at);

-- +goose Down
DROP TABLE run_reports;
DROP TABLE trigger_deliveries;
DROP TABLE triggers;
