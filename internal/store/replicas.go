package store

import (
	"context"
	"log/slog"

	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store/sqldb"
)

var _ sandbox.Replicas = (*Replica)(nil)

// Replica is this gateway's seat among the replicas sharing a PostgreSQL
// database: sandbox.Replicas over sqldb's session locks, the sweep's
// leader and the holds on sandboxes.
type Replica struct{ seat *sqldb.Replica }

// Replica returns this gateway's seat among replicas. Only a PostgreSQL
// store has one: on SQLite, where one gateway owns the database and needs
// none, it is nil.
func (s *Store) Replica(ctx context.Context, log *slog.Logger) (*Replica, error) {
	seat, err := s.db.Replica(ctx, log)
	if seat == nil || err != nil {
		return nil, err
	}
	return &Replica{seat}, nil
}

// Lead reports whether this replica leads the sweep, trying to take the
// lead if no replica has it.
func (r *Replica) Lead(ctx context.Context) (bool, error) { return r.seat.Lead(ctx) }

// Hold holds a sandbox for this replica until release is called. A
// sandbox another replica holds cannot be held.
func (r *Replica) Hold(ctx context.Context, id sandbox.ID) (func(), error) {
	return r.seat.Hold(ctx, string(id))
}

// HeldElsewhere reports whether another replica's session holds a sandbox.
func (r *Replica) HeldElsewhere(ctx context.Context, id sandbox.ID) (bool, error) {
	return r.seat.HeldElsewhere(ctx, string(id))
}

// Close ends the session, giving up the lead and every hold.
func (r *Replica) Close() error { return r.seat.Close() }
