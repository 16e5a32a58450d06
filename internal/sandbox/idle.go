package sandbox

import (
	"context"
	"time"

	"berth.dev/berth/internal/quantity"
)

// Activity is the idle clock's source (SPEC S3): what the gateway's
// tunnel (package reach) saw of the connections to each sandbox, here or
// as another replica saved it. The sweep asks it whether an engineer
// sandbox is idle, has it save what it saw once a tick of Run, and has it
// forget a sandbox that ended for good.
type Activity interface {
	// Seen is how many connections this replica has open to sb and when
	// one last opened, closed or carried bytes (sb.ActiveAt when later).
	Seen(sb Sandbox) (open int, last time.Time)
	// Save writes to the store what this replica saw since it last did.
	Save(ctx context.Context)
	// Forget drops what was seen of a sandbox that is gone for good.
	Forget(id ID)
}

// SetActivity feeds the idle clock from a (the tunnel's connections);
// without it no connection is counted, only what the row says. Call it
// before Run.
func (s *Service) SetActivity(a Activity) { s.activity = a }

// Activity returns the connections this replica has open to sb and when
// a connection last opened, closed or carried bytes, here or as another
// replica saved it; zero when none has since the sandbox was made.
func (s *Service) Activity(sb Sandbox) (open int, last time.Time) {
	if s.activity == nil {
		return 0, sb.ActiveAt
	}
	return s.activity.Seen(sb)
}

// idle reports whether an engineer sandbox has had no connection for the
// deployment's idle limit. The clock counts from the last connection, or
// from when it last started running (it restarts on resume).
func (s sweeper) idle(sb Sandbox, now time.Time) bool {
	if s.cfg.IdleSuspend <= 0 || sb.Purpose != PurposeEngineer || sb.State != StateRunning || sb.RunningSince.IsZero() {
		return false
	}
	open, last := s.Activity(sb)
	if open > 0 {
		return false
	}
	if last.Before(sb.RunningSince) {
		last = sb.RunningSince
	}
	return now.Sub(last) >= s.cfg.IdleSuspend
}

// suspendIdle suspends a sandbox the sweep found idle.
func (s sweeper) suspendIdle(ctx context.Context, sb Sandbox) error {
	next, err := sb.Transition(StateSuspended)
	if err != nil {
		return err
	}
	next.Reason = "idle for " + quantity.FormatDuration(s.cfg.IdleSuspend)
	// The row first, as Suspend does: a machine stopped under a row still
	// running is one that stopped by itself to whoever looks meanwhile
	// (the driver's watch, another sweep), and fails.
	out, err := s.write(ctx, "", sb, Update{Sandbox: next, From: StateRunning, At: s.clamp(sb)})
	if err != nil {
		return err
	}
	s.stopSuspended(ctx, "", out) // with its memory where it can: it resumes warm
	return nil
}

// Recheck looks again at a running sandbox whose machine did not answer
// (the tunnel's dial, package reach): unless the driver says it runs, the
// sandbox is handled at once, as the sweep would (its machine stopped or
// went behind the gateway's back), and its row is read afresh. It returns
// sb as it now is.
func (s *Service) Recheck(ctx context.Context, sb Sandbox) (Sandbox, error) {
	if m, err := s.driver.Inspect(ctx, sb.ID); err == nil && m.Status == MachineRunning {
		return sb, nil
	}
	if err := (sweeper{s}).sweepSandbox(ctx, sb.ID, &SweepResult{Errors: map[ID]error{}}); err != nil {
		s.log.WarnContext(ctx, "could not handle a sandbox whose machine stopped", "sandbox", sb.ID, "err", err)
	}
	return s.store.GetSandbox(ctx, sb.ID)
}
