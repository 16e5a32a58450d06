package store_test

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/review"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
	"berth.dev/berth/internal/store/storetest"
	"berth.dev/berth/internal/warm"
)

// The store is the database behind every domain Store interface.
var (
	_ account.Store          = (*store.Store)(nil)
	_ account.GuardrailStore = (*store.Store)(nil)
	_ sandbox.Store          = (*store.Store)(nil)
	_ warm.Store             = (*store.Store)(nil)
)

func TestSQLite(t *testing.T) {
	runConformance(t, func(t *testing.T) *store.Store {
		return openStore(t, store.DefaultPath(t.TempDir()))
	})
}

// TestPostgres runs the same suite on PostgreSQL, each subtest in a
// schema of its own.
func TestPostgres(t *testing.T) {
	storetest.PostgresURL(t) // skips without a server
	runConformance(t, func(t *testing.T) *store.Store {
		return openStore(t, storetest.PostgresURL(t))
	})
}

// openStore opens url and closes it when t ends.
func openStore(t *testing.T, url string) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), url)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return st
}

func TestDefaultPath(t *testing.T) {
	if got, want := store.DefaultPath("/var/lib/berth"), "/var/lib/berth/berth.db"; got != want {
		t.Errorf("DefaultPath = %q, want %q", got, want)
	}
}

