-- Reports of sessions (SPEC S13, sessions): a session's runs each owe
-- their forge a report, so a report is for its sandbox's run seq (1 for
-- every report before this); a session's first report holds the pull
-- request it opened, which its later tasks follow, found by (repo,
-- change_number). triggers.session makes a trigger's runs sessions.
--
-- The key of run_reports becomes (sandbox_id, seq), which SQLite changes
-- only by rebuilding the table, as 00032 did for runs: make the new one,
-- copy, drop, rename. No table references run_reports, so dropping it
-- deletes nothing else.

-- +goose Up
CREATE TABLE run_reports_new (
    sandbox_id    TEXT    NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    seq           INTEGER NOT NULL DEFAULT 1,
    org_id        TEXT    NOT NULL,
    repo          TEXT    NOT NULL,
    base          TEXT    NOT NULL,
    trigger_id    TEXT    NOT NULL,
    thread_kind   TEXT    NOT NULL,
    thread_number INTEGER NOT NULL,
    open_pr       INTEGER NOT NULL,
    comment       INTEGER NOT NULL,
    state         TEXT    NOT NULL,
    change_number INTEGER NOT NULL,
    change_url    TEXT    NOT NULL,
    change_existed INTEGER NOT NULL,
    comments      TEXT    NOT NULL,
    error         TEXT    NOT NULL,
    attempts      INTEGER NOT NULL,
    next_at       INTEGER  NOT NULL,
    PRIMARY KEY (sandbox_id, seq)
);
INSERT INTO run_reports_new (sandbox_id, seq, org_id, repo, base, trigger_id, thread_kind, thread_number, open_pr, comment, state,
        change_number, change_url, change_existed, comments, error, attempts, next_at)
    SELECT sandbox_id, 1, org_id, repo, base, trigger_id, thread_kind, thread_number, open_pr, comment, state,
        change_number, change_url, change_existed, comments, error, attempts, next_at
    FROM run_reports;
DROP TABLE run_reports;
ALTER TABLE run_reports_new RENAME TO run_reports;
CREATE INDEX run_reports_due ON run_reports (state, next_at);
CREATE INDEX run_reports_change ON run_reports (repo, change_number);
ALTER TABLE triggers ADD COLUMN session INTEGER NOT NULL DEFAULT 0;

-- +goose Down
-- A sandbox keeps its latest report alone, as 00032's Down keeps its
-- latest run: the two stay each other's.
ALTER TABLE triggers DROP COLUMN session;
CREATE TABLE run_reports_old (
    sandbox_id    TEXT    PRIMARY KEY REFERENCES sandboxes (id) ON DELETE CASCADE,
    org_id        TEXT    NOT NULL,
    repo          TEXT    NOT NULL,
    base          TEXT    NOT NULL,
    trigger_id    TEXT    NOT NULL,
    thread_kind   TEXT    NOT NULL,
    thread_number INTEGER NOT NULL,
    open_pr       INTEGER NOT NULL,
    comment       INTEGER NOT NULL,
    state         TEXT    NOT NULL,
    change_number INTEGER NOT NULL,
    change_url    TEXT    NOT NULL,
    change_existed INTEGER NOT NULL,
    comments      TEXT    NOT NULL,
    error         TEXT    NOT NULL,
    attempts      INTEGER NOT NULL,
    next_at       INTEGER  NOT NULL
);
INSERT INTO run_reports_old (sandbox_id, org_id, repo, base, trigger_id, thread_kind, thread_number, open_pr, comment, state,
        change_number, change_url, change_existed, comments, error, attempts, next_at)
    SELECT sandbox_id, org_id, repo, base, trigger_id, thread_kind, thread_number, open_pr, comment, state,
        change_number, change_url, change_existed, comments, error, attempts, next_at
    FROM run_reports r
    WHERE seq = (SELECT MAX(seq) FROM run_reports l WHERE l.sandbox_id = r.sandbox_id);
DROP TABLE run_reports;
ALTER TABLE run_reports_old RENAME TO run_reports;
CREATE INDEX run_reports_due ON run_reports (state, next_at);
