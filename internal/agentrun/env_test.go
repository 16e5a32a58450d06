package agentrun_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/fakeclock"
	"berth.dev/berth/internal/forge/local"
	"berth.dev/berth/internal/inference/inferencetest"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/sandbox/sandboxtest"
	"berth.dev/berth/internal/store"
	"berth.dev/berth/internal/workspace"
)

const testKey = sandboxtest.Key

// env is the run tests' world (sandboxtest) with a deployment that runs
// agents: images for claude-code, pi and opencode, checkouts and logs in
// temporary directories, models served by the scripted provider; and one
// gateway's sandbox and run services in it.
type env struct {
	st       *store.Store
	drv      *fake.Driver
	local    *local.Forge
	accounts *account.Service
	clock    *fakeclock.Clock
	w        *sandboxtest.World
	svc      *sandbox.Service
	runs     *agentrun.Service
	classes  *class.Service
	cfg      sandbox.Config
	rcfg     agentrun.Config
	opts     []sandbox.Option
	ropts    []agentrun.Option

	operator, admin, alice, bob, stranger account.Principal
	acme, other                           account.Organisation
}

type option func(*sandbox.Config, *agentrun.Config)

func newEnv(t *testing.T, opts ...option) *env {
	t.Helper()
	e := &env{}
	w := sandboxtest.New(t, func(ctx context.Context, org string) error { return e.classes.Seed(ctx, org) })
	e.w, e.st, e.drv, e.local, e.accounts, e.clock = w, w.Store, w.Driver, w.Forge, w.Accounts, w.Clock
	e.cfg = w.Config(t)
	e.rcfg = agentrun.Config{
		Driver:     "fake",
		PublicURL:  e.cfg.PublicURL,
		Workspaces: workspace.New(t.TempDir(), os.Getuid(), w.Forge, workspace.Local{Forge: w.Forge}),
		Images: map[string]string{
			"claude-code": "localhost/berth-agent-claude-code:latest",
			"pi":          "localhost/berth-agent-pi:latest",
			"opencode":    "localhost/berth-agent-opencode:latest",
		},
		Model:  "claude-sonnet-4-5",
		LogDir: t.TempDir(),
	}
	for _, o := range opts {
		o(&e.cfg, &e.rcfg)
	}
	models := inferencetest.Scripted(t, w.Store, w.Accounts, e.cfg.PublicURL)
	e.opts = []sandbox.Option{sandbox.WithModelEnv(models)}
	e.ropts = []agentrun.Option{agentrun.WithModels(models)}
	e.svc, e.runs = e.services(e.st, e.drv, w.Log)
	e.classes = class.NewService(e.st, e.accounts, nil, w.ClassConfig(t, e.cfg), w.Log, e.clock.Now)
	w.People(t)
	e.operator, e.admin, e.alice, e.bob, e.stranger, e.acme, e.other = w.Operator, w.Admin, w.Alice, w.Bob, w.Stranger, w.Acme, w.Other
	return e
}

// withRunner sets the deployment's runner (BERTH_AGENT_RUNNER).
func withRunner(name string) option {
	return func(c *sandbox.Config, rc *agentrun.Config) { c.AgentRunner, rc.Runner = name, name }
}

// services are one gateway's: a sandbox service on st and drv whose agent
// sandboxes' runs the run service runs, as the composition root wires
// them.
func (e *env) services(st sandbox.Store, drv sandbox.Driver, log *slog.Logger) (*sandbox.Service, *agentrun.Service) {
	svc := sandbox.NewService(st, drv, e.accounts, e.cfg, log, e.clock.Now, e.opts...)
	rcfg := e.rcfg
	rcfg.Pushes = e.w.Repos
	runs := agentrun.NewService(e.st, svc, drv, e.accounts, rcfg, log, e.clock.Now, e.ropts...)
	svc.SetRuns(runs)
	return svc, runs
}

// run starts the sandbox service's background work for the test's life.
func (e *env) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.svc.Run(ctx, time.Hour)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// waitState polls until the sandbox is in state want.
func (e *env) waitState(t *testing.T, id sandbox.ID, want sandbox.State) sandbox.Sandbox {
	t.Helper()
	return e.w.Within(t, id, want, 10*time.Second)
}

// within polls the row until the sandbox is in state want, failing the
// test when d passes first.
func (e *env) within(t *testing.T, id sandbox.ID, want sandbox.State, d time.Duration) sandbox.Sandbox {
	t.Helper()
	return e.w.Within(t, id, want, d)
}

func (e *env) agentRun(t *testing.T, runnerName string) sandbox.Sandbox {
	t.Helper()
	sb, err := e.svc.Create(t.Context(), e.alice, sandbox.CreateRequest{Name: "fix", Purpose: "agent", Repo: "acme/app", Branch: "main", Task: "add a greeting", Runner: runnerName})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}
