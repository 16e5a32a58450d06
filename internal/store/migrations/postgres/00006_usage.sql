-- Usage reports and retention (SPEC S8).

-- +goose Up
CREATE INDEX sandboxes_created ON sandboxes (org_id, created_at);
CREATE INDEX sandboxes_ended ON sandboxes (ended_at) WHERE live = 0;
CREATE INDEX keys_sandbox ON keys (sandbox_id) WHERE sandbox_id <> '';

-- +goose Down
DROP INDEX keys_sandbox;
DROP INDEX sandboxes_ended;
DROP INDEX sandboxes_created;
