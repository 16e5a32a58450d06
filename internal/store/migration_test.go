package store

import (
	"database/sql"
	"io/fs"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store/storetest"
	"berth.dev/berth/internal/trigger"
	"berth.dev/berth/internal/trigger/event"
)

// beforeSessions is the schema's version before runs were numbered in
// their sandbox (migration 00032).
const beforeSessions = 31

// beforeSessionReports is the schema's version before reports were
// numbered by their run (migration 00033).
const beforeSessionReports = 32

// migrationTest is a test of a migration on the database at url: raw
// opens it without migrating, goose knows it as dialect, and dir holds its
// migrations.
type migrationTest func(t *testing.T, url string, dialect goose.Dialect, dir string, raw func() (*sql.DB, error))

// eachDialect runs test on a new SQLite file and, with a server, on a new
// PostgreSQL schema.
func eachDialect(t *testing.T, test migrationTest) {
	t.Run("SQLite", func(t *testing.T) {
		path := DefaultPath(t.TempDir())
		test(t, path, goose.DialectSQLite3, "migrations/sqlite", func() (*sql.DB, error) {
			return sql.Open("sqlite", path+"?_pragma=foreign_keys(1)")
		})
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		url := storetest.PostgresURL(t) // skips without a server
		test(t, url, goose.DialectPostgres, "migrations/postgres", func() (*sql.DB, error) {
			cfg, err := pgx.ParseConfig(url)
			if err != nil {
				return nil, err
			}
			return stdlib.OpenDB(*cfg), nil
		})
	})
}

