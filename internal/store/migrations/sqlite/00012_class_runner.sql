-- A class's default runner (SPEC S13): what its agent sandboxes run when
-- their creator names none; '' leaves it to the deployment's default.

-- +goose Up
ALTER TABLE classes ADD COLUMN runner TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE classes DROP COLUMN runner;
