-- When a connection through the gateway last opened, closed or carried
-- bytes to a sandbox (SPEC S3's idle clock), as any replica saw it: the
-- replica that sweeps may not be the one that held the connection.

-- +goose Up
ALTER TABLE sandboxes ADD COLUMN active_at INTEGER;

-- +goose Down
ALTER TABLE sandboxes DROP COLUMN active_at;
