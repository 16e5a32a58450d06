package sandbox_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/sandbox"
)

// TestAStoppedMachineIsHandledAtOnce: with a driver that tells of its
// machines' changes (the fake's Watch), a machine that exits or vanishes
// behind the service's back is handled as the sweep would handle it
// within two seconds, though the sweep is an hour away; the clock of one
// that exited stops at its exit, however late the service gets to it.
func TestAStoppedMachineIsHandledAtOnce(t *testing.T) {
	e := newEnv(t)
	e.run(t) // sweeps an hour apart: only the watch can tell in time
	ctx := t.Context()
	mk := func(req sandbox.CreateRequest) sandbox.Sandbox {
		t.Helper()
		sb, err := e.svc.Create(ctx, e.alice, req)
		if err != nil {
			t.Fatal(err)
		}
		e.waitState(t, sb.ID, sandbox.StateRunning)
		return sb
	}
	engineer := func(name string) sandbox.CreateRequest {
		return sandbox.CreateRequest{Name: name, Class: "standard", SSHKeys: []string{testKey}}
	}
	for _, tt := range []struct {
		name   string
		req    sandbox.CreateRequest
		change func(id sandbox.ID)
		want   sandbox.State
		reason string
		exited bool // its clock stops at its exit
	}{
		{"crash", engineer("crash"), func(id sandbox.ID) { e.drv.Exit(id, 137) }, sandbox.StateFailed, "exited 137", true},
		{"clean", engineer("clean"), func(id sandbox.ID) { e.drv.Exit(id, 0) }, sandbox.StateSuspended, "exited 0", true},
		{"gone", engineer("gone"), e.drv.Vanish, sandbox.StateFailed, "gone", false},
		{"task", sandbox.CreateRequest{Name: "task", Purpose: "agent", Repo: "acme/app", Task: "t"},
			func(id sandbox.ID) { e.drv.Exit(id, 0) }, sandbox.StateTerminated, "finished", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sb := mk(tt.req)
			e.clock.Advance(5 * time.Minute)
			tt.change(sb.ID)
			e.clock.Advance(10 * time.Minute) // the service may come later: not charged
			got := e.within(t, sb.ID, tt.want, 2*time.Second)
			if !strings.Contains(got.Reason, tt.reason) {
				t.Errorf("reason %q, want it to say %q", got.Reason, tt.reason)
			}
			if tt.exited && (got.Ran != 5*time.Minute || !got.RunningSince.IsZero()) {
				t.Errorf("ran %v (open since %v), want the 5m until its exit", got.Ran, got.RunningSince)
			}
		})
	}
}

// TestABrokenWatchIsCaughtUpBySweeping: a change made while the driver's
// watch is broken is told to nobody; once the watch is back the service
// sweeps, so the machine that exited meanwhile is handled all the same,
// long before the next sweep is due.
func TestABrokenWatchIsCaughtUpBySweeping(t *testing.T) {
	e := newEnv(t)
	e.run(t)
	sb := e.engineer(t, e.alice, "dev")
	e.waitState(t, sb.ID, sandbox.StateRunning)
	release := e.drv.BreakWatch()
	e.drv.Exit(sb.ID, 137)
	release()
	e.within(t, sb.ID, sandbox.StateFailed, 5*time.Second)
}

// TestATunnelToAStoppedMachineSaysSo: a machine that stopped behind the
// gateway's back while nothing watched (here: the service's background
// work is stopped) is found by the tunnel, handled then as the sweep
// would, and the refusal is the sandbox's new state in berth's words, not
// the driver's.
func TestATunnelToAStoppedMachineSaysSo(t *testing.T) {
	e := newEnv(t)
	stop := e.run(t)
	crash, clean := e.engineer(t, e.alice, "crash"), e.engineer(t, e.alice, "clean")
	e.waitState(t, crash.ID, sandbox.StateRunning)
	e.waitState(t, clean.ID, sandbox.StateRunning)
	stop()
	e.drv.Exit(crash.ID, 137)
	e.drv.Exit(clean.ID, 0)
	for _, tt := range []struct {
		sb    sandbox.Sandbox
		state sandbox.State
		words string
	}{
		{crash, sandbox.StateFailed, "sandbox crash is failed (its process exited 137); a failed sandbox is over"},
		{clean, sandbox.StateSuspended, "sandbox clean is suspended (its process exited 0); resume it first (berth sandbox resume clean)"},
	} {
		_, err := e.reach.Connect(t.Context(), e.alice, tt.sb.Name, 2222)
		if !errors.Is(err, fault.Conflict) || !strings.Contains(err.Error(), tt.words) || strings.Contains(err.Error(), "fake") {
			t.Errorf("tunnel to %s: %v, want a conflict saying %q", tt.sb.Name, err, tt.words)
		}
		if got, _ := e.st.GetSandbox(t.Context(), tt.sb.ID); got.State != tt.state {
			t.Errorf("%s after the tunnel found it stopped: %s, want %s", tt.sb.Name, got.State, tt.state)
		}
	}
}
