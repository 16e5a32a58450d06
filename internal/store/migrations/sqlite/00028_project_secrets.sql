-- Secrets by placeholder (issue 22): a project's secrets, each with the
-- hosts it is for and its value sealed (AES-GCM) with the deployment's
-- key (BERTH_SECRETS_KEY_FILE), bound to its project and name. The value
-- is never kept in the clear.

-- +goose Up
CREATE TABLE project_secrets (
    project_id TEXT    NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name       TEXT    NOT NULL,
    org_id     TEXT    NOT NULL,
    hosts      TEXT    NOT NULL,
    value      BLOB    NOT NULL,
    created_at INTEGER NOT NULL,
    created_by TEXT    NOT NULL,
    PRIMARY KEY (project_id, name)
);

-- +goose Down
DROP TABLE project_secrets;
