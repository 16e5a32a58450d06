package sandbox_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/sandbox"
)

// checkRan checks a sandbox's closed running time and the start of its
// open segment (zero: none open), to the second: together they are its
// segments as S8 counts them.
func (e *env) checkRan(t *testing.T, id sandbox.ID, ran time.Duration, since time.Time) sandbox.Sandbox {
	t.Helper()
	sb, err := e.st.GetSandbox(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Ran != ran || !sb.RunningSince.Equal(since) {
		t.Errorf("%s (%s): closed segments %v, open since %v; want %v, %v", sb.Name, sb.State, sb.Ran, sb.RunningSince, ran, since)
	}
	return sb
}

// TestSegmentsFollowTheLifecycle drives a sandbox through start → suspend
// → resume → expiry on a controlled clock: a segment opens when it starts
// running and closes the moment it is suspended or expires, never past
// its expiry, however late the sweep comes.
func TestSegmentsFollowTheLifecycle(t *testing.T) {
	e := newEnv(t)
	e.run(t)
	ctx := t.Context()
	t0 := e.clock.Now() // 09:00; the class gives 4h, so it expires at 13:00
	sb := e.engineer(t, e.alice, "dev")
	e.waitState(t, sb.ID, sandbox.StateRunning)
	e.checkRan(t, sb.ID, 0, t0)

	e.clock.Advance(10 * time.Minute)
	if _, err := e.svc.Suspend(ctx, e.alice, "dev"); err != nil {
		t.Fatal(err)
	}
	e.checkRan(t, sb.ID, 10*time.Minute, time.Time{})

	e.clock.Advance(20 * time.Minute) // suspended: not charged
	if _, err := e.svc.Resume(ctx, e.alice, "dev"); err != nil {
		t.Fatal(err)
	}
	e.waitState(t, sb.ID, sandbox.StateRunning)
	e.checkRan(t, sb.ID, 10*time.Minute, t0.Add(30*time.Minute))

	e.clock.Advance(time.Hour)
	got, _ := e.svc.Get(ctx, e.alice, "dev")
	if rt := e.svc.RunningTime(got); rt != 70*time.Minute {
		t.Errorf("running time with a segment open: %v, want 1h10m", rt)
	}

	// The sweep comes an hour after the expiry: the segment closes at
	// 13:00 all the same, and reading it before the sweep never counts
	// past the expiry either.
	e.clock.Advance(4 * time.Hour) // 14:30
	got, _ = e.svc.Get(ctx, e.alice, "dev")
	if rt := e.svc.RunningTime(got); rt != 10*time.Minute+3*time.Hour+30*time.Minute {
		t.Errorf("running time past the expiry, before the sweep: %v, want 3h40m", rt)
	}
	if _, err := e.svc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	got = e.checkRan(t, sb.ID, 10*time.Minute+3*time.Hour+30*time.Minute, time.Time{})
	if got.State != sandbox.StateExpired {
		t.Fatalf("after the sweep: %s, want expired", got.State)
	}
	if cs := got.RunningTime(e.clock.Now()).Seconds() * got.CPU.Cores(); cs != 2*13200 {
		t.Errorf("core-seconds %v, want 2 cores × 13200s = 26400", cs)
	}
}

// TestGatewayDownChargesUpToExpiry: while the gateway is down nothing
// sweeps. When it comes back, a sandbox that expired meanwhile is charged
// up to its expiry and not past it, one whose machine stopped by itself is
// charged until its machine stopped, as the driver says (not until the
// start-up sweep noticed, SPEC S8 as issue 15 has it), even when its
// expiry passed too, and a suspended one nothing.
func TestGatewayDownChargesUpToExpiry(t *testing.T) {
	e := newEnv(t)
	stop := e.run(t)
	ctx := t.Context()
	t0 := e.clock.Now()
	expiring := e.engineer(t, e.alice, "expiring") // 4h: expires at 13:00
	long, err := e.svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: "long", Class: "standard", TTL: "24h", SSHKeys: []string{testKey}})
	if err != nil {
		t.Fatal(err)
	}
	crashed := e.engineer(t, e.alice, "crashed") // 4h too
	parked := e.engineer(t, e.bob, "parked")
	for _, id := range []sandbox.ID{expiring.ID, long.ID, crashed.ID, parked.ID} {
		e.waitState(t, id, sandbox.StateRunning)
	}
	e.clock.Advance(time.Minute)
	if _, err := e.svc.Suspend(ctx, e.bob, "parked"); err != nil {
		t.Fatal(err)
	}

	stop() // the gateway goes down for ten hours
	e.clock.Advance(2 * time.Hour)
	e.drv.Exit(long.ID, 0)      // its process ends at 11:01, nobody notices
	e.drv.Exit(crashed.ID, 137) // and this one's, before its expiry at 13:00
	e.clock.Advance(8 * time.Hour)

	restarted := sandbox.NewService(e.st, e.drv, e.accounts, e.cfg, slog.New(slog.NewTextHandler(t.Output(), nil)), e.clock.Now, e.opts...)
	if _, err := restarted.Sweep(ctx); err != nil { // what Run does first
		t.Fatal(err)
	}
	if got := e.checkRan(t, expiring.ID, 4*time.Hour, time.Time{}); got.State != sandbox.StateExpired {
		t.Errorf("expiring: %s, want expired", got.State)
	}
	if got := e.checkRan(t, long.ID, 2*time.Hour+time.Minute, time.Time{}); got.State != sandbox.StateSuspended {
		t.Errorf("long: %s, want suspended (its process exited 0)", got.State)
	}
	if got := e.checkRan(t, crashed.ID, 2*time.Hour+time.Minute, time.Time{}); got.State != sandbox.StateExpired {
		t.Errorf("crashed: %s, want expired (the sweep came after its expiry)", got.State)
	}
	e.checkRan(t, parked.ID, time.Minute, time.Time{})
	if got := e.clock.Now().Sub(t0); got != 10*time.Hour+time.Minute {
		t.Fatalf("clock moved %v", got)
	}
}

