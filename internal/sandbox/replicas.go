package sandbox

import (
	"context"
)

// Replicas is how gateway replicas sharing one database split the
// background work. Exactly one of them sweeps (expiry, reconciling,
// retention); each holds the sandboxes whose start, agent run or tunnel it
// is serving, so the sweeping one leaves those alone: it neither fails a
// start another replica is making nor follows a run another replica
// follows. A hold ends when released or when its replica dies, and so does
// leadership; then the next sweep's leader takes the sandbox over (it
// re-follows a running agent run, SPEC S13). A gateway alone needs none of
// this: it always leads and nothing is held elsewhere (WithReplicas not
// given).
type Replicas interface {
	// Lead reports whether this replica sweeps now. It is asked before
	// every sweep.
	Lead(ctx context.Context) (bool, error)
	// Hold marks a sandbox as this replica's until release is called.
	Hold(ctx context.Context, id ID) (release func(), err error)
	// HeldElsewhere reports whether another replica holds a sandbox.
	HeldElsewhere(ctx context.Context, id ID) (bool, error)
}

// WithReplicas makes the service one of several replicas on one database.
func WithReplicas(r Replicas) Option {
	return func(s *Service) { s.replicas = r }
}

// alone is the Replicas of a gateway that shares its database with no
// other.
type alone struct{}

func (alone) Lead(context.Context) (bool, error)              { return true, nil }
func (alone) Hold(context.Context, ID) (func(), error)        { return func() {}, nil }
func (alone) HeldElsewhere(context.Context, ID) (bool, error) { return false, nil }

// hold holds id for this replica and returns its release. A hold that
// cannot be taken is logged and the work goes on: at worst the leader's
// sweep looks at the sandbox too, as it did before replicas.
func (s *Service) hold(ctx context.Context, id ID) func() {
	release, err := s.replicas.Hold(ctx, id)
	if err != nil {
		s.log.WarnContext(ctx, "could not hold a sandbox for this replica", "sandbox", id, "err", err)
		return func() {}
	}
	return release
}

// heldElsewhere reports whether another replica is serving id; when that
// cannot be told, it says so, and the sweep leaves the sandbox for later.
func (s sweeper) heldElsewhere(ctx context.Context, id ID) bool {
	held, err := s.replicas.HeldElsewhere(ctx, id)
	if err != nil {
		s.log.WarnContext(ctx, "could not tell whether another replica holds a sandbox", "sandbox", id, "err", err)
		return true
	}
	return held
}

// sweepIfLeader sweeps when this replica leads, and logs when that
// changes; leading is the loop's memory of the last answer.
func (s sweeper) sweepIfLeader(ctx context.Context, leading *bool) {
	lead, err := s.replicas.Lead(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		s.log.WarnContext(ctx, "cannot tell whether this replica leads the sweep", "err", err)
		lead = false
	}
	if lead != *leading {
		*leading = lead
		if lead {
			s.log.InfoContext(ctx, "this replica leads the sweep")
		} else {
			s.log.InfoContext(ctx, "this replica no longer leads the sweep")
		}
	}
	if lead {
		if s.warm != nil {
			s.warm.Tick(ctx) // the pools in step with the classes (SPEC S12)
		}
		s.sweepAndLog(ctx)
	}
}
