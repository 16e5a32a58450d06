package gateway_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentconfig"
	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/egress"
	"berth.dev/berth/internal/egress/placeholder"
	"berth.dev/berth/internal/egress/proxy"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/forge/local"
	"berth.dev/berth/internal/gateway"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/metrics"
	"berth.dev/berth/internal/reach"
	"berth.dev/berth/internal/repository"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/sso"
	"berth.dev/berth/internal/store"
	"berth.dev/berth/internal/terminal"
	"berth.dev/berth/internal/trigger"
	"berth.dev/berth/internal/usage"
	"berth.dev/berth/internal/warm"
	"berth.dev/berth/internal/workspace"
)

const sshKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGQ0n8q0dvGXmfhT3x7Jt0yq4xNn6JkJ3sJ8QmV4c2Xk test@example"

const classes = `sandboxes:
  - name: standard
    image: localhost/berth-sandbox:1
    isolation: standard
`

// world is a gateway on a real SQLite store and the fake driver, with
// clients for an operator, organisation "acme"'s administrator and two
// members, and a member of organisation "other".
type world struct {
	url                                     string
	dbPath                                  string // the SQLite file
	drv                                     *fake.Driver
	st                                      *store.Store
	operator, admin, owner, member, foreign *client.Client
	opKey, adminKey                         string
	accounts                                *account.Service
	forge                                   *local.Forge
	sandboxes                               *sandbox.Service
	runs                                    *agentrun.Service
	classes                                 *class.Service
	metrics                                 *metrics.Metrics
	gw                                      *gateway.Server
	inference                               *inference.Service // nil unless the world serves models
	secrets                                 *placeholder.Service
	issuer                                  *proxy.Issuer
	agentCfg                                *agentconfig.Service
	triggers                                *trigger.Service
	sso                                     *sso.Service // without a provider unless the world's config gives one
}

// worldForge makes the deployment's forge instead of the local one.
type worldForge func(t testing.TB) (forge.Forge, gateway.Mirrors)

// worldConfig is what a test may change of a world.
type worldConfig struct {
	now      func() time.Time
	log      *slog.Logger
	template string
	options  func(*gateway.Options)
	remote   worldForge
	// driver wraps the fake driver, to take abilities away.
	driver func(*fake.Driver) sandbox.Driver
	// tunnelIdle is the gateway's tunnel idle timeout; 0 is its default.
	tunnelIdle time.Duration
	// inference makes the world's inference service and its scripted
	// provider's handler; nil serves no models.
	// url is where the gateway answers, as sandboxes reach it.
	inference func(st *store.Store, accounts *account.Service, url string) (*inference.Service, http.Handler)
	// runs makes agent sandboxes run claude-code and opencode on the fake
	// driver, on a checkout of acme/app, started on runModel, their runs
	// joined to what the gateway metered of them.
	runs     bool
	runModel string
	// agents changes how agent sandboxes run; with Workspaces they do.
	agents func(w *world, c *agentrun.Config)
	// store are the store's options.
	store []store.Option
	// sso configures signing in through an identity provider; nil: the
	// gateway has none (the sign-in service still keeps mappings).
	sso func(w *world, c *sso.Config)
	// emails are the emails of the world's people, by name; none by
	// default.
	emails map[string]string
	// githubHookSecret is the GitHub App's webhook secret; nil: none.
	githubHookSecret []byte
}

// withForge makes a world on a remote forge.
func withForge(f worldForge) func(*worldConfig) {
	return func(c *worldConfig) { c.remote = f }
}