// migrateDown takes the database raw opens back to version, and returns
// it open at that schema.
func migrateDown(t *testing.T, version int64, dialect goose.Dialect, dir string, raw func() (*sql.DB, error)) *sql.DB {
	t.Helper()
	db, err := raw()
	if err != nil {
		t.Fatalf("open the database: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	fsys, err := fs.Sub(migrations, dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(dialect, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatalf("goose: %v", err)
	}
	if _, err := p.DownTo(t.Context(), version); err != nil {
		t.Fatalf("migrate down to %d: %v", version, err)
	}
	return db
}

// migrationFixture is an organisation with a project and a user, in a
// store at the current schema.
type migrationFixture struct {
	st  *Store
	t0  time.Time
	org account.Organisation
	prj account.Project
	ann account.User
}

// newMigrationFixture opens the store at url, migrating it, and makes
// the organisation; the caller closes the store.
func newMigrationFixture(t *testing.T, url string) migrationFixture {
	t.Helper()
	ctx := t.Context()
	st, err := Open(ctx, url)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t0 := time.Date(2026, 11, 3, 10, 0, 0, 123456789, time.UTC)
	fx := migrationFixture{st: st, t0: t0,
		org: account.Organisation{ID: "org_1", Name: "acme", CreatedAt: t0},
		prj: account.Project{ID: "prj_1", Org: "org_1", Name: "default", CreatedAt: t0},
		ann: account.User{ID: "usr_ann", Org: "org_1", Name: "ann", Role: account.RoleAdmin, CreatedAt: t0},
	}
	if err := st.CreateOrganisation(ctx, fx.org, fx.prj); err != nil {
		t.Fatalf("CreateOrganisation: %v", err)
	}
	if err := st.CreateUser(ctx, fx.ann); err != nil {
		t.Fatalf("CreateUser: %v", err)
	}
	return fx
}

// agent creates an agent sandbox of the fixture's user, a session if
// session.
func (fx migrationFixture) agent(t *testing.T, name string, session bool) sandbox.Sandbox {
	t.Helper()
	sb := sandbox.Sandbox{ID: sandbox.NewID(), Name: name, Org: fx.org.ID, Project: fx.prj.ID, Owner: fx.ann.ID,
		Purpose: sandbox.PurposeAgent, Class: "small", Image: "ghcr.io/acme/agent:1", Isolation: sandbox.TierStandard,
		State: sandbox.StateStarting, Runner: "pi", Task: "fix the build", Session: session, CreatedAt: fx.t0, ExpiresAt: fx.t0.Add(time.Hour)}
	key, _ := account.NewSandboxKey(fx.ann.ID, string(sb.ID), fx.prj.ID, sb.ExpiresAt, fx.t0)
	sb.KeyID = key.ID
	if err := fx.st.CreateSandbox(t.Context(), sb, key, func(sandbox.Live) error { return nil }); err != nil {
		t.Fatalf("CreateSandbox %s: %v", name, err)
	}
	return sb
}

// TestRunsBeforeSessions: a run written before migration 00032 reads back
// as its sandbox's run 1, with no task and no onto, and its sandbox takes
// a run 2; the migration's Down keeps each sandbox's latest run alone, in
// the shape before.
func TestRunsBeforeSessions(t *testing.T) {
	eachDialect(t, testRunsBeforeSessions)
}

func testRunsBeforeSessions(t *testing.T, url string, dialect goose.Dialect, dir string, raw func() (*sql.DB, error)) {
	ctx := t.Context()

	// The sandboxes, made at the current schema: a session with two runs,
	// and one whose run is written at the schema before.
	fx := newMigrationFixture(t, url)
	st, t0 := fx.st, fx.t0
	session, old := fx.agent(t, "session", true), fx.agent(t, "old", false)
	latest := agentrun.Run{Sandbox: session.ID, Seq: 2, Task: "add a test", Onto: "c1", Runner: "pi", State: agentrun.RunSucceeded,
		Exited: true, Commit: "c2", StartedAt: t0.Add(time.Hour)}
	for _, r := range []agentrun.Run{
		{Sandbox: session.ID, Seq: 1, Task: "fix the build", Runner: "pi", State: agentrun.RunSucceeded, Exited: true, Commit: "c1", StartedAt: t0},
		latest,
	} {
		if err := st.PutRun(ctx, r); err != nil {
			t.Fatalf("PutRun %d: %v", r.Seq, err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	// Back to the schema before, where a sandbox has one run.
	db := migrateDown(t, beforeSessions, dialect, dir, raw)
	var n int
	var commit string
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*), MAX(commit_id) FROM runs WHERE sandbox_id = $1`, string(session.ID)).
		Scan(&n, &commit); err != nil {
		t.Fatalf("read the session's runs after the Down: %v", err)
	}
	if n != 1 || commit != latest.Commit {
		t.Errorf("after the Down the session has %d runs, of commit %q; want 1, its latest's (%s)", n, commit, latest.Commit)
	}
	if _, err := db.ExecContext(ctx, `
		INSERT INTO runs (sandbox_id, runner, model, state, exit_code, error, branch, commit_id, telemetry, lines, ignored, started_at, ended_at)
		VALUES ($1, 'pi', 'm', 'failed', 0, 'the sandbox ended', 'berth/old', 'abc', '{"turns": 3}', 12, 1, $2, $3)`,
		string(old.ID), t0.UnixNano(), t0.Add(time.Minute).UnixNano()); err != nil {
		t.Fatalf("write a run at the schema before: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Up again, as a gateway's start migrates it.
	st, err := Open(ctx, url)
	if err != nil {
		t.Fatalf("Open after the Down: %v", err)
	}
	defer st.Close()
	want := agentrun.Run{Sandbox: old.ID, Seq: 1, Runner: "pi", Model: "m", State: agentrun.RunFailed, Error: "the sandbox ended",
		Branch: "berth/old", Commit: "abc", Lines: 12, Ignored: 1, StartedAt: t0, EndedAt: t0.Add(time.Minute)}
	want.Telemetry.Turns = 3
	ignore := cmpopts.IgnoreUnexported(runner.Telemetry{})
	got, err := st.GetRun(ctx, old.ID)
	if err != nil {
		t.Fatalf("GetRun of a run written before: %v", err)
	}
	if diff := cmp.Diff(want, got, ignore); diff != "" {
		t.Errorf("GetRun of a run written before (-want +got):\n%s", diff)
	}
	next := agentrun.Run{Sandbox: old.ID, Seq: 2, Task: "again", Onto: "abc", Runner: "pi", State: agentrun.RunRunning, StartedAt: t0.Add(time.Hour)}
	if err := st.PutRun(ctx, next); err != nil {
		t.Fatalf("PutRun 2 after a run written before: %v", err)
	}
	runs, err := st.ListRuns(ctx, old.ID)
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	if diff := cmp.Diff([]agentrun.Run{want, next}, runs, ignore); diff != "" {
		t.Errorf("ListRuns after a run written before and one after (-want +got):\n%s", diff)
	}
	// The session kept its latest run, now its run 1 (its task went with
	// the Down), and is no session any more.
	got, err = st.GetRun(ctx, session.ID)
	if err != nil || got.Seq != 1 || got.Commit != latest.Commit || got.Task != "" {
		t.Errorf("GetRun of the session after Down and Up = seq %d, commit %q, task %q, %v; want 1, %q, \"\"",
			got.Seq, got.Commit, got.Task, err, latest.Commit)
	}
	if sb, err := st.GetSandbox(ctx, session.ID); err != nil || sb.Session {
		t.Errorf("GetSandbox of the session after Down and Up: session %t, %v; want false", sb.Session, err)
	}
}

// TestReportsBeforeSessionReports: a report written before migration
// 00033 reads back as its sandbox's run 1's, and its sandbox takes a run
// 2's; a trigger written before makes no sessions; the migration's Down
// keeps each sandbox's latest report alone, in the shape before, as
// 00032's keeps its latest run.
func TestReportsBeforeSessionReports(t *testing.T) {
	eachDialect(t, testReportsBeforeSessionReports)
}

func testReportsBeforeSessionReports(t *testing.T, url string, dialect goose.Dialect, dir string, raw func() (*sql.DB, error)) {
	ctx := t.Context()
	const repo = "github.com/acme/app"

	// At the current schema: a session's trigger, a session whose runs 1
	// and 2 owe reports, and a sandbox whose report is written at the
	// schema before.
	fx := newMigrationFixture(t, url)
	st, t0 := fx.st, fx.t0
	session, old := fx.agent(t, "session", true), fx.agent(t, "old", false)
	tr := trigger.Trigger{ID: "trg_1", Org: fx.org.ID, Project: fx.prj.ID, Name: "fix",
		On:   trigger.On{Source: event.SourceGitHub, Kind: event.KindIssueLabeled, Label: "berth"},
		Repo: repo, Class: "small", Runner: "pi", Role: "author", Task: "{{.Title}}", Concurrency: 1, OpenPR: true, Session: true,
		Owner: fx.ann.ID, CreatedAt: t0, UpdatedAt: t0}
	e := audit.Event{At: t0, Org: fx.org.ID, Actor: fx.ann.ID, Action: audit.TriggerSet, Target: "default/fix", Outcome: audit.OK}
	if err := st.PutTrigger(ctx, tr, e); err != nil {
		t.Fatalf("PutTrigger: %v", err)
	}
	thread := forge.Thread{Kind: forge.ThreadIssue, Number: 7}
	first := trigger.Report{Sandbox: session.ID, Seq: 1, Org: fx.org.ID, Repo: repo, Trigger: tr.ID, Thread: thread, OpenPR: true, Comment: true}
	latest := trigger.Report{Sandbox: session.ID, Seq: 2, Org: fx.org.ID, Repo: repo, Trigger: tr.ID, Thread: thread, Comment: true}
	for _, r := range []trigger.Report{first, latest} {
		if err := st.AddReport(ctx, r); err != nil {
			t.Fatalf("AddReport %d: %v", r.Seq, err)
		}
	}
	first.State, first.Change = trigger.ReportDone, forge.Change{Number: 5, URL: "https://x/pull/5"}
	if err := st.SaveReport(ctx, first); err != nil {
		t.Fatalf("SaveReport 1: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	// Back to the schema before, where a sandbox owes one report.
	db := migrateDown(t, beforeSessionReports, dialect, dir, raw)
	var n, openPR, change int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*), MAX(open_pr), MAX(change_number) FROM run_reports WHERE sandbox_id = $1`, string(session.ID)).
		Scan(&n, &openPR, &change); err != nil {
		t.Fatalf("read the session's reports after the Down: %v", err)
	}
	if n != 1 || openPR != 0 || change != 0 {
		t.Errorf("after the Down the session owes %d reports, open_pr %d, change %d; want 1, its latest's (0, 0)", n, openPR, change)
	}
	if _, err := db.ExecContext(ctx, `
		INSERT INTO run_reports (sandbox_id, org_id, repo, base, trigger_id, thread_kind, thread_number, open_pr, comment, state,
			change_number, change_url, change_existed, comments, error, attempts, next_at)
		VALUES ($1, $2, $3, 'main', $4, 'issue', 7, 1, 1, 'done', 3, 'https://x/pull/3', 1, '["https://x/7#c"]', 'once', 2, $5)`,
		string(old.ID), fx.org.ID, repo, tr.ID, t0.UnixNano()); err != nil {
		t.Fatalf("write a report at the schema before: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Up again, as a gateway's start migrates it.
	st, err := Open(ctx, url)
	if err != nil {
		t.Fatalf("Open after the Down: %v", err)
	}
	defer st.Close()
	want := trigger.Report{Sandbox: old.ID, Seq: 1, Org: fx.org.ID, Repo: repo, Base: "main", Trigger: tr.ID, Thread: thread,
		OpenPR: true, Comment: true, State: trigger.ReportDone, Change: forge.Change{Number: 3, URL: "https://x/pull/3", Existed: true},
		Comments: []string{"https://x/7#c"}, Error: "once", Attempts: 2, NextAt: t0}
	got, err := st.GetReport(ctx, old.ID)
	if err != nil {
		t.Fatalf("GetReport of a report written before: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetReport of a report written before (-want +got):\n%s", diff)
	}
	if err := st.AddReport(ctx, trigger.Report{Sandbox: old.ID, Seq: 2, Org: fx.org.ID, Repo: repo, Comment: true}); err != nil {
		t.Fatalf("AddReport 2 after a report written before: %v", err)
	}
	if got, err := st.GetReport(ctx, old.ID); err != nil || got.Seq != 2 {
		t.Errorf("GetReport after a report 2 = seq %d, %v; want 2", got.Seq, err)
	}
	// The session kept its latest report, now its run 1's; the trigger
	// makes sessions no more (the Down dropped what said so).
	if got, err := st.GetReport(ctx, session.ID); err != nil || got.Seq != 1 || got.OpenPR || got.Change.Number != 0 {
		t.Errorf("GetReport of the session after Down and Up = seq %d, open PR %t, change %d, %v; want 1, false, 0",
			got.Seq, got.OpenPR, got.Change.Number, err)
	}
	tr.Session = false
	if got, err := st.GetTrigger(ctx, tr.ID); err != nil || !cmp.Equal(got, tr) {
		t.Errorf("GetTrigger after Down and Up = %+v, %v; want %+v", got, err, tr)
	}
}
