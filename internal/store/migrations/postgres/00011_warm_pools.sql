-- Warm pools (SPEC S12): whether a sandbox was taken from its class's
-- pool, and the one-time bootstrap tokens with which a pool's machine
-- fetches its environment once claimed (the hash only, never the token).

-- +goose Up
ALTER TABLE sandboxes ADD COLUMN from_pool INTEGER NOT NULL DEFAULT 0;

CREATE TABLE bootstrap_tokens (
    hash       TEXT   PRIMARY KEY,
    sandbox_id TEXT   NOT NULL REFERENCES sandboxes (id),
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at    BIGINT
);
CREATE INDEX bootstrap_tokens_sandbox ON bootstrap_tokens (sandbox_id);

-- +goose Down
DROP INDEX bootstrap_tokens_sandbox;
DROP TABLE bootstrap_tokens;
ALTER TABLE sandboxes DROP COLUMN from_pool;
