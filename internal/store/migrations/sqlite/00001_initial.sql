-- The first schema of berth's database, SQLite dialect.
--
-- Conventions (a PostgreSQL migration set must keep them, so the queries in
-- package store work unchanged on both):
--   * times are INTEGER unix nanoseconds, UTC (BIGINT in PostgreSQL); a zero
--     time.Time is NULL, so only columns that may be unset are nullable;
--   * durations are INTEGER nanoseconds, CPU is millicores, memory and disk
--     are bytes (a guardrail's memory ceiling is MiB, as the domain has it);
--   * lists and maps are JSON text; NULL is a nil slice or map, so nil and
--     empty round-trip as different values;
--   * seq is the insertion order, the tie-break when two rows share a
--     created_at (in SQLite INTEGER PRIMARY KEY is the rowid; in PostgreSQL
--     it is a BIGINT identity column);
--   * booleans are INTEGER 0/1.

-- +goose Up
CREATE TABLE organisations (
    seq        INTEGER PRIMARY KEY,
    id         TEXT    NOT NULL UNIQUE,
    name       TEXT    NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);

CREATE TABLE projects (
    seq        INTEGER PRIMARY KEY,
    id         TEXT    NOT NULL UNIQUE,
    org_id     TEXT    NOT NULL REFERENCES organisations (id),
    name       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (org_id, name)
);

CREATE TABLE users (
    seq        INTEGER PRIMARY KEY,
    id         TEXT    NOT NULL UNIQUE,
    org_id     TEXT    NOT NULL REFERENCES organisations (id),
    name       TEXT    NOT NULL,
    email      TEXT    NOT NULL,
    role       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (org_id, name)
);

-- A key's sandbox and project are '' for a user's own key, so they are not
-- foreign keys; a sandbox's key is written before the sandbox row.
CREATE TABLE keys (
    seq        INTEGER PRIMARY KEY,
    id         TEXT    NOT NULL UNIQUE,
    user_id    TEXT    NOT NULL REFERENCES users (id),
    name       TEXT    NOT NULL,
    sandbox_id TEXT    NOT NULL,
    project_id TEXT    NOT NULL,
    hash       BLOB    NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    revoked_at INTEGER
);
CREATE INDEX keys_user ON keys (user_id);

-- One row per organisation (project_id '') and per project that has a
-- guardrail; every limit NULL when not set.
CREATE TABLE guardrails (
    org_id             TEXT    NOT NULL REFERENCES organisations (id),
    project_id         TEXT    NOT NULL,
    max_sandboxes      INTEGER,
    max_sandbox_memory INTEGER,
    max_sandbox_cpu    INTEGER,
    max_sandbox_ttl    INTEGER,
    allowed_repos      TEXT,
    PRIMARY KEY (org_id, project_id)
);

-- Names are lowercase ASCII (package name); PostgreSQL should declare
-- name COLLATE "C" so ORDER BY name agrees with SQLite's BINARY order.
CREATE TABLE classes (
    org_id      TEXT    NOT NULL REFERENCES organisations (id),
    name        TEXT    NOT NULL,
    description TEXT    NOT NULL,
    image       TEXT    NOT NULL,
    isolation   TEXT    NOT NULL,
    cpu         INTEGER NOT NULL,
    memory      INTEGER NOT NULL,
    disk        INTEGER NOT NULL,
    default_ttl INTEGER NOT NULL,
    max_ttl     INTEGER NOT NULL,
    warm        INTEGER NOT NULL,
    purposes    TEXT,
    PRIMARY KEY (org_id, name)
);

-- class is a copy, not a foreign key: a class may be deleted while
-- sandboxes made from it live on (SPEC S4). live mirrors Sandbox.Live().
CREATE TABLE sandboxes (
    seq        INTEGER PRIMARY KEY,
    id         TEXT    NOT NULL UNIQUE,
    name       TEXT    NOT NULL,
    org_id     TEXT    NOT NULL REFERENCES organisations (id),
    project_id TEXT    NOT NULL REFERENCES projects (id),
    owner_id   TEXT    NOT NULL REFERENCES users (id),
    purpose    TEXT    NOT NULL,
    class      TEXT    NOT NULL,
    image      TEXT    NOT NULL,
    isolation  TEXT    NOT NULL,
    runtime    TEXT    NOT NULL,
    cpu        INTEGER NOT NULL,
    memory     INTEGER NOT NULL,
    disk       INTEGER NOT NULL,
    state      TEXT    NOT NULL,
    reason     TEXT    NOT NULL,
    repo       TEXT    NOT NULL,
    branch     TEXT    NOT NULL,
    task       TEXT    NOT NULL,
    runner     TEXT    NOT NULL,
    ssh_keys   TEXT,
    env        TEXT,
    key_id     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    ended_at   INTEGER,
    live       INTEGER NOT NULL
);
-- A name is taken only among its owner's live sandboxes (SPEC S3).
CREATE UNIQUE INDEX sandboxes_live_name ON sandboxes (owner_id, name) WHERE live = 1;
CREATE INDEX sandboxes_org ON sandboxes (org_id, live);
CREATE INDEX sandboxes_project ON sandboxes (project_id, live);
CREATE INDEX sandboxes_name ON sandboxes (name);

-- Running segments (SPEC S8): at most one open (ended_at NULL) per sandbox.
CREATE TABLE segments (
    sandbox_id TEXT    NOT NULL REFERENCES sandboxes (id),
    started_at INTEGER NOT NULL,
    ended_at   INTEGER
);
CREATE INDEX segments_sandbox ON segments (sandbox_id);
CREATE UNIQUE INDEX segments_open ON segments (sandbox_id) WHERE ended_at IS NULL;

-- +goose Down
DROP TABLE segments;
DROP TABLE sandboxes;
DROP TABLE classes;
DROP TABLE guardrails;
DROP TABLE keys;
DROP TABLE users;
DROP TABLE projects;
DROP TABLE organisations;
