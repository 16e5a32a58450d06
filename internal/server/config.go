package server

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/egress/proxy"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/secret"
	"berth.dev/berth/internal/sso"
	"berth.dev/berth/internal/store"
)

// Config is what `berth serve` reads at start-up (SPEC S16). Each field
// names the setting it comes from.
type Config struct {
	Addr        string // BERTH_ADDR, default ":8080"
	DataDir     string // BERTH_DATA_DIR, default ~/.local/share/berth
	DatabaseURL string // BERTH_DATABASE_URL, default an SQLite file in DataDir
	PublicURL   string // BERTH_PUBLIC_URL, default http://localhost<port>
	LogLevel    string // BERTH_LOG_LEVEL: debug, info (default), warn, error

	// WriteWait is BERTH_DATABASE_WRITE_WAIT (SQLite): how long a request
	// that starts something new waits for its turn to write before it is
	// answered 503 busy; default store.DefaultWriteWait.
	WriteWait time.Duration

	Driver           string                  // BERTH_SANDBOX_DRIVER: "", fake, podman, kubernetes
	SandboxesFile    string                  // BERTH_SANDBOXES_FILE
	Classes          []class.Class           // the file, parsed
	Images           []string                // BERTH_SANDBOX_IMAGES
	Runtimes         map[sandbox.Tier]string // BERTH_SANDBOX_RUNTIME_STANDARD|ISOLATED|VM
	SandboxPublicURL string                  // BERTH_SANDBOX_PUBLIC_URL, default PublicURL
	IdleSuspend      time.Duration           // BERTH_SANDBOX_IDLE_SUSPEND; 0 is off
	Namespace        string                  // BERTH_SANDBOX_NAMESPACE
	StorageClass     string                  // BERTH_SANDBOX_STORAGE_CLASS
	ServiceAccount   string                  // BERTH_SANDBOX_SERVICE_ACCOUNT
	ImagePullSecrets []string                // BERTH_SANDBOX_IMAGE_PULL_SECRETS
	InitImage        string                  // BERTH_SANDBOX_INIT_IMAGE; "" is kubernetes.DefaultInitImage
	Warm             bool                    // BERTH_SANDBOX_WARM
	// Kubeconfig is KUBECONFIG: the kubernetes driver's cluster when the
	// gateway runs outside it; "" is the in-cluster service account.
	Kubeconfig     string
	PodmanBinary   string        // BERTH_SANDBOX_PODMAN_BINARY, default podman
	PodmanNetwork  string        // BERTH_SANDBOX_PODMAN_NETWORK
	PodmanAgentNet string        // BERTH_SANDBOX_PODMAN_AGENT_NETWORK, default berth-agents
	PodmanRoot     string        // BERTH_SANDBOX_PODMAN_ROOT, default DataDir/podman
	PodmanStandby  time.Duration // BERTH_SANDBOX_PODMAN_STANDBY, default 24h; 0 keeps none
	// TerminalCA is the panel terminal's SSH certificate authority, made
	// there at first start (BERTH_TERMINAL_CA_FILE, default
	// DataDir/terminal_ca); replicas must share it.
	TerminalCA string

	Forge     string // BERTH_SANDBOX_GIT_FORGE: "", local, github, gitlab
	GitURL    string // BERTH_SANDBOX_GIT_URL
	GitAppID  string // BERTH_SANDBOX_GIT_APP_ID
	GitAppKey string // BERTH_SANDBOX_GIT_APP_KEY_FILE
	// GitHookSecret is BERTH_SANDBOX_GIT_WEBHOOK_SECRET_FILE: the file of
	// the GitHub App's webhook secret; "" refuses its deliveries.
	GitHookSecret string
	GitTokenFn    string // BERTH_SANDBOX_GIT_TOKEN_FILE
	// LocalRepos is the local forge's directory of bare repositories:
	// BERTH_SANDBOX_GIT_URL when the forge is local (an absolute path),
	// default DataDir/repos.
	LocalRepos string

	// RunnerImages maps each agent runner to its image (BERTH_RUNNER_IMAGES,
	// runner=image pairs); a runner without one is refused (SPEC S13).
	RunnerImages map[string]string
	AgentRunner  string // BERTH_AGENT_RUNNER: the runner of a run that names none
	AgentModel   string // BERTH_AGENT_MODEL: the model runs start on where it fits the runner; "" the first that does
	AgentNetwork string // BERTH_AGENT_NETWORK: allowlist (default) or open
	// InferenceFile is BERTH_INFERENCE_FILE: the model providers and
	// models the gateway serves (SPEC S14); unset serves none. Models is
	// the file, validated, with each provider's credential read from the
	// variable the file names.
	InferenceFile string
	Models        *inference.Catalog

	UsageRetention time.Duration // BERTH_USAGE_RETENTION, default 90d
	SweepInterval  time.Duration // BERTH_SWEEP_INTERVAL, default 30s
	// ShutdownGrace is BERTH_SHUTDOWN_GRACE: how long a gateway told to
	// stop (SIGTERM, SIGINT) waits for the requests and sandbox starts in
	// flight before it exits anyway; default 1m.
	ShutdownGrace time.Duration
	// PreviewDomain is BERTH_PREVIEW_DOMAIN: the domain whose names
	// p<port>-<sandbox id>.<domain> are the HTTP previews of sandboxes'
	// ports (a wildcard DNS name and certificate at the gateway); "" is
	// no previews.
	PreviewDomain string

	// OIDC is signing in through the organisation's identity provider
	// (BERTH_OIDC_*); its Issuer "" is none.
	OIDC OIDC
	// KeySignIn is BERTH_PANEL_KEY_SIGNIN: the panel's sign-in form that
	// takes an API key (default on; off only with an identity provider).
	KeySignIn bool

	// EgressConnectTo is BERTH_EGRESS_CONNECT_TO: names the egress proxy
	// reaches at another address (a mirror; a test's server on loopback).
	EgressConnectTo map[string]string
	// EgressHosts is BERTH_EGRESS_RESOLVE: names the egress proxy resolves
	// from the setting before DNS.
	EgressHosts map[string][]netip.Addr
	// SecretsKey is BERTH_SECRETS_KEY_FILE: the key projects' secrets are
	// sealed with (default DataDir/secrets_key, made at first start);
	// replicas must share it.
	SecretsKey string
	// EgressCA is BERTH_EGRESS_CA_FILE: the authority whose certificates
	// the egress proxy shows for secrets' hosts (default
	// DataDir/egress_ca.pem, made at first start); replicas share it.
	EgressCA string
	// EgressUpstreamCA is BERTH_EGRESS_UPSTREAM_CA_FILE: authorities the
	// proxy trusts, beside the system's, for secrets' hosts' own
	// certificates; "" the system's alone.
	EgressUpstreamCA string
	// CoreHourUSD is BERTH_CORE_HOUR_USD: the price of machine time, US
	// dollars per core-hour; 0 (unset) prices none.
	CoreHourUSD float64
}

