// Package sqldb is the store's database, one floor below it: the
// connection to SQLite (modernc.org/sqlite, pure Go) or PostgreSQL (pgx)
// through database/sql, the migrations run by goose, the order SQLite's
// writes take turns in (writer.go), the advisory locks PostgreSQL
// serialises on (postgres.go), and Replica, a gateway's seat among the
// replicas sharing a PostgreSQL database. It knows no table: the schema
// and the queries are package store's, one set for both dialects.
package sqldb

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"sync"
	"time"
)

// DB is an open database: *sql.DB for reads, InTx, Autocommit and Write
// for writes in their turn. It is safe for concurrent use.
type DB struct {
	*sql.DB
	dialect dialect
	// stmts keeps the statements of the hot paths prepared (see
	// Prepared): query text -> *sql.Stmt.
	stmts sync.Map
	// writer is the queue of SQLite's writes (nil on PostgreSQL), and
	// writeWait how long a bounded one waits in it (see writer.go).
	writer    *queue
	writeWait time.Duration
}

// Open opens the database named by url and migrates it to the current
// schema, the goose migrations in migrations/sqlite or migrations/postgres
// of fsys. url is postgres://… or postgresql://… for PostgreSQL (pgx's
// connection URL); otherwise a file path, sqlite://<path> or file:<path>
// for SQLite, whose parent directory is created if needed. A bounded
// write waits writeWait for its turn (writer.go). Errors never repeat a
// password.
func Open(ctx context.Context, url string, fsys fs.FS, writeWait time.Duration) (*DB, error) {
	d := &DB{writeWait: writeWait}
	var err error
	if isPostgres(url) {
		d.dialect = postgresDialect
		d.DB, err = openPostgres(ctx, url)
	} else {
		d.dialect = sqliteDialect
		d.DB, err = openSQLite(ctx, url, writeWait)
		d.writer = &queue{}
	}
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := migrate(ctx, d.DB, fsys, d.dialect); err != nil {
		d.DB.Close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	return d, nil
}

// Postgres reports whether the database is PostgreSQL, which several
// gateways may share.
func (d *DB) Postgres() bool { return d.dialect == postgresDialect }

// Close closes the database.
func (d *DB) Close() error {
	d.stmts.Range(func(_, st any) bool {
		st.(*sql.Stmt).Close()
		return true
	})
	return d.DB.Close()
}

// Prepared returns query prepared once for the database's life. The hot
// paths (every request's key and user, every model request's record)
// use it: SQLite otherwise parses and plans the statement again on every
// call, which costs more than running it. database/sql prepares it again
// on each connection that needs it.
func (d *DB) Prepared(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := d.stmts.Load(query); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := d.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if prev, loaded := d.stmts.LoadOrStore(query, st); loaded {
		st.Close()
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}

// Queryer is what *sql.DB and *sql.Tx share, so one read serves both.
type Queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}
