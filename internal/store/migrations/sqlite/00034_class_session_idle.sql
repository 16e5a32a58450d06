-- How long a session of a class (an agent sandbox created with
-- --session) waits suspended for its next task before the sweep ends it,
-- in nanoseconds as default_ttl and max_ttl are; 0: until its lifetime
-- ends.

-- +goose Up
ALTER TABLE classes ADD COLUMN session_idle INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE classes DROP COLUMN session_idle;
