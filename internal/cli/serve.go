package cli

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
	"github.com/spf13/cobra"

	"berth.dev/berth/internal/account"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/driver/kubernetes"
	"berth.dev/berth/internal/driver/podman"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/gateway"
	"berth.dev/berth/internal/githttp"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/metrics"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/secret"
	"berth.dev/berth/internal/store"
	"berth.dev/berth/internal/usage"
	"berth.dev/berth/internal/workspace"
)

// app is the gateway wired together: the composition root's product,
// shared by `berth serve` and the admin commands that work on the database
// directly.
type app struct {
	store     *store.Store
	replica   *store.Replica // nil on SQLite
	accounts  *account.Service
	sandboxes *sandbox.Service
	classes   *class.Service
	forge     forge.Forge      // nil without one
	mirrors   *githttp.Mirrors // of a remote forge; nil for the local one
	usage     *usage.Service
	metrics   *metrics.Metrics
	registry  *prometheus.Registry
	log       *slog.Logger
	inference *inference.Service // nil when the gateway serves no models
	scripted  http.Handler       // the scripted provider's server; nil without one
}

// build opens the store, picks the driver and makes the services, in that
// order. It is the one place that knows every adapter.
func build(ctx context.Context, cfg Config, log *slog.Logger) (*app, error) {
	st, err := store.Open(ctx, cfg.DatabaseURL, store.WithWriteWait(cfg.WriteWait))
	if err != nil {
		return nil, fmt.Errorf("BERTH_DATABASE_URL: %w", err)
	}
	var drv sandbox.Driver
	switch cfg.Driver {
	case "fake":
		drv = fake.New()
	case "podman":
		pc := podmanConfig(cfg)
		if pc.Deployment, err = st.DeploymentID(ctx); err != nil {
			st.Close()
			return nil, err
		}
		pd, err := podman.New(pc, log)
		if err != nil {
			st.Close()
			return nil, fmt.Errorf("BERTH_SANDBOX_DRIVER=podman: %w", err)
		}
		drv = pd
	case "kubernetes":
		kd, err := kubernetesDriver(ctx, cfg, st, log)
		if err != nil {
			st.Close()
			return nil, err
		}
		drv = kd
	case "":
	default:
		st.Close()
		return nil, fmt.Errorf("BERTH_SANDBOX_DRIVER: %s is not built into this version", cfg.Driver)
	}
	fg, err := buildForge(cfg, st)
	if err != nil {
		st.Close()
		return nil, err
	}
	// The registry is this gateway's own, never Prometheus's global one.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := metrics.New(reg, st)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mirrors := mirrorsFor(cfg, fg)
	var work sandbox.Workspaces
	if fg != nil && cfg.Driver != "" {
		work = workspacesFor(cfg, fg, mirrors)
	}
	var classes *class.Service
	seed := func(ctx context.Context, org string) error { return classes.Seed(ctx, org) }
	accounts := account.NewService(st, st, time.Now, seed, st, log)
	models, scripted, sbOpts, err := buildInference(cfg, st, accounts, log)
	if err != nil {
		st.Close()
		return nil, err
	}
	// Replicas on one PostgreSQL database elect the sweep's leader and
	// hold what each serves; SQLite has one gateway, which always sweeps.
	replica, err := st.Replica(ctx, log)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("BERTH_DATABASE_URL: %w", err)
	}
	if replica != nil {
		sbOpts = append(sbOpts, sandbox.WithReplicas(replica))
	}
	sandboxes := sandbox.NewService(st, drv, accounts, sandbox.Config{
		Driver:      cfg.Driver,
		Runtimes:    cfg.Runtimes,
		Forge:       fg,
		PublicURL:   cfg.SandboxPublicURL,
		MinTTL:      cfg.MinTTL,
		IdleSuspend: cfg.IdleSuspend,
		Audit:       st,
		Retention:   cfg.UsageRetention,
		Metrics:     m,
		Workspaces:  work,
		Warm:        cfg.Warm,
		Agents: sandbox.AgentConfig{
			Images:  cfg.RunnerImages,
			Runner:  cfg.AgentRunner,
			Model:   cfg.AgentModel,
			Network: cfg.AgentNetwork,
			LogDir:  filepath.Join(cfg.DataDir, "runs"),
			Logs:    runLogs(st, cfg),
			Prices:  agentPrices(cfg),
		},
	}, log, time.Now, sbOpts...)
	classes = class.NewService(st, accounts, sandboxes, class.Config{Template: cfg.Classes, AllowedImages: cfg.Images,
		Runtimes: cfg.Runtimes, NoSandboxes: drv == nil}, log, time.Now)
	reports := usage.NewService(st, accounts, sandboxes, cfg.UsageRetention, time.Now)
	return &app{store: st, replica: replica, accounts: accounts, sandboxes: sandboxes, classes: classes, usage: reports, metrics: m, registry: reg, forge: fg, mirrors: mirrors, log: log,
		inference: models, scripted: scripted}, nil
}

