package agentrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/review"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
)

// In-machine runs (SPEC S13 on a driver with InMachineRuns: Kubernetes,
// where the gateway can neither mount a checkout into the machine nor read
// its output). The machine does the host's part itself, through the
// gateway and with the sandbox's own key only: berth-init clones the
// repository through the gateway's git endpoint, asks for the task
// (Task), streams the agent's output (Output), and reports the
// agent's exit (Exit) with its work as a git bundle. The key pushes
// nothing (package repository): the container never pushes, on any driver. The
// gateway lands the bundle as berth/<name> once it has concluded the run
// clean, as the host pushes a followed run's checkout, and discards it
// otherwise. The run's telemetry, log and ending are the same as a
// host-followed run's: the output it streams is read as the host reads a
// container's log (runReader), a kelos image's markers and banners
// included, and kept on the run until its exit report concludes it.

// The variable that tells berth-init to run in this mode, the one that
// tells it not to push (a reviewer's run), and the one that names the
// image's contract when it is not berth's: a kelos image's own entrypoint
// runs as berth-init's child, the task its $1 (SPEC S13.6).
const (
	runReportVar     = "BERTH_RUN_REPORT"
	runReportGateway = "gateway"
	runPushVar       = "BERTH_RUN_PUSH"
	runContractVar   = "BERTH_RUN_CONTRACT"
)

// inMachine reports whether this deployment's agent runs run whole in
// their machines.
func (s *Service) inMachine() bool {
	_, ok := s.driver.(sandbox.InMachineRuns)
	return ok
}

// runsAgents reports whether the driver can run agents at all: follow a
// host-prepared run, or let the machine run it whole.
func (s *Service) runsAgents() bool {
	if _, ok := s.driver.(Follower); ok {
		return true
	}
	return s.inMachine()
}

// Report is what an in-machine run says once its agent exited.
type Report struct {
	ExitCode int
	// Commit is the agent's HEAD after a clean exit, the one ref of
	// Bundle; "" when the agent made no commit (or did not exit 0).
	Commit string
	// Bundle is the agent's work after a clean exit: a git bundle of its
	// commits on the clone's commit, at most MaxBundle bytes. Untrusted:
	// the agent shared the machine.
	Bundle []byte
	// Error says why the machine could not hand its work over (or run
	// the agent at all).
	Error string
	// Verdict is the verdict file the machine found in its checkout (SPEC
	// S13.5), as it read it, at VerdictFile; VerdictError says why it
	// took none. A reviewer run's gateway judges its own copy of it.
	Verdict      []byte
	VerdictFile  string
	VerdictError string
}

// reporting resolves the sandbox of p, the key of a sandbox whose
// in-machine run is under way (SPEC S6: any other sandbox is not found).
func (s *Service) reporting(ctx context.Context, p account.Principal) (sandbox.Sandbox, Run, error) {
	if p.Sandbox == "" {
		return sandbox.Sandbox{}, Run{}, fault.Errorf(fault.Forbidden, "only a sandbox's own key reports its run")
	}
	sb, err := s.store.GetSandbox(ctx, sandbox.ID(p.Sandbox))
	if err != nil {
		return sandbox.Sandbox{}, Run{}, err
	}
	if !s.agentRun(sb) || !s.inMachine() {
		return sandbox.Sandbox{}, Run{}, fault.Errorf(fault.NotFound, "sandbox %s runs no task in its machine", sb.Name)
	}
	if sb.State != sandbox.StateStarting && sb.State != sandbox.StateRunning {
		return sandbox.Sandbox{}, Run{}, fault.Errorf(fault.Conflict, "sandbox %s is %s", sb.Name, sb.State)
	}
	run, err := s.store.GetRun(ctx, sb.ID)
	if err != nil {
		return sandbox.Sandbox{}, Run{}, err
	}
	switch {
	case run.State != RunRunning:
		return sandbox.Sandbox{}, Run{}, fault.Errorf(fault.Conflict, "the run of sandbox %s is over (%s)", sb.Name, run.State)
	case !run.EndedAt.IsZero():
		return sandbox.Sandbox{}, Run{}, fault.Errorf(fault.Conflict, "the run of sandbox %s has reported its end", sb.Name)
	}
	return sb, run, nil
}

// Task gives an in-machine run its task (SPEC S13.2: the machine writes
// it to the prompt file; it is never in the machine's environment).
func (s *Service) Task(ctx context.Context, p account.Principal) (string, error) {
	sb, _, err := s.reporting(ctx, p)
	if err != nil {
		return "", fmt.Errorf("run task: %w", err)
	}
	return sb.Task, nil
}

// serving marks a run whose report this replica is reading: its own sweep
// leaves it alone (another replica's sees the hold), so a machine that
// finished right after reporting is not failed as silent meanwhile.
func (s *Service) serving(ctx context.Context, id sandbox.ID) (done func()) {
	release := s.hold(ctx, id)
	s.mu.Lock()
	s.following[id]++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.following[id]--; s.following[id] <= 0 {
			delete(s.following, id)
		}
		s.mu.Unlock()
		release()
	}
}

