package agentrun_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/runner/runnertest"
	"berth.dev/berth/internal/sandbox"
)

// staleList is the store with a sweep's listing that is read, then held
// until the test lets it go: what a sweep sees while a start ends.
type staleList struct {
	sandbox.Store
	armed           atomic.Bool // the next listing is held
	listed, proceed chan struct{}
}

func (s *staleList) ListSandboxes(ctx context.Context, f sandbox.Filter) ([]sandbox.Sandbox, error) {
	sbs, err := s.Store.ListSandboxes(ctx, f)
	if s.armed.CompareAndSwap(true, false) {
		close(s.listed)
		<-s.proceed
	}
	return sbs, err
}

// TestSweepTakesNoEndedStartForAnInterruptedOne: a sweep that listed a
// sandbox while it was starting, and looks at it after the start ended
// (a fast agent run), reads its row again rather than taking it for a
// start a restart interrupted: the machine is started once, and the
// sandbox is not failed for it.
func TestSweepTakesNoEndedStartForAnInterruptedOne(t *testing.T) {
	e := newEnv(t)
	st := &staleList{Store: e.st, listed: make(chan struct{}), proceed: make(chan struct{})}
	svc, _ := e.services(st, e.drv, e.w.Log)
	following, finish := make(chan struct{}), make(chan struct{})
	e.drv.SetAgent(func(sandbox.Spec) ([]string, int) {
		close(following) // the start is over: the run is followed
		<-finish
		return runnertest.Stream(t, "claude-text"), 0
	})
	sb, err := svc.Create(t.Context(), e.alice, sandbox.CreateRequest{Name: "fast", Class: "agent", Purpose: "agent",
		Repo: "acme/app", Task: "fix it", Runner: "claude-code"})
	if err != nil {
		t.Fatal(err)
	}
	swept := make(chan sandbox.SweepResult, 1)
	st.armed.Store(true)
	go func() {
		res, err := svc.Sweep(context.Background())
		if err != nil {
			t.Error(err)
		}
		swept <- res
	}()
	<-st.listed // the sweep has the row as starting
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); svc.Run(ctx, time.Hour) }()
	t.Cleanup(func() { close(finish); cancel(); <-ran })
	<-following
	close(st.proceed)
	res := <-swept
	if slices.Contains(res.Resumed, sb.ID) || len(res.Errors) > 0 {
		t.Errorf("the sweep resumed %v (errors %v): it took the ended start of %s for an interrupted one", res.Resumed, res.Errors, sb.ID)
	}
	got, err := e.st.GetSandbox(t.Context(), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != sandbox.StateRunning || e.drv.Starts() != 1 {
		t.Errorf("the sandbox is %s (%s) after %d starts, want running after one", got.State, got.Reason, e.drv.Starts())
	}
}

// TestRestartFinishesAnAgentRunOnItsModel: an agent run's start that a
// stop interrupted starts after the restart on the model chosen at
// create, which the row keeps.
func TestRestartFinishesAnAgentRunOnItsModel(t *testing.T) {
	e := newEnv(t)
	ran := make(chan map[string]string, 1)
	e.drv.SetAgent(func(spec sandbox.Spec) ([]string, int) {
		ran <- spec.Env
		return runnertest.Stream(t, "claude-text"), 0
	})
	sb, err := e.svc.Create(t.Context(), e.alice, sandbox.CreateRequest{Name: "fix", Purpose: "agent", Repo: "acme/app",
		Task: "add a greeting", Runner: "claude-code", Model: "claude-sonnet-4-5"})
	if err != nil {
		t.Fatal(err)
	}
	if row, _ := e.st.GetSandbox(t.Context(), sb.ID); row.Model != "claude-sonnet-4-5" {
		t.Fatalf("the row keeps model %q, want the one chosen at create", row.Model)
	}
	// A new gateway on the same database and driver, as after a restart:
	// it knows nothing of the start the first one had queued.
	restarted, _ := e.services(e.st, e.drv, e.w.Log.With("gateway", "restarted"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); restarted.Run(ctx, time.Hour) }()
	t.Cleanup(func() { cancel(); <-done })
	env := <-ran
	if env["BERTH_MODEL"] != "claude-sonnet-4-5" {
		t.Errorf("the run started on %q after the restart, want claude-sonnet-4-5", env["BERTH_MODEL"])
	}
	e.waitState(t, sb.ID, sandbox.StateTerminated)
}

