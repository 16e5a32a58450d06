// Package server is berth's composition root: LoadConfig reads the
// gateway's settings (BERTH_*), Build wires the store, the driver, the
// services and the gateway together, and Serve runs them until told to
// stop. It is the one package that knows every adapter; the cobra commands
// that call it are in cli.
package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentconfig"
	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/driver/kubernetes"
	"berth.dev/berth/internal/driver/podman"
	"berth.dev/berth/internal/egress"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/forge/github"
	"berth.dev/berth/internal/forge/gitlab"
	"berth.dev/berth/internal/forge/local"
	"berth.dev/berth/internal/gateway"
	"berth.dev/berth/internal/githttp"
	"berth.dev/berth/internal/idp"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/metrics"
	"berth.dev/berth/internal/reach"
	"berth.dev/berth/internal/repository"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/secret"
	"berth.dev/berth/internal/sso"
	"berth.dev/berth/internal/store"
	"berth.dev/berth/internal/terminal"
	"berth.dev/berth/internal/trigger"
	"berth.dev/berth/internal/usage"
	"berth.dev/berth/internal/warm"
	"berth.dev/berth/internal/workspace"
)

// Version is berth's version, reported by `berth version` and /healthz.
const Version = "0.1.0-dev"

// App is the gateway wired together: the composition root's product,
// shared by `berth serve` and the admin commands that work on the database
// directly.
type App struct {
	store     *store.Store
	replica   *store.Replica // nil on SQLite
	accounts  *account.Service
	sandboxes *sandbox.Service
	reach     *reach.Service
	warm      *warm.Service
	runs      *agentrun.Service
	classes   *class.Service
	forge     forge.Forge         // nil without one
	repos     *repository.Service // how sandboxes reach their repositories
	mirrors   *githttp.Mirrors    // of a remote forge; nil for the local one
	usage     *usage.Service
	metrics   *metrics.Metrics
	registry  *prometheus.Registry
	log       *slog.Logger
	inference *inference.Service // nil when the gateway serves no models
	scripted  http.Handler       // the scripted provider's server; nil without one
	terminal  *terminal.CA       // the panel's terminal; nil without a driver
	secrets   egressSecrets      // projects' secrets, by placeholder
	agentCfg  *agentconfig.Service
	triggers  *trigger.Service
	sso       *sso.Service // signing in through the identity provider
}

// Base is Build's first phase: the store and the account service. It
// makes no driver, forge or model service, so what needs the accounts
// alone (berth admin bootstrap) touches nothing else: no podman file is
// written, no cluster reached.
type Base struct {
	store    *store.Store
	accounts *account.Service
}

// Open is Build's first phase: it opens the store and makes the account
// service. Each new organisation gets its copies of the template classes
// (BERTH_SANDBOXES_FILE) through the store, by a hook that needs no
// sandbox service.
func Open(ctx context.Context, cfg Config, log *slog.Logger) (*Base, error) {
	st, err := store.Open(ctx, cfg.DatabaseURL, store.WithWriteWait(cfg.WriteWait))
	if err != nil {
		return nil, fmt.Errorf("BERTH_DATABASE_URL: %w", err)
	}
	seed := class.Seeder(st, cfg.Classes)
	return &Base{store: st, accounts: account.NewService(st, st, time.Now, seed, st, log)}, nil
}

// Close closes the store.
func (b *Base) Close() error { return b.store.Close() }

// Option changes what Build makes, for tests; no setting reaches one.
type Option func(*options)

type options struct {
	minTTL  time.Duration // 0: class.MinTTL
	serving func()        // nil: none
}

// OnServing has Serve call f once the gateway listens, after everything
// it needs (the data directory among them) is in place.
func OnServing(f func()) Option { return func(o *options) { o.serving = f } }

// WithMinTTL lowers the shortest lifetime a sandbox may ask for (5m), so
// a test can watch sandboxes expire in seconds.
func WithMinTTL(d time.Duration) Option { return func(o *options) { o.minTTL = d } }