// Output reads an in-machine run's output from body: one line each,
// "o " then a line of the agent's stdout, or "e " and one of its stderr.
// The output is read from its first line on every call (a machine whose
// stream broke sends it whole again), into the run log and the telemetry,
// as a host-followed run's.
func (s *Service) Output(ctx context.Context, p account.Principal, body io.Reader) error {
	sb, run, err := s.reporting(ctx, p)
	if err != nil {
		return fmt.Errorf("run output: %w", err)
	}
	r, err := runner.Get(run.Runner)
	if err != nil {
		return fmt.Errorf("run output: %w", err)
	}
	defer s.serving(ctx, sb.ID)()
	rr := s.readRun(ctx, sb, run, r)
	defer rr.close()
	malformed := 0
	err = runner.ReadLines(body, false, func(b []byte) {
		stream, line, ok := strings.Cut(string(b), " ")
		switch {
		case ok && stream == "o":
			rr.line(ctx, true, []byte(line))
		case ok && stream == "e":
			rr.line(ctx, false, []byte(line))
		default:
			malformed++
		}
	})
	if malformed > 0 {
		s.log.WarnContext(ctx, "run output lines without their stream's mark", "sandbox", sb.ID, "count", malformed)
	}
	// What was read counts even when the stream broke: the machine sends
	// it whole again. Only what the output said (the telemetry, a kelos
	// image's outputs, results and setup, which Exit concludes with): the
	// run may have reported its end meanwhile.
	if err := s.store.PutRunOutput(ctx, rr.result()); err != nil {
		s.log.WarnContext(ctx, "could not save what a run's output said", "sandbox", sb.ID, "err", err)
	}
	if err != nil {
		return fault.Errorf(fault.Invalid, "run output: read: %v", err)
	}
	return nil
}

// Exit concludes an in-machine run: its agent exited rep.ExitCode, and
// after a clean exit rep.Bundle holds its work. The sandbox ends as a
// host-followed run's does, and the bundle becomes berth/<name> only when
// the run is concluded clean (exit 0, no error in its stream, not a
// reviewer's). A run reports once: a second report, even one racing the
// first, is refused, so an agent that reports with the run's key ends its
// own run.
func (s *Service) Exit(ctx context.Context, p account.Principal, rep Report) (sandbox.Sandbox, Run, error) {
	sb, run, err := s.reporting(ctx, p)
	if err != nil {
		return sandbox.Sandbox{}, Run{}, fmt.Errorf("run exit: %w", err)
	}
	now := s.now()
	if err := s.store.ClaimRunEnd(ctx, sb.ID, now); err != nil {
		return sandbox.Sandbox{}, Run{}, fmt.Errorf("run exit: %w", err)
	}
	defer s.serving(ctx, sb.ID)()
	run.Telemetry.Settle(s.prices())
	run.EndedAt = now
	run.Exited, run.ExitCode = true, rep.ExitCode
	if rep.ExitCode != 0 && rep.Error != "" {
		// berth-init's own failure (the clone, the task), or why the agent
		// could not start: its words, not just a code.
		run.State, run.Error = RunFailed, fmt.Sprintf("in its machine (exit %d): %s", rep.ExitCode, rep.Error)
	}
	s.concludeRun(ctx, sb, run, s.landBundle(rep), reportedVerdict(rep), time.Time{})
	out, err := s.store.GetRun(ctx, sb.ID)
	if err != nil {
		return sandbox.Sandbox{}, Run{}, fmt.Errorf("run exit: %w", err)
	}
	return sb, out, nil
}

// reportedVerdict judges the verdict an in-machine run sent: the host's
// copy is what it received, and a verdict the machine could not take is
// held with the machine's reason.
func reportedVerdict(rep Report) verdictFunc {
	return func(dest string) review.Result {
		switch {
		case rep.VerdictError != "":
			return review.Result{Outcome: review.Held, Reason: rep.VerdictError, File: rep.VerdictFile}
		case rep.Verdict == nil:
			return review.Result{Outcome: review.Held, Reason: "the machine sent no verdict (" + review.FileName + ")"}
		}
		return review.Judge(rep.Verdict, rep.VerdictFile, dest)
	}
}

// landBundle is the push of an in-machine run, called only once the run
// is concluded clean: the gateway takes the bundle its machine sent into
// the repository it serves, as the host pushes a followed run's checkout.
func (s *Service) landBundle(rep Report) pushFunc {
	return s.audited("", func(ctx context.Context, sb sandbox.Sandbox) (string, string, error) {
		switch {
		case rep.Error != "":
			return "", "", errors.New(rep.Error)
		case len(rep.Bundle) == 0 && rep.Commit != "":
			return "", "", fmt.Errorf("the machine reported commit %s but sent no bundle of it", rep.Commit)
		case len(rep.Bundle) == 0:
			return "", "", nil // no commit: nothing to push
		}
		return s.work.PushBundle(ctx, sb, rep.Bundle, rep.Commit)
	})
}
