package sqldb

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// Everything that depends on the database engine is in this file, in
// postgres.go, and in the store's migrations/<dialect>/ and constraint.go;
// the store's queries are shared.

// dialect is the database engine a DB talks to.
type dialect int

const (
	sqliteDialect dialect = iota
	postgresDialect
)

// isPostgres reports whether a database URL names PostgreSQL.
func isPostgres(url string) bool {
	scheme, _, ok := strings.Cut(url, "://")
	if !ok {
		return false
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		return true
	}
	return false
}

// sqlitePragmas is applied to every SQLite connection, after busy_timeout
// (sqliteDSN): a writer that finds the lock held by another process waits
// that long for it instead of failing at once (the gateway's own writers
// take turns before they reach the lock, writer.go). WAL lets readers run beside
// the writer (admission reads guardrails on another connection while its
// transaction holds the lock); _txlock=immediate takes the write lock at
// BEGIN, so the counts a transaction reads stay true until it commits and
// admission is race-free (SPEC S7). synchronous=NORMAL syncs the WAL at
// checkpoints, not at every commit: a commit survives the gateway being
// killed, and the database stays whole if the machine loses power, though
// the last commits before the loss may be gone. A sync per commit was the
// larger part of a model request's added latency (BenchmarkModelProxy).
const sqlitePragmas = "_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)&_txlock=immediate"

// sqliteDSN is the driver's name for the file at path, waiting up to
// busy for another process's lock.
func sqliteDSN(path string, busy time.Duration) string {
	return fmt.Sprintf("%s?_pragma=busy_timeout(%d)&%s", path, busy.Milliseconds(), sqlitePragmas)
}

// openSQLite opens the SQLite file url names, creating its directory; a
// write waits up to busy for another process's lock.
func openSQLite(ctx context.Context, url string, busy time.Duration) (*sql.DB, error) {
	path, err := sqlitePath(url)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create directory for %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", sqliteDSN(path, busy))
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
// skipped. On PostgreSQL a session advisory lock keeps replicas that start
// together from migrating at once.
func migrate(ctx context.Context, db *sql.DB, migrations fs.FS, d dialect) error {
	dir, gd := "migrations/sqlite", goose.DialectSQLite3
	opts := []goose.ProviderOption{goose.WithDisableGlobalRegistry(true)}
	if d == postgresDialect {
		dir, gd = "migrations/postgres", goose.DialectPostgres
		// Retried every second for up to five minutes: a replica waits
		// while another migrates.
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	fsys, err := fs.Sub(migrations, dir)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	p, err := goose.NewProvider(gd, db, fsys, opts...)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