// OIDC is the deployment's identity provider.
type OIDC struct {
	Issuer       string        // BERTH_OIDC_ISSUER
	ClientID     string        // BERTH_OIDC_CLIENT_ID
	SecretFile   string        // BERTH_OIDC_CLIENT_SECRET_FILE
	ClientSecret secret.Secret // the file's first line
	Scopes       []string      // BERTH_OIDC_SCOPES; nil: openid, email, profile, and groups and offline_access where offered
	GroupsClaim  string        // BERTH_OIDC_GROUPS_CLAIM, default groups
	Operators    []string      // BERTH_OIDC_OPERATOR_GROUPS
	KeyTTL       time.Duration // BERTH_OIDC_KEY_TTL, default 12h
	RefreshEvery time.Duration // BERTH_OIDC_REFRESH_INTERVAL, default 5m
}

// DefaultShutdownGrace is BERTH_SHUTDOWN_GRACE's default. It covers a
// cold start many times over: on the 2-core development machine, page
// cache dropped and a new gateway, one engineer sandbox ran 0.7 s after
// its create and ten created at once 1.6 s after; ten in flight under the
// load of other work drained in 2–9 s (README, Stopping and crashes).
const DefaultShutdownGrace = time.Minute

// SettingsHelp lists every setting LoadConfig reads, for `berth serve --help`.
const SettingsHelp = `Settings (environment variables, read once at start-up):
  BERTH_ADDR                        listen address (default :8080)
  BERTH_DATA_DIR                    data directory (default ~/.local/share/berth)
  BERTH_DATABASE_URL                database: an SQLite file (default: berth.db in the data
                                    directory), or postgres://user:password@host/db for
                                    PostgreSQL, which several gateway replicas can share
  BERTH_DATABASE_WRITE_WAIT         SQLite: how long a request that starts something new (a
                                    sandbox, a key, a setting) waits for its turn to write
                                    before it is answered 503 busy, with Retry-After
                                    (default 5s; 10ms to 10m)
  BERTH_PUBLIC_URL                  the gateway's address as users reach it
  BERTH_LOG_LEVEL                   debug, info (default), warn or error
  BERTH_SANDBOX_DRIVER              podman, kubernetes (agent-sandbox v1beta1), fake (development
                                    only: isolates nothing), or unset for no sandboxes
  BERTH_SANDBOXES_FILE              the classes each new organisation starts with (YAML)
  BERTH_SANDBOX_IMAGES              comma-separated images administrators may give a class
                                    (an entry ending in / allows everything under it)
  BERTH_SANDBOX_RUNTIME_STANDARD    runtime of the standard tier (default: the driver's)
  BERTH_SANDBOX_RUNTIME_ISOLATED    runtime of the isolated tier (gVisor); unset: unavailable
  BERTH_SANDBOX_RUNTIME_VM          runtime of the vm tier (Kata, krun); unset: unavailable
                                    (podman: an OCI runtime name or path; kubernetes: a
                                    RuntimeClass name)
  BERTH_SANDBOX_PUBLIC_URL          the gateway as a sandbox reaches it (default BERTH_PUBLIC_URL)
  BERTH_SANDBOX_IDLE_SUSPEND        suspend engineer sandboxes idle this long (at least 5m)
  BERTH_SANDBOX_NAMESPACE           kubernetes: the namespace of sandboxes and warm pools
                                    (default: default, with a warning)
  BERTH_SANDBOX_STORAGE_CLASS       kubernetes: storage class of a class's disk (default: the
                                    cluster's); a class without a disk gets an 8Gi emptyDir
  BERTH_SANDBOX_SERVICE_ACCOUNT     kubernetes: the sandboxes' service account (its token is
                                    never mounted; default: the namespace's default)
  BERTH_SANDBOX_IMAGE_PULL_SECRETS  kubernetes: comma-separated secrets to pull images with
  BERTH_SANDBOX_INIT_IMAGE          kubernetes: the image a kelos image's pod copies berth-init
                                    from, in an init container: berth's sandbox image (default
                                    localhost/berth-sandbox:latest)
  BERTH_SANDBOX_WARM                on or off (default): warm pools for engineer classes with
                                    warm > 0 (podman and kubernetes); off deletes every pool
  KUBECONFIG                        kubernetes: the cluster when the gateway runs outside it
                                    (default: the in-cluster service account)
  BERTH_SANDBOX_PODMAN_BINARY       podman driver's command (default podman)
  BERTH_SANDBOX_PODMAN_NETWORK      podman driver's network (default podman's bridge)
  BERTH_SANDBOX_PODMAN_AGENT_NETWORK
                                    the allowlist network agent runs join (default berth-agents;
                                    berth admin agent-network makes it)
  BERTH_SANDBOX_PODMAN_ROOT         podman driver's own containers.conf and image store
                                    (default BERTH_DATA_DIR/podman; build images into it)
  BERTH_SANDBOX_PODMAN_STANDBY      how long a sandbox suspended with its memory waits made
                                    for a fast resume, 20-30 MiB of host memory each (default
                                    24h; 0 keeps none)
  BERTH_SANDBOX_GIT_FORGE           local, github, gitlab, or unset for no repositories
  BERTH_SANDBOX_GIT_URL             the forge's API (GitHub Enterprise: https://host/api/v3);
                                    with local, its directory (default BERTH_DATA_DIR/repos)
  BERTH_SANDBOX_GIT_APP_ID          GitHub App id
  BERTH_SANDBOX_GIT_APP_KEY_FILE    GitHub App private key file
  BERTH_SANDBOX_GIT_WEBHOOK_SECRET_FILE
                                    GitHub App webhook secret file: triggers on GitHub take the
                                    App's deliveries at /hooks/v1/github (unset: refused)
  BERTH_SANDBOX_GIT_TOKEN_FILE      GitLab token file
  BERTH_RUNNER_IMAGES               the image of each agent runner, as runner=image pairs
                                    separated by commas; a run of any other runner is refused
  BERTH_AGENT_RUNNER                the runner of an agent sandbox that names none and whose
                                    class has no runner: (default: claude-code when it has an
                                    image, else the only one)
  BERTH_AGENT_MODEL                 the model agent runs start on when the project may reach
                                    it and the runner speaks its provider's API (else, and by
                                    default: the first such model the project may reach)
  BERTH_AGENT_NETWORK               podman: allowlist (default: runs reach the gateway and
                                    nothing else; berth admin agent-network makes it) or open.
                                    On Kubernetes the sandboxes' NetworkPolicy decides.
  BERTH_INFERENCE_FILE              the model providers and models the gateway serves (YAML;
                                    each provider's key is read from the variable it names,
                                    and stays on the gateway); unset: no models
  BERTH_USAGE_RETENTION             how long ended sandboxes and their usage are kept, and so
                                    how far back usage reports reach (default 90d)
  BERTH_SWEEP_INTERVAL              how often the sweep runs (default 30s); a machine that stops
                                    by itself is noticed at once, from the runtime's events
  BERTH_SHUTDOWN_GRACE              on SIGTERM or SIGINT, how long the gateway lets the requests
                                    and sandbox starts in flight finish before it exits anyway
                                    (default 1m; a second signal exits at once). A start it
                                    could not wait for is finished by the next gateway
  BERTH_PREVIEW_DOMAIN              the domain of sandboxes' HTTP previews: a browser opens port
                                    P of sandbox sbx_ID at p<P>-sbx-ID.<domain> (point a wildcard
                                    DNS name and TLS certificate at the gateway; preview.localhost
                                    needs neither on one machine); unset: no previews
  BERTH_OIDC_ISSUER                 sign people in through the organisation's identity provider
                                    (OpenID Connect): its issuer URL (https; http only on
                                    loopback); unset: API keys only. Register berth as a
                                    confidential client whose redirect URI is
                                    BERTH_PUBLIC_URL/sign-in/sso/callback
  BERTH_OIDC_CLIENT_ID              berth's client id at the provider
  BERTH_OIDC_CLIENT_SECRET_FILE     a file holding berth's client secret (never the value itself)
  BERTH_OIDC_SCOPES                 comma-separated scopes (default: openid, email, profile,
                                    and groups and offline_access when the provider offers them)
  BERTH_OIDC_GROUPS_CLAIM           the ID token's claim listing the person's groups (default
                                    groups; GitLab: groups_direct)
  BERTH_OIDC_OPERATOR_GROUPS        comma-separated groups whose people are operators (an
                                    organisation's mapping never makes one)
  BERTH_OIDC_KEY_TTL                how long the key a sign-in gives lasts (default 12h; 5m to
                                    7d); signing in again gives a new one
  BERTH_OIDC_REFRESH_INTERVAL       how often each sign-in is refreshed at the provider (default
                                    5m; 1s to 24h): a refusal, or groups that no longer map to
                                    the person's organisation, disables them and ends their
                                    sandboxes
  BERTH_PANEL_KEY_SIGNIN            on (default) or off: the panel's sign-in with an API key;
                                    off only with BERTH_OIDC_ISSUER (API keys still work on the
                                    API and the CLI)
  BERTH_EGRESS_CONNECT_TO           comma-separated host:port=address:port: the egress proxy
                                    reaches a name the sandbox's policy allows at that address
                                    instead (a mirror under the public name), whatever its range
  BERTH_EGRESS_RESOLVE              comma-separated name=address: the egress proxy's own answers
                                    for these names, before DNS; the address is checked as any
                                    (a private or loopback one only where a rule names it)
  BERTH_SECRETS_KEY_FILE            the key projects' secrets are sealed with (berth secret set;
                                    default BERTH_DATA_DIR/secrets_key, made at first start;
                                    replicas share it)
  BERTH_EGRESS_CA_FILE              the authority whose certificates the egress proxy shows an
                                    agent sandbox for its secrets' hosts, which the sandbox
                                    trusts (default BERTH_DATA_DIR/egress_ca.pem, made at first
                                    start; replicas share it)
  BERTH_EGRESS_UPSTREAM_CA_FILE     authorities (PEM) the proxy trusts beside the system's for
                                    those hosts' own certificates (an internal service's)
  BERTH_CORE_HOUR_USD               the price of machine time, US dollars per core-hour (such as
                                    0.05): a run's and a usage report's cost then counts it beside
                                    the models'; unset prices none`

