// Package storetest gives tests a PostgreSQL database of their own when
// BERTH_TEST_POSTGRES names a server, and skips them otherwise, so
// `go test ./...` passes anywhere (scripts/test-postgres starts one); and
// a stall of an SQLite file's writers (LockSQLite).
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // LockSQLite's driver
)

// Env names the setting that turns the PostgreSQL tests on: a
// postgres:// URL of a database the tests may create schemas in.
const Env = "BERTH_TEST_POSTGRES"

// PostgresURL returns a URL of the BERTH_TEST_POSTGRES database whose
// search_path is a new, empty schema, dropped when t ends; it skips t when
// the setting is empty. Schemas are cheap where a database per test is
// not, and keep tests that run at once apart.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(Env)
	if base == "" {
		t.Skip("set " + Env + " to a PostgreSQL URL (scripts/test-postgres start DIR prints one) to run the PostgreSQL tests")
	}
	schema := "t_" + strings.ToLower(rand.Text()[:12])
	db := open(t, base)
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), `CREATE SCHEMA `+schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		db := open(t, base)
		defer db.Close()
		if _, err := db.Exec(`DROP SCHEMA ` + schema + ` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", Env, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func open(t testing.TB, rawURL string) *sql.DB {
	t.Helper()
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		t.Fatalf("%s: %v", Env, err)
	}
	return stdlib.OpenDB(*cfg)
}

// LockSQLite takes the write lock of the SQLite database at path from a
// connection of its own, as another process would (an admin command, a
// backup), and holds it until release (or t's end): every writer of the
// file stalls behind it.
func LockSQLite(t testing.TB, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatalf("take the write lock of %s: %v", path, err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := conn.ExecContext(context.Background(), `ROLLBACK`); err != nil {
				t.Errorf("release the write lock of %s: %v", path, err)
			}
			conn.Close()
			db.Close()
		})
	}
	t.Cleanup(release)
	return release
}
