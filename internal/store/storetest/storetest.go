// Package storetest gives tests a PostgreSQL database of their own when
// BERTH_TEST_POSTGRES names a server, and skips them otherwise, so
// `go test ./...` passes anywhere (scripts/test-postgres starts one).
package storetest

import (
	"crypto/rand"
	"database/sql"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
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
