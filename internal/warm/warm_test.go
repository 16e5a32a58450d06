package warm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/fakeclock"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/sandbox/sandboxtest"
	"berth.dev/berth/internal/store"
	"berth.dev/berth/internal/warm"
)

const testKey = sandboxtest.Key

// poolDriver is the fake driver with the warm pools of the kubernetes
// driver and none of podman's capabilities: it records every start and
// every SyncPools call.
type poolDriver struct {
	f *fake.Driver

	mu    sync.Mutex
	pools [][]warm.Pool // every SyncPools call
	specs []sandbox.Spec
}

var _ warm.Pools = (*poolDriver)(nil)

func (d *poolDriver) Start(ctx context.Context, spec sandbox.Spec) error {
	d.mu.Lock()
	d.specs = append(d.specs, spec)
	d.mu.Unlock()
	if !spec.Bootstrap.IsZero() && spec.Env == nil {
		spec.Env = map[string]string{} // a pool's machine has nothing of the sandbox's
	}
	return d.f.Start(ctx, spec)
}
func (d *poolDriver) Stop(ctx context.Context, id sandbox.ID) error   { return d.f.Stop(ctx, id) }
func (d *poolDriver) Remove(ctx context.Context, id sandbox.ID) error { return d.f.Remove(ctx, id) }
func (d *poolDriver) Inspect(ctx context.Context, id sandbox.ID) (sandbox.Machine, error) {
	return d.f.Inspect(ctx, id)
}
func (d *poolDriver) List(ctx context.Context) ([]sandbox.Machine, error) { return d.f.List(ctx) }

func (d *poolDriver) SyncPools(_ context.Context, pools []warm.Pool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pools = append(d.pools, pools)
	return nil
}

func (d *poolDriver) lastSpec(t *testing.T, id sandbox.ID) sandbox.Spec {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := len(d.specs) - 1; i >= 0; i-- {
		if d.specs[i].Sandbox.ID == id {
			return d.specs[i]
		}
	}
	t.Fatalf("no start of %s", id)
	return sandbox.Spec{}
}

func (d *poolDriver) lastPools() []warm.Pool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.pools) == 0 {
		return nil
	}
	return d.pools[len(d.pools)-1]
}

// env is the warm pools' world (sandboxtest): one gateway's sandbox
// service on a poolDriver, with warm pools on or off, its classes telling
// the pools, as the composition root wires them.
type env struct {
	st      *store.Store
	clock   *fakeclock.Clock
	w       *sandboxtest.World
	svc     *sandbox.Service
	warm    *warm.Service
	classes *class.Service

	accounts          *account.Service
	admin, alice, bob account.Principal
	acme              account.Organisation
}

// withPools makes the world with warm pools on or off, and a class warm
// with a pool of 2 in acme.
func withPools(t *testing.T, on bool) (*env, *poolDriver) {
	t.Helper()
	e := &env{}
	w := sandboxtest.New(t, func(ctx context.Context, org string) error { return e.classes.Seed(ctx, org) })
	e.w, e.st, e.clock, e.accounts = w, w.Store, w.Clock, w.Accounts
	d := &poolDriver{f: w.Driver}
	cfg := w.Config(t)
	cfg.Driver = "kubernetes"
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	e.svc = sandbox.NewService(e.st, d, w.Accounts, cfg, log, e.clock.Now)
	e.warm = warm.NewService(e.st, e.svc, d, warm.Config{On: on, Runtimes: cfg.Runtimes}, log, e.clock.Now)
	e.svc.SetWarm(e.warm)
	e.classes = class.NewService(e.st, w.Accounts, e.warm, w.ClassConfig(t, cfg), log, e.clock.Now) // its pools follow the classes
	w.People(t)
	e.admin, e.alice, e.bob, e.acme = w.Admin, w.Alice, w.Bob, w.Acme
	const warmClass = "sandboxes:\n  - name: warm\n    image: localhost/berth-sandbox:1\n    isolation: standard\n    warm: 2\n    purposes: [engineer]\n"
	if _, err := e.classes.Apply(t.Context(), e.admin, "", strings.NewReader(warmClass)); err != nil {
		t.Fatal(err)
	}
	return e, d
}

// run starts the sandbox service's background work for the test's life.
func (e *env) run(t *testing.T) { sandboxtest.Run(t, e.svc) }

func (e *env) engineer(t *testing.T, p account.Principal, name string) sandbox.Sandbox {
	return sandboxtest.Engineer(t, e.svc, p, name)
}

// waitState polls until the sandbox is in state want.
func (e *env) waitState(t *testing.T, id sandbox.ID, want sandbox.State) sandbox.Sandbox {
	t.Helper()
	return e.w.Within(t, id, want, 10*time.Second)
}

