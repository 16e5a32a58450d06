-- A disabled user's keys stop working and their sandboxes end or are
-- suspended (SPEC S9).

-- +goose Up
ALTER TABLE users ADD COLUMN disabled INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE users DROP COLUMN disabled;
