-- Compatibility mode (SPEC S13.6).

-- +goose Up
ALTER TABLE classes ADD COLUMN contract TEXT NOT NULL DEFAULT 'berth';
ALTER TABLE classes ADD COLUMN setup_command TEXT;
ALTER TABLE sandboxes ADD COLUMN contract TEXT NOT NULL DEFAULT 'berth';
ALTER TABLE sandboxes ADD COLUMN setup_command TEXT;
ALTER TABLE runs ADD COLUMN outputs TEXT;
ALTER TABLE runs ADD COLUMN results TEXT;

-- +goose Down
ALTER TABLE runs DROP COLUMN results;
ALTER TABLE runs DROP COLUMN outputs;
ALTER TABLE sandboxes DROP COLUMN setup_command;
ALTER TABLE sandboxes DROP COLUMN contract;
ALTER TABLE classes DROP COLUMN setup_command;
ALTER TABLE classes DROP COLUMN contract;