func TestOpenURLs(t *testing.T) {
	dir := t.TempDir()
	for _, url := range []string{
		filepath.Join(dir, "plain", "berth.db"),
		"sqlite://" + filepath.Join(dir, "sqlite", "deeper", "berth.db"),
		"file:" + filepath.Join(dir, "file", "berth.db"),
	} {
		t.Run(url, func(t *testing.T) {
			st, err := store.Open(t.Context(), url)
			if err != nil {
				t.Fatalf("Open(%q): %v", url, err)
			}
			if err := st.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	for _, sub := range []string{"plain", "sqlite/deeper", "file"} {
		if _, err := os.Stat(filepath.Join(dir, sub, "berth.db")); err != nil {
			t.Errorf("database file in %s: %v", sub, err)
		}
	}
}

func TestOpenRefuses(t *testing.T) {
	for _, tc := range []struct {
		url, want string
	}{
		// Nothing listens on port 1; the message names the server, not the password.
		{"postgres://berth:secret@127.0.0.1:1/berth?connect_timeout=2", "postgres postgres://berth:xxxxx@127.0.0.1:1/berth"},
		{"postgresql://berth:secret@127.0.0.1:1/berth?sslmode=bogus", "sslmode"},
		{"sqlite://", "names no file"},
		{"sqlite://" + filepath.Join(t.TempDir(), "x.db") + "?mode=ro", "may not contain"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			st, err := store.Open(t.Context(), tc.url)
			if err == nil {
				st.Close()
				t.Fatalf("Open(%q) succeeded, want an error saying %q", tc.url, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open(%q) = %v, want it to say %q", tc.url, err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("Open(%q) = %v: the error repeats the password", tc.url, err)
			}
		})
	}
}

// TestReopen checks the data survives a restart and that migrating an
// up-to-date database changes nothing.
func TestReopen(t *testing.T) {
	ctx := t.Context()
	path := store.DefaultPath(t.TempDir())
	t0 := time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC)
	org := account.Organisation{ID: "org_1", Name: "acme", CreatedAt: t0}
	prj := account.Project{ID: "prj_1", Org: org.ID, Name: "default", CreatedAt: t0}

	st, err := store.Open(ctx, path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := st.CreateOrganisation(ctx, org, prj); err != nil {
		t.Fatalf("CreateOrganisation: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	before := migrationRows(t, path)

	st, err = store.Open(ctx, path)
	if err != nil {
		t.Fatalf("Open again: %v", err)
	}
	defer st.Close()
	got, err := st.GetOrganisation(ctx, "acme")
	if err != nil {
		t.Fatalf("GetOrganisation after reopening: %v", err)
	}
	if diff := cmp.Diff(org, got); diff != "" {
		t.Errorf("organisation after reopening (-want +got):\n%s", diff)
	}
	if after := migrationRows(t, path); after != before || before == 0 {
		t.Errorf("goose_db_version has %d rows after reopening, %d before; want the same, not 0", after, before)
	}
}

// migrationRows counts goose's version rows, reading the file directly (the
// store registers the "sqlite" driver).
func migrationRows(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM goose_db_version`).Scan(&n); err != nil {
		t.Fatalf("count migrations: %v", err)
	}
	return n
}

func TestDeploymentIDIsStable(t *testing.T) {
	path := t.TempDir() + "/berth.db"
	st, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.DeploymentID(t.Context())
	if err != nil || !strings.HasPrefix(first, "berth") || len(first) != 13 {
		t.Fatalf("DeploymentID = %q, %v", first, err)
	}
	st.Close()
	st, err = store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	again, err := st.DeploymentID(t.Context())
	if err != nil || again != first {
		t.Fatalf("DeploymentID after reopening = %q, %v; want %q", again, err, first)
	}
	other, _ := store.Open(t.Context(), t.TempDir()+"/berth.db")
	defer other.Close()
	if id, _ := other.DeploymentID(t.Context()); id == first {
		t.Fatal("two databases share a deployment id")
	}
}

func testRunRoundTrip(t *testing.T, st *store.Store) {
	fx := newFixture(t, st, "acme")
	sb, key := newSandbox(fx, fx.ann, "task", t0)
	mustCreate(t, st, sb, key)
	if _, err := st.GetRun(t.Context(), sb.ID); !errors.Is(err, fault.NotFound) {
		t.Fatalf("GetRun before any = %v, want fault.NotFound", err)
	}
	run := agentrun.Run{Sandbox: sb.ID, Runner: "pi", Model: "m", State: agentrun.RunRunning, StartedAt: t0}
	if err := st.PutRun(t.Context(), run); err != nil {
		t.Fatal(err)
	}
	// An in-machine run's end is claimed once.
	if err := st.ClaimRunEnd(t.Context(), sb.ID, t0.Add(time.Minute)); err != nil {
		t.Fatalf("claim the end: %v", err)
	}
	if err := st.ClaimRunEnd(t.Context(), sb.ID, t0.Add(2*time.Minute)); !errors.Is(err, fault.Conflict) {
		t.Fatalf("claim the end again: %v, want a conflict", err)
	}
	// What the output said, saved meanwhile (an in-machine run's, before
	// its exit report concludes it), changes nothing else; a run put
	// without its end keeps the one it has.
	run.Lines, run.State, run.Error = 3, agentrun.RunFailed, "not saved by PutRunOutput"
	run.Outputs, run.Results, run.Setup = []string{"pr: 7"}, map[string]string{"pr": "7"}, kelos.SetupError
	if err := st.PutRunOutput(t.Context(), run); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetRun(t.Context(), sb.ID)
	if err != nil || got.Lines != 3 || got.State != agentrun.RunRunning || got.Error != "" || !got.EndedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after the output: %+v, %v", got, err)
	}
	if !slices.Equal(got.Outputs, run.Outputs) || got.Results["pr"] != "7" || got.Setup != kelos.SetupError {
		t.Fatalf("after the output: outputs %q, results %v, setup %d; want the output's", got.Outputs, got.Results, got.Setup)
	}
	run = agentrun.Run{Sandbox: sb.ID, Seq: 1, Task: "fix the build", Onto: "0123abc", Runner: "pi", Model: "m",
		State: agentrun.RunSucceeded, Exited: true, ExitCode: 0,
		Branch: "berth/task", Commit: "abc", Lines: 12, Ignored: 1, StartedAt: t0, EndedAt: t0.Add(time.Minute)}
	run.Telemetry.Usage.Input, run.Telemetry.Usage.Output, run.Telemetry.CostUSD = 240, 34, 0.0012
	run.Telemetry.Cost = runner.CostNative
	run.Telemetry.SessionID = "s1"
	run.Review = review.Result{Outcome: review.ChangesRequested, Summary: "add a test", SHA256: "ab12", File: "sub/.berth-review-verdict.json", Best: "try-2"}
	run.Outputs, run.Results, run.Setup = []string{"branch: b", "a note"}, map[string]string{"branch": "b"}, kelos.SetupOK
	if err := st.PutRun(t.Context(), run); err != nil {
		t.Fatal(err)
	}
	run.State, run.Error = agentrun.RunFailed, "again"
	run.Exited, run.Ended, run.EndedBy = false, sandbox.StateTerminated, fx.ann.ID
	run.Review = run.Review.Hold("the agent exited 1")
	if err := st.PutRun(t.Context(), run); err != nil {
		t.Fatal(err)
	}
	got, err = st.GetRun(t.Context(), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(run, got, cmpopts.IgnoreUnexported(runner.Telemetry{})); diff != "" {
		t.Errorf("run round trip (-want +got):\n%s", diff)
	}
}
