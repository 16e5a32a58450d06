-- The project a user's new sandboxes and keys land in, which only an
-- administrator sets (berth user set-project); NULL: the organisation's
-- oldest, as before. The account service checks it is a project of the
-- user's organisation (no REFERENCES: SQLite cannot drop such a column).

-- +goose Up
ALTER TABLE users ADD COLUMN project_id TEXT;

-- +goose Down
ALTER TABLE users DROP COLUMN project_id;