// LoadConfig reads the settings through getenv, applies defaults and
// validates them, reporting every problem at once.
func LoadConfig(getenv func(string) string) (Config, error) {
	var errs []error
	bad := func(setting, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", setting, fmt.Sprintf(format, args...)))
	}
	get := func(k, def string) string {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			return v
		}
		return def
	}
	dur := func(k string, def time.Duration) time.Duration {
		s := get(k, "")
		if s == "" {
			return def
		}
		d, err := quantity.ParseDuration(s)
		if err != nil {
			bad(k, "%v", err)
			return def
		}
		return d
	}
	c := Config{
		Addr:           get("BERTH_ADDR", ":8080"),
		DataDir:        get("BERTH_DATA_DIR", ""),
		DatabaseURL:    get("BERTH_DATABASE_URL", ""),
		WriteWait:      dur("BERTH_DATABASE_WRITE_WAIT", store.DefaultWriteWait),
		PublicURL:      get("BERTH_PUBLIC_URL", ""),
		LogLevel:       get("BERTH_LOG_LEVEL", "info"),
		Driver:         get("BERTH_SANDBOX_DRIVER", ""),
		SandboxesFile:  get("BERTH_SANDBOXES_FILE", ""),
		Images:         list(getenv("BERTH_SANDBOX_IMAGES")),
		Namespace:      get("BERTH_SANDBOX_NAMESPACE", ""),
		StorageClass:   get("BERTH_SANDBOX_STORAGE_CLASS", ""),
		ServiceAccount: get("BERTH_SANDBOX_SERVICE_ACCOUNT", ""),
		InitImage:      get("BERTH_SANDBOX_INIT_IMAGE", ""),
		PodmanBinary:   get("BERTH_SANDBOX_PODMAN_BINARY", "podman"),
		PodmanNetwork:  get("BERTH_SANDBOX_PODMAN_NETWORK", ""),
		PodmanAgentNet: get("BERTH_SANDBOX_PODMAN_AGENT_NETWORK", ""),
		PodmanRoot:     get("BERTH_SANDBOX_PODMAN_ROOT", ""),
		PodmanStandby:  dur("BERTH_SANDBOX_PODMAN_STANDBY", 24*time.Hour),
		TerminalCA:     get("BERTH_TERMINAL_CA_FILE", ""),
		Forge:          get("BERTH_SANDBOX_GIT_FORGE", ""),
		GitURL:         get("BERTH_SANDBOX_GIT_URL", ""),
		GitAppID:       get("BERTH_SANDBOX_GIT_APP_ID", ""),
		GitAppKey:      get("BERTH_SANDBOX_GIT_APP_KEY_FILE", ""),
		GitHookSecret:  get("BERTH_SANDBOX_GIT_WEBHOOK_SECRET_FILE", ""),
		GitTokenFn:     get("BERTH_SANDBOX_GIT_TOKEN_FILE", ""),
		IdleSuspend:    dur("BERTH_SANDBOX_IDLE_SUSPEND", 0),
		UsageRetention: dur("BERTH_USAGE_RETENTION", 90*24*time.Hour),
		SweepInterval:  dur("BERTH_SWEEP_INTERVAL", 30*time.Second),
		ShutdownGrace:  dur("BERTH_SHUTDOWN_GRACE", DefaultShutdownGrace),
	}
	c.ImagePullSecrets = list(getenv("BERTH_SANDBOX_IMAGE_PULL_SECRETS"))
	switch w := strings.ToLower(get("BERTH_SANDBOX_WARM", "off")); w {
	case "on", "true", "1", "yes":
		c.Warm = true
	case "off", "false", "0", "no":
	default:
		bad("BERTH_SANDBOX_WARM", "%q is neither on nor off", w)
	}
	if c.DataDir == "" {
		c.DataDir = defaultDataDir(getenv)
	}
	if c.PodmanRoot == "" {
		c.PodmanRoot = filepath.Join(c.DataDir, "podman")
	}
	if c.TerminalCA == "" {
		c.TerminalCA = filepath.Join(c.DataDir, "terminal_ca")
	}
	c.SecretsKey = get("BERTH_SECRETS_KEY_FILE", filepath.Join(c.DataDir, "secrets_key"))
	c.EgressCA = get("BERTH_EGRESS_CA_FILE", filepath.Join(c.DataDir, "egress_ca.pem"))
	c.EgressUpstreamCA = get("BERTH_EGRESS_UPSTREAM_CA_FILE", "")
	if v := get("BERTH_CORE_HOUR_USD", ""); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1000 || math.IsNaN(f) {
			bad("BERTH_CORE_HOUR_USD", "%q is not a price in US dollars per core-hour, 0 to 1000", v)
		} else {
			c.CoreHourUSD = f
		}
	}
	if c.DatabaseURL == "" {
		c.DatabaseURL = filepath.Join(c.DataDir, "berth.db")
	} else if scheme, _, ok := strings.Cut(c.DatabaseURL, "://"); ok {
		// The URL is never repeated: it may carry a password.
		switch strings.ToLower(scheme) {
		case "sqlite", "file":
		case "postgres", "postgresql":
			if _, err := url.Parse(c.DatabaseURL); err != nil {
				bad("BERTH_DATABASE_URL", "not a valid postgres:// URL")
			}
		default:
			bad("BERTH_DATABASE_URL", "unknown scheme %q: give postgres://… for PostgreSQL, or a file path (or sqlite://path) for SQLite", scheme)
		}
	}
	if c.PublicURL == "" {
		c.PublicURL = "http://localhost" + portOf(c.Addr)
	} else if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("BERTH_PUBLIC_URL", "%q is not an http(s) URL", c.PublicURL)
	}
	c.SandboxPublicURL = get("BERTH_SANDBOX_PUBLIC_URL", c.PublicURL)
	c.PreviewDomain = strings.ToLower(strings.TrimSuffix(get("BERTH_PREVIEW_DOMAIN", ""), "."))
	if d := c.PreviewDomain; d != "" {
		pub, _ := url.Parse(c.PublicURL)
		host := ""
		if pub != nil {
			host = strings.ToLower(pub.Hostname())
		}
		switch {
		case !validDomain(d):
			bad("BERTH_PREVIEW_DOMAIN", "%q is not a DNS name (labels of letters, digits and -, at least two)", d)
		case host == d || strings.HasSuffix(host, "."+d):
			// The API's host would be a preview's: the preview's apps would
			// share the gateway's origin.
			bad("BERTH_PREVIEW_DOMAIN", "%q holds the gateway's own host %q (BERTH_PUBLIC_URL); give previews a domain of their own", d, host)
		}
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("BERTH_LOG_LEVEL", "%q is not debug, info, warn or error", c.LogLevel)
	}

	switch c.Driver {
	case "", "fake", "podman":
	case "kubernetes":
		c.Kubeconfig = get("KUBECONFIG", "")
	default:
		bad("BERTH_SANDBOX_DRIVER", "unknown driver %q (podman, kubernetes, fake, or unset for no sandboxes)", c.Driver)
	}
	c.Runtimes = map[sandbox.Tier]string{sandbox.TierStandard: get("BERTH_SANDBOX_RUNTIME_STANDARD", "")}
	for _, t := range []sandbox.Tier{sandbox.TierIsolated, sandbox.TierVM} {
		if rt := get(t.Setting(), ""); rt != "" {
			c.Runtimes[t] = rt
		}
	}
	if c.Driver == "kubernetes" {
		checkKubernetes(c, bad)
	}
	if c.IdleSuspend != 0 && c.IdleSuspend < 5*time.Minute {
		bad("BERTH_SANDBOX_IDLE_SUSPEND", "%s is under the 5m minimum", quantity.FormatDuration(c.IdleSuspend))
	}
	if c.PodmanStandby < 0 {
		bad("BERTH_SANDBOX_PODMAN_STANDBY", "%s is negative (0 keeps no standby)", c.PodmanStandby)
	}
	if c.WriteWait < 10*time.Millisecond || c.WriteWait > 10*time.Minute {
		bad("BERTH_DATABASE_WRITE_WAIT", "%v is outside 10ms to 10m", c.WriteWait)
	}
	if c.UsageRetention <= 0 {
		bad("BERTH_USAGE_RETENTION", "must be more than 0")
	}
	if c.SweepInterval <= 0 {
		bad("BERTH_SWEEP_INTERVAL", "must be more than 0")
	}
	if c.ShutdownGrace <= 0 {
		bad("BERTH_SHUTDOWN_GRACE", "must be more than 0 (a second SIGTERM or SIGINT exits at once)")
	}

	switch c.Forge {
	case "":
	case "local":
		c.LocalRepos = c.GitURL
		if c.LocalRepos == "" {
			c.LocalRepos = filepath.Join(c.DataDir, "repos")
		} else if !filepath.IsAbs(c.LocalRepos) {
			bad("BERTH_SANDBOX_GIT_URL", "with the local forge it is the directory of bare repositories, an absolute path; %q is not", c.LocalRepos)
		}
	case "github":
		if c.GitAppID == "" || c.GitAppKey == "" {
			bad("BERTH_SANDBOX_GIT_FORGE", "github needs both BERTH_SANDBOX_GIT_APP_ID and BERTH_SANDBOX_GIT_APP_KEY_FILE")
		}
	case "gitlab":
		if c.GitTokenFn == "" {
			bad("BERTH_SANDBOX_GIT_FORGE", "gitlab needs BERTH_SANDBOX_GIT_TOKEN_FILE")
		}
	default:
		bad("BERTH_SANDBOX_GIT_FORGE", "unknown forge %q (local, github, gitlab, or unset)", c.Forge)
	}

	c.RunnerImages = map[string]string{}
	for _, pair := range list(getenv("BERTH_RUNNER_IMAGES")) {
		name, image, ok := strings.Cut(pair, "=")
		if !ok || image == "" {
			bad("BERTH_RUNNER_IMAGES", "%q is not runner=image", pair)
			continue
		}
		if err := runner.Runnable(name); err != nil {
			bad("BERTH_RUNNER_IMAGES", "%v", err)
			continue
		}
		c.RunnerImages[name] = image
	}
	c.AgentRunner = get("BERTH_AGENT_RUNNER", "")
	switch {
	case c.AgentRunner != "":
		if err := runner.Runnable(c.AgentRunner); err != nil {
			bad("BERTH_AGENT_RUNNER", "%v", err)
		} else if c.RunnerImages[c.AgentRunner] == "" {
			bad("BERTH_AGENT_RUNNER", "%s has no image in BERTH_RUNNER_IMAGES", c.AgentRunner)
		}
	case c.RunnerImages["claude-code"] != "":
		c.AgentRunner = "claude-code"
	case len(c.RunnerImages) == 1:
		for name := range c.RunnerImages {
			c.AgentRunner = name
		}
	}
	c.AgentModel = get("BERTH_AGENT_MODEL", "")
	c.AgentNetwork = get("BERTH_AGENT_NETWORK", "allowlist")
	if c.AgentNetwork != "allowlist" && c.AgentNetwork != "open" {
		bad("BERTH_AGENT_NETWORK", "%q is neither allowlist nor open", c.AgentNetwork)
	}

	if c.InferenceFile = get("BERTH_INFERENCE_FILE", ""); c.InferenceFile != "" {
		cat, err := readInferenceFile(c.InferenceFile, getenv)
		if err != nil {
			bad("BERTH_INFERENCE_FILE", "%v", err)
		}
		c.Models = cat
	}
	c.OIDC, c.KeySignIn = loadOIDC(get, dur, bad)
	var err error
	if c.EgressConnectTo, err = proxy.ParseConnectTo(getenv("BERTH_EGRESS_CONNECT_TO")); err != nil {
		bad("BERTH_EGRESS_CONNECT_TO", "%v", err)
	}
	if c.EgressHosts, err = proxy.ParseHosts(getenv("BERTH_EGRESS_RESOLVE")); err != nil {
		bad("BERTH_EGRESS_RESOLVE", "%v", err)
	}
	if c.SandboxesFile != "" {
		classes, err := readClassFile(c.SandboxesFile)
		if err != nil {
			bad("BERTH_SANDBOXES_FILE", "%v", err)
		}
		c.Classes = classes
	}
	return c, errors.Join(errs...)
}

