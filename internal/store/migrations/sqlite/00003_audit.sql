-- The audit log (SPEC S17): append-only; nothing updates or deletes a row
-- except retention.

-- +goose Up
CREATE TABLE audit (
    seq        INTEGER PRIMARY KEY,
    at         INTEGER NOT NULL,
    org_id     TEXT    NOT NULL DEFAULT '',
    actor_id   TEXT    NOT NULL DEFAULT '',
    sandbox_id TEXT    NOT NULL DEFAULT '',
    action     TEXT    NOT NULL,
    target     TEXT    NOT NULL DEFAULT '',
    outcome    TEXT    NOT NULL DEFAULT 'ok',
    detail     TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX audit_org_at ON audit (org_id, at);
CREATE INDEX audit_sandbox ON audit (sandbox_id);

-- +goose Down
DROP TABLE audit;