// TestAnAgentThatExitsWhileTheGatewayIsDownIsChargedToItsExit: the run's
// container exits while no gateway runs; the gateway that comes back an
// half an hour later follows the run again, finishes it, and closes its sandbox's
// running time at the container's exit, not at the restart (issue 15).
func TestAnAgentThatExitsWhileTheGatewayIsDownIsChargedToItsExit(t *testing.T) {
	e := newEnv(t)
	release, running := make(chan struct{}), make(chan struct{}, 2)
	e.drv.SetAgent(func(sandbox.Spec) ([]string, int) {
		running <- struct{}{}
		<-release // the agent works until the test lets it finish
		return runnertest.Stream(t, "claude-text"), 0
	})
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	runFor := func(svc *sandbox.Service) (cancel func(), done chan struct{}) {
		ctx, cancel := context.WithCancel(context.Background())
		done = make(chan struct{})
		go func() { defer close(done); svc.Run(ctx, time.Hour) }()
		return cancel, done
	}
	down, stopped := runFor(e.svc)
	sb := e.agentRun(t, "claude-code")
	<-running
	opened := e.within(t, sb.ID, sandbox.StateRunning, 10*time.Second).RunningSince

	// The gateway goes down 3 minutes in; the agent exits 4 minutes later;
	// the gateway is back half an hour after that (the run's lifetime is
	// an hour).
	e.clock.Advance(3 * time.Minute)
	down()
	e.clock.Advance(4 * time.Minute)
	exit := e.clock.Now()
	e.drv.Exit(sb.ID, 0)
	close(release) // its follower, cut off, returns without finishing it
	<-stopped
	e.clock.Advance(30 * time.Minute)

	restarted, _ := e.services(e.st, e.drv, log)
	up, ran := runFor(restarted)
	t.Cleanup(func() { up(); <-ran })
	end := e.within(t, sb.ID, sandbox.StateTerminated, 10*time.Second)
	if got := end.FirstRan.Add(end.Ran); !got.Equal(exit) || !end.FirstRan.Equal(opened) {
		t.Errorf("running time %v → %v (%v), want it to end at the exit, %v", end.FirstRan, got, end.Ran, exit)
	}
	run, err := e.runs.Of(t.Context(), end)
	if err != nil {
		t.Fatal(err)
	}
	if run.State != agentrun.RunSucceeded || !run.EndedAt.Equal(exit) {
		t.Errorf("run %s (%s), ended %v; want succeeded, ended at the exit %v", run.State, run.Error, run.EndedAt, exit)
	}
}

// TestRetentionRemovesARunsFiles: an agent run's log (and a reviewer's
// verdict copy) on the gateway's disk goes with its sandbox's row.
func TestRetentionRemovesARunsFiles(t *testing.T) {
	const retention = 24 * time.Hour
	logs := ""
	e := newEnv(t, func(c *sandbox.Config, rc *agentrun.Config) { c.Retention, logs = retention, rc.LogDir })
	e.drv.SetAgent(func(sandbox.Spec) ([]string, int) { return runnertest.Stream(t, "pi-text"), 0 })
	e.run(t)
	sb := e.agentRun(t, "pi")
	e.waitState(t, sb.ID, sandbox.StateTerminated)
	log := filepath.Join(logs, string(sb.ID)+".log")
	if _, err := os.Stat(log); err != nil {
		t.Fatalf("the run's log: %v", err)
	}
	e.clock.Advance(retention + time.Hour)
	if res, err := e.svc.Sweep(t.Context()); err != nil || res.Deleted != 1 {
		t.Fatalf("sweep past the retention deleted %d (%v), want 1", res.Deleted, err)
	}
	if _, err := os.Stat(log); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the run's log after its sandbox was deleted: %v, want it gone", err)
	}
	if _, _, err := e.runs.Log(t.Context(), e.alice, string(sb.ID)); !errors.Is(err, fault.NotFound) {
		t.Errorf("RunLog of a deleted sandbox: %v, want fault.NotFound", err)
	}
}

// plain is a driver with neither Follow nor InMachineRuns.
type plain struct{ sandbox.Driver }

// TestAgentRunsNeedADriverThatRunsThem: a driver that can neither follow a
// run's output nor run it in its machine refuses agent runs at creation,
// saying why.
func TestAgentRunsNeedADriverThatRunsThem(t *testing.T) {
	e := newEnv(t)
	e.svc, e.runs = e.services(e.st, plain{e.drv}, e.w.Log)
	_, err := e.svc.Create(t.Context(), e.alice, sandbox.CreateRequest{Name: "task", Purpose: "agent", Class: "agent",
		Repo: "acme/app", Task: "fix it", Runner: "claude-code"})
	if !errors.Is(err, fault.Unavailable) || !strings.Contains(err.Error(), "can run no agents") {
		t.Fatalf("agent run on a driver without Follow or InMachineRuns = %v, want fault.Unavailable naming why", err)
	}
}