// Build opens the store and makes the account service (Open), then picks
// the driver and makes the other services, in that order. It is the one
// place that knows every adapter.
func Build(ctx context.Context, cfg Config, log *slog.Logger, opts ...Option) (*App, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	b, err := Open(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	a, err := b.build(ctx, cfg, log, o)
	if err != nil {
		b.Close()
		return nil, err
	}
	return a, nil
}

// build is Build's second phase, on the store and accounts of the first.
func (b *Base) build(ctx context.Context, cfg Config, log *slog.Logger, o options) (*App, error) {
	st, accounts := b.store, b.accounts
	var (
		drv sandbox.Driver
		err error
	)
	switch cfg.Driver {
	case "fake":
		drv = newDevDriver()
	case "podman":
		pc := PodmanConfig(cfg)
		if pc.Deployment, err = st.DeploymentID(ctx); err != nil {
			return nil, err
		}
		pd, err := podman.New(pc, log)
		if err != nil {
			return nil, fmt.Errorf("BERTH_SANDBOX_DRIVER=podman: %w", err)
		}
		drv = pd
	case "kubernetes":
		kd, err := kubernetesDriver(ctx, cfg, st, log)
		if err != nil {
			return nil, err
		}
		drv = kd
	case "":
	default:
		return nil, fmt.Errorf("BERTH_SANDBOX_DRIVER: %s is not built into this version", cfg.Driver)
	}
	fg, err := buildForge(cfg, st)
	if err != nil {
		return nil, err
	}
	// The registry is this gateway's own, never Prometheus's global one.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := metrics.New(reg, st)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mirrors := mirrorsFor(cfg, fg)
	var work agentrun.Workspaces
	if fg != nil && cfg.Driver != "" {
		work = workspacesFor(cfg, fg, mirrors)
	}
	models, scripted, sbOpts, err := buildInference(cfg, st, accounts, log)
	if err != nil {
		return nil, err
	}
	agentCfg := agentconfig.NewService(st, accounts, time.Now)
	runOpts := []agentrun.Option{agentrun.WithAgentConfigs(agentCfg)}
	if models != nil {
		runOpts = append(runOpts, agentrun.WithModels(models), agentrun.WithSessionMeter(st))
	}
	// Replicas on one PostgreSQL database elect the sweep's leader and
	// hold what each serves; SQLite has one gateway, which always sweeps.
	replica, err := st.Replica(ctx, log)
	if err != nil {
		return nil, fmt.Errorf("BERTH_DATABASE_URL: %w", err)
	}
	secrets, err := buildSecrets(cfg, st, accounts, models)
	if err != nil {
		return nil, err
	}
	sbOpts = append(sbOpts, sandbox.WithSecretEnv(secrets.service))
	if replica != nil {
		sbOpts = append(sbOpts, sandbox.WithReplicas(replica))
		runOpts = append(runOpts, agentrun.WithReplicas(replica))
	}
	// The panel's terminal signs in to sandboxes' sshd with certificates
	// of its CA, which every engineer sandbox trusts for itself alone.
	var term *terminal.CA
	var gatewayKey func(sandbox.ID) string
	if drv != nil {
		if term, err = terminal.LoadCA(cfg.TerminalCA); err != nil {
			return nil, fmt.Errorf("BERTH_TERMINAL_CA_FILE: %w", err)
		}
		gatewayKey = func(id sandbox.ID) string { return term.AuthorizedKey(string(id)) }
	}
	repos := repository.New(st, accounts, repository.Config{Forge: fg, PublicURL: cfg.SandboxPublicURL, Audit: st}, log, time.Now)
	var reposOf sandbox.Repositories // nil: sandboxes cannot have a repository
	if fg != nil {
		reposOf = repos
	}
	sandboxes := sandbox.NewService(st, drv, accounts, sandbox.Config{
		Driver:       cfg.Driver,
		Runtimes:     cfg.Runtimes,
		Repositories: reposOf,
		PublicURL:    cfg.SandboxPublicURL,
		GatewayKey:   gatewayKey,
		MinTTL:       o.minTTL,
		IdleSuspend:  cfg.IdleSuspend,
		Audit:        st,
		Retention:    cfg.UsageRetention,
		Metrics:      m,
		AgentRunner:  cfg.AgentRunner,
	}, log, time.Now, sbOpts...)
	runs := agentrun.NewService(st, sandboxes, drv, accounts, agentrun.Config{
		Driver:     cfg.Driver,
		PublicURL:  cfg.SandboxPublicURL,
		Workspaces: work,
		Pushes:     repos,
		Images:     cfg.RunnerImages,
		Runner:     cfg.AgentRunner,
		Model:      cfg.AgentModel,
		Network:    cfg.AgentNetwork,
		LogDir:     filepath.Join(cfg.DataDir, "runs"),
		Logs:       runLogs(st, cfg),
		Prices:     agentPrices(cfg),
	}, log, time.Now, runOpts...)
	if work != nil {
		sandboxes.SetRuns(runs) // agent sandboxes run their runner (SPEC S13)
	}
	triggers, err := buildTriggers(cfg, st, accounts, repos, sandboxes, fg, secrets, log)
	if err != nil {
		return nil, err
	}
	runs.SetReports(triggers)
	triggers.SetSettings(agentCfg)
	// The way in (SPEC S10): the tunnel's connections feed the idle clock.
	rcfg := reach.Config{Driver: cfg.Driver, Audit: st}
	if r, ok := drv.(reach.Reacher); ok {
		rcfg.Reacher = r
	}
	if replica != nil {
		rcfg.Holds = replica
	}
	way := reach.NewService(sandboxes, st, rcfg, log, time.Now)
	sandboxes.SetActivity(way)
	// Warm pools (SPEC S12): the classes' pools, when the driver keeps them.
	var pools warm.Pools
	if p, ok := drv.(warm.Pools); ok {
		pools = p
	}
	warmth := warm.NewService(st, sandboxes, pools, warm.Config{On: cfg.Warm, Runtimes: cfg.Runtimes}, log, time.Now)
	sandboxes.SetWarm(warmth)
	classes := class.NewService(st, accounts, warmth, class.Config{Template: cfg.Classes, AllowedImages: cfg.Images,
		Runtimes: cfg.Runtimes, NoSandboxes: drv == nil}, log, time.Now)
	reports := usage.NewService(st, accounts, sandboxes, cfg.UsageRetention, time.Now)
	signins, err := buildSSO(ctx, cfg, st, sandboxes, replica, log)
	if err != nil {
		return nil, err
	}
	return &App{sso: signins, store: st, replica: replica, accounts: accounts, sandboxes: sandboxes, reach: way, warm: warmth, classes: classes, runs: runs, usage: reports, metrics: m, registry: reg, forge: fg, repos: repos, mirrors: mirrors, log: log,
		inference: models, scripted: scripted, terminal: term, secrets: secrets, agentCfg: agentCfg, triggers: triggers}, nil
}

// buildSSO makes the sign-in service: with BERTH_OIDC_ISSUER, the
// provider is discovered now (a provider that cannot be reached stops the
// start, naming it); without, the service signs nobody in but keeps the
// organisations' mappings.
func buildSSO(ctx context.Context, cfg Config, st *store.Store, sandboxes *sandbox.Service, replica *store.Replica, log *slog.Logger) (*sso.Service, error) {
	sc := sso.Config{KeyTTL: cfg.OIDC.KeyTTL, RefreshEvery: cfg.OIDC.RefreshEvery, Operators: cfg.OIDC.Operators, Start: ssoCLIStart}
	if cfg.OIDC.Issuer != "" {
		p, err := idp.New(ctx, idp.Config{Issuer: cfg.OIDC.Issuer, ClientID: cfg.OIDC.ClientID, ClientSecret: cfg.OIDC.ClientSecret,
			Scopes: cfg.OIDC.Scopes, RedirectURL: strings.TrimSuffix(cfg.PublicURL, "/") + ssoCallback, GroupsClaim: cfg.OIDC.GroupsClaim}, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("BERTH_OIDC_ISSUER: %w", err)
		}
		sc.Provider, sc.ClientSecret = p, cfg.OIDC.ClientSecret
	}
	var opts []sso.Option
	if replica != nil {
		opts = append(opts, sso.WithLeader(replica.Lead))
	}
	var ends sso.Sandboxes
	if cfg.Driver != "" {
		ends = sandboxes
	}
	return sso.New(sc, st, ends, st, log, time.Now, opts...)
}

// The panel's pages of a sign-in through the identity provider.
const (
	ssoCLIStart = "/sign-in/sso/cli"
	ssoCallback = "/sign-in/sso/callback"
)

// runLogs keeps runs' logs in the database when replicas share it, so any
// replica answers `sandbox logs` for a run another one read; on SQLite
// (one gateway) they are files in the data directory.
func runLogs(st *store.Store, cfg Config) agentrun.RunLogs {
	if st.Shared() {
		return st.RunLogs()
	}
	return agentrun.FileLogs{Dir: filepath.Join(cfg.DataDir, "runs")}
}

// buildForge makes the deployment's forge (BERTH_SANDBOX_GIT_FORGE); nil
// when none is configured.
func buildForge(cfg Config, st *store.Store) (forge.Forge, error) {
	switch cfg.Forge {
	case "":
		return nil, nil
	case "local":
		return local.New(cfg.LocalRepos, cfg.SandboxPublicURL, st, time.Now), nil
	case "github":
		key, err := os.ReadFile(cfg.GitAppKey)
		if err != nil {
			return nil, fmt.Errorf("BERTH_SANDBOX_GIT_APP_KEY_FILE: %w", err)
		}
		gh, err := github.New(github.Config{URL: cfg.GitURL, AppID: cfg.GitAppID, Key: secret.New(string(key))}, &http.Client{Timeout: 30 * time.Second}, time.Now)
		if err != nil {
			return nil, fmt.Errorf("BERTH_SANDBOX_GIT_FORGE=github: %w", err)
		}
		return gh, nil
	case "gitlab":
		token, err := os.ReadFile(cfg.GitTokenFn)
		if err != nil {
			return nil, fmt.Errorf("BERTH_SANDBOX_GIT_TOKEN_FILE: %w", err)
		}
		gl, err := gitlab.New(gitlab.Config{URL: cfg.GitURL, Token: secret.New(string(token))}, &http.Client{Timeout: 30 * time.Second}, time.Now)
		if err != nil {
			return nil, fmt.Errorf("BERTH_SANDBOX_GIT_FORGE=gitlab: %w", err)
		}
		return gl, nil
	}
	return nil, fmt.Errorf("BERTH_SANDBOX_GIT_FORGE: unknown forge %q", cfg.Forge)
}

// mirrorsFor keeps the gateway's mirrors of a remote forge's repositories
// in the data directory; the local forge needs none.
func mirrorsFor(cfg Config, fg forge.Forge) *githttp.Mirrors {
	if fg == nil || fg.Kind() == "local" {
		return nil
	}
	return githttp.NewMirrors(filepath.Join(cfg.DataDir, "mirrors"), fg, 0, time.Now)
}

// workspacesFor keeps agent runs' checkouts in the data directory, cloned
// from the local forge's repositories or the remote forge's mirrors.
func workspacesFor(cfg Config, fg forge.Forge, mirrors *githttp.Mirrors) *workspace.Workspaces {
	uid := -1 // the fake driver runs nothing
	if cfg.Driver == "podman" {
		uid = podman.SandboxUID
	}
	var src workspace.Source
	if lf, ok := fg.(*local.Forge); ok {
		src = workspace.Local{Forge: lf}
	} else {
		src = workspace.Mirrored{Mirrors: mirrors}
	}
	return workspace.New(filepath.Join(cfg.DataDir, "work"), uid, fg, src)
}

// Serve builds the gateway (Build, with opts) and runs the HTTP server and
// the sandbox service's background work until ctx is done, then shuts both
// down and returns. It logs to log.
func Serve(ctx context.Context, cfg Config, log *slog.Logger, opts ...Option) error {
	a, err := Build(ctx, cfg, log, opts...)
	if err != nil {
		return err
	}
	defer a.store.Close()
	if a.replica != nil {
		// Closed before the store, so the lead and the holds end with the
		// gateway rather than when the pool gets round to it.
		defer a.replica.Close()
	}
	if cfg.Driver == "fake" {
		log.Warn("BERTH_SANDBOX_DRIVER=fake is a development driver: it runs and isolates nothing, and forgets its machines when the gateway stops")
	}
	if cfg.Driver == "kubernetes" && cfg.Namespace == "" {
		log.Warn("BERTH_SANDBOX_NAMESPACE is unset: sandboxes go in the default namespace; give them their own, with the NetworkPolicy of deploy/")
	}
	if cfg.Warm && cfg.Driver != "kubernetes" && cfg.Driver != "podman" {
		log.Warn("BERTH_SANDBOX_WARM=on does nothing here: only the podman and kubernetes drivers keep warm pools", "driver", cfg.Driver)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("BERTH_ADDR: %w", err)
	}
	gw := gateway.New(gateway.Options{Audit: a.store, Accounts: a.accounts, Sandboxes: a.sandboxes, Reach: a.reach, Warm: a.warm, Classes: a.classes, Runs: a.runs, Usage: a.usage, Log: log, Version: Version, Commit: Commit(), Driver: cfg.Driver,
		Forge: a.forge, Repositories: a.repos, Mirrors: gatewayMirrors(a.mirrors), Meter: a.metrics, Inference: a.inference, Scripted: a.scripted,
		Terminal: a.terminal, PublicURL: cfg.PublicURL, PreviewDomain: cfg.PreviewDomain, SSO: a.sso, NoKeySignIn: !cfg.KeySignIn,
		EgressConnectTo: cfg.EgressConnectTo, EgressHosts: cfg.EgressHosts, Egress: egress.NewLedger(a.store, log), Freezer: a.store,
		Secrets: a.secrets.service, Issuer: a.secrets.issuer, UpstreamRoots: a.secrets.roots,
		CoreHour: usage.CoreHour(cfg.CoreHourUSD), AgentConfigs: a.agentCfg, Triggers: a.triggers,
		Metrics: promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{
			ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
			ErrorHandling: promhttp.ContinueOnError, // a failed count still serves the rest
		})})
	if a.runs != nil {
		a.runs.SetLearning(gw)
	}
	a.triggers.SetResults(gw.Results())
	srv := &http.Server{
		Handler:           gw.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(gw.StopStreams)
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.serving != nil {
		o.serving()
	}
	log.Info("berth is serving", "addr", ln.Addr().String(), "public_url", cfg.PublicURL,
		"driver", cfg.Driver, "data_dir", cfg.DataDir, "version", Version)

	// The sandbox service's background work runs until the very end: a
	// signal (ctx) first stops what takes new work, then lets what is in
	// flight finish (drain).
	// It is not cancelled on the way out unless drain says so: cancelling
	// it kills the starts' podman processes, which a gateway that exits
	// without waiting leaves to finish, as a crash does.
	run := goBackground(ctx, func(ctx context.Context) { a.sandboxes.Run(ctx, cfg.SweepInterval) })
	var leases *background
	if a.inference != nil {
		// Renews the budgets' leases of replicas until the model requests
		// have drained: a lease expires 30 s after its last renewal.
		leases = goBackground(ctx, a.inference.Run)
	}
	// Sign-ins are refreshed at the identity provider until the signal.
	go a.sso.Run(ctx)
	// Runs' reports to their forge that no replica made when the run
	// ended are made here (each is claimed: replicas may all look).
	go a.triggers.Run(ctx, cfg.SweepInterval)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served: // the listener failed
		leases.halt()
		run.halt()
		return err
	case <-ctx.Done():
	}
	return drain(log, cfg.ShutdownGrace, srv, gw, a.sandboxes, run, leases)
}

