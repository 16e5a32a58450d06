package sandbox_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/sandbox"
)

// TestFork: a fork of a running sandbox makes sandboxes of their own
// (names, keys, environments), each restored from the source's save,
// audited on both sides; the source runs on.
func TestFork(t *testing.T) {
	e := newEnv(t)
	c := e.withCheckpoints(t)
	e.run(t)
	ctx := t.Context()
	src := e.engineer(t, e.alice, "dev")
	e.waitState(t, src.ID, sandbox.StateRunning)

	forks, err := e.svc.Fork(ctx, e.alice, "dev", sandbox.ForkRequest{Name: "try", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(forks) != 2 || forks[0].Name != "try-1" || forks[1].Name != "try-2" {
		t.Fatalf("forks %+v, want try-1 and try-2", forks)
	}
	keys := map[string]string{"dev": e.drv.Env(src.ID)["BERTH_API_KEY"]}
	for _, f := range forks {
		if f.State != sandbox.StateStarting || f.Checkpoint != 7<<20 || f.ID == src.ID || f.Owner != src.Owner || f.Class != src.Class {
			t.Errorf("fork %s: %s, save %d, owner %s, class %s; want starting with the save, alice's, of class %s", f.Name, f.State, f.Checkpoint, f.Owner, f.Class, src.Class)
		}
		got := e.waitState(t, f.ID, sandbox.StateRunning)
		if got.Checkpoint != 0 {
			t.Errorf("fork %s runs with a save of %d recorded", f.Name, got.Checkpoint)
		}
		if from := c.ForkedFrom(f.ID); from != src.ID {
			t.Errorf("fork %s was made from %q, want %s", f.Name, from, src.ID)
		}
		env := e.drv.Env(f.ID)
		if env["BERTH_SANDBOX_NAME"] != f.Name || env["BERTH_SANDBOX_ID"] != string(f.ID) {
			t.Errorf("fork %s's machine is told it is %s (%s)", f.Name, env["BERTH_SANDBOX_NAME"], env["BERTH_SANDBOX_ID"])
		}
		key := env["BERTH_API_KEY"]
		for name, k := range keys {
			if key == k {
				t.Errorf("fork %s holds the key of %s", f.Name, name)
			}
		}
		keys[f.Name] = key
		if p, err := e.accounts.Authenticate(ctx, key); err != nil || p.Sandbox != string(f.ID) {
			t.Errorf("fork %s's key authenticates as %q (%v)", f.Name, p.Sandbox, err)
		}
		if d := e.details(t, f.ID, audit.SandboxFork); len(d) != 1 || !strings.Contains(d[0], "a fork of sandbox dev ("+string(src.ID)+")") {
			t.Errorf("fork %s's fork audit: %q", f.Name, d)
		}
		if d := e.details(t, f.ID, audit.SandboxRestore); len(d) != 1 || !strings.Contains(d[0], "restored from its checkpoint") {
			t.Errorf("fork %s's restore audit: %q", f.Name, d)
		}
	}
	if c.Restores() != 2 {
		t.Errorf("%d restores, want 2", c.Restores())
	}
	if got, _ := e.svc.Get(ctx, e.alice, "dev"); got.State != sandbox.StateRunning {
		t.Errorf("the source after the fork: %s", got.State)
	}
	if d := e.details(t, src.ID, audit.SandboxFork); len(d) != 1 || !strings.Contains(d[0], "forked into try-1, try-2: 7Mi of memory saved") {
		t.Errorf("the source's fork audit: %q", d)
	}

	// One fork keeps the name it was given; a taken name is refused.
	one, err := e.svc.Fork(ctx, e.alice, "dev", sandbox.ForkRequest{Name: "solo"})
	if err != nil || len(one) != 1 || one[0].Name != "solo" {
		t.Fatalf("a fork of one: %+v, %v", one, err)
	}
	if _, err := e.svc.Fork(ctx, e.alice, "dev", sandbox.ForkRequest{Name: "solo"}); !errors.Is(err, fault.Conflict) {
		t.Errorf("a fork onto a taken name: %v, want a conflict", err)
	}

	// Who may fork, and what.
	for _, tt := range []struct {
		name string
		err  func() error
		want error
	}{
		{"an administrator", func() error {
			_, err := e.svc.Fork(ctx, e.admin, string(src.ID), sandbox.ForkRequest{Name: "adm"})
			return err
		}, fault.Forbidden},
		{"another member", func() error {
			_, err := e.svc.Fork(ctx, e.bob, string(src.ID), sandbox.ForkRequest{Name: "bob"})
			return err
		}, fault.NotFound},
		{"too many", func() error {
			_, err := e.svc.Fork(ctx, e.alice, "dev", sandbox.ForkRequest{Name: "many", Count: sandbox.MaxForks + 1})
			return err
		}, fault.Invalid},
		{"a bad name", func() error {
			_, err := e.svc.Fork(ctx, e.alice, "dev", sandbox.ForkRequest{Name: "Bad Name"})
			return err
		}, fault.Invalid},
	} {
		if err := tt.err(); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	if _, err := e.svc.Suspend(ctx, e.alice, "dev"); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.Fork(ctx, e.alice, "dev", sandbox.ForkRequest{Name: "late"})
	if !errors.Is(err, fault.Conflict) || !strings.Contains(err.Error(), "only a running sandbox") {
		t.Errorf("a fork of a suspended sandbox: %v, want a conflict saying it must run", err)
	}
}

// TestForkRefusals: a fork that does not fit whole makes none; a save
// that fails fails the forks' rows, saying why, and the source runs on; a
// driver that cannot save a machine refuses.
func TestForkRefusals(t *testing.T) {
	e := newEnv(t)
	c := e.withCheckpoints(t)
	e.run(t)
	ctx := t.Context()
	if err := e.accounts.SetGuardrail(ctx, e.admin, "acme", "", guardrail.Guardrail{MaxSandboxes: ptr(3), AllowedRepos: []string{"acme"}}); err != nil {
		t.Fatal(err)
	}
	src := e.engineer(t, e.alice, "dev")
	e.waitState(t, src.ID, sandbox.StateRunning)
	live := func() []string {
		t.Helper()
		all, _, err := e.svc.List(ctx, e.alice, sandbox.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, sb := range all {
			if sb.Live() {
				names = append(names, sb.Name)
			}
		}
		slices.Sort(names)
		return names
	}
	_, err := e.svc.Fork(ctx, e.alice, "dev", sandbox.ForkRequest{Name: "try", Count: 3})
	if !errors.Is(err, fault.Exceeded) || !strings.Contains(err.Error(), "3 forks do not fit") {
		t.Errorf("a fork of 3 with room for 2: %v, want exceeded, saying 3 do not fit", err)
	}
	if got := live(); !slices.Equal(got, []string{"dev"}) {
		t.Errorf("live after a refused fork: %q, want just dev", got)
	}

	c.FailNextFork(errors.New("runsc checkpoint: no space left on device"))
	_, err = e.svc.Fork(ctx, e.alice, "dev", sandbox.ForkRequest{Name: "try", Count: 2})
	if !errors.Is(err, fault.Unavailable) || !strings.Contains(err.Error(), "no space left") {
		t.Errorf("a fork whose save failed: %v, want unavailable with why", err)
	}
	all, _, _ := e.svc.List(ctx, e.alice, sandbox.ListOptions{All: true})
	failed := 0
	for _, sb := range all {
		if strings.HasPrefix(sb.Name, "try-") {
			if sb.State != sandbox.StateFailed || !strings.Contains(sb.Reason, "no space left") {
				t.Errorf("fork %s after a failed save: %s (%q)", sb.Name, sb.State, sb.Reason)
			}
			failed++
		}
	}
	if failed != 2 {
		t.Errorf("%d forks' rows after a failed save, want 2, failed", failed)
	}
	if got, _ := e.svc.Get(ctx, e.alice, "dev"); got.State != sandbox.StateRunning {
		t.Errorf("the source after a failed fork: %s", got.State)
	}

	// A fork's lifetime is its class's default from now, under the
	// guardrail's max_sandbox_ttl as at a create.
	if err := e.accounts.SetGuardrail(ctx, e.admin, "acme", "", guardrail.Guardrail{MaxSandboxes: ptr(3), MaxSandboxTTL: ptr(30 * time.Minute), AllowedRepos: []string{"acme"}}); err != nil {
		t.Fatal(err)
	}
	short, err := e.svc.Fork(ctx, e.alice, "dev", sandbox.ForkRequest{Name: "short"})
	if err != nil {
		t.Fatal(err)
	}
	if got := short[0].ExpiresAt.Sub(short[0].CreatedAt); got != 30*time.Minute || !strings.Contains(short[0].LifetimeCut, "max_sandbox_ttl") {
		t.Errorf("a fork under a 30m max_sandbox_ttl lives %s (cut: %q), want 30m, cut by the guardrail", got, short[0].LifetimeCut)
	}

	// The fake driver alone cannot save a machine.
	plain := sandbox.NewService(e.st, e.drv, e.accounts, e.cfg, e.w.Log, e.clock.Now)
	if _, err := plain.Fork(ctx, e.alice, "dev", sandbox.ForkRequest{Name: "x"}); !errors.Is(err, fault.Conflict) || !strings.Contains(err.Error(), "cannot be forked") {
		t.Errorf("a fork on a driver that cannot save: %v", err)
	}
}

// TestRestartRestoresAFork: a gateway stopped after a fork's 201, before
// its forks' restores ran, leaves starting rows with the save recorded:
// the next gateway's start-up sweep restores them, with the keys their
// machines hold, rather than starting them afresh.
func TestRestartRestoresAFork(t *testing.T) {
	e := newEnv(t)
	c := e.withCheckpoints(t)
	stop := e.run(t)
	ctx := t.Context()
	src := e.engineer(t, e.alice, "dev")
	e.waitState(t, src.ID, sandbox.StateRunning)
	stop() // the forks' starts stay queued in a gateway that stops
	forks, err := e.svc.Fork(ctx, e.alice, "dev", sandbox.ForkRequest{Name: "try", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	next := sandbox.NewService(e.st, c, e.accounts, e.cfg, e.w.Log, e.clock.Now)
	res, err := next.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Resumed) != 2 || len(res.Failed) != 0 {
		t.Errorf("the start-up sweep resumed %v and failed %v; want both forks resumed", res.Resumed, res.Failed)
	}
	runService(t, next)
	for _, f := range forks {
		got := e.waitState(t, f.ID, sandbox.StateRunning)
		if got.KeyID != f.KeyID {
			t.Errorf("fork %s got a new key %s; its machine holds %s", f.Name, got.KeyID, f.KeyID)
		}
		if d := e.details(t, f.ID, audit.SandboxRestore); len(d) != 1 || !strings.Contains(d[0], "restored from its checkpoint") {
			t.Errorf("fork %s after the restart: %q, want restored", f.Name, d)
		}
	}
	if c.Restores() != 2 {
		t.Errorf("%d restores, want 2", c.Restores())
	}
}
