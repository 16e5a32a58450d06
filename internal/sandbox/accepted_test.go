package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/sandbox"
)

// Accepted means it will start (issue 15): the rules of a start a stop
// interrupted, a graceful stop, the quota after failed starts, and the
// audit rows a crash must not lose, on the fake driver and the real store.

// restarted is a new service on the same database and driver, as after a
// restart: it knows nothing of the starts the first one had queued.
func (e *env) restarted(t *testing.T) *sandbox.Service {
	return sandbox.NewService(e.st, e.drv, e.accounts, e.cfg, slog.New(slog.NewTextHandler(t.Output(), nil)).With("gateway", "restarted"),
		e.clock.Now, e.opts...)
}

// runService runs svc's background work for the test's life.
func runService(t *testing.T, svc *sandbox.Service) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(ctx, time.Hour) }()
	t.Cleanup(func() { cancel(); <-done })
}

// actions lists the audit log's entries of a sandbox as "action target".
func (e *env) actions(t *testing.T, id sandbox.ID) []string {
	t.Helper()
	events, _, err := e.st.ListAudit(t.Context(), audit.Filter{Sandbox: string(id)}, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range events {
		out = append(out, ev.Action+" "+ev.Target)
	}
	return out
}

// TestRestartFinishesAnInterruptedStart: a create accepted by a gateway
// that stopped before its start ran is finished by the next gateway's
// start-up sweep, whether the machine was never made or was left half
// made. The key minted at create went with the first gateway (its secret
// is never stored), so the sandbox gets a fresh one: the old key is
// revoked, the new one authenticates as the sandbox from its machine's
// environment, and the log has both, and every step, in order.
func TestRestartFinishesAnInterruptedStart(t *testing.T) {
	for _, tt := range []struct {
		name  string
		leave func(e *env, id sandbox.ID) // what the first gateway left of the machine
	}{
		{"no machine", func(*env, sandbox.ID) {}},
		{"a machine half made", func(e *env, id sandbox.ID) { e.drv.Plant(id); e.drv.Exit(id, 137) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := t.Context()
			sb := e.engineer(t, e.alice, "dev") // no Run: the start stays queued in a gateway that stops
			tt.leave(e, sb.ID)
			svc := e.restarted(t)
			res, err := svc.Sweep(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Failed) != 0 || !slices.Equal(res.Resumed, []sandbox.ID{sb.ID}) {
				t.Fatalf("the start-up sweep failed %v and finished %v; want %s finished", res.Failed, res.Resumed, sb.ID)
			}
			runService(t, svc)
			got := e.waitState(t, sb.ID, sandbox.StateRunning)

			if got.KeyID == sb.KeyID {
				t.Fatalf("the finished start kept key %s, whose secret went with the first gateway", sb.KeyID)
			}
			old, err := e.st.GetKey(ctx, sb.KeyID)
			if err != nil || old.RevokedAt.IsZero() {
				t.Errorf("the key minted at create is not revoked (%v, %v)", old.RevokedAt, err)
			}
			p, err := e.accounts.Authenticate(ctx, e.drv.Env(sb.ID)["BERTH_API_KEY"])
			if err != nil || p.Sandbox != string(sb.ID) || p.KeyID != got.KeyID {
				t.Errorf("the key in the machine's environment authenticates as %+v (%v), want the sandbox's new key %s", p, err, got.KeyID)
			}
			want := []string{
				"sandbox.create dev", "key.create " + sb.KeyID,
				"key.revoke " + sb.KeyID, "key.create " + got.KeyID,
				"sandbox.state dev",
			}
			if have := e.actions(t, sb.ID); !slices.Equal(have, want) {
				t.Errorf("audit of the sandbox:\n%s\nwant\n%s", strings.Join(have, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// TestRestartKeepsAMachineThatRuns: a start whose machine was made and
// runs (a killed gateway's podman run finished on its own) is only waited
// for again: the machine keeps the key it was given, which stays live.
func TestRestartKeepsAMachineThatRuns(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	sb := e.engineer(t, e.alice, "dev")
	e.drv.Plant(sb.ID) // made and running, by a podman the gateway left
	res, err := e.restarted(t).Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Resumed, []sandbox.ID{sb.ID}) {
		t.Fatalf("the start-up sweep finished %v, want %s", res.Resumed, sb.ID)
	}
	runService(t, e.restarted(t))
	got := e.waitState(t, sb.ID, sandbox.StateRunning)
	key, err := e.st.GetKey(ctx, sb.KeyID)
	if got.KeyID != sb.KeyID || err != nil || !key.RevokedAt.IsZero() {
		t.Errorf("key %s (revoked %v, %v), want the machine's own %s kept live", got.KeyID, key.RevokedAt, err, sb.KeyID)
	}
	if e.drv.Env(sb.ID) != nil {
		t.Errorf("the machine was made again, with %d variables", len(e.drv.Env(sb.ID)))
	}
}

// TestRestartMintsAFreshRepositoryToken: in token mode the finished start
// carries a new repository token, and the one handed to the first start
// is revoked.
func TestRestartMintsAFreshRepositoryToken(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	if _, err := e.classes.Apply(ctx, e.admin, "", strings.NewReader(`sandboxes:
  - name: tokens
    image: localhost/berth-sandbox:1
    isolation: standard
    git: token
    purposes: [engineer]
`)); err != nil {
		t.Fatal(err)
	}
	sb, err := e.svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: "dev", Class: "tokens", Repo: "acme/app", SSHKeys: []string{testKey}})
	if err != nil {
		t.Fatal(err)
	}
	first, err := e.st.LiveCredentials(ctx, sb.ID)
	if err != nil || len(first) != 1 {
		t.Fatalf("credentials after create: %v (%v), want one", first, err)
	}
	runService(t, e.restarted(t))
	e.waitState(t, sb.ID, sandbox.StateRunning)
	live, err := e.st.LiveCredentials(ctx, sb.ID)
	if err != nil || len(live) != 1 || live[0].TokenID == first[0].TokenID {
		t.Fatalf("live credentials after the restart: %v (%v), want one, not the first start's %s", live, err, first[0].TokenID)
	}
	if got := e.drv.Env(sb.ID)["BERTH_GIT_TOKEN"]; got == "" {
		t.Errorf("the machine has no repository token: %v", e.drv.Env(sb.ID))
	}
}

// TestShutdownWaitsForStartsInFlight: a graceful stop lets the starts in
// flight finish, without cancelling them, and says when its wait ran out
// first; the starts it could not wait for stay starting, for the next
// gateway, never failed.
func TestShutdownWaitsForStartsInFlight(t *testing.T) {
	e := newEnv(t)
	release := e.drv.Hold()
	var ids []sandbox.ID
	for i := range 3 {
		ids = append(ids, e.engineer(t, e.alice, fmt.Sprintf("dev-%d", i)).ID)
	}
	e.run(t)

	short, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := e.svc.Shutdown(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with three starts held = %v, want its deadline", err)
	}
	for _, id := range ids {
		if sb, _ := e.st.GetSandbox(t.Context(), id); sb.State != sandbox.StateStarting {
			t.Errorf("%s is %s (%s) after a Shutdown that ran out, want starting", id, sb.State, sb.Reason)
		}
	}

	done := make(chan error, 1)
	go func() { done <- e.svc.Shutdown(t.Context()) }()
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) with the starts still held", err)
	case <-time.After(20 * time.Millisecond):
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	for _, id := range ids {
		if sb, _ := e.st.GetSandbox(t.Context(), id); sb.State != sandbox.StateRunning {
			t.Errorf("%s is %s (%s) when Shutdown returned, want running", id, sb.State, sb.Reason)
		}
	}
	if n := e.svc.InFlight(); n != 0 {
		t.Errorf("%d starts in flight after Shutdown", n)
	}
}

// TestFailedStartsAndTheQuota: a failed engineer sandbox counts towards
// max_sandboxes for its volume (SPEC S7), so only while it has one: one
// whose machine never started holds no slot (its volume is removed), one
// that ran and lost its machine keeps its home and its slot. A start's
// failure says why in berth's words, the driver's after them.
func TestFailedStartsAndTheQuota(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	e.run(t)
	if err := e.accounts.SetGuardrail(ctx, e.admin, "acme", "", guardrail.Guardrail{MaxSandboxes: ptr(2), AllowedRepos: []string{"acme"}}); err != nil {
		t.Fatal(err)
	}
	never := e.engineerFailing(t, "never", errors.New("podman run exited 127: runc create failed: exec: no such file"))
	got := e.waitState(t, never, sandbox.StateFailed)
	if got.Reason != "its machine did not start: podman run exited 127: runc create failed: exec: no such file" {
		t.Errorf("reason %q: want berth's words, then the driver's", got.Reason)
	}
	if got.Live() || e.drv.Has(never) {
		t.Errorf("a sandbox that never started is live %v, its machine kept %v; want neither", got.Live(), e.drv.Has(never))
	}

	ran := e.engineer(t, e.alice, "ran")
	e.waitState(t, ran.ID, sandbox.StateRunning)
	e.clock.Advance(time.Minute)
	e.drv.Vanish(ran.ID)
	if _, err := e.svc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.waitState(t, ran.ID, sandbox.StateFailed); !got.Live() {
		t.Errorf("a failed sandbox that ran (%s) is not live: it holds its volume", got.Reason)
	}

	// Two slots: "never" holds none, "ran" one whatever its state.
	if _, err := e.svc.Create(ctx, e.bob, sandbox.CreateRequest{Name: "third", Class: "standard", SSHKeys: []string{testKey}}); err != nil {
		t.Fatalf("with a failed sandbox that never ran, a create under max_sandboxes 2 = %v; want it admitted", err)
	}
	_, err := e.svc.Create(ctx, e.bob, sandbox.CreateRequest{Name: "fourth", Class: "standard", SSHKeys: []string{testKey}})
	if !errors.Is(err, fault.Exceeded) {
		t.Errorf("a fourth create = %v, want refused: the sandbox that ran holds its slot", err)
	}
	// Its name is free again: nothing of it is left.
	if _, err := e.svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: "never", Class: "standard", SSHKeys: []string{testKey}}); !errors.Is(err, fault.Exceeded) {
		t.Errorf("a new %q = %v, want refused by the quota only, not by the name", "never", err)
	}
}

// failingRecorder is an audit recorder that records nothing, as when the
// gateway dies right after a change commits.
type failingRecorder struct{}

func (failingRecorder) Record(context.Context, audit.Event) error {
	return errors.New("the gateway died before it recorded this")
}

// TestAuditCommittedWithTheChange: a create, every state change, and keys
// minted and revoked record their entries in the transaction of the
// change, so no entry is lost when the gateway dies after the commit
// (here: a recorder that records nothing afterwards).
func TestAuditCommittedWithTheChange(t *testing.T) {
	e := newEnv(t, func(c *sandbox.Config) { c.Audit = failingRecorder{} })
	ctx := t.Context()
	accounts := account.NewService(e.st, e.st, e.clock.Now, nil, failingRecorder{}, nil)
	e.run(t)
	sb := e.engineer(t, e.alice, "dev")
	e.waitState(t, sb.ID, sandbox.StateRunning)
	if _, err := e.svc.Terminate(ctx, e.alice, "dev"); err != nil {
		t.Fatal(err)
	}
	want := []string{"sandbox.create dev", "key.create " + sb.KeyID, "sandbox.state dev", "sandbox.state dev", "key.revoke " + sb.KeyID}
	if have := e.actions(t, sb.ID); !slices.Equal(have, want) {
		t.Errorf("audit of the sandbox:\n%s\nwant\n%s", strings.Join(have, "\n"), strings.Join(want, "\n"))
	}

	k, err := accounts.CreateKey(ctx, e.alice, "", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // a second revoke changes nothing and records nothing
		if err := accounts.RevokeKey(ctx, e.alice, k.Key.ID); err != nil {
			t.Fatal(err)
		}
	}
	events, _, err := e.st.ListAudit(ctx, audit.Filter{}, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, ev := range events {
		if ev.Target == k.Key.ID {
			keys = append(keys, ev.Action)
		}
	}
	if !slices.Equal(keys, []string{audit.KeyCreate, audit.KeyRevoke}) {
		t.Errorf("audit of key %s: %v, want created and revoked once", k.Key.ID, keys)
	}

	// Every other change of the account and sandbox services too.
	before, _, err := e.st.ListAudit(ctx, audit.Filter{}, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := accounts.CreateProject(ctx, e.admin, "", "ml"); err != nil {
		t.Fatal(err)
	}
	u, err := accounts.CreateUser(ctx, e.admin, "", "carol", "", account.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := accounts.Invite(ctx, e.admin, "", u.ID, 0); err != nil {
		t.Fatal(err)
	}
	if err := accounts.SetGuardrail(ctx, e.admin, "", "", guardrail.Guardrail{MaxSandboxes: ptr(9), AllowedRepos: []string{"acme"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := accounts.CreateOrganisation(ctx, e.operator, "initech", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.classes.Apply(ctx, e.admin, "", strings.NewReader("sandboxes:\n  - name: small\n    image: localhost/berth-sandbox:1\n    isolation: standard\n")); err != nil {
		t.Fatal(err)
	}
	if err := e.classes.Delete(ctx, e.admin, "", "small"); err != nil {
		t.Fatal(err)
	}
	after, _, err := e.st.ListAudit(ctx, audit.Filter{}, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range after[len(before):] {
		got = append(got, ev.Action+" "+ev.Target)
	}
	others := []string{
		"project.create ml", "user.create carol", "invitation.create carol", "guardrail.set organisation",
		"org.create initech", "project.create default", "class.apply small", "class.delete small",
	}
	if !slices.Equal(got, others) {
		t.Errorf("audit of the other changes:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(others, "\n"))
	}
}

// machinesFirst is the fake driver whose listing of machines is taken,
// then held until the test lets it go: a sweep that lists the machines
// while a start is still making its machine.
type machinesFirst struct {
	sandbox.Driver
	listed, proceed chan struct{}
}

func (d machinesFirst) List(ctx context.Context) ([]sandbox.Machine, error) {
	ms, err := d.Driver.List(ctx)
	close(d.listed)
	<-d.proceed
	return ms, err
}

// TestSweepTrustsNoMachineListOlderThanAStart: a sweep that listed the
// machines before a start made its machine, and reads the row after the
// start wrote it running, does not take the machine for gone.
func TestSweepTrustsNoMachineListOlderThanAStart(t *testing.T) {
	e := newEnv(t)
	release := e.drv.Hold()
	sb := e.engineer(t, e.alice, "dev")
	e.run(t) // its start waits for the driver
	drv := machinesFirst{Driver: e.drv, listed: make(chan struct{}), proceed: make(chan struct{})}
	sweeper := sandbox.NewService(e.st, drv, e.accounts, e.cfg, slog.New(slog.NewTextHandler(t.Output(), nil)), e.clock.Now)
	swept := make(chan sandbox.SweepResult, 1)
	go func() {
		res, err := sweeper.Sweep(context.Background())
		if err != nil {
			t.Error(err)
		}
		swept <- res
	}()
	<-drv.listed // no machine yet
	release()
	e.waitState(t, sb.ID, sandbox.StateRunning)
	close(drv.proceed)
	res := <-swept
	if got, _ := e.st.GetSandbox(t.Context(), sb.ID); got.State != sandbox.StateRunning || len(res.Failed) > 0 {
		t.Errorf("after a sweep whose machine list was older than the start: %s (%s), failed %v; want running", got.State, got.Reason, res.Failed)
	}
}