// newWorld makes a world; opts change its clock, its logger, its classes,
// its forge or the gateway's options.
func newWorld(t testing.TB, opts ...func(*worldConfig)) *world {
	t.Helper()
	ctx := t.Context()
	cfg := worldConfig{
		now:      time.Now,
		log:      slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		template: classes,
	}
	for _, o := range opts {
		o(&cfg)
	}
	dbPath := t.TempDir() + "/berth.db"
	st, err := store.Open(ctx, dbPath, cfg.store...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tmpl, err := class.ParseFile(strings.NewReader(cfg.template))
	if err != nil {
		t.Fatal(err)
	}
	log := cfg.log
	w := &world{drv: fake.New(), st: st, dbPath: dbPath}
	reg := prometheus.NewRegistry()
	if w.metrics, err = metrics.New(reg, st); err != nil {
		t.Fatal(err)
	}
	// The gateway's address is known before it serves: sandboxes are told it.
	srv := httptest.NewUnstartedServer(nil)
	w.url = "http://" + srv.Listener.Addr().String()
	w.forge = local.New(t.TempDir(), w.url, st, cfg.now)
	for _, name := range []string{"acme/app", "acme/other", "elsewhere/app"} {
		if _, err := w.forge.Import(ctx, name, seedRepo(t)); err != nil {
			t.Fatal(err)
		}
	}
	var (
		fg      forge.Forge = w.forge
		mirrors gateway.Mirrors
	)
	if cfg.remote != nil {
		fg, mirrors = cfg.remote(t)
	}
	var drv sandbox.Driver = w.drv
	if cfg.driver != nil {
		drv = cfg.driver(w.drv)
	}
	w.accounts = account.NewService(st, st, cfg.now, func(ctx context.Context, org string) error { return w.classes.Seed(ctx, org) }, st, log)
	var (
		sbOpts   []sandbox.Option
		runOpts  []agentrun.Option
		scripted http.Handler
	)
	if cfg.inference != nil {
		w.inference, scripted = cfg.inference(st, w.accounts, w.url)
		sbOpts = append(sbOpts, sandbox.WithModelEnv(w.inference))
		runOpts = append(runOpts, agentrun.WithModels(w.inference))
	}
	repos := repository.New(st, w.accounts, repository.Config{Forge: fg, PublicURL: w.url, Audit: st}, log, cfg.now)
	sbCfg := sandbox.Config{
		Driver: "fake", Runtimes: map[sandbox.Tier]string{sandbox.TierStandard: ""}, Audit: st,
		Retention: 90 * 24 * time.Hour, Metrics: w.metrics, Repositories: repos, PublicURL: w.url,
	}
	runCfg := agentrun.Config{Driver: "fake", PublicURL: w.url}
	if cfg.runs {
		// As serve.go prices runs: the catalog's prices over the vendors'.
		prices := runner.ListPrices()
		if w.inference != nil {
			maps.Copy(prices, w.inference.Catalog().Prices())
		}
		runCfg.Images = map[string]string{"claude-code": "localhost/berth-agent-claude-code:latest", "opencode": "localhost/berth-agent-opencode:latest"}
		runCfg.Model, runCfg.LogDir, runCfg.Prices = cfg.runModel, t.TempDir(), prices
		runCfg.Workspaces = workspace.New(t.TempDir(), os.Getuid(), w.forge, workspace.Local{Forge: w.forge})
		runOpts = append(runOpts, agentrun.WithSessionMeter(st))
	}
	if cfg.agents != nil {
		cfg.agents(w, &runCfg)
	}
	if w.issuer, err = proxy.LoadIssuer(filepath.Join(t.TempDir(), "egress_ca.pem")); err != nil {
		t.Fatal(err)
	}
	w.secrets = placeholder.NewService(st, w.accounts, placeholder.NewKey([]byte("0123456789abcdef0123456789abcdef")), cfg.now, nil, w.issuer.CertPEM())
	sbOpts = append(sbOpts, sandbox.WithSecretEnv(w.secrets))
	w.agentCfg = agentconfig.NewService(st, w.accounts, cfg.now)
	svc := sandbox.NewService(st, drv, w.accounts, sbCfg, log, cfg.now, sbOpts...)
	runCfg.Pushes = repos
	runOpts = append(runOpts, agentrun.WithAgentConfigs(w.agentCfg))
	runs := agentrun.NewService(st, svc, drv, w.accounts, runCfg, log, cfg.now, runOpts...)
	if runCfg.Workspaces != nil {
		svc.SetRuns(runs)
	}
	w.triggers = trigger.NewService(st, w.accounts, repos, svc, fg, trigger.Config{Key: []byte("matrix trigger key"), GitHubSecret: cfg.githubHookSecret, MaxTask: sandbox.MaxTask}, log, cfg.now)
	runs.SetReports(w.triggers)
	w.triggers.SetSettings(w.agentCfg)
	w.sandboxes, w.runs = svc, runs
	var ssoCfg sso.Config
	if cfg.sso != nil {
		cfg.sso(w, &ssoCfg)
	}
	if w.sso, err = sso.New(ssoCfg, st, svc, st, log, cfg.now); err != nil {
		t.Fatal(err)
	}
	rcfg := reach.Config{Driver: sbCfg.Driver, Audit: st}
	if r, ok := drv.(reach.Reacher); ok {
		rcfg.Reacher = r
	}
	way := reach.NewService(svc, st, rcfg, log, cfg.now)
	svc.SetActivity(way)
	var pools warm.Pools
	if p, ok := drv.(warm.Pools); ok {
		pools = p
	}
	warmth := warm.NewService(st, svc, pools, warm.Config{Runtimes: sbCfg.Runtimes}, log, cfg.now)
	svc.SetWarm(warmth)
	w.classes = class.NewService(st, w.accounts, warmth, class.Config{Template: tmpl, Runtimes: sbCfg.Runtimes}, log, cfg.now)
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(runCtx, time.Hour) }()
	t.Cleanup(func() { cancel(); <-done })

	gwo := gateway.Options{Audit: st, Accounts: w.accounts, Sandboxes: svc, Reach: way, Warm: warmth, Classes: w.classes, Runs: runs, Log: log, Version: "test", Driver: "fake", Now: cfg.now,
		Usage:   usage.NewService(st, w.accounts, svc, 90*24*time.Hour, cfg.now),
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		Forge:   fg, Repositories: repos, Mirrors: mirrors, TunnelIdleTimeout: cfg.tunnelIdle,
		Inference: w.inference, Scripted: scripted, PublicURL: w.url, SSO: w.sso, Meter: w.metrics,
		Egress: egress.NewLedger(st, log), Freezer: st, Secrets: w.secrets, Issuer: w.issuer, AgentConfigs: w.agentCfg, Triggers: w.triggers}
	if gwo.Terminal, err = terminal.LoadCA(filepath.Join(t.TempDir(), "terminal_ca")); err != nil {
		t.Fatal(err)
	}
	if cfg.options != nil {
		cfg.options(&gwo)
	}
	w.gw = gateway.New(gwo)
	w.triggers.SetResults(w.gw.Results())
	srv.Config.Handler = w.gw.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(w.gw.StopEgress)   // before the store closes: no count is written to it after
	t.Cleanup(w.gw.CloseTunnels) // runs first: the tunnels' handlers end before the server closes

	_, _, _, opKey, err := w.accounts.Bootstrap(ctx, "acme", "default", "ops")
	if err != nil {
		t.Fatal(err)
	}
	w.opKey = opKey.Secret.Reveal()
	w.operator = client.New(srv.URL, w.opKey, srv.Client())
	if _, err := w.operator.CreateOrg(ctx, api.CreateOrganisation{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	person := func(org, name, role string) (*client.Client, string) {
		return w.userWith(t, org, name, cfg.emails[name], role)
	}
	w.admin, w.adminKey = person("acme", "ada", "admin")
	w.owner, _ = person("acme", "alice", "member")
	w.member, _ = person("acme", "bob", "member")
	w.foreign, _ = person("other", "sam", "member")
	return w
}

// user makes a user of org with a key, and returns a client with the key.
func (w *world) user(t testing.TB, org, name, role string) *client.Client {
	t.Helper()
	c, _ := w.userKey(t, org, name, role)
	return c
}

// userKey is user, also returning the key's secret.
func (w *world) userKey(t testing.TB, org, name, role string) (*client.Client, string) {
	t.Helper()
	return w.userWith(t, org, name, "", role)
}

// userWith is userKey for a user with an email ("" none).
func (w *world) userWith(t testing.TB, org, name, email, role string) (*client.Client, string) {
	t.Helper()
	u, err := w.operator.CreateUser(t.Context(), org, api.CreateUser{Name: name, Email: email, Role: role})
	if err != nil {
		t.Fatal(err)
	}
	k, err := w.operator.CreateKey(t.Context(), api.CreateKey{User: u.ID})
	if err != nil {
		t.Fatal(err)
	}
	return client.New(w.url, k.Secret, nil), k.Secret
}

func (w *world) create(t *testing.T, c *client.Client, name string) api.Sandbox {
	t.Helper()
	sb, err := c.CreateSandbox(t.Context(), api.CreateSandbox{Name: name, Class: "standard", SSHKeys: []string{sshKey}})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for sb.State == "starting" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		if sb, err = c.Sandbox(t.Context(), sb.ID); err != nil {
			t.Fatal(err)
		}
	}
	if sb.State != "running" {
		t.Fatalf("sandbox %s is %s, want running", name, sb.State)
	}
	return sb
}

func code(err error) (int, string) {
	var e *api.Error
	if errors.As(err, &e) {
		return e.Status, e.Code
	}
	return 0, ""
}

// TestAuthorisationMatrix is SPEC S6 over HTTP: see, suspend and terminate
// for the operator, the organisation's administrator, the owner, another
// member and a member of another organisation. Whoever may not see a
// sandbox gets 404, never 403, by id and by name.
func TestAuthorisationMatrix(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	rows := []struct {
		who     string
		c       func() *client.Client
		allowed bool
	}{
		{"operator", func() *client.Client { return w.operator }, true},
		{"administrator", func() *client.Client { return w.admin }, true},
		{"owner", func() *client.Client { return w.owner }, true},
		{"another member", func() *client.Client { return w.member }, false},
		{"another organisation", func() *client.Client { return w.foreign }, false},
	}
	for _, row := range rows {
		t.Run(row.who, func(t *testing.T) {
			sb := w.create(t, w.owner, "m-"+strings.ReplaceAll(row.who, " ", "-"))
			c := row.c()
			for _, ref := range []string{sb.ID, sb.Name} {
				_, err := c.Sandbox(ctx, ref)
				checkAllowed(t, "see "+ref, err, row.allowed)
			}
			_, err := c.Suspend(ctx, sb.ID)
			checkAllowed(t, "suspend", err, row.allowed)
			if row.allowed {
				if _, err := c.Resume(ctx, sb.ID); err != nil {
					t.Fatalf("resume: %v", err)
				}
			}
			_, err = c.Terminate(ctx, sb.ID)
			checkAllowed(t, "terminate", err, row.allowed)
			list, err := c.Sandboxes(ctx, client.ListOptions{All: true})
			if err != nil {
				t.Fatal(err)
			}
			seen := false
			for _, s := range list {
				seen = seen || s.ID == sb.ID
			}
			if seen != row.allowed {
				t.Errorf("list shows the sandbox: %v, want %v", seen, row.allowed)
			}
		})
	}
}

func checkAllowed(t *testing.T, what string, err error, allowed bool) {
	t.Helper()
	status, c := code(err)
	switch {
	case allowed && err != nil:
		t.Errorf("%s: %v, want it allowed", what, err)
	case !allowed && (status != http.StatusNotFound || c != api.CodeNotFound):
		t.Errorf("%s: status %d code %q (%v), want 404 not_found", what, status, c, err)
	}
}

func TestErrorsRoundTrip(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	w.create(t, w.owner, "dev")
	w.create(t, w.member, "dev")

	_, err := w.admin.Sandbox(ctx, "dev")
	var e *api.Error
	if !errors.As(err, &e) || e.Status != http.StatusConflict || e.Code != api.CodeAmbiguous || len(e.IDs) != 2 {
		t.Errorf("administrator resolving a shared name: %v, want 409 ambiguous with two ids", err)
	}
	_, err = w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "Bad_Name", SSHKeys: []string{sshKey}})
	if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Code != api.CodeInvalid || e.Field != "name" {
		t.Errorf("bad name: %v, want 400 invalid naming the field", err)
	}
	_, err = w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "x", Class: "standard", SSHKeys: []string{sshKey}, Env: map[string]string{"BERTH_X": "1"}})
	if !errors.As(err, &e) || e.Code != api.CodeInvalid || e.Field != "env.BERTH_X" {
		t.Errorf("BERTH_ env: %v, want 400 invalid on env.BERTH_X", err)
	}
	if _, err := w.owner.CreateProject(ctx, "acme", "mine"); !errors.As(err, &e) || e.Status != http.StatusForbidden {
		t.Errorf("a member creating a project: %v, want 403", err)
	}
	if _, err := w.foreign.Projects(ctx, "acme"); !errors.As(err, &e) || e.Status != http.StatusNotFound {
		t.Errorf("another organisation's projects: %v, want 404", err)
	}
	bad := client.New(w.url, "berth_0123456789abcdef_WRONGSECRET", nil)
	if _, err := bad.Whoami(ctx); !errors.As(err, &e) || e.Status != http.StatusUnauthorized || e.Code != api.CodeUnauthenticated {
		t.Errorf("a wrong key: %v, want 401 unauthenticated", err)
	}
	if _, err := w.owner.Extend(ctx, "dev", "0s"); !errors.As(err, &e) || e.Code != api.CodeInvalid || e.Field != "ttl" {
		t.Errorf("extend --ttl 0: %v, want 400 invalid on ttl", err)
	}
	// A revoked key stops working at once.
	k, err := w.owner.CreateKey(ctx, api.CreateKey{Name: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	laptop := client.New(w.url, k.Secret, nil)
	if _, err := laptop.Whoami(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.owner.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := laptop.Whoami(ctx); !errors.As(err, &e) || e.Status != http.StatusUnauthorized {
		t.Errorf("a revoked key: %v, want 401", err)
	}
	if err := w.member.RevokeKey(ctx, k.ID); !errors.As(err, &e) || e.Status != http.StatusNotFound {
		t.Errorf("revoking another member's key: %v, want 404", err)
	}
}

func TestSandboxKeyCannotUseTheControlAPI(t *testing.T) {
	w := newWorld(t)
	sb := w.create(t, w.owner, "dev")
	key := w.envOf(t, sb.ID)["BERTH_API_KEY"]
	c := client.New(w.url, key, nil)
	who, err := c.Whoami(t.Context())
	if err != nil || who.Sandbox != sb.ID {
		t.Fatalf("whoami with the sandbox's key: %+v, %v", who, err)
	}
	_, err = c.Sandboxes(t.Context(), client.ListOptions{})
	if s, cd := code(err); s != http.StatusForbidden || cd != api.CodeForbidden {
		t.Errorf("list with a sandbox's key: %v, want 403 forbidden", err)
	}
}

func TestGuardrailIsWrittenWhole(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	ten, mem := 10, api.Memory("32Gi")
	ttl := "8h"
	if _, err := w.admin.SetGuardrail(ctx, "acme", "", api.Guardrail{MaxSandboxes: &ten, MaxSandboxMemory: &mem, MaxSandboxTTL: &ttl}); err != nil {
		t.Fatal(err)
	}
	// An editor that only knows max_sandbox_ttl reads, changes one field, writes back.
	g, err := w.admin.Guardrail(ctx, "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	two := "2h"
	g.MaxSandboxTTL = &two
	g, err = w.admin.SetGuardrail(ctx, "acme", "", g)
	if err != nil {
		t.Fatal(err)
	}
	if g.MaxSandboxes == nil || *g.MaxSandboxes != 10 || g.MaxSandboxMemory == nil || *g.MaxSandboxMemory != "32Gi" || *g.MaxSandboxTTL != "2h" {
		t.Errorf("after a read-modify-write of one field: %+v", g)
	}
	// allowed_repos on the organisation is the operator's.
	g.AllowedRepos = []string{"acme"}
	var e *api.Error
	if _, err := w.admin.SetGuardrail(ctx, "acme", "", g); !errors.As(err, &e) || e.Status != http.StatusForbidden {
		t.Errorf("administrator setting the organisation's allowed_repos: %v, want 403", err)
	}
	if _, err := w.operator.SetGuardrail(ctx, "acme", "", g); err != nil {
		t.Errorf("operator setting allowed_repos: %v", err)
	}
	if _, err := w.admin.SetGuardrail(ctx, "acme", "default", api.Guardrail{AllowedRepos: []string{"acme/app"}}); err != nil {
		t.Errorf("administrator narrowing a project's repositories: %v", err)
	}
	bad := "lots"
	if _, err := w.admin.SetGuardrail(ctx, "acme", "", api.Guardrail{MaxSandboxCPU: &bad}); !errors.As(err, &e) || e.Field != "max_sandbox_cpu" {
		t.Errorf("a bad cpu value: %v, want 400 naming max_sandbox_cpu", err)
	}
}

func TestApplyClassesAllOrNothing(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	file := `sandboxes:
  - name: small
    image: localhost/berth-sandbox:1
    isolation: standard
    cpu: 500m
  - name: broken
    image: localhost/berth-sandbox:1
    memory: lots
`
	var e *api.Error
	if _, err := w.admin.ApplyClasses(ctx, "", strings.NewReader(file)); !errors.As(err, &e) || e.Status != http.StatusBadRequest || !strings.Contains(e.Message, "memory") {
		t.Fatalf("a file with one bad entry: %v, want 400 naming memory", err)
	}
	got, err := w.admin.Classes(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "standard" {
		t.Fatalf("after a refused apply the classes are %v, want only the template's standard", got)
	}
	good := strings.Replace(file, "memory: lots", "memory: 2Gi", 1)
	res, err := w.admin.ApplyClasses(ctx, "", strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Created) != 2 || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "BERTH_SANDBOX_RUNTIME_ISOLATED") {
		t.Errorf("apply: %+v; want two created and a warning that broken's default tier (isolated) is unmapped", res)
	}
	// The image rule: an administrator may not pick an image nobody allowed.
	other := strings.Replace(good, "image: localhost/berth-sandbox:1\n    isolation: standard\n    cpu: 500m", "image: evil.example/miner:1\n    isolation: standard\n    cpu: 500m", 1)
	if _, err := w.admin.ApplyClasses(ctx, "", strings.NewReader(other)); !errors.As(err, &e) || e.Status != http.StatusForbidden || !strings.Contains(e.Message, "evil.example/miner:1") {
		t.Errorf("administrator setting an unlisted image: %v, want 403 naming the image", err)
	}
	if _, err := w.operator.ApplyClasses(ctx, "acme", strings.NewReader(other)); err != nil {
		t.Errorf("operator setting an unlisted image: %v", err)
	}
	if _, err := w.member.ApplyClasses(ctx, "", strings.NewReader(good)); !errors.As(err, &e) || e.Status != http.StatusForbidden {
		t.Errorf("member applying classes: %v, want 403", err)
	}
	if err := w.admin.DeleteClass(ctx, "", "small"); err != nil {
		t.Fatal(err)
	}
	if err := w.admin.DeleteClass(ctx, "", "small"); !errors.As(err, &e) || e.Status != http.StatusNotFound {
		t.Errorf("deleting a deleted class: %v, want 404", err)
	}
}

func TestHealthAndUnknownRoutes(t *testing.T) {
	w := newWorld(t)
	h, err := client.New(w.url, "", nil).Health(t.Context())
	if err != nil || h.Status != "ok" || h.Driver != "fake" {
		t.Errorf("health = %+v, %v", h, err)
	}
	resp, err := http.Get(w.url + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown route: %d", resp.StatusCode)
	}
}
