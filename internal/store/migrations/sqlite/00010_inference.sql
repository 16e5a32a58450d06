-- Inference through the gateway (SPEC S14): an organisation's (project_id
-- '') and its projects' inference settings, and one row per model request
-- as the gateway metered it, summed per session (an agent sandbox's run)
-- and per month against budgets.

-- +goose Up
CREATE TABLE inference_settings (
    org_id        TEXT    NOT NULL REFERENCES organisations (id),
    project_id    TEXT    NOT NULL,
    models        TEXT,             -- JSON list; NULL: not set
    budget_usd    REAL,             -- a month's budget; NULL: none
    rate_requests INTEGER,          -- NULL: no rate limit
    rate_period   INTEGER,          -- nanoseconds
    system_prompt TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (org_id, project_id)
);

CREATE TABLE inference_usage (
    seq         INTEGER PRIMARY KEY,
    at          INTEGER NOT NULL,
    org_id      TEXT    NOT NULL,
    project_id  TEXT    NOT NULL,
    user_id     TEXT    NOT NULL,
    key_id      TEXT    NOT NULL,
    sandbox_id  TEXT    NOT NULL,
    session     TEXT    NOT NULL,
    provider    TEXT    NOT NULL,
    model       TEXT    NOT NULL,
    dialect     TEXT    NOT NULL,
    status      INTEGER NOT NULL,
    input       INTEGER NOT NULL,
    cache_read  INTEGER NOT NULL,
    cache_write INTEGER NOT NULL,
    output      INTEGER NOT NULL,
    reasoning   INTEGER NOT NULL,
    cost_usd    REAL    NOT NULL,
    metered     INTEGER NOT NULL
);
CREATE INDEX inference_usage_session ON inference_usage (session) WHERE session <> '';
CREATE INDEX inference_usage_spend ON inference_usage (org_id, project_id, at);

-- +goose Down
DROP INDEX inference_usage_spend;
DROP INDEX inference_usage_session;
DROP TABLE inference_usage;
DROP TABLE inference_settings;
