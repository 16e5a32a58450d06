package sqldb

import (
	"container/list"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/overload"
)

// SQLite takes one writer at a time, and a writer that finds the lock
// taken sleeps in SQLite's busy handler (1 ms, 2 ms, 5 ms … up to 100 ms a
// try) rather than queueing: under 32 concurrent creates the lock sat idle
// while writers slept, the unlucky ones waited seconds (p99 of a create
// 0.8–1.4 s, a transaction's BEGIN 64–90 ms on average for a write that holds
// the lock under 1 ms), one past busy_timeout failed with SQLITE_BUSY,
// and throughput fell as clients grew. So the gateway serialises its own
// writes: one writer at a time in the order they asked (queue), each
// handed the turn by the one before it, and SQLite's lock is only ever
// contested by another process (an admin command on the same file). A
// pool of one connection for writes would serialise them too, but
// database/sql hands a freed connection to a waiter at random and bounds
// no wait but the context's.
//
// How long a write waits for its turn depends on what it is (Turn).
// PostgreSQL has no queue: it waits on its own row and advisory locks,
// and replicas share it.

// Turn says how long a write may wait for the database.
type Turn int

const (
	// Bounded is a write that starts something new at a caller's
	// request (a sandbox, an organisation, a key, a setting): it waits
	// at most the store's write wait for its turn (and as long again
	// for another process's lock), then fails with fault.Busy
	// having written nothing, which the caller may send again.
	Bounded Turn = iota
	// Patient is a write of what has happened or must follow (a state
	// change, a run's record, an audit event, a revocation, activity,
	// the sweep's deletes, what an accepted create still writes): it
	// waits as long as its context allows and is tried again while the
	// database is busy, so load delays it and never drops it.
	Patient
)

// queue hands the one turn to write to callers in the order they asked.
// The turn passes straight from the holder to the first in line, so none
// who arrives later takes it first.
type queue struct {
	mu      sync.Mutex
	held    bool
	waiting list.List // of chan struct{}, the first in line first
}

// acquire waits for the turn, at most wait when wait > 0, and as long as
// ctx allows. It returns nil holding the turn, fault.Busy when the
// wait ran out, or ctx's error.
func (q *queue) acquire(ctx context.Context, wait time.Duration) error {
	q.mu.Lock()
	if !q.held {
		q.held = true
		q.mu.Unlock()
		return nil
	}
	ch := make(chan struct{}, 1)
	me := q.waiting.PushBack(ch)
	q.mu.Unlock()
	var expired <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		expired = t.C
	}
	var err error
	select {
	case <-ch:
		return nil
	case <-expired:
		err = &fault.Error{Kind: fault.Busy, RetryAfter: overload.RetryAfter, Message: fmt.Sprintf("no turn to write to the database within %v", wait)}
	case <-ctx.Done():
		err = ctx.Err()
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	select {
	case <-ch:
		// The turn came as the wait ended: pass it on.
		q.handOff()
	default:
		q.waiting.Remove(me)
	}
	return err
}

// release gives the turn to the first in line, or frees it.
func (q *queue) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.handOff()
}

// handOff is release with q.mu held.
func (q *queue) handOff() {
	first := q.waiting.Front()
	if first == nil {
		q.held = false
		return
	}
	q.waiting.Remove(first)
	first.Value.(chan struct{}) <- struct{}{}
}

// InTx runs fn in a transaction in its turn (see Turn), committing if it
// returns nil. On SQLite every transaction takes the write lock at BEGIN
// (see dialect.go), so the reads fn makes cannot be invalidated before it
// commits. A patient transaction may run fn more than once: fn touches
// nothing but tx.
func (d *DB) InTx(ctx context.Context, t Turn, fn func(tx *sql.Tx) error) error {
	return d.write(ctx, t, func() error {
		tx, err := d.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("begin transaction: %w", err)
		}
		if err := fn(tx); err != nil {
			_ = tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("commit transaction: %w", err)
		}
		return nil
	})
}

// Autocommit runs fn's writes on the database, each its own transaction,
// in its turn; like InTx's fn, a patient one's may run more than once.
func (d *DB) Autocommit(ctx context.Context, t Turn, fn func(q Queryer) error) error {
	return d.write(ctx, t, func() error { return fn(d.DB) })
}

// Write runs one writing statement in its turn.
func (d *DB) Write(ctx context.Context, t Turn, query string, args ...any) (sql.Result, error) {
	var res sql.Result
	err := d.Autocommit(ctx, t, func(q Queryer) error {
		var err error
		res, err = q.ExecContext(ctx, query, args...)
		return err
	})
	return res, err
}

// write runs fn holding the turn to write (SQLite), as t allows: a bounded
// write that waits past the database's write wait, or meets another process's
// lock for as long, is fault.Busy; a patient one waits and tries
// again. On PostgreSQL fn runs at once.
func (d *DB) write(ctx context.Context, t Turn, fn func() error) error {
	if d.writer == nil {
		return fn()
	}
	for {
		wait := d.writeWait
		if t == Patient {
			wait = 0
		}
		if err := d.writer.acquire(ctx, wait); err != nil {
			return err
		}
		err := fn()
		d.writer.release()
		if !isBusy(err) {
			return err
		}
		if t == Bounded {
			return &fault.Error{Kind: fault.Busy, RetryAfter: overload.RetryAfter, Message: fmt.Sprintf("the database was locked by another process for %v", d.writeWait)}
		}
		if ctx.Err() != nil {
			return err
		}
	}
}

// isBusy reports whether err is SQLite's "database is locked": its busy
// timeout ran out while another connection (another process) held the
// lock.
func isBusy(err error) bool {
	e, ok := errors.AsType[*sqlite.Error](err)
	return ok && e.Code()&0xff == sqlite3.SQLITE_BUSY
}