// loadOIDC reads the identity provider's settings and the panel's key
// sign-in.
func loadOIDC(get func(k, def string) string, dur func(k string, def time.Duration) time.Duration, bad func(setting, format string, args ...any)) (OIDC, bool) {
	o := OIDC{
		Issuer:       strings.TrimSuffix(get("BERTH_OIDC_ISSUER", ""), "/"),
		ClientID:     get("BERTH_OIDC_CLIENT_ID", ""),
		SecretFile:   get("BERTH_OIDC_CLIENT_SECRET_FILE", ""),
		Scopes:       list(get("BERTH_OIDC_SCOPES", "")),
		GroupsClaim:  get("BERTH_OIDC_GROUPS_CLAIM", "groups"),
		Operators:    list(get("BERTH_OIDC_OPERATOR_GROUPS", "")),
		KeyTTL:       dur("BERTH_OIDC_KEY_TTL", sso.DefaultKeyTTL),
		RefreshEvery: dur("BERTH_OIDC_REFRESH_INTERVAL", sso.DefaultRefreshEvery),
	}
	keySignIn := true
	switch v := strings.ToLower(get("BERTH_PANEL_KEY_SIGNIN", "on")); v {
	case "on", "true", "1", "yes":
	case "off", "false", "0", "no":
		keySignIn = false
		if o.Issuer == "" {
			bad("BERTH_PANEL_KEY_SIGNIN", "off needs BERTH_OIDC_ISSUER: nobody could sign in to the panel")
		}
	default:
		bad("BERTH_PANEL_KEY_SIGNIN", "%q is neither on nor off", v)
	}
	if o.Issuer == "" {
		for _, k := range []string{"BERTH_OIDC_CLIENT_ID", "BERTH_OIDC_CLIENT_SECRET_FILE", "BERTH_OIDC_OPERATOR_GROUPS"} {
			if get(k, "") != "" {
				bad(k, "is set, but BERTH_OIDC_ISSUER is not")
			}
		}
		return o, keySignIn
	}
	if u, err := url.Parse(o.Issuer); err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && loopbackHost(u.Hostname()))) {
		bad("BERTH_OIDC_ISSUER", "%q is not an https URL (plain http only on this machine's loopback)", o.Issuer)
	}
	if o.ClientID == "" {
		bad("BERTH_OIDC_CLIENT_ID", "is required with BERTH_OIDC_ISSUER")
	}
	switch b, err := os.ReadFile(o.SecretFile); {
	case o.SecretFile == "":
		bad("BERTH_OIDC_CLIENT_SECRET_FILE", "is required with BERTH_OIDC_ISSUER (berth is a confidential client)")
	case err != nil:
		bad("BERTH_OIDC_CLIENT_SECRET_FILE", "%v", err)
	default:
		line, _, _ := strings.Cut(string(b), "\n")
		if line = strings.TrimSpace(line); line == "" {
			bad("BERTH_OIDC_CLIENT_SECRET_FILE", "%s is empty", o.SecretFile)
		}
		o.ClientSecret = secret.New(line)
	}
	if len(o.Scopes) > 0 && !slices.Contains(o.Scopes, "openid") {
		bad("BERTH_OIDC_SCOPES", "must hold openid")
	}
	if o.KeyTTL < 5*time.Minute || o.KeyTTL > 7*24*time.Hour {
		bad("BERTH_OIDC_KEY_TTL", "%s is outside 5m to 7d", quantity.FormatDuration(o.KeyTTL))
	}
	if o.RefreshEvery < time.Second || o.RefreshEvery > 24*time.Hour {
		bad("BERTH_OIDC_REFRESH_INTERVAL", "%s is outside 1s to 24h", quantity.FormatDuration(o.RefreshEvery))
	}
	return o, keySignIn
}

