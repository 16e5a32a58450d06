-- Sign-in through the deployment's OpenID Connect identity provider
-- (issue 20; package sso).
--
-- users: issuer and subject name the person at the provider once they
-- have signed in through it (NULL for a user made by hand who never has);
-- one person is at most one user of each organisation, which the unique
-- index holds (NULLs are distinct, so unlinked users never clash).
-- disabled_by_idp is 1 when berth disabled the user because the provider
-- no longer lets them in, so a later sign-in it allows enables them again.
--
-- sso_mappings: an organisation's groups whose people become its members
-- and administrators (JSON text lists; NULL is a nil list). updated_at is
-- the time of the events the write recorded (NULL when it recorded none):
-- the store reads no clock.
--
-- sso_attempts: sign-ins under way, between sending the browser to the
-- provider and its return, found by the SHA-256 of their state and taken
-- (deleted) once. cli_* are NULL unless berth login --sso started it.
--
-- sso_handoffs: CLI sign-ins back from the provider, found by the SHA-256
-- of the one-time code and taken once; session_* are the session the
-- trade opens (its client, person and sealed refresh token).
--
-- sso_devices: berth login --sso --device's sign-ins (a device
-- authorization grant, RFC 8628's flow, berth's own), found by the SHA-256
-- of the device code the CLI polls with, or of the user code a person
-- types in the panel; user_id (or denied) is set once somebody signed in
-- for it, with the session the CLI's next poll opens.
-- sso_attempts.device_id names the device a sign-in is for.
--
-- sso_sessions: one sign-in's hold on the provider: the key it gave and
-- the sealed refresh token (NULL when the provider gave none) berth
-- refreshes it with, and berth's client id at the provider then (a
-- session of another client is ended, never taken for a refusal). A session is live until ended_at or expires_at (its
-- key's expiry); sso_sessions_due is what the refresh loop scans.

-- +goose Up
ALTER TABLE users ADD COLUMN issuer TEXT;
ALTER TABLE users ADD COLUMN subject TEXT;
ALTER TABLE users ADD COLUMN disabled_by_idp INTEGER NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX users_org_identity ON users (org_id, issuer, subject);
CREATE INDEX users_identity ON users (issuer, subject);

CREATE TABLE sso_mappings (
    org_id         TEXT    PRIMARY KEY REFERENCES organisations (id),
    members        TEXT,
    administrators TEXT,
    updated_at     INTEGER
);

CREATE TABLE sso_attempts (
    id            TEXT    PRIMARY KEY,
    nonce         TEXT    NOT NULL,
    verifier      TEXT    NOT NULL,
    browser       BLOB    NOT NULL,
    next          TEXT    NOT NULL,
    org           TEXT    NOT NULL,
    cli_port      INTEGER,
    cli_challenge TEXT,
    cli_state     TEXT,
    device_id     TEXT,
    device_code   TEXT,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL
);
CREATE INDEX sso_attempts_expires ON sso_attempts (expires_at);

CREATE TABLE sso_handoffs (
    id              TEXT    PRIMARY KEY,
    user_id         TEXT    NOT NULL REFERENCES users (id),
    challenge       TEXT    NOT NULL,
    session_client  TEXT    NOT NULL,
    session_issuer  TEXT    NOT NULL,
    session_subject TEXT    NOT NULL,
    session_refresh BLOB,
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL
);
CREATE INDEX sso_handoffs_expires ON sso_handoffs (expires_at);

CREATE TABLE sso_devices (
    id              TEXT    PRIMARY KEY,
    user_code       TEXT    NOT NULL UNIQUE,
    key_name        TEXT    NOT NULL,
    org             TEXT    NOT NULL,
    interval_ns     INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    polled_at       INTEGER,
    user_id         TEXT    REFERENCES users (id),
    denied          TEXT    NOT NULL DEFAULT '',
    session_issuer  TEXT    NOT NULL DEFAULT '',
    session_subject TEXT    NOT NULL DEFAULT '',
    session_refresh BLOB
);
CREATE INDEX sso_devices_expires ON sso_devices (expires_at);

CREATE TABLE sso_sessions (
    seq          INTEGER PRIMARY KEY,
    id           TEXT    NOT NULL UNIQUE,
    user_id      TEXT    NOT NULL REFERENCES users (id),
    key_id       TEXT    NOT NULL UNIQUE REFERENCES keys (id),
    client       TEXT    NOT NULL,
    client_id    TEXT    NOT NULL DEFAULT '',
    issuer       TEXT    NOT NULL,
    subject      TEXT    NOT NULL,
    refresh      BLOB,
    created_at   INTEGER NOT NULL,
    refreshed_at INTEGER,
    expires_at   INTEGER NOT NULL,
    ended_at     INTEGER
);
CREATE INDEX sso_sessions_user ON sso_sessions (user_id);
CREATE INDEX sso_sessions_expires ON sso_sessions (expires_at);
CREATE INDEX sso_sessions_due ON sso_sessions (COALESCE(refreshed_at, created_at))
    WHERE ended_at IS NULL AND refresh IS NOT NULL;

-- +goose Down
DROP TABLE sso_sessions;
DROP TABLE sso_devices;
DROP TABLE sso_handoffs;
DROP TABLE sso_attempts;
DROP TABLE sso_mappings;
DROP INDEX users_identity;
DROP INDEX users_org_identity;
ALTER TABLE users DROP COLUMN disabled_by_idp;
ALTER TABLE users DROP COLUMN subject;
ALTER TABLE users DROP COLUMN issuer;
