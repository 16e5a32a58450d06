-- Reviewer runs (SPEC S13.5).

-- +goose Up
ALTER TABLE sandboxes ADD COLUMN role TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN review_outcome TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN review_summary TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN review_sha256 TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN review_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN review_file TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE runs DROP COLUMN review_file;
ALTER TABLE runs DROP COLUMN review_reason;
ALTER TABLE runs DROP COLUMN review_sha256;
ALTER TABLE runs DROP COLUMN review_summary;
ALTER TABLE runs DROP COLUMN review_outcome;
ALTER TABLE sandboxes DROP COLUMN role;
