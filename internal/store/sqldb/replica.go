package sqldb

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Replica is one gateway's seat among the replicas sharing a PostgreSQL
// database: it elects the sweep's leader and holds sandboxes, by id, for
// the store's sandbox.Replicas. Both are session-level advisory locks on one
// connection of its own, so they end with the replica: when its process
// dies the server closes the session and frees them, and another replica
// takes them at its next try. Should the connection break while the
// replica lives, Replica opens another, takes its holds again and stands
// for leader again.
type Replica struct {
	db  *sql.DB
	log *slog.Logger

	mu      sync.Mutex // guards what follows, and serialises the session's use
	conn    *sql.Conn  // the session; nil until opened or after it broke
	pid     int64      // the session's server process, to tell its locks from others'
	leader  int32      // the leader lock's second key: the schema's, as deployments may share a database
	leading bool
	held    map[int32]int // sandboxes' lock keys, with how many holds each
}

// Replica returns this gateway's seat among replicas. Only a PostgreSQL
// database has one: on SQLite, where one gateway owns the database and needs
// none, it is nil.
// Advisory locks belong to the whole database, so the lead is taken per
// schema: two deployments in two schemas of one database each have a
// leader.
func (d *DB) Replica(ctx context.Context, log *slog.Logger) (*Replica, error) {
	if d.dialect != postgresDialect {
		return nil, nil
	}
	var schema string
	if err := d.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	return &Replica{db: d.DB, log: log, leader: lockKey(schema), held: map[int32]int{}}, nil
}

// Lead reports whether this replica leads the sweep, trying to take the
// lead if no replica has it.
func (r *Replica) Lead(ctx context.Context) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	conn, err := r.session(ctx)
	if err != nil {
		return false, fmt.Errorf("lead the sweep: %w", err)
	}
	if r.leading {
		// The lock lives as long as the session: a session that answers
		// still holds it.
		if err := conn.PingContext(ctx); err != nil {
			r.broken(err)
			return false, fmt.Errorf("lead the sweep: %w", err)
		}
		return true, nil
	}
	var got bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1, $2)`, lockSpaceLeader, r.leader).Scan(&got); err != nil {
		r.broken(err)
		return false, fmt.Errorf("lead the sweep: %w", err)
	}
	r.leading = got
	return got, nil
}

// Hold holds a sandbox for this replica until release is called. A
// sandbox another replica holds cannot be held.
func (r *Replica) Hold(ctx context.Context, id string) (func(), error) {
	key := lockKey(id)
	r.mu.Lock()
	defer r.mu.Unlock()
	conn, err := r.session(ctx)
	if err != nil {
		return nil, fmt.Errorf("hold sandbox %s: %w", id, err)
	}
	var got bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1, $2)`, lockSpaceHold, key).Scan(&got); err != nil {
		r.broken(err)
		return nil, fmt.Errorf("hold sandbox %s: %w", id, err)
	}
	if !got {
		return nil, fmt.Errorf("hold sandbox %s: another replica holds it", id)
	}
	r.held[key]++
	var once sync.Once
	return func() { once.Do(func() { r.release(id, key) }) }, nil
}

// release ends one hold of key.
func (r *Replica) release(id string, key int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held[key]--; r.held[key] <= 0 {
		delete(r.held, key)
	}
	if r.conn == nil {
		return // the session is gone, and its locks with it
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1, $2)`, lockSpaceHold, key); err != nil {
		r.broken(err)
		r.log.Warn("could not release a sandbox's hold", "sandbox", id, "err", err)
	}
}

// HeldElsewhere reports whether another replica's session holds a
// sandbox. It reads the server's lock table, so it takes nothing a
// concurrent Hold could meet.
func (r *Replica) HeldElsewhere(ctx context.Context, id string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	conn, err := r.session(ctx)
	if err != nil {
		return false, fmt.Errorf("is sandbox %s held: %w", id, err)
	}
	// pg_locks shows a two-key advisory lock's keys as oids (unsigned)
	// in classid and objid, with objsubid 2.
	var held bool
	err = conn.QueryRowContext(ctx, `
		SELECT EXISTS (SELECT 1 FROM pg_locks
			WHERE locktype = 'advisory' AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 2
				AND granted AND pid <> $3)`,
		int64(uint32(lockSpaceHold)), int64(uint32(lockKey(id))), r.pid).Scan(&held)
	if err != nil {
		r.broken(err)
		return false, fmt.Errorf("is sandbox %s held: %w", id, err)
	}
	return held, nil
}

// Close ends the session, giving up the lead and every hold.
func (r *Replica) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn == nil {
		return nil
	}
	err := endSession(r.conn)
	r.conn, r.leading = nil, false
	return err
}

// endSession closes a session's connection for good. Closing a sql.Conn
// only hands the connection back to the pool, where its session, and its
// locks, would live on.
func endSession(conn *sql.Conn) error {
	err := conn.Raw(func(dc any) error {
		if c, ok := dc.(io.Closer); ok {
			return c.Close()
		}
		return nil
	})
	// The pool sees the connection closed and drops it.
	conn.Close()
	return err
}

// session returns the replica's session, opening one (and taking its
// holds again) if it has none. r.mu is held.
func (r *Replica) session(ctx context.Context) (*sql.Conn, error) {
	if r.conn != nil {
		return r.conn, nil
	}
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if err := conn.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&r.pid); err != nil {
		conn.Close()
		return nil, err
	}
	for key := range r.held {
		var got bool
		err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1, $2)`, lockSpaceHold, key).Scan(&got)
		if err != nil {
			endSession(conn)
			return nil, err
		}
		if !got {
			r.log.WarnContext(ctx, "a sandbox this replica held was taken by another while its session was down", "lock_key", key)
		}
		// Each further hold of the same key stacks on the session.
		for range r.held[key] - 1 {
			if _, err := conn.ExecContext(ctx, `SELECT pg_try_advisory_lock($1, $2)`, lockSpaceHold, key); err != nil {
				endSession(conn)
				return nil, err
			}
		}
	}
	r.conn = conn
	return conn, nil
}

// broken drops a session that failed a query: its locks may be gone with
// it, so the lead is given up and the next call opens another. r.mu is
// held.
func (r *Replica) broken(err error) {
	if r.conn == nil {
		return
	}
	r.log.Warn("replica session lost; opening another", "err", err)
	endSession(r.conn)
	r.conn, r.leading = nil, false
}
