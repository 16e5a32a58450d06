package agentrun

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/sandbox"
)

// pushFunc takes a clean run's work to berth/<name> and says where it
// went: the host pushes its checkout, or the gateway lands the bundle an
// in-machine run sent. commit is "" when there was nothing.
type pushFunc func(ctx context.Context, sb sandbox.Sandbox) (branch, commit string, err error)

// hostPush pushes the host's checkout in work, moving the branch from
// onto (a session's earlier push; "" creates it).
func (s *Service) hostPush(work, onto string) pushFunc {
	return s.audited(onto, func(ctx context.Context, sb sandbox.Sandbox) (string, string, error) {
		return s.work.Push(ctx, sb, work, onto)
	})
}

// errEnded says a run's sandbox ended (terminated, expired) before its
// work was taken: the work is discarded, and the end recorded the run.
var errEnded = errors.New("the sandbox ended before its run's work was taken")

// audited is push, audited like any push, and only while the run's
// sandbox still runs: one terminated meanwhile leaves no branch.
func (s *Service) audited(onto string, push pushFunc) pushFunc {
	return func(ctx context.Context, sb sandbox.Sandbox) (string, string, error) {
		if cur, err := s.store.GetSandbox(ctx, sb.ID); err != nil || (cur.State != sandbox.StateRunning && cur.State != sandbox.StateStarting) {
			return "", "", errEnded
		}
		branch, commit, err := push(ctx, sb)
		if err != nil {
			s.cfg.Pushes.Refused(ctx, sb, map[string]string{forge.AgentBranch(sb.Name): err.Error()})
			return "", "", err
		}
		if commit != "" {
			s.cfg.Pushes.Pushed(ctx, sb, []forge.RefUpdate{{Old: cmp.Or(onto, strings.Repeat("0", len(commit))), New: commit, Ref: "refs/heads/" + branch}})
		}
		return branch, commit, nil
	}
}

// conclude decides how a run whose agent exited ended (run.ExitCode, or
// run.State already failed), from what it reported, how far a kelos
// image's setup command got (run.Setup) and its sandbox's role: a clean
// author's run has its work taken by push, a reviewer's pushes nothing
// (its verdict is its work). It returns errEnded, deciding nothing, when
// push found the sandbox ended meanwhile.
func conclude(run Run, role sandbox.Role, push func() (branch, commit string, err error)) (Run, error) {
	if run.State == RunFailed {
		return run, nil
	}
	switch setup := run.Setup; {
	case setup == kelos.SetupError:
		run.State, run.Error = RunFailed, "the setup command (KELOS_SETUP_COMMAND) failed, so the agent did not run"
		if run.ExitCode != 0 {
			run.Error += fmt.Sprintf(" (exit %d)", run.ExitCode)
		}
	case setup == kelos.SetupStarted && run.ExitCode != 0:
		run.State, run.Error = RunFailed, fmt.Sprintf("the setup command (KELOS_SETUP_COMMAND) did not finish (exit %d), so the agent did not run", run.ExitCode)
	case run.ExitCode != 0:
		run.State, run.Error = RunFailed, fmt.Sprintf("the agent exited %d", run.ExitCode)
		if run.Telemetry.Error != "" {
			run.Error += ": " + run.Telemetry.Error
		}
	case run.Telemetry.Error != "":
		// Recognised even when the CLI exits 0 (pi does).
		run.State, run.Error = RunFailed, "the agent reported an error: "+run.Telemetry.Error
	case role == sandbox.RoleReviewer:
		run.State = RunSucceeded // a reviewer pushes nothing: its verdict is its work
	default:
		branch, commit, err := push()
		switch {
		case errors.Is(err, errEnded):
			return run, err
		case err != nil:
			run.State, run.Error = RunFailed, "push: "+err.Error()
		default:
			run.State, run.Branch, run.Commit = RunSucceeded, branch, commit
		}
	}
	return run, nil
}

// concludeRun concludes a run whose agent exited (conclude), taking its
// work with push after a clean run, records it, and ends the sandbox:
// terminated after a clean run, failed otherwise. exited is when its
// machine stopped, as its runtime says (zero: it has not, or it is not
// known): the sandbox's running time ends there.
func (s *Service) concludeRun(ctx context.Context, sb sandbox.Sandbox, run Run, push pushFunc, verdict verdictFunc, exited time.Time) {
	run, err := conclude(run, sb.Role, func() (string, string, error) { return push(ctx, sb) })
	if errors.Is(err, errEnded) {
		// Ended meanwhile: its end recorded the run and removed what it
		// had.
		return
	}
	if sb.Role == sandbox.RoleReviewer {
		s.digestVerdict(ctx, &run, verdict)
		s.judgeBest(ctx, sb, &run)
	}
	if sb.Session {
		s.endTask(ctx, sb, run, exited)
		return
	}
	// Gone before the sandbox says it ended: nothing of the run outlives it.
	s.removeCheckout(ctx, sb)
	s.saveRun(ctx, run)
	to, reason := sandbox.StateTerminated, "its task finished"
	if run.State == RunFailed {
		to, reason = sandbox.StateFailed, run.Error
	}
	if err := s.sandboxes.EndRun(ctx, sb.ID, to, reason, exited); err != nil && !errors.Is(err, fault.Conflict) {
		s.log.ErrorContext(ctx, "could not end a finished run's sandbox", "sandbox", sb.ID, "err", err)
	}
	if s.reports != nil {
		s.reports.Concluded(ctx, sb.ID)
	}
}

// endTask records a session's run and suspends the session for its next
// task, keeping its checkout and its agent's state: a failed task ends
// the run, not the session.
func (s *Service) endTask(ctx context.Context, sb sandbox.Sandbox, run Run, exited time.Time) {
	s.saveRun(ctx, run)
	reason := fmt.Sprintf("task %d finished; it waits for the next (berth sandbox task)", run.Seq)
	if run.State == RunFailed {
		reason = fmt.Sprintf("task %d failed (%s); it waits for the next (berth sandbox task)", run.Seq, run.Error)
	}
	if err := s.sandboxes.EndTask(ctx, sb.ID, reason, exited); err != nil && !errors.Is(err, fault.Conflict) {
		s.log.ErrorContext(ctx, "could not suspend a session after its task", "sandbox", sb.ID, "err", err)
	}
	if s.reports != nil {
		s.reports.Concluded(ctx, sb.ID)
	}
}
