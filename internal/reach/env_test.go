package reach_test

import (
	"context"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/fakeclock"
	"berth.dev/berth/internal/reach"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/sandbox/sandboxtest"
	"berth.dev/berth/internal/store"
)

const testKey = sandboxtest.Key

// env is the way in's world (sandboxtest): one gateway's sandbox service
// with the way in as its idle clock, as the composition root wires them.
type env struct {
	st      *store.Store
	drv     *fake.Driver
	clock   *fakeclock.Clock
	w       *sandboxtest.World
	svc     *sandbox.Service
	reach   *reach.Service
	classes *class.Service

	operator, admin, alice, bob, stranger account.Principal
}

func newEnv(t *testing.T, opts ...func(*sandbox.Config)) *env {
	t.Helper()
	e := &env{}
	w := sandboxtest.New(t, func(ctx context.Context, org string) error { return e.classes.Seed(ctx, org) })
	e.w, e.st, e.drv, e.clock = w, w.Store, w.Driver, w.Clock
	cfg := w.Config(t)
	for _, o := range opts {
		o(&cfg)
	}
	e.svc = sandbox.NewService(e.st, e.drv, w.Accounts, cfg, w.Log, e.clock.Now)
	e.reach = reach.NewService(e.svc, e.st, reach.Config{Driver: cfg.Driver, Reacher: e.drv, Audit: e.st}, w.Log, e.clock.Now)
	e.svc.SetActivity(e.reach)
	e.classes = class.NewService(e.st, w.Accounts, nil, w.ClassConfig(t, cfg), w.Log, e.clock.Now)
	w.People(t)
	e.operator, e.admin, e.alice, e.bob, e.stranger = w.Operator, w.Admin, w.Alice, w.Bob, w.Stranger
	return e
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