// background is work serve runs beside the HTTP server until drain halts
// it: its context outlives serve's, so that a signal does not stop it.
type background struct {
	stop context.CancelFunc
	done chan struct{}
}

// goBackground runs work in a goroutine with a context that keeps ctx's
// values but not its cancellation.
func goBackground(ctx context.Context, work func(context.Context)) *background {
	ctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	b := &background{stop: stop, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		work(ctx)
	}()
	return b
}

// halt cancels the work and waits for it to return; a nil b has none.
func (b *background) halt() {
	if b == nil {
		return
	}
	b.stop()
	<-b.done
}

// drain is a graceful stop, bounded by grace: the listener closes (no new
// request, no new tunnel), the requests in flight end (leases, the
// budgets' leases, renewed until then: a model request in flight reserves
// against them; then given back), then the sandbox starts in flight (a create that answered 201 is running when the
// gateway exits), then the open tunnels close, last. Should grace run out
// (or a second signal come: cmd/berth exits at once then), the gateway
// exits without waiting, leaving what a crash leaves: the starts' podman
// processes finish on their own, and the next gateway's start-up sweep
// finishes the rest.
func drain(log *slog.Logger, grace time.Duration, srv *http.Server, gw *gateway.Server, sandboxes *sandbox.Service,
	run, leases *background) error {
	began := time.Now()
	log.Info("berth is stopping: finishing the requests and starts in flight", "grace", grace, "starts", sandboxes.InFlight())
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	httpErr := srv.Shutdown(ctx)
	leases.halt() // after the model requests, or a lease could expire under one
	defer gw.StopEgress()
	if err := sandboxes.Shutdown(ctx); err != nil {
		gw.CloseTunnels()
		log.Warn("berth stopped before every start finished; the next start-up sweep finishes them", "err", err, "took", time.Since(began))
		return fmt.Errorf("stopping: %w", err)
	}
	gw.CloseTunnels() // the connections Shutdown does not know of
	run.halt()        // agent runs' followers: the next gateway follows them again
	if httpErr != nil {
		log.Warn("berth stopped before every request ended", "err", httpErr, "took", time.Since(began))
		return fmt.Errorf("stopping: requests still in flight: %w", httpErr)
	}
	log.Info("berth stopped", "took", time.Since(began))
	return nil
}

