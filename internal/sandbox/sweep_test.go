package sandbox_test

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

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
	e := newEnv(t, agents(t))
	st := &staleList{Store: e.st, listed: make(chan struct{}), proceed: make(chan struct{})}
	svc := sandbox.NewService(st, e.drv, e.accounts, e.cfg, slog.New(slog.NewTextHandler(t.Output(), nil)), e.clock.Now, e.opts...)
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
