package sqldb

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// PostgreSQL serves several gateway replicas at once (SPEC S5's "past one
// host"). What SQLite gets from one writer at a time, PostgreSQL gets from
// advisory locks: a transaction that reads and then writes on what it read
// (admission counting live sandboxes, the bootstrap, the deployment id)
// first takes a transaction-scoped lock on what it decides about. The
// leader lock and the sandbox holds of replica.go are session-scoped
// advisory locks in spaces of their own.

// Advisory lock spaces: the first key of PostgreSQL's two-key advisory
// locks, so berth's locks never meet each other's or another program's
// keys (goose's migration lock uses the one-key form).
const (
	lockSpaceTx     int32 = 0x62727401 // transaction locks: serialize
	lockSpaceLeader int32 = 0x62727402 // the sweep's leader
	lockSpaceHold   int32 = 0x62727403 // sandboxes a replica is starting or following
)

// MaxPostgresConns caps each replica's connections. Creates wait on the
// admission lock holding a connection, so without a cap a burst of them
// could use up the server's max_connections (100 by default) across two
// replicas.
const MaxPostgresConns = 25

// openPostgres connects to the PostgreSQL database url names.
func openPostgres(ctx context.Context, rawURL string) (*sql.DB, error) {
	where := redact(rawURL)
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		// pgx's message repeats the URL with its password masked.
		return nil, fmt.Errorf("postgres %s: %w", where, err)
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(MaxPostgresConns)
	db.SetMaxIdleConns(MaxPostgresConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	pingCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		db.Close()
		return nil, fmt.Errorf("postgres %s: %w", where, err)
	}
	return db, nil
}

// redact is a database URL fit for a message: without its password, or
// nothing of it when it does not parse.
func redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(an unparsable URL)"
	}
	return u.Redacted()
}

// Serialize makes tx the only transaction past this point for key until
// it ends. On SQLite every transaction already holds the database's write
// lock from BEGIN (see dialect.go), so there is nothing to do.
func (d *DB) Serialize(ctx context.Context, tx *sql.Tx, key string) error {
	if d.dialect != postgresDialect {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, lockSpaceTx, lockKey(key)); err != nil {
		return fmt.Errorf("lock %s: %w", key, err)
	}
	return nil
}

// lockKey is the second key of an advisory lock on a name. Two names
// sharing a key only serialize a little more than they must.
func lockKey(name string) int32 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int32(h.Sum32())
}
