-- The agent work loop (issue 23): an organisation's (project_id '') and a
-- project's agent configuration: user-level instructions, and the effort
-- and the default model runs start with.

-- +goose Up
CREATE TABLE agent_configs (
    org_id       TEXT    NOT NULL,
    project_id   TEXT    NOT NULL,
    instructions TEXT    NOT NULL,
    effort       TEXT    NOT NULL,
    model        TEXT    NOT NULL DEFAULT '',
    updated_at   BIGINT  NOT NULL,
    updated_by   TEXT    NOT NULL,
    PRIMARY KEY (org_id, project_id)
);

-- +goose Down
DROP TABLE agent_configs;