// TestNothingIsChargedPastExpiryBeforeTheSweep: between a sandbox's expiry
// and the sweep that notices it, extend is refused (the sandbox has
// expired) and resume treats it as expired: new key, new lifetime. Neither
// charges the gap.
func TestNothingIsChargedPastExpiryBeforeTheSweep(t *testing.T) {
	e := newEnv(t)
	e.run(t)
	ctx := t.Context()
	t0 := e.clock.Now()
	sb := e.engineer(t, e.alice, "dev")
	e.waitState(t, sb.ID, sandbox.StateRunning)
	e.clock.Advance(4*time.Hour + 20*time.Second) // 20s past expiry, no sweep yet
	if _, err := e.svc.Extend(ctx, e.alice, "dev", "2h"); !errors.Is(err, fault.Conflict) {
		t.Fatalf("extend 20s past expiry: err = %v, want fault.Conflict (resume it first)", err)
	}
	if _, err := e.svc.Suspend(ctx, e.alice, "dev"); err != nil {
		t.Fatal(err)
	}
	e.checkRan(t, sb.ID, 4*time.Hour, time.Time{}) // closed at the expiry

	oldKey := e.drv.Env(sb.ID)["BERTH_API_KEY"]
	got, err := e.svc.Resume(ctx, e.alice, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if want := e.clock.Now().Add(4 * time.Hour); !got.ExpiresAt.Equal(want) {
		t.Errorf("resumed past expiry: expires %v, want a new lifetime to %v", got.ExpiresAt, want)
	}
	e.waitState(t, sb.ID, sandbox.StateRunning)
	if newKey := e.drv.Env(sb.ID)["BERTH_API_KEY"]; newKey == "" || newKey == oldKey {
		t.Error("a sandbox resumed past its expiry kept its old, expired key")
	}
	if _, err := e.accounts.Authenticate(ctx, oldKey); err == nil {
		t.Error("the replaced key still authenticates")
	}
	e.checkRan(t, sb.ID, 4*time.Hour, t0.Add(4*time.Hour+20*time.Second))
}
