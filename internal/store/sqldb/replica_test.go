package sqldb_test

import (
	"database/sql"
	"log/slog"
	"testing"
	"testing/fstest"
	"time"

	"berth.dev/berth/internal/store/sqldb"
	"berth.dev/berth/internal/store/storetest"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for terminateHolder
)

// TestReplicaLead checks that one replica leads at a time and that the
// lead passes on when the leader's session ends, closed or killed.
func TestReplicaLead(t *testing.T) {
	url := storetest.PostgresURL(t)
	a, b := newReplica(t, url), newReplica(t, url)
	ctx := t.Context()
	lead := func(r *sqldb.Replica, name string, want bool) {
		t.Helper()
		got, err := r.Lead(ctx)
		if err != nil || got != want {
			t.Fatalf("%s.Lead = %v, %v; want %v", name, got, err, want)
		}
	}
	// The server frees a closed session's locks a moment after the
	// client has gone: the next leader finds out at a later try.
	takesOver := func(r *sqldb.Replica, name string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			got, err := r.Lead(ctx)
			if got {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s.Lead = false, %v for 5s after the leader's session ended; want true", name, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	lead(a, "a", true)
	lead(b, "b", false)
	lead(a, "a", true) // asked again, it still leads
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	takesOver(b, "b")
	lead(a, "a (reopened)", false)

	// A leader whose session the server ends (as when its host vanishes)
	// finds out at its next Lead, and the other takes over.
	terminateHolder(t, url, sqldb.LockSpaceLeader, b.LeaderKey())
	if got, err := b.Lead(ctx); got {
		t.Fatalf("b.Lead after its session ended = true, %v; want false", err)
	}
	takesOver(a, "a")
	lead(b, "b", false)
}

// TestReplicaHold checks holds: seen by other replicas, exclusive, given
// up on release and when the session ends, and taken again on a new
// session.
func TestReplicaHold(t *testing.T) {
	url := storetest.PostgresURL(t)
	a, b := newReplica(t, url), newReplica(t, url)
	ctx := t.Context()
	const id = "sbx_held"
	held := func(r *sqldb.Replica, name string, want bool) {
		t.Helper()
		got, err := r.HeldElsewhere(ctx, id)
		if err != nil || got != want {
			t.Fatalf("%s.HeldElsewhere = %v, %v; want %v", name, got, err, want)
		}
	}
	held(b, "b", false)
	release, err := a.Hold(ctx, id)
	if err != nil {
		t.Fatalf("a.Hold: %v", err)
	}
	again, err := a.Hold(ctx, id) // the same replica may hold twice
	if err != nil {
		t.Fatalf("a.Hold again: %v", err)
	}
	held(a, "a", false)
	held(b, "b", true)
	if _, err := b.Hold(ctx, id); err == nil {
		t.Fatal("b.Hold of a's sandbox succeeded")
	}
	release()
	held(b, "b after one release", true)

	// a's session ends; a takes its hold again on its next call.
	terminateHolder(t, url, sqldb.LockSpaceHold, sqldb.LockKey(id))
	if _, err := a.Lead(ctx); err == nil {
		t.Fatal("a.Lead on an ended session = nil error, want the session's failure")
	}
	held(a, "a (new session)", false)
	held(b, "b after a's new session", true)
	again()
	held(b, "b after a's last release", false)
	release() // a second call changes nothing
	held(b, "b after a release called twice", false)
}

func newReplica(t *testing.T, url string) *sqldb.Replica {
	t.Helper()
	r, err := openDB(t, url).Replica(t.Context(), slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatalf("Replica: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// terminateHolder ends the server session holding the advisory lock
// (space, key), as a replica's vanished host would.
func terminateHolder(t *testing.T, url string, space, key int32) {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	err = db.QueryRowContext(t.Context(), `
		SELECT COUNT(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 2 AND granted`,
		int64(uint32(space)), int64(uint32(key))).Scan(&n)
	if err != nil || n != 1 {
		t.Fatalf("terminate the holder of lock (%d, %d): ended %d sessions, %v; want 1", space, key, n, err)
	}
}

// noSchema is a migration set that makes nothing: a replica needs no
// table of the store's.
var noSchema = fstest.MapFS{
	"migrations/postgres/00001_none.sql": {Data: []byte("-- +goose Up\nSELECT 1;\n")},
}

// openDB opens the database at url, closed when t ends.
func openDB(t *testing.T, url string) *sqldb.DB {
	t.Helper()
	db, err := sqldb.Open(t.Context(), url, noSchema, time.Second)
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