func loopbackHost(h string) bool { return h == "localhost" || h == "127.0.0.1" || h == "::1" }

// checkKubernetes checks the names the kubernetes driver writes into
// objects, so a typo stops the start instead of every sandbox's.
func checkKubernetes(c Config, bad func(setting, format string, args ...any)) {
	if c.Namespace != "" {
		if errs := validation.IsDNS1123Label(c.Namespace); len(errs) > 0 {
			bad("BERTH_SANDBOX_NAMESPACE", "%q is not a namespace name: %s", c.Namespace, strings.Join(errs, "; "))
		}
	}
	if strings.ContainsAny(c.InitImage, " \t\n") {
		bad("BERTH_SANDBOX_INIT_IMAGE", "%q is not an image reference", c.InitImage)
	}
	names := []struct{ setting, value string }{
		{"BERTH_SANDBOX_STORAGE_CLASS", c.StorageClass},
		{"BERTH_SANDBOX_SERVICE_ACCOUNT", c.ServiceAccount},
	}
	for _, s := range c.ImagePullSecrets {
		names = append(names, struct{ setting, value string }{"BERTH_SANDBOX_IMAGE_PULL_SECRETS", s})
	}
	for _, t := range []sandbox.Tier{sandbox.TierStandard, sandbox.TierIsolated, sandbox.TierVM} {
		names = append(names, struct{ setting, value string }{t.Setting(), c.Runtimes[t]})
	}
	for _, n := range names {
		if n.value == "" {
			continue
		}
		if errs := validation.IsDNS1123Subdomain(n.value); len(errs) > 0 {
			bad(n.setting, "%q is not a Kubernetes object name (with the kubernetes driver it names a RuntimeClass, storage class, service account or secret): %s",
				n.value, strings.Join(errs, "; "))
		}
	}
}

func readClassFile(path string) ([]class.Class, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	classes, err := class.ParseFile(f)
	if err != nil {
		return nil, fmt.Errorf("%s:\n%w", path, err)
	}
	return classes, nil
}

// readInferenceFile reads the inference file and validates it, reading
// each provider's credential through getenv.
func readInferenceFile(path string, getenv func(string) string) (*inference.Catalog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cfg, err := inference.ParseConfig(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cat, err := inference.NewCatalog(cfg, getenv)
	if err != nil {
		return nil, fmt.Errorf("%s:\n%w", path, err)
	}
	return cat, nil
}

func defaultDataDir(getenv func(string) string) string {
	if x := getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "berth")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "share", "berth")
	}
	return "berth-data"
}

// portOf returns ":8080" of ":8080", "0.0.0.0:8080" or "[::]:8080".
func portOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return addr[i:]
	}
	return ""
}

func list(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// validDomain reports whether d is a DNS name of two labels or more, each
// letters, digits and "-", short enough that a preview's label fits.
func validDomain(d string) bool {
	labels := strings.Split(d, ".")
	if len(labels) < 2 || len(d) > 200 {
		return false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, r := range l {
			if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
				return false
			}
		}
	}
	return true
}
