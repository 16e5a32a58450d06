package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store/sqldb"
)

// RunLogs keeps runs' logs in the database (agentrun.RunLogs): replicas that
// share it answer for runs any of them read. A log is its chunks in order,
// as the writer flushed them; chunk 0 is empty and says the log exists.
func (s *Store) RunLogs() agentrun.RunLogs { return dbLogs{s} }

type dbLogs struct{ st *Store }

// Chunks are written once this much is waiting, or this long after the
// first byte of one: a follower on another replica sees a line within it.
const (
	logChunk = 64 << 10
	logFlush = 250 * time.Millisecond
)

// Write starts id's log anew and returns its writer. Its writes outlive
// ctx's cancellation: what a run printed is kept even when the request
// that streamed it broke.
func (l dbLogs) Write(ctx context.Context, id sandbox.ID) (io.WriteCloser, error) {
	ctx = context.WithoutCancel(ctx)
	err := l.st.db.InTx(ctx, sqldb.Patient, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM run_logs WHERE sandbox_id = $1`, string(id)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO run_logs (sandbox_id, seq, data) VALUES ($1, 0, $2)`, string(id), []byte{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("start the run log of %s: %w", id, err)
	}
	w := &logWriter{st: l.st, ctx: ctx, id: string(id), stop: make(chan struct{}), done: make(chan struct{})}
	go w.flushing()
	return w, nil
}

// Read reads id's log from its start.
func (l dbLogs) Read(ctx context.Context, id sandbox.ID) (io.ReadCloser, error) {
	var n int
	err := l.st.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM run_logs WHERE sandbox_id = $1 AND seq = 0`, string(id)).Scan(&n)
	if err != nil {
		return nil, fmt.Errorf("run log of %s: %w", id, err)
	}
	if n == 0 {
		return nil, fault.Errorf(fault.NotFound, "run log of %s", id)
	}
	return &logReader{st: l.st, ctx: ctx, id: string(id)}, nil
}

// Remove deletes id's log.
func (l dbLogs) Remove(ctx context.Context, id sandbox.ID) error {
	// A session's later runs' logs are id, a dot and the run's number:
	// the ids from "id." up to "id/" ('/' follows '.'), with no pattern
	// for the id's own characters to upset.
	if _, err := l.st.db.Write(ctx, sqldb.Patient, `DELETE FROM run_logs WHERE sandbox_id = $1 OR (sandbox_id > $2 AND sandbox_id < $3)`,
		string(id), string(id)+".", string(id)+"/"); err != nil {
		return fmt.Errorf("remove the run log of %s: %w", id, err)
	}
	return nil
}

// logWriter gathers what is written into chunks; a goroutine of its own
// flushes a chunk that waited logFlush, so a quiet run's last lines are
// not held back.
type logWriter struct {
	st   *Store
	ctx  context.Context
	id   string
	stop chan struct{}
	done chan struct{}

	mu    sync.Mutex
	buf   []byte
	since time.Time // when buf got its first byte
	seq   int64
	err   error
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	if len(w.buf) == 0 {
		w.since = time.Now()
	}
	w.buf = append(w.buf, p...)
	if len(w.buf) >= logChunk {
		w.flush()
	}
	return len(p), w.err
}

// flush writes what waits as the next chunk; w.mu is held.
func (w *logWriter) flush() {
	if len(w.buf) == 0 || w.err != nil {
		return
	}
	w.seq++
	if _, err := w.st.db.Write(w.ctx, sqldb.Patient, `INSERT INTO run_logs (sandbox_id, seq, data) VALUES ($1, $2, $3)`, w.id, w.seq, w.buf); err != nil {
		w.err = fmt.Errorf("run log of %s: chunk %d: %w", w.id, w.seq, err)
		return
	}
	w.buf = w.buf[:0]
}

func (w *logWriter) flushing() {
	defer close(w.done)
	t := time.NewTicker(logFlush / 2)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.mu.Lock()
			if len(w.buf) > 0 && time.Since(w.since) >= logFlush {
				w.flush()
			}
			w.mu.Unlock()
		}
	}
}

// Close writes what is left.
func (w *logWriter) Close() error {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flush()
	return w.err
}

// logReader reads a log's chunks in order, a few at a time; at the last
// it says io.EOF, and a later Read looks for chunks written since.
type logReader struct {
	st      *Store
	ctx     context.Context
	id      string
	seq     int64
	pending []byte
}

func (r *logReader) Read(p []byte) (int, error) {
	if len(r.pending) == 0 {
		if err := r.more(); err != nil {
			return 0, err
		}
		if len(r.pending) == 0 {
			return 0, io.EOF
		}
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// more reads the next chunks after the last one read.
func (r *logReader) more() error {
	rows, err := r.st.db.QueryContext(r.ctx, `SELECT seq, data FROM run_logs WHERE sandbox_id = $1 AND seq > $2 ORDER BY seq LIMIT 16`, r.id, r.seq)
	if err != nil {
		return fmt.Errorf("run log of %s: %w", r.id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&r.seq, &data); err != nil {
			return fmt.Errorf("run log of %s: %w", r.id, err)
		}
		r.pending = append(r.pending, data...)
	}
	if err := rows.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("run log of %s: %w", r.id, err)
	}
	return nil
}

func (r *logReader) Close() error { return nil }
