// Package store keeps berth's state in a database through database/sql: the
// organisations, projects, users, keys and guardrails of package account, and
// the classes, sandboxes and running segments of package sandbox (SPEC S1–S8).
// It implements account.Store, account.GuardrailStore and sandbox.Store.
//
// The database is an SQLite file (modernc.org/sqlite, pure Go) for one
// gateway, or PostgreSQL (pgx) for one or several replicas of it. The
// queries use $1, $2… placeholders and portable SQL, the same on both; what
// is dialect-specific lives in the migrations, dialect.go and postgres.go.
//
// The store never reads a clock: every time it writes comes from its caller.
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"
)

// Store is berth's database. It is safe for concurrent use.
type Store struct {
	db      *sql.DB
	dialect dialect
	// admitting bounds the creates whose transaction is open at once on
	// PostgreSQL (nil on SQLite): admit reads guardrails on a second
	// connection while the transaction holds its own, so creates waiting
	// for the admission lock must never take every connection of the
	// pool.
	admitting chan struct{}
	// inference commits concurrent model requests' records together.
	inference recordBatch
	// stmts keeps the statements of the hot paths prepared (see
	// prepared): query text -> *sql.Stmt.
	stmts sync.Map
	// writer is the queue of SQLite's writes (nil on PostgreSQL), and
	// writeWait how long a bounded one waits in it (see writer.go).
	writer    *queue
	writeWait time.Duration
}

// DefaultPath is where the SQLite database lives in a data directory.
func DefaultPath(dataDir string) string {
	return filepath.Join(dataDir, "berth.db")
}

// Open opens the database named by url and migrates it to the current
// schema. url is postgres://… or postgresql://… for PostgreSQL (pgx's
// connection URL); otherwise a file path, sqlite://<path> or file:<path>
// for SQLite, whose parent directory is created if needed. Errors never
// repeat a password.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	st := &Store{writeWait: DefaultWriteWait}
	for _, o := range opts {
		o(st)
	}
	var err error
	if isPostgres(url) {
		st.dialect = postgresDialect
		st.db, err = openPostgres(ctx, url)
		st.admitting = make(chan struct{}, maxPostgresConns/2)
	} else {
		st.dialect = sqliteDialect
		st.db, err = openSQLite(ctx, url, st.writeWait)
		st.writer = &queue{}
	}
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := migrate(ctx, st.db, st.dialect); err != nil {
		st.db.Close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	return st, nil
}

// Shared reports whether several gateways may share the database
// (PostgreSQL): what one caches of it, another may change.
func (s *Store) Shared() bool { return s.dialect == postgresDialect }

// Close closes the database.
func (s *Store) Close() error {
	s.stmts.Range(func(_, st any) bool {
		st.(*sql.Stmt).Close()
		return true
	})
	return s.db.Close()
}

// prepared returns query prepared once for the store's life. The hot
// paths (every request's key and user, every model request's record)
// use it: SQLite otherwise parses and plans the statement again on every
// call, which costs more than running it. database/sql prepares it again
// on each connection that needs it.
func (s *Store) prepared(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := s.stmts.Load(query); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := s.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if prev, loaded := s.stmts.LoadOrStore(query, st); loaded {
		st.Close()
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}

// queryRow runs a one-row query through its prepared statement.
func (s *Store) queryRow(ctx context.Context, query string, args ...any) rowScanner {
	st, err := s.prepared(ctx, query)
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

// queryer is what *sql.DB and *sql.Tx share, so one read serves both.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

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
