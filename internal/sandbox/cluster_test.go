package sandbox_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/sandbox"
)

// clusterDriver is the fake driver with the capabilities of the
// kubernetes driver and none of podman's: it carries expiries, its
// machines finish for good, and it neither follows runs nor reaches ports.
type clusterDriver struct {
	f *fake.Driver

	mu       sync.Mutex
	expiries map[sandbox.ID]time.Time
	final    map[sandbox.ID]bool
}

var _ sandbox.Expirer = (*clusterDriver)(nil)

func (d *clusterDriver) Start(ctx context.Context, spec sandbox.Spec) error {
	return d.f.Start(ctx, spec)
}
func (d *clusterDriver) Stop(ctx context.Context, id sandbox.ID) error   { return d.f.Stop(ctx, id) }
func (d *clusterDriver) Remove(ctx context.Context, id sandbox.ID) error { return d.f.Remove(ctx, id) }
func (d *clusterDriver) Inspect(ctx context.Context, id sandbox.ID) (sandbox.Machine, error) {
	m, err := d.f.Inspect(ctx, id)
	d.mu.Lock()
	m.Final = d.final[id]
	d.mu.Unlock()
	return m, err
}
func (d *clusterDriver) List(ctx context.Context) ([]sandbox.Machine, error) {
	ms, err := d.f.List(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range ms {
		ms[i].Final = d.final[ms[i].ID]
	}
	return ms, err
}

func (d *clusterDriver) SetExpiry(_ context.Context, id sandbox.ID, at time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expiries[id] = at
	return nil
}

// finish makes a machine's pod finish with code, as on Kubernetes.
func (d *clusterDriver) finish(id sandbox.ID, code int) {
	d.mu.Lock()
	d.final[id] = true
	d.mu.Unlock()
	d.f.Exit(id, code)
}

// onCluster rebuilds e's service on a clusterDriver.
func onCluster(t *testing.T, e *env) *clusterDriver {
	t.Helper()
	d := &clusterDriver{f: e.drv, expiries: map[sandbox.ID]time.Time{}, final: map[sandbox.ID]bool{}}
	cfg := e.cfg
	cfg.Driver = "kubernetes"
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	e.svc = sandbox.NewService(e.st, d, e.accounts, cfg, log, e.clock.Now, e.opts...)
	return d
}

// TestExtendMovesTheDriversExpiry: a driver that carries expiries gets
// every new one (SPEC S11: the cluster enforces shutdownTime).
func TestExtendMovesTheDriversExpiry(t *testing.T) {
	e := newEnv(t)
	d := onCluster(t, e)
	e.run(t)
	sb := e.engineer(t, e.alice, "long")
	e.waitState(t, sb.ID, sandbox.StateRunning)
	got, err := e.svc.Extend(t.Context(), e.alice, "long", "8h")
	if err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	at := d.expiries[sb.ID]
	d.mu.Unlock()
	if !at.Equal(got.ExpiresAt) {
		t.Errorf("driver expiry %s, want %s", at, got.ExpiresAt)
	}
}

// TestFinishedMachineFails: a machine that finished cannot restart, so
// even exit 0 fails the sandbox instead of suspending it (SPEC S11).
func TestFinishedMachineFails(t *testing.T) {
	e := newEnv(t)
	d := onCluster(t, e)
	stop := e.run(t)
	sb := e.engineer(t, e.alice, "done")
	e.waitState(t, sb.ID, sandbox.StateRunning)
	stop()
	d.finish(sb.ID, 0)
	if _, err := e.svc.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, _ := e.st.GetSandbox(t.Context(), sb.ID)
	if got.State != sandbox.StateFailed || !strings.Contains(got.Reason, "cannot restart") {
		t.Errorf("after a finished pod: %s (%s), want failed", got.State, got.Reason)
	}
}