// TestWarmPoolSandboxFetchesItsEnvironmentOnce: a sandbox of a warm class
// is started with a bootstrap token and no environment; the token buys
// the environment once, with a fresh key that replaces the one of its
// creation, and every step is in the audit log (SPEC S12, S17).
func TestWarmPoolSandboxFetchesItsEnvironmentOnce(t *testing.T) {
	e, d := withPools(t, true)
	e.run(t)
	ctx := t.Context()
	if got := d.lastPools(); len(got) != 1 || got[0].Class.Name != "warm" || got[0].Class.Warm != 2 || got[0].Org != e.acme.ID {
		t.Fatalf("pools after apply = %+v, want acme's class warm with 2", got)
	}
	sb, err := e.svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: "quick", Class: "warm", SSHKeys: []string{testKey}})
	if err != nil {
		t.Fatal(err)
	}
	running := e.waitState(t, sb.ID, sandbox.StateRunning)
	if !running.FromPool {
		t.Errorf("row FromPool = false, want true")
	}
	spec := d.lastSpec(t, sb.ID)
	if spec.Env != nil || !strings.HasPrefix(spec.Bootstrap.Reveal(), "bst_") {
		t.Fatalf("start of a pool sandbox: Env %v, Bootstrap %q; want no environment and a token", spec.Env, spec.Bootstrap)
	}
	// The token is a credential: no print or log of the spec shows it.
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("start", "spec", spec)
	for _, out := range []string{fmt.Sprintf("%v", spec), fmt.Sprintf("%+v", spec), fmt.Sprintf("%#v", spec), logged.String()} {
		if strings.Contains(out, spec.Bootstrap.Reveal()) {
			t.Errorf("the spec shows its bootstrap token: %s", out)
		}
	}

	env, err := e.warm.Bootstrap(ctx, spec.Bootstrap.Reveal())
	if err != nil {
		t.Fatalf("Bootstrap = %v", err)
	}
	if env["BERTH_SANDBOX_ID"] != string(sb.ID) || env["BERTH_AUTHORIZED_KEYS"] != testKey || env["BERTH_SANDBOX_NAME"] != "quick" {
		t.Errorf("environment names %q %q %q, want the sandbox's", env["BERTH_SANDBOX_ID"], env["BERTH_SANDBOX_NAME"], env["BERTH_AUTHORIZED_KEYS"])
	}
	p, err := e.accounts.Authenticate(ctx, env["BERTH_API_KEY"])
	if err != nil || p.Sandbox != string(sb.ID) {
		t.Fatalf("the fetched key authenticates as %q, %v; want the sandbox", p.Sandbox, err)
	}
	after, _ := e.st.GetSandbox(ctx, sb.ID)
	if after.KeyID == sb.KeyID || after.KeyID == "" {
		t.Errorf("key %s after bootstrap, created with %s: want a new one", after.KeyID, sb.KeyID)
	}
	if _, err := e.warm.Bootstrap(ctx, spec.Bootstrap.Reveal()); !errors.Is(err, fault.Unauthenticated) {
		t.Errorf("second Bootstrap = %v, want fault.Unauthenticated", err)
	}
	if _, err := e.warm.Bootstrap(ctx, "bst_NOTATOKEN"); !errors.Is(err, fault.Unauthenticated) {
		t.Errorf("Bootstrap(unknown) = %v, want fault.Unauthenticated", err)
	}
	events, _, err := e.st.ListAudit(ctx, audit.Filter{Sandbox: string(sb.ID)}, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var issued []string
	for _, ev := range events {
		if ev.Action == audit.CredentialIssue {
			issued = append(issued, ev.Target)
		}
	}
	if !slices.Equal(issued, []string{"bootstrap token", "environment"}) {
		t.Errorf("credentials issued %v, want the bootstrap token then the environment", issued)
	}

	// A resume gives the new pod a token of its own.
	if _, err := e.svc.Suspend(ctx, e.alice, "quick"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Resume(ctx, e.alice, "quick"); err != nil {
		t.Fatal(err)
	}
	e.waitState(t, sb.ID, sandbox.StateRunning)
	if again := d.lastSpec(t, sb.ID); again.Bootstrap.IsZero() || again.Bootstrap.Equal(spec.Bootstrap) || again.Env != nil {
		t.Errorf("resume of a pool sandbox: Bootstrap %q, Env %v; want a new token", again.Bootstrap, again.Env)
	}

	// Engineers of other classes, and agents, start cold.
	cold := e.engineer(t, e.bob, "cold")
	e.waitState(t, cold.ID, sandbox.StateRunning)
	if s := d.lastSpec(t, cold.ID); !s.Bootstrap.IsZero() || s.Env == nil {
		t.Errorf("a class without warm got Bootstrap %q", s.Bootstrap)
	}

	// Pools do not outlive their class.
	if err := e.classes.Delete(ctx, e.admin, "", "warm"); err != nil {
		t.Fatal(err)
	}
	if got := d.lastPools(); len(got) != 0 {
		t.Errorf("pools after the class was deleted = %+v, want none", got)
	}
}

// TestWarmPoolsOffDeletesThem: with warm pools off the gateway asks the
// driver for no pool at its start, and sandboxes of warm classes start
// cold (SPEC S12).
func TestWarmPoolsOffDeletesThem(t *testing.T) {
	e, d := withPools(t, false)
	e.run(t)
	deadline := time.Now().Add(5 * time.Second)
	for {
		d.mu.Lock()
		n := len(d.pools)
		d.mu.Unlock()
		if n >= 2 { // the classes' Apply, then Run's start
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("SyncPools called %d times, want at start-up too", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := d.lastPools(); len(got) != 0 {
		t.Fatalf("pools with warm off = %+v, want none", got)
	}
	sb, err := e.svc.Create(t.Context(), e.alice, sandbox.CreateRequest{Name: "cold", Class: "warm", SSHKeys: []string{testKey}})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.waitState(t, sb.ID, sandbox.StateRunning); got.FromPool {
		t.Errorf("FromPool with pools off")
	}
}