// agentPrices prices agent runs: the models of BERTH_INFERENCE_FILE at
// their prices there, and the vendors' list prices for the rest.
func agentPrices(cfg Config) runner.Prices {
	prices := runner.ListPrices()
	if cfg.Models != nil {
		maps.Copy(prices, cfg.Models.Prices())
	}
	return prices
}

// gatewayMirrors keeps a nil pointer a nil interface.
func gatewayMirrors(m *githttp.Mirrors) gateway.Mirrors {
	if m == nil {
		return nil
	}
	return m
}

// NewLogger is the gateway's log: JSON, or text when w is a terminal.
func NewLogger(w io.Writer, level string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			return slog.New(slog.NewTextHandler(w, opts))
		}
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// PodmanConfig is the podman driver's share of the settings. Its state
// (containers.conf, storage.conf and podman's store, where the sandbox
// images are built) lives in the data directory.
func PodmanConfig(cfg Config) podman.Config {
	rts := map[string]string{}
	for _, rt := range cfg.Runtimes {
		if strings.Contains(rt, "/") {
			rts[podman.RuntimeName(rt)] = rt
		}
	}
	return podman.Config{
		Binary:       cfg.PodmanBinary,
		StateDir:     cfg.PodmanRoot,
		Network:      cfg.PodmanNetwork,
		AgentNetwork: cfg.PodmanAgentNet,
		Runtimes:     rts,
		PublicURL:    cfg.SandboxPublicURL,
		// The gateway's own: another gateway on the same podman root
		// (a test's, a replica's) must not take its sockets over.
		HandoffDir: filepath.Join(cfg.DataDir, "handoff"),
		Standby:    cfg.PodmanStandby,
	}
}

