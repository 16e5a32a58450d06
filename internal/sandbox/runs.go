package sandbox

import (
	"context"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/class"
)

// Runs is an agent run's part in its sandbox's life (SPEC S13), which
// package agentrun plays: the service asks it at create, around a start
// and when an agent sandbox ends. A run changes no sandbox's state itself:
// how its sandbox ends it asks of EndRun, so every change still takes the
// service's one write path.
type Runs interface {
	// Choose fills in an agent sandbox's runner and image (sb.Runner is
	// the creator's) and the model its run starts on, or refuses the
	// create before anything starts.
	Choose(ctx context.Context, sb *Sandbox, c class.Class, project account.Project, model string) error
	// Prepare turns spec into an agent run's (spec.Run) and records the
	// run; on error nothing is left behind.
	Prepare(ctx context.Context, spec *Spec) error
	// Follow reads a started run's output until its machine exits, then
	// concludes the run; work is its checkout, "" when followed again
	// after a restart.
	Follow(ctx context.Context, sb Sandbox, work string)
	// Following reports whether this replica is reading sb's run: its
	// output, or an in-machine run's report.
	Following(id ID) bool
	// Unstarted records a run whose machine did not start, for reason.
	Unstarted(ctx context.Context, spec Spec, reason string)
	// Ended closes the record of a run whose sandbox ended under it (to,
	// by actor: "" for berth itself), before its machine is removed;
	// Removed, once it is, deletes the run's task and checkout.
	Ended(ctx context.Context, sb Sandbox, to State, actor, reason string)
	Removed(ctx context.Context, sb Sandbox)
	// Fork copies what the session src kept between tasks (its checkout
	// and its agent's home) into each of forks, whose first task goes on
	// from it; a fork whose branch berth/<name> is taken is a
	// fault.Conflict. On error nothing of the forks' is left.
	Fork(ctx context.Context, src Sandbox, forks []Sandbox) error
	// Forget removes what a run kept (its log, its verdict's copy), once
	// its sandbox's row is deleted.
	Forget(ctx context.Context, id ID)
}

// AgentPushRefused is why an agent run's key may not push (SPEC S13.1):
// the container never pushes; the host takes its work after a clean exit.
const AgentPushRefused = "the host pushes an agent's work after a clean exit: an agent run's key may fetch, never push"

// SetRuns makes agent sandboxes run their runner through r; without it an
// agent sandbox runs none and waits for its end. Call it before Run.
func (s *Service) SetRuns(r Runs) { s.runs = r }

// agentRun reports whether sb is an agent run: an agent sandbox with a
// runner, on a deployment that runs them.
func (s *Service) agentRun(sb Sandbox) bool {
	return sb.Purpose == PurposeAgent && sb.Runner != "" && s.runs != nil
}

// inMachine reports whether this deployment's agent runs run whole in
// their machines.
func (s *Service) inMachine() bool {
	_, ok := s.driver.(InMachineRuns)
	return ok
}

// EndRun ends an agent sandbox whose run is over, as the run decided: to
// terminated after a clean run, failed with reason otherwise, its running
// time closed at exited (zero: now). A sandbox that cannot move there any
// more (it ended meanwhile) is left as it is.
func (s *Service) EndRun(ctx context.Context, id ID, to State, reason string, exited time.Time) error {
	_, err := retryMoved(func() (Sandbox, error) {
		cur, err := s.store.GetSandbox(ctx, id)
		if err != nil {
			return Sandbox{}, err
		}
		if !CanMove(cur.State, to) {
			return cur, nil
		}
		return s.endAt(ctx, "", cur, to, reason, exited)
	})
	return err
}
