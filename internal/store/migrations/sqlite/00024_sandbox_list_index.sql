-- Every live sandbox newest first (an operator's list), read from an index
-- in that order rather than sorted: without it the first page sorted every
-- live row, with 10,000 sandboxes about 10 ms of a 12 ms list on SQLite and
-- its p99 over 50 ms under load (bench/density.sh). An organisation's list
-- is in order already in sandboxes_created (org_id, created_at).

-- +goose Up
CREATE INDEX sandboxes_live_created ON sandboxes (created_at, seq) WHERE live = 1;

-- +goose Down
DROP INDEX sandboxes_live_created;
