// Package store keeps berth's state in a database through database/sql: the
// organisations, projects, users, keys and guardrails of package account, and
// the classes, sandboxes and running segments of package sandbox (SPEC S1–S8),
// and the sign-ins through the identity provider of package sso. It
// implements account.Store, account.GuardrailStore, sandbox.Store and
// sso.Store.
//
// The database is an SQLite file (modernc.org/sqlite, pure Go) for one
// gateway, or PostgreSQL (pgx) for one or several replicas of it, opened,
// migrated and written in turn by package sqldb, one floor down. The
// queries use $1, $2… placeholders and portable SQL, the same on both; what
// is dialect-specific lives in the migrations, sqldb and constraint.go.
//
// The store never reads a clock: every time it writes comes from its caller.
package store

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"path/filepath"
	"time"

	"berth.dev/berth/internal/store/sqldb"
)

// migrations holds the schema of every dialect, which sqldb.Open runs.
// Embedded files are read-only, so this is data, not state.
//
//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrations embed.FS

// Store is berth's database. It is safe for concurrent use.
type Store struct {
	db *sqldb.DB
	// admitting bounds the creates whose transaction is open at once on
	// PostgreSQL (nil on SQLite): admit reads guardrails on a second
	// connection while the transaction holds its own, so creates waiting
	// for the admission lock must never take every connection of the
	// pool.
	admitting chan struct{}
	// inference commits concurrent model requests' records together.
	inference recordBatch
}

// DefaultPath is where the SQLite database lives in a data directory.
func DefaultPath(dataDir string) string {
	return filepath.Join(dataDir, "berth.db")
}

// DefaultWriteWait is how long a bounded write waits for its turn unless
// WithWriteWait says otherwise (BERTH_DATABASE_WRITE_WAIT). A write holds
// the turn about a millisecond, so only a stall (another process holding
// the file, a disk that stopped) makes a queue this long.
const DefaultWriteWait = 5 * time.Second

// Option changes how Open opens a store.
type Option func(*options)

// options are what Open is told.
type options struct{ writeWait time.Duration }

// WithWriteWait is how long a bounded write waits for its turn at an
// SQLite database, and how long any write waits for another process's
// lock on the file (busy_timeout), before it is fault.Busy; d > 0.
func WithWriteWait(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.writeWait = d
		}
	}
}

// Open opens the database named by url and migrates it to the current
// schema. url is postgres://… or postgresql://… for PostgreSQL (pgx's
// connection URL); otherwise a file path, sqlite://<path> or file:<path>
// for SQLite, whose parent directory is created if needed. Errors never
// repeat a password.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	o := options{writeWait: DefaultWriteWait}
	for _, opt := range opts {
		opt(&o)
	}
	db, err := sqldb.Open(ctx, url, migrations, o.writeWait)
	if err != nil {
		return nil, err
	}
	st := &Store{db: db}
	if db.Postgres() {
		st.admitting = make(chan struct{}, sqldb.MaxPostgresConns/2)
	}
	return st, nil
}

// Shared reports whether several gateways may share the database
// (PostgreSQL): what one caches of it, another may change.
func (s *Store) Shared() bool { return s.db.Postgres() }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// queryRow runs a one-row query through its prepared statement.
func (s *Store) queryRow(ctx context.Context, query string, args ...any) rowScanner {
	st, err := s.db.Prepared(ctx, query)
	if err != nil {
		return errRow{err}
	}
	return st.QueryRowContext(ctx, args...)
}

// rowScanner is a row to scan: *sql.Row, or errRow.
type rowScanner interface{ Scan(dest ...any) error }

// errRow is a row whose query could not be prepared.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// timeArg encodes a time as unix nanoseconds; the zero time is NULL.
func timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

// timeOf decodes what timeArg wrote, in UTC.
func timeOf(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

// jsonArg encodes a slice or map as JSON text; nil is NULL, so nil and
// empty stay apart.
func jsonArg(v any, isNil bool) (any, error) {
	if isNil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// jsonOf decodes what jsonArg wrote into v; NULL leaves v as it is (nil).
func jsonOf(s sql.NullString, v any) error {
	if !s.Valid {
		return nil
	}
	return json.Unmarshal([]byte(s.String), v)
}

// nullString encodes an optional string; "" is NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// ptrArg encodes an optional number; nil is NULL.
func ptrArg[T ~int | ~int64](p *T) any {
	if p == nil {
		return nil
	}
	return int64(*p)
}

// ptrOf decodes what ptrArg wrote.
func ptrOf[T ~int | ~int64](n sql.NullInt64) *T {
	if !n.Valid {
		return nil
	}
	v := T(n.Int64)
	return &v
}

// notFound reports whether err is a query that found no row.
func notFound(err error) bool {
	return errors.Is(err, sql.ErrNoRows)
}
