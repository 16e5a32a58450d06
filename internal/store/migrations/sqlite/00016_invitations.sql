-- Invitations (SPEC S6): how a person an administrator adds gets their
-- first key without the administrator ever holding it. The secret is kept
-- as a SHA-256 only. A row stays after it is used, replaced or expired, so
-- a second use can say when the first one was (and the audit log from
-- where). recovery is 1 for an operator's invitation, which a user who
-- already has keys may redeem.

-- +goose Up
CREATE TABLE invitations (
    seq           INTEGER PRIMARY KEY,
    id            TEXT    NOT NULL UNIQUE,
    user_id       TEXT    NOT NULL REFERENCES users (id),
    created_by    TEXT    NOT NULL,
    recovery      INTEGER NOT NULL,
    hash          BLOB    NOT NULL,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL,
    replaced_at   INTEGER,
    redeemed_at   INTEGER,
    redeemed_from TEXT    NOT NULL DEFAULT '',
    key_id        TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX invitations_user ON invitations (user_id);

-- +goose Down
DROP TABLE invitations;