// runLogs keeps runs' logs in the database when replicas share it, so any
// replica answers `sandbox logs` for a run another one read; on SQLite
// (one gateway) they are files in the data directory.
func runLogs(st *store.Store, cfg Config) sandbox.RunLogs {
	if st.Shared() {
		return st.RunLogs()
	}
	return sandbox.FileLogs{Dir: filepath.Join(cfg.DataDir, "runs")}
}

// buildForge makes the deployment's forge (BERTH_SANDBOX_GIT_FORGE); nil
// when none is configured.
func buildForge(cfg Config, st *store.Store) (forge.Forge, error) {
	switch cfg.Forge {
	case "":
		return nil, nil
	case "local":
		return forge.NewLocal(cfg.LocalRepos, cfg.SandboxPublicURL, st, time.Now), nil
	case "github":
		key, err := os.ReadFile(cfg.GitAppKey)
		if err != nil {
			return nil, fmt.Errorf("BERTH_SANDBOX_GIT_APP_KEY_FILE: %w", err)
		}
		gh, err := forge.NewGitHub(forge.GitHubConfig{URL: cfg.GitURL, AppID: cfg.GitAppID, Key: secret.New(string(key))}, &http.Client{Timeout: 30 * time.Second}, time.Now)
		if err != nil {
			return nil, fmt.Errorf("BERTH_SANDBOX_GIT_FORGE=github: %w", err)
		}
		return gh, nil
	case "gitlab":
		token, err := os.ReadFile(cfg.GitTokenFn)
		if err != nil {
			return nil, fmt.Errorf("BERTH_SANDBOX_GIT_TOKEN_FILE: %w", err)
		}
		gl, err := forge.NewGitLab(forge.GitLabConfig{URL: cfg.GitURL, Token: secret.New(string(token))}, &http.Client{Timeout: 30 * time.Second}, time.Now)
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
	if local, ok := fg.(*forge.Local); ok {
		src = workspace.Local{Forge: local}
	} else {
		src = workspace.Mirrored{Mirrors: mirrors}
	}
	return workspace.New(filepath.Join(cfg.DataDir, "work"), uid, fg, src)
}

func newServeCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run the gateway",
		Long: `Run the gateway: the API, the sandbox driver and the sweep.

It reads its settings from BERTH_* environment variables once, and refuses
to start, naming the setting, when one is wrong.

` + settingsHelp,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := LoadConfig(env.Getenv)
			if err != nil {
				return fmt.Errorf("refusing to start:\n%w", err)
			}
			return serve(cmd.Context(), cfg, env)
		},
	}
}

// serve runs the HTTP server and the sandbox service's background work
// until ctx is done, then shuts both down and returns.
func serve(ctx context.Context, cfg Config, env Env) error {
	log := newLogger(env.Stderr, cfg.LogLevel)
	a, err := build(ctx, cfg, log)
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
	if cfg.Warm && cfg.Driver != "kubernetes" {
		log.Warn("BERTH_SANDBOX_WARM=on does nothing here: only the kubernetes driver keeps warm pools", "driver", cfg.Driver)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("BERTH_ADDR: %w", err)
	}
	gw := gateway.New(gateway.Options{Accounts: a.accounts, Sandboxes: a.sandboxes, Classes: a.classes, Usage: a.usage, Log: log, Version: Version, Driver: cfg.Driver,
		Forge: a.forge, Mirrors: gatewayMirrors(a.mirrors), Meter: a.metrics, Inference: a.inference, Scripted: a.scripted,
		Metrics: promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{
			ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
			ErrorHandling: promhttp.ContinueOnError, // a failed count still serves the rest
		})})
	srv := &http.Server{
		Handler:           gw.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(gw.StopStreams)
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

// newLogger logs JSON, or text when w is a terminal.
func newLogger(w io.Writer, level string) *slog.Logger {
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

// podmanConfig is the podman driver's share of the settings. Its state
// (containers.conf, storage.conf and podman's store, where the sandbox
// images are built) lives in the data directory.
func podmanConfig(cfg Config) podman.Config {
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
		ImagePullSecrets: cfg.ImagePullSecrets, PublicURL: cfg.SandboxPublicURL,
	}, dyn, log), nil
}