// kubernetesDriver connects to the cluster (KUBECONFIG, else the pod's
// own service account) and makes the kubernetes driver. Its objects carry
// the deployment's id, so two gateways can share a namespace.
func kubernetesDriver(ctx context.Context, cfg Config, st *store.Store, log *slog.Logger) (*kubernetes.Driver, error) {
	var (
		rc  *rest.Config
		err error
	)
	if cfg.Kubeconfig != "" {
		if rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig); err != nil {
			return nil, fmt.Errorf("KUBECONFIG: %w", err)
		}
	} else if rc, err = rest.InClusterConfig(); err != nil {
		return nil, fmt.Errorf("BERTH_SANDBOX_DRIVER=kubernetes: not in a cluster and KUBECONFIG is unset: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("BERTH_SANDBOX_DRIVER=kubernetes: %w", err)
	}
	dep, err := st.DeploymentID(ctx)
	if err != nil {
		return nil, err
	}
	return kubernetes.New(kubernetes.Config{
		Namespace: cfg.Namespace, Deployment: dep, StorageClass: cfg.StorageClass, ServiceAccount: cfg.ServiceAccount,
		ImagePullSecrets: cfg.ImagePullSecrets, PublicURL: cfg.SandboxPublicURL, InitImage: cfg.InitImage,
	}, dyn, log), nil
}
