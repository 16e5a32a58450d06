package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/sandbox"
)

// TestSuspendWhileTheSweepLooks: a sweep that sees the machine stopped
// while the caller's suspend is still stopping it must not take that for
// the machine's own exit: the caller's suspend succeeds, is theirs in the
// audit log, and the sandbox is suspended, not failed.
func TestSuspendWhileTheSweepLooks(t *testing.T) {
	e := newEnv(t)
	e.run(t)
	ctx := t.Context()
	sb := e.engineer(t, e.alice, "dev")
	e.waitState(t, sb.ID, sandbox.StateRunning)

	swept := false
	e.drv.OnStop(func(id sandbox.ID) {
		if id == sb.ID && !swept {
			swept = true
			if _, err := e.svc.Sweep(ctx); err != nil {
				t.Errorf("sweep during the stop: %v", err)
			}
		}
	})
	got, err := e.svc.Suspend(ctx, e.alice, "dev")
	if err != nil {
		t.Fatalf("suspend with a sweep looking mid-stop: %v", err)
	}
	if !swept {
		t.Fatal("the driver's stop was never reached")
	}
	if got.State != sandbox.StateSuspended || got.Reason != "" {
		t.Errorf("after suspend: %s (%q), want suspended with no reason of its own", got.State, got.Reason)
	}
	if now, _ := e.svc.Get(ctx, e.alice, "dev"); now.State != sandbox.StateSuspended {
		t.Errorf("row after the sweep: %s (%s), want suspended", now.State, now.Reason)
	}
	entries, _, err := e.st.ListAudit(ctx, audit.Filter{}, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var by []string
	for _, a := range entries {
		if a.Sandbox == string(sb.ID) && a.Action == audit.SandboxState && strings.Contains(a.Detail, "→ suspended") {
			by = append(by, a.Actor)
		}
	}
	if len(by) != 1 || by[0] != e.alice.User.ID {
		t.Errorf("suspensions in the audit log by %q, want one, by alice (%s)", by, e.alice.User.ID)
	}
}

func TestSuspendResumeExtendTerminate(t *testing.T) {
	e := newEnv(t)
	e.run(t)
	ctx := t.Context()
	sb := e.engineer(t, e.alice, "dev")
	e.waitState(t, sb.ID, sandbox.StateRunning)

	e.clock.Advance(90 * time.Second)
	got, err := e.svc.Suspend(ctx, e.alice, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != sandbox.StateSuspended {
		t.Fatalf("after suspend: %s", got.State)
	}
	if m, _ := e.drv.Inspect(ctx, sb.ID); m.Status != sandbox.MachineStopped {
		t.Errorf("machine after suspend: %s, want stopped (volume kept)", m.Status)
	}
	if rt := e.svc.RunningTime(got); rt != 90*time.Second {
		t.Errorf("running time after 90s running then suspended: %v", rt)
	}
	e.clock.Advance(time.Hour) // suspended time is not charged
	if _, err := e.svc.Suspend(ctx, e.alice, "dev"); !errors.Is(err, fault.Conflict) {
		t.Errorf("suspend a suspended sandbox: err = %v, want fault.Conflict", err)
	}
	if _, err := e.svc.Resume(ctx, e.alice, "dev"); err != nil {
		t.Fatal(err)
	}
	e.waitState(t, sb.ID, sandbox.StateRunning)
	e.clock.Advance(30 * time.Second)
	got, _ = e.svc.Get(ctx, e.alice, "dev")
	if rt := e.svc.RunningTime(got); rt != 120*time.Second {
		t.Errorf("running time 90s + 30s across a suspend: %v", rt)
	}

	got, err = e.svc.Extend(ctx, e.alice, "dev", "2h")
	if err != nil {
		t.Fatal(err)
	}
	if want := e.clock.Now().Add(2 * time.Hour); !got.ExpiresAt.Equal(want) {
		t.Errorf("extend 2h: expires %v, want %v (counted from now)", got.ExpiresAt, want)
	}
	got, _ = e.svc.Extend(ctx, e.alice, "dev", "72h")
	if want := e.clock.Now().Add(24 * time.Hour); !got.ExpiresAt.Equal(want) {
		t.Errorf("extend 72h on a 24h class: expires %v, want %v (cut)", got.ExpiresAt, want)
	}

	key := e.drv.Env(sb.ID)["BERTH_API_KEY"]
	got, err = e.svc.Terminate(ctx, e.alice, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != sandbox.StateTerminated || got.EndedAt.IsZero() {
		t.Errorf("after terminate: state %s, ended %v", got.State, got.EndedAt)
	}
	if e.drv.Has(sb.ID) {
		t.Error("terminate left the machine behind")
	}
	if _, err := e.accounts.Authenticate(ctx, key); !errors.Is(err, fault.Unauthenticated) {
		t.Errorf("the terminated sandbox's key still authenticates: %v", err)
	}
	if _, err := e.svc.Resume(ctx, e.alice, string(sb.ID)); !errors.Is(err, fault.Conflict) {
		t.Errorf("resume a terminated sandbox: err = %v, want fault.Conflict", err)
	}
	// The name is free again, and the ended sandbox shows only with All.
	again := e.engineer(t, e.alice, "dev")
	if again.ID == sb.ID {
		t.Fatal("the new sandbox reused the old id")
	}
	live, _, _ := e.svc.List(ctx, e.alice, sandbox.ListOptions{})
	all, _, _ := e.svc.List(ctx, e.alice, sandbox.ListOptions{All: true})
	if len(live) != 1 || len(all) != 2 {
		t.Errorf("list: %d live, %d with --all; want 1 and 2", len(live), len(all))
	}
}

func TestExpiry(t *testing.T) {
	e := newEnv(t)
	e.run(t)
	ctx := t.Context()
	eng := e.engineer(t, e.alice, "dev")
	agent, err := e.svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: "task", Purpose: "agent", Repo: "acme/app", Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	e.waitState(t, eng.ID, sandbox.StateRunning)
	e.waitState(t, agent.ID, sandbox.StateRunning)
	oldKey := e.drv.Env(eng.ID)["BERTH_API_KEY"]

	e.clock.Advance(5 * time.Hour) // past both lifetimes (4h, 1h)
	res, err := e.svc.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Expired) != 1 || res.Expired[0] != eng.ID || len(res.Ended) != 1 || res.Ended[0] != agent.ID {
		t.Fatalf("sweep: expired %v ended %v; want [%s] and [%s]", res.Expired, res.Ended, eng.ID, agent.ID)
	}
	got := e.waitState(t, eng.ID, sandbox.StateExpired)
	if rt := got.RunningTime(e.clock.Now()); rt != 4*time.Hour {
		t.Errorf("an engineer sandbox expired after 4h is charged %v (never past expiry)", rt)
	}
	if m, err := e.drv.Inspect(ctx, eng.ID); err != nil || m.Status != sandbox.MachineStopped {
		t.Errorf("expired engineer machine: %v %v, want stopped with its volume", m.Status, err)
	}
	if _, err := e.accounts.Authenticate(ctx, oldKey); err == nil {
		t.Error("an expired sandbox's key still authenticates")
	}
	e.waitState(t, agent.ID, sandbox.StateTerminated)
	if e.drv.Has(agent.ID) {
		t.Error("an expired agent sandbox's machine was kept")
	}
	if _, err := e.svc.Extend(ctx, e.alice, "dev", "1h"); !errors.Is(err, fault.Conflict) {
		t.Errorf("extend while expired: err = %v, want fault.Conflict", err)
	}
	// Resume after expiry: new key, the class's default lifetime, env dropped.
	res2, err := e.svc.Resume(ctx, e.alice, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if want := e.clock.Now().Add(4 * time.Hour); !res2.ExpiresAt.Equal(want) {
		t.Errorf("resumed after expiry: expires %v, want %v", res2.ExpiresAt, want)
	}
	e.waitState(t, eng.ID, sandbox.StateRunning)
	newKey := e.drv.Env(eng.ID)["BERTH_API_KEY"]
	if newKey == "" || newKey == oldKey {
		t.Fatal("a sandbox resumed after expiry did not get a new key")
	}
	if _, err := e.accounts.Authenticate(ctx, newKey); err != nil {
		t.Errorf("the new key does not authenticate: %v", err)
	}
}

func TestSweepNoticesMachines(t *testing.T) {
	e := newEnv(t)
	e.run(t)
	ctx := t.Context()
	clean := e.engineer(t, e.alice, "clean")
	crash := e.engineer(t, e.alice, "crash")
	gone := e.engineer(t, e.alice, "gone")
	agent, err := e.svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: "task", Purpose: "agent", Repo: "acme/app", Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []sandbox.ID{clean.ID, crash.ID, gone.ID, agent.ID} {
		e.waitState(t, id, sandbox.StateRunning)
	}
	stray := sandbox.NewID()
	e.drv.Plant(stray)
	e.drv.Leave("orphan-1")
	e.drv.Exit(clean.ID, 0)
	e.drv.Exit(crash.ID, 137)
	e.drv.Vanish(gone.ID)
	e.drv.Exit(agent.ID, 0)
	res, err := e.svc.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// What the driver's engine left behind, owned by no sandbox, goes too.
	if !slices.Equal(res.Tidied, []string{"orphan-1"}) {
		t.Errorf("sweep tidied %q, want [orphan-1]", res.Tidied)
	}
	e.waitState(t, clean.ID, sandbox.StateSuspended)
	c := e.waitState(t, crash.ID, sandbox.StateFailed)
	if !strings.Contains(c.Reason, "137") {
		t.Errorf("failure reason %q does not give the exit code", c.Reason)
	}
	if !e.drv.Has(crash.ID) {
		t.Error("a failed engineer sandbox lost its volume before terminate")
	}
	e.waitState(t, gone.ID, sandbox.StateFailed)
	e.waitState(t, agent.ID, sandbox.StateTerminated)
	if e.drv.Has(stray) {
		t.Error("the reconciler left a machine the database does not know")
	}
	// A failed engineer sandbox still counts and keeps its name until terminated.
	live, _, _ := e.svc.List(ctx, e.alice, sandbox.ListOptions{})
	names := map[string]bool{}
	for _, sb := range live {
		names[sb.Name] = true
	}
	if !names["crash"] || !names["gone"] || names["task"] {
		t.Errorf("live after the sweep: %v; want crash and gone (failed engineers), not task", names)
	}
	if _, err := e.svc.Terminate(ctx, e.alice, "crash"); err != nil {
		t.Fatal(err)
	}
	if e.drv.Has(crash.ID) {
		t.Error("terminate of a failed engineer sandbox kept its volume")
	}
}

func TestStartFailures(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	release := e.drv.Hold()
	e.run(t)
	// Terminated while starting: the machine is released when the start ends.
	sb := e.engineer(t, e.alice, "quick")
	if _, err := e.svc.Terminate(ctx, e.alice, "quick"); err != nil {
		t.Fatal(err)
	}
	release()
	deadline := time.Now().Add(5 * time.Second)
	for e.drv.Has(sb.ID) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if e.drv.Has(sb.ID) {
		t.Error("a sandbox terminated while starting kept its machine")
	}
	if got := e.waitState(t, sb.ID, sandbox.StateTerminated); got.State != sandbox.StateTerminated {
		t.Fatal(got.State)
	}

	// A driver that cannot start the machine fails the sandbox with its reason.
	failing := e.engineerFailing(t, "broken", errors.New("image localhost/x not found"))
	got := e.waitState(t, failing, sandbox.StateFailed)
	if !strings.Contains(got.Reason, "image localhost/x not found") {
		t.Errorf("failure reason %q does not say why", got.Reason)
	}
}

// engineerFailing creates a sandbox whose start the driver refuses.
func (e *env) engineerFailing(t *testing.T, name string, cause error) sandbox.ID {
	t.Helper()
	release := e.drv.Hold()
	sb := e.engineer(t, e.alice, name)
	e.drv.FailStart(sb.ID, cause)
	release()
	return sb.ID
}

func TestConcurrentCreatesRespectMaxSandboxes(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	if err := e.accounts.SetGuardrail(ctx, e.admin, "acme", "", guardrail.Guardrail{MaxSandboxes: ptr(10), AllowedRepos: []string{"acme"}}); err != nil {
		t.Fatal(err)
	}
	users := []account.Principal{e.alice, e.bob, e.admin, e.operator}
	for i := range 2 {
		u, err := e.accounts.CreateUser(ctx, e.admin, "acme", fmt.Sprintf("extra%d", i), "", account.RoleMember)
		if err != nil {
			t.Fatal(err)
		}
		users = append(users, account.Principal{User: u})
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	created, refused := 0, 0
	for i := range 50 {
		wg.Go(func() {
			p := users[i%len(users)]
			_, err := e.svc.Create(ctx, p, sandbox.CreateRequest{Name: fmt.Sprintf("sb-%d", i), Class: "standard", SSHKeys: []string{testKey}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case errors.Is(err, fault.Exceeded):
				refused++
			default:
				t.Errorf("create sb-%d: %v", i, err)
			}
		})
	}
	wg.Wait()
	live, _, err := e.svc.List(ctx, e.operator, sandbox.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created != 10 || refused != 40 || len(live) != 10 {
		t.Fatalf("50 concurrent creates under max-sandboxes 10: %d created, %d refused, %d live; want 10, 40, 10", created, refused, len(live))
	}
}

func TestNamesResolve(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	mine := e.engineer(t, e.alice, "dev")
	bobs := e.engineer(t, e.bob, "dev")
	if _, err := e.svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: "dev", Class: "standard", SSHKeys: []string{testKey}}); !errors.Is(err, fault.Conflict) {
		t.Errorf("a second live sandbox of the same name and owner: err = %v, want fault.Conflict", err)
	}
	if got, err := e.svc.Get(ctx, e.alice, "dev"); err != nil || got.ID != mine.ID {
		t.Errorf("alice's dev resolves to %v (%v), want hers", got.ID, err)
	}
	if got, err := e.svc.Get(ctx, e.bob, "dev"); err != nil || got.ID != bobs.ID {
		t.Errorf("bob's dev resolves to %v (%v), want his", got.ID, err)
	}
	_, err := e.svc.Get(ctx, e.admin, "dev")
	var amb *fault.Error
	if !errors.As(err, &amb) || amb.Kind != fault.Ambiguous || len(amb.IDs) != 2 {
		t.Fatalf("administrator resolving a name two people use: err = %v, want fault.Ambiguous with 2 ids", err)
	}
	if got, err := e.svc.Get(ctx, e.admin, string(bobs.ID)); err != nil || got.ID != bobs.ID {
		t.Errorf("administrator by id: %v, %v", got.ID, err)
	}
	for _, ref := range []string{string(bobs.ID), "nope", "NOT A NAME"} {
		if _, err := e.svc.Get(ctx, e.alice, ref); !errors.Is(err, fault.NotFound) {
			t.Errorf("alice Get(%s) = %v, want fault.NotFound", ref, err)
		}
	}
	if _, err := e.svc.Get(ctx, e.stranger, string(mine.ID)); !errors.Is(err, fault.NotFound) {
		t.Errorf("another organisation's member by id: %v, want fault.NotFound", err)
	}
}

func TestIdleSuspend(t *testing.T) {
	e := newEnv(t, func(c *sandbox.Config) { c.IdleSuspend = 30 * time.Minute })
	e.run(t)
	ctx := t.Context()
	quiet := e.engineer(t, e.alice, "quiet")
	busy := e.engineer(t, e.alice, "busy")
	e.waitState(t, quiet.ID, sandbox.StateRunning)
	e.waitState(t, busy.ID, sandbox.StateRunning)
	e.reach.ConnectionOpened(busy.ID) // an ssh session nobody types in

	e.clock.Advance(29 * time.Minute)
	if res, _ := e.svc.Sweep(ctx); len(res.Suspended) != 0 {
		t.Fatalf("suspended %v before the idle limit", res.Suspended)
	}
	e.clock.Advance(2 * time.Minute)
	res, err := e.svc.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Suspended) != 1 || res.Suspended[0] != quiet.ID {
		t.Fatalf("idle sweep suspended %v, want only %s (the other has a connection open)", res.Suspended, quiet.ID)
	}
	got := e.waitState(t, quiet.ID, sandbox.StateSuspended)
	if !strings.Contains(got.Reason, "idle for 30m") {
		t.Errorf("reason %q", got.Reason)
	}
	// The clock restarts on resume, and a closed connection starts it too.
	if _, err := e.svc.Resume(ctx, e.alice, "quiet"); err != nil {
		t.Fatal(err)
	}
	e.waitState(t, quiet.ID, sandbox.StateRunning)
	e.reach.ConnectionClosed(busy.ID)
	e.clock.Advance(10 * time.Minute)
	if res, _ := e.svc.Sweep(ctx); len(res.Suspended) != 0 {
		t.Fatalf("suspended %v 10 minutes after a resume and a closed connection", res.Suspended)
	}
	e.clock.Advance(25 * time.Minute)
	if res, _ := e.svc.Sweep(ctx); len(res.Suspended) != 2 {
		t.Fatalf("after 35 quiet minutes suspended %v, want both", res.Suspended)
	}
}

// TestStartsDoNotWaitForASweep: a create that arrives while a sweep is
// held up (an engine slow to list or tidy) starts all the same; starts
// are not taken off the queue by the loop that sweeps.
func TestStartsDoNotWaitForASweep(t *testing.T) {
	e := newEnv(t)
	entered, release := e.drv.HoldTidy()
	e.run(t)
	t.Cleanup(release) // before the service stops: its sweep waits in Tidy
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the start-up sweep never reached Tidy")
	}
	sb := e.engineer(t, e.alice, "dev")
	e.waitState(t, sb.ID, sandbox.StateRunning)
}

// staleList is a driver whose machine list is read between before and
// after (once): what a slow `podman ps` lets happen around it.
type staleList struct {
	*fake.Driver
	before, after func()
}

func (d *staleList) List(ctx context.Context) ([]sandbox.Machine, error) {
	before, after := d.before, d.after
	d.before, d.after = nil, nil
	if before != nil {
		before()
	}
	ms, err := d.Driver.List(ctx)
	if after != nil {
		after()
	}
	return ms, err
}

// TestSweepTrustsNoMachineListOlderThanAResume: a sweep reads the rows,
// then lists the machines. A suspend before the list and a resume after
// it leave a running row beside a machine listed stopped; the sweep must
// not take that for the machine's own exit and suspend a sandbox that
// runs (CI's e2e: "suspended (its process exited 0 (stopping))" right
// after a resume).
func TestSweepTrustsNoMachineListOlderThanAResume(t *testing.T) {
	e := newEnv(t)
	e.run(t)
	ctx := t.Context()
	sb := e.engineer(t, e.alice, "dev")
	e.waitState(t, sb.ID, sandbox.StateRunning)

	drv := &staleList{Driver: e.drv}
	drv.before = func() {
		if _, err := e.svc.Suspend(ctx, e.alice, "dev"); err != nil {
			t.Errorf("suspend: %v", err)
		}
	}
	drv.after = func() {
		if _, err := e.svc.Resume(ctx, e.alice, "dev"); err != nil {
			t.Errorf("resume: %v", err)
		}
		e.waitState(t, sb.ID, sandbox.StateRunning)
	}
	sweeper := sandbox.NewService(e.st, drv, e.accounts, e.cfg, e.w.Log, e.clock.Now)
	res, err := sweeper.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if drv.after != nil {
		t.Fatal("the sweep never listed the machines")
	}
	if len(res.Suspended)+len(res.Failed)+len(res.Ended) != 0 {
		t.Errorf("the sweep acted on a machine list older than the resume: %+v", res)
	}
	if got, _ := e.svc.Get(ctx, e.alice, "dev"); got.State != sandbox.StateRunning {
		t.Errorf("after the sweep: %s (%s), want running", got.State, got.Reason)
	}
}

// TestSweepStopsNoMachineAResumeStartedAfterItsRows: a sweep reads the
// rows while a sandbox is suspended; its resume ends before the sweep
// lists the machines. The sweep must not take the running machine beside
// the stale suspended row for one that must not run, and stop it under
// the resumed sandbox (CI's e2e: "is not running" on the first ssh after
// a resume).
func TestSweepStopsNoMachineAResumeStartedAfterItsRows(t *testing.T) {
	e := newEnv(t)
	e.run(t)
	ctx := t.Context()
	sb := e.engineer(t, e.alice, "dev")
	e.waitState(t, sb.ID, sandbox.StateRunning)
	if _, err := e.svc.Suspend(ctx, e.alice, "dev"); err != nil {
		t.Fatal(err)
	}
	drv := &staleList{Driver: e.drv}
	drv.before = func() {
		if _, err := e.svc.Resume(ctx, e.alice, "dev"); err != nil {
			t.Errorf("resume: %v", err)
		}
		e.waitState(t, sb.ID, sandbox.StateRunning)
	}
	sweeper := sandbox.NewService(e.st, drv, e.accounts, e.cfg, e.w.Log, e.clock.Now)
	if _, err := sweeper.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if drv.before != nil {
		t.Fatal("the sweep never listed the machines")
	}
	if m, err := e.drv.Inspect(ctx, sb.ID); err != nil || m.Status != sandbox.MachineRunning {
		t.Errorf("after the sweep the resumed sandbox's machine is %+v (%v), want running", m, err)
	}
	if got, _ := e.svc.Get(ctx, e.alice, "dev"); got.State != sandbox.StateRunning {
		t.Errorf("after the sweep: %s (%s), want running", got.State, got.Reason)
	}
}
