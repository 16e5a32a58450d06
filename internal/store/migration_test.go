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
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store/storetest"
)

// beforeSessions is the schema's version before runs were numbered in
// their sandbox (migration 00032).
const beforeSessions = 31

// TestRunsBeforeSessions: a run written before migration 00032 reads back
// as its sandbox's run 1, with no task and no onto, and its sandbox takes
// a run 2; the migration's Down keeps each sandbox's latest run alone, in
// the shape before.
func TestRunsBeforeSessions(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) {
		path := DefaultPath(t.TempDir())
		testRunsBeforeSessions(t, path, goose.DialectSQLite3, "migrations/sqlite", func() (*sql.DB, error) {
			return sql.Open("sqlite", path+"?_pragma=foreign_keys(1)")
		})
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		url := storetest.PostgresURL(t) // skips without a server
		testRunsBeforeSessions(t, url, goose.DialectPostgres, "migrations/postgres", func() (*sql.DB, error) {
			cfg, err := pgx.ParseConfig(url)
			if err != nil {
				return nil, err
			}
			return stdlib.OpenDB(*cfg), nil
		})
	})
}

// testRunsBeforeSessions runs TestRunsBeforeSessions on the database at
// url: raw opens it without migrating, goose knows it as dialect, and dir
// holds its migrations.
func testRunsBeforeSessions(t *testing.T, url string, dialect goose.Dialect, dir string, raw func() (*sql.DB, error)) {
	ctx := t.Context()
	t0 := time.Date(2026, 11, 3, 10, 0, 0, 123456789, time.UTC)

	// The sandboxes, made at the current schema: a session with two runs,
	// and one whose run is written at the schema before.
	st, err := Open(ctx, url)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	org := account.Organisation{ID: "org_1", Name: "acme", CreatedAt: t0}
	prj := account.Project{ID: "prj_1", Org: org.ID, Name: "default", CreatedAt: t0}
	ann := account.User{ID: "usr_ann", Org: org.ID, Name: "ann", Role: account.RoleAdmin, CreatedAt: t0}
	if err := st.CreateOrganisation(ctx, org, prj); err != nil {
		t.Fatalf("CreateOrganisation: %v", err)
	}
	if err := st.CreateUser(ctx, ann); err != nil {
		t.Fatalf("CreateUser: %v", err)
	}
	agent := func(name string) sandbox.Sandbox {
		t.Helper()
		sb := sandbox.Sandbox{ID: sandbox.NewID(), Name: name, Org: org.ID, Project: prj.ID, Owner: ann.ID,
			Purpose: sandbox.PurposeAgent, Class: "small", Image: "ghcr.io/acme/agent:1", Isolation: sandbox.TierStandard,
			State: sandbox.StateStarting, Runner: "pi", Task: "fix the build", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
		key, _ := account.NewSandboxKey(ann.ID, string(sb.ID), prj.ID, sb.ExpiresAt, t0)
		sb.KeyID = key.ID
		if err := st.CreateSandbox(ctx, sb, key, func(sandbox.Live) error { return nil }); err != nil {
			t.Fatalf("CreateSandbox %s: %v", name, err)
		}
		return sb
	}
	session, old := agent("session"), agent("old")
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
	db, err := raw()
	if err != nil {
		t.Fatalf("open the database: %v", err)
	}
	defer db.Close()
	fsys, err := fs.Sub(migrations, dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(dialect, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatalf("goose: %v", err)
	}
	if _, err := p.DownTo(ctx, beforeSessions); err != nil {
		t.Fatalf("migrate down to %d: %v", beforeSessions, err)
	}
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
	st, err = Open(ctx, url)
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
