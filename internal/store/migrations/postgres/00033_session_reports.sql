-- Reports of sessions (SPEC S13, sessions): a session's runs each owe
-- their forge a report, so a report is for its sandbox's run seq (1 for
-- every report before this); a session's first report holds the pull
-- request it opened, which its later tasks follow, found by (repo,
-- change_number). triggers.session makes a trigger's runs sessions.
-- The key of run_reports becomes (sandbox_id, seq).

-- +goose Up
ALTER TABLE run_reports ADD COLUMN seq INTEGER NOT NULL DEFAULT 1;
ALTER TABLE run_reports DROP CONSTRAINT run_reports_pkey;
ALTER TABLE run_reports ADD PRIMARY KEY (sandbox_id, seq);
CREATE INDEX run_reports_change ON run_reports (repo, change_number);
ALTER TABLE triggers ADD COLUMN session INTEGER NOT NULL DEFAULT 0;

-- +goose Down
-- A sandbox keeps its latest report alone, as 00032's Down keeps its
-- latest run: the two stay each other's.
ALTER TABLE triggers DROP COLUMN session;
DROP INDEX run_reports_change;
DELETE FROM run_reports r WHERE seq < (SELECT MAX(seq) FROM run_reports l WHERE l.sandbox_id = r.sandbox_id);
ALTER TABLE run_reports DROP CONSTRAINT run_reports_pkey;
ALTER TABLE run_reports ADD PRIMARY KEY (sandbox_id);
ALTER TABLE run_reports DROP COLUMN seq;
