package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Everything that depends on the database engine is in this file and in
// migrations/<dialect>/. A PostgreSQL dialect adds a branch to Open, its
// migration set, and its error codes to constraintOf; the queries elsewhere
// are shared.

// migrations holds the schema of every dialect. Embedded files are
// read-only, so this is data, not state.
//
//go:embed migrations/sqlite/*.sql
var migrations embed.FS

// sqlitePragmas is applied to every SQLite connection. busy_timeout makes a
// writer wait for the lock instead of failing; WAL lets readers run beside
// the writer (admission reads guardrails on another connection while its
// transaction holds the lock); _txlock=immediate takes the write lock at
// BEGIN, so the counts a transaction reads stay true until it commits and
// admission is race-free (SPEC S7).
const sqlitePragmas = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate"

// openSQLite opens the SQLite file url names, creating its directory.
func openSQLite(ctx context.Context, url string) (*sql.DB, error) {
	path, err := sqlitePath(url)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create directory for %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", path+"?"+sqlitePragmas)
	if err != nil {
		return nil, fmt.Errorf("sqlite %s: %w", path, err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite %s: %w", path, err)
	}
	// database/sql keeps 2 idle connections by default: under concurrent
	// requests (the model routes) every other query would open a
	// connection and read the schema again.
	db.SetMaxIdleConns(32)
	return db, nil
}

// sqlitePath reads the file path out of a database URL.
func sqlitePath(url string) (string, error) {
	scheme, _, _ := strings.Cut(url, "://")
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		// The URL is not repeated: it may carry a password.
		return "", errors.New("PostgreSQL is not built yet (it lands with the scale-out work); leave BERTH_DATABASE_URL empty or give an SQLite path")
	}
	path := url
	switch {
	case strings.HasPrefix(url, "sqlite://"):
		path = strings.TrimPrefix(url, "sqlite://")
	case strings.HasPrefix(url, "file://"):
		path = strings.TrimPrefix(url, "file://")
	case strings.HasPrefix(url, "file:"):
		path = strings.TrimPrefix(url, "file:")
	}
	switch {
	case path == "":
		return "", fmt.Errorf("database URL %q names no file", url)
	case strings.ContainsAny(path, "?#"):
		// The driver would read what follows as connection parameters.
		return "", fmt.Errorf("database URL %q: an SQLite path may not contain ? or #", url)
	case path == ":memory:":
		// Each pooled connection would get its own empty database.
		return "", fmt.Errorf("database URL %q: an in-memory database is not supported; give a file", url)
	}
	return path, nil
}

// migrate brings the schema up to date; already applied migrations are
// skipped.
func migrate(ctx context.Context, db *sql.DB) error {
	fsys, err := fs.Sub(migrations, "migrations/sqlite")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// constraint is the kind of integrity constraint a write broke.
type constraint int

const (
	noConstraint constraint = iota
	uniqueConstraint
	foreignKeyConstraint
)

// constraintOf tells which constraint err reports breaking, if any.
func constraintOf(err error) constraint {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return noConstraint
	}
	switch e.Code() {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return uniqueConstraint
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return foreignKeyConstraint
	}
	return noConstraint
}
