-- Repositories (SPEC S9, S17): tokens the local forge mints (hashed), the
-- credentials handed to sandboxes (to revoke them when a sandbox ends or a
-- refresh replaces them), and the refs each sandbox created (the only ones
-- it may delete).

-- +goose Up
CREATE TABLE forge_tokens (
    id         TEXT    NOT NULL PRIMARY KEY,
    repo       TEXT    NOT NULL,
    hash       BLOB    NOT NULL,
    expires_at INTEGER NOT NULL,
    revoked_at INTEGER
);

CREATE TABLE credentials (
    seq        INTEGER PRIMARY KEY,
    sandbox_id TEXT    NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    token_id   TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE INDEX credentials_sandbox ON credentials (sandbox_id);

CREATE TABLE sandbox_refs (
    sandbox_id TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    ref        TEXT NOT NULL,
    PRIMARY KEY (sandbox_id, ref)
);

-- How each class and sandbox reaches its repository: gateway or token.
ALTER TABLE classes ADD COLUMN git TEXT NOT NULL DEFAULT 'gateway';
ALTER TABLE sandboxes ADD COLUMN git_mode TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sandboxes DROP COLUMN git_mode;
ALTER TABLE classes DROP COLUMN git;
DROP TABLE sandbox_refs;
DROP TABLE credentials;
DROP TABLE forge_tokens;
