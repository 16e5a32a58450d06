// Package gateway is berth's HTTP API: authentication, the routes of the
// control API (/api/v1) and of sandboxes (/sandbox/v1), and the one place
// that maps domain errors to HTTP statuses. Handlers decode the wire types
// of package api, call the domain services, and encode the answer.
package gateway

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentconfig"
	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/egress"
	"berth.dev/berth/internal/egress/placeholder"
	"berth.dev/berth/internal/egress/proxy"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/gateway/panel"
	"berth.dev/berth/internal/githttp"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/reach"
	"berth.dev/berth/internal/repository"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/sso"
	"berth.dev/berth/internal/terminal"
	"berth.dev/berth/internal/trigger"
	"berth.dev/berth/internal/trigger/event"
	"berth.dev/berth/internal/usage"
	"berth.dev/berth/internal/warm"
)

// Options configure a Server. Every field is required unless it says not.
type Options struct {
	// Audit records what the gateway refuses itself (the egress proxy's
	// refusals); nil records nothing.
	Audit     audit.Recorder
	Accounts  *account.Service
	Sandboxes *sandbox.Service
	// Reach is the way into sandboxes (the tunnel's route); nil: none.
	Reach *reach.Service
	// Warm hands warm pool sandboxes their environment (the bootstrap
	// route); nil: the deployment keeps no pools.
	Warm    *warm.Service
	Runs    *agentrun.Service
	Classes *class.Service
	Usage   *usage.Service
	Log     *slog.Logger
	// Version and Commit (the build's commit; may be "") are reported by
	// /healthz.
	Version string
	Commit  string
	// Driver names the sandbox driver, "" when the deployment runs none.
	Driver string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Forge is the deployment's forge; nil without one.
	Forge forge.Forge
	// Repositories authorises the git routes and hands out repository
	// credentials (SPEC S9, S17).
	Repositories *repository.Service
	// Mirrors keeps the gateway's mirrors of a remote forge's repositories;
	// nil for the local forge or none.
	Mirrors Mirrors
	// Metrics serves the Prometheus exposition at /metrics to operators;
	// nil answers not found.
	Metrics http.Handler
	// Meter is told of tunnels and repository credential requests (package
	// metrics implements it); nil tells nobody.
	Meter Meter
	// TunnelIdleTimeout closes a tunnel with no byte either way for this
	// long; 0 means two hours (SPEC S10). Tests shorten it.
	TunnelIdleTimeout time.Duration
	// Inference decides and meters the model routes (SPEC S14); nil
	// serves no models.
	Inference *inference.Service
	// Scripted serves the scripted provider inside the gateway (package
	// modelserver's handler); nil when the deployment has none.
	Scripted http.Handler
	// Terminal opens the panel's terminals in sandboxes, through Reach;
	// nil: the panel offers none.
	Terminal *terminal.CA
	// PublicURL is the gateway as browsers reach it: a terminal's
	// WebSocket must come from a page of this origin.
	PublicURL string
	// ModelTransport reaches the model vendors; nil is a transport of the
	// gateway's own (no compression, so answers can be metered).
	ModelTransport http.RoundTripper
	// PreviewDomain is the domain under which each port of each sandbox
	// has a host name of its own for its HTTP preview (preview.go); ""
	// serves no previews.
	PreviewDomain string
	// SSO signs people in through the identity provider and keeps the
	// organisations' mappings; required (without a provider it signs
	// nobody in).
	SSO *sso.Service
	// NoKeySignIn turns off the panel's sign-in with an API key
	// (BERTH_PANEL_KEY_SIGNIN=off): people sign in through the identity
	// provider. Keys still work on the API.
	NoKeySignIn bool
	// EgressConnectTo and EgressHosts are the egress proxy's ConnectTo and
	// Hosts (BERTH_EGRESS_CONNECT_TO, BERTH_EGRESS_RESOLVE); nil: none.
	EgressConnectTo map[string]string
	EgressHosts     map[string][]netip.Addr
	// Egress counts the egress proxy's connections into the sandboxes'
	// summaries (berth sandbox egress); nil counts none.
	Egress *egress.Ledger
	// Freezer ends a learning sandbox's learning (egress learn); nil:
	// none is ended, so such a sandbox stays open.
	Freezer EgressFreezer
	// Secrets are projects' secrets by placeholder: the routes that keep
	// them, and the values the egress proxy puts in; nil: none. Issuer
	// and UpstreamRoots are the proxy's (package egress/proxy).
	Secrets       *placeholder.Service
	Issuer        *proxy.Issuer
	UpstreamRoots *x509.CertPool
	// CoreHour prices machine time (BERTH_CORE_HOUR_USD); 0 prices none.
	CoreHour usage.CoreHour
	// AgentConfigs are the organisations' and projects' agent
	// configurations; nil serves none.
	AgentConfigs *agentconfig.Service
	// Triggers are the projects' triggers, their webhooks, and the
	// reports runs owe their forge; nil serves none.
	Triggers *trigger.Service
}

// EgressFreezer makes a learning sandbox's egress the list it learnt
// (the store).
type EgressFreezer interface {
	FreezeEgress(ctx context.Context, id sandbox.ID, to string) (bool, error)
}

// Meter counts what the gateway's own routes do, for /metrics.
type Meter interface {
	TunnelOpened()
	TunnelClosed()
	TunnelBytes(toSandbox, fromSandbox int64)
	CredentialRequested(kind, outcome string)
	Egress(class string, allowed bool, toHost, fromHost int64)
}

// noMeter counts nothing.
type noMeter struct{}

func (noMeter) TunnelOpened()                     {}
func (noMeter) TunnelClosed()                     {}
func (noMeter) TunnelBytes(int64, int64)          {}
func (noMeter) CredentialRequested(_, _ string)   {}
func (noMeter) Egress(string, bool, int64, int64) {}

// Mirrors keeps a mirror of each repository the gateway serves from a
// remote forge (SPEC S17).
type Mirrors interface {
	// Sync makes the mirror of repo current enough to serve and returns its
	// directory.
	Sync(ctx context.Context, repo forge.Repo) (string, error)
	// Push sends what a push did to the mirror on to the forge, undoing it
	// in the mirror if the forge refuses.
	Push(ctx context.Context, repo forge.Repo, done []forge.RefUpdate) error
}

// Server serves the API.
type Server struct {
	accounts  *account.Service
	sandboxes *sandbox.Service
	reach     *reach.Service
	warm      *warm.Service
	runs      *agentrun.Service
	classes   *class.Service
	usage     *usage.Service
	log       *slog.Logger
	version   string
	commit    string
	driver    string
	now       func() time.Time
	forge     forge.Forge
	repos     *repository.Service
	mirrors   Mirrors
	git       *githttp.Handler
	credLimit *rateLimit
	metrics   http.Handler
	// enrollLimit bounds invitation redemptions per client address: the
	// route is public, its secret the credential.
	enrollLimit *rateLimit
	// ssoLimit bounds berth login --sso's code exchanges likewise.
	ssoLimit *rateLimit

	tunnelIdle time.Duration
	tunnels    *tunnels
	meter      Meter
	stopping   chan struct{} // closed when the gateway stops: followed logs end
	stopOnce   sync.Once

	inference      *inference.Service
	scripted       http.RoundTripper // nil without a scripted provider
	modelTransport http.RoundTripper

	panel    *panel.Panel
	previews *previews // nil: no preview domain

	sso       *sso.Service
	keySignIn bool
	publicURL string

	auditRec audit.Recorder
	egress   *proxy.Proxy   // the sandboxes' way out (egress.go)
	ledger   *egress.Ledger // and what they did with it; nil: not counted
	freezer  EgressFreezer
	// refusalAudit bounds each sandbox's refusals in the audit log.
	refusalAudit *rateLimit
	secrets      *placeholder.Service // nil: no secrets
	coreHour     usage.CoreHour       // the price of machine time
	agentCfg     *agentconfig.Service // nil: none
	triggers     *trigger.Service     // nil: none
	learnt       sync.Map             // sandbox.ID → struct{}: sandboxes known to learn no more
}

// New returns a Server.
func New(o Options) *Server {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	s := &Server{accounts: o.Accounts, sandboxes: o.Sandboxes, reach: o.Reach, warm: o.Warm, classes: o.Classes, runs: o.Runs, usage: o.Usage, log: o.Log, version: o.Version, commit: o.Commit, driver: o.Driver,
		now: now, metrics: o.Metrics, forge: o.Forge, repos: o.Repositories, mirrors: o.Mirrors, git: githttp.New("", o.Log), credLimit: newRateLimit(10, time.Minute),
		enrollLimit: newRateLimit(10, time.Minute), ssoLimit: newRateLimit(10, time.Minute), tunnelIdle: o.TunnelIdleTimeout, tunnels: newTunnels(), meter: meterOr(o.Meter), stopping: make(chan struct{}),
		inference: o.Inference, scripted: scriptedTransport(o.Scripted), modelTransport: modelTransportOr(o.ModelTransport),
		previews: newPreviews(o.PreviewDomain), sso: o.SSO, keySignIn: !o.NoKeySignIn, publicURL: o.PublicURL, auditRec: o.Audit, ledger: o.Egress, freezer: o.Freezer, refusalAudit: newRateLimit(auditedRefusals, time.Minute), secrets: o.Secrets, coreHour: o.CoreHour, agentCfg: o.AgentConfigs, triggers: o.Triggers}
	if s.auditRec == nil {
		s.auditRec = audit.Discard{}
	}
	s.egress = s.newEgressProxy()
	s.egress.ConnectTo, s.egress.Hosts = o.EgressConnectTo, o.EgressHosts
	s.egress.Issuer, s.egress.UpstreamRoots = o.Issuer, o.UpstreamRoots
	// The web panel answers with the same services and the same error
	// mapping as the API.
	s.panel = panel.New(panel.Options{Accounts: o.Accounts, Sandboxes: o.Sandboxes, Classes: o.Classes, Runs: o.Runs, Usage: o.Usage, Log: o.Log, Now: now,
		Driver: o.Driver, Status: s.errorStatus, Reach: o.Reach, Terminal: o.Terminal, PublicURL: o.PublicURL, Previews: panelPreviews(s),
		SSO: o.SSO, NoKeySignIn: o.NoKeySignIn,
		Track: func() (<-chan struct{}, func(), bool) { stop, ok := s.tunnels.add(); return stop, s.tunnels.done, ok }})
	return s
}

// access says who may call a route.
type access int

const (
	public        access = iota // anybody
	anyKey                      // any live key, a sandbox's own included
	userKey                     // a person's key; a sandbox's key is refused
	operatorKey                 // an operator's key
	own                         // the handler authenticates (git's Basic auth) and reads bodies of any size
	sandboxStream               // a sandbox's own key, and a body the handler bounds (a run's output, its exit report)
)

// route is one entry of the API. The OpenAPI description is checked against
// this table in a test, so the two cannot drift.
type route struct {
	method, path string
	access       access
	handle       func(w http.ResponseWriter, r *http.Request, p account.Principal)
}

func (s *Server) routes() []route {
	return []route{
		{"GET", "/healthz", public, s.health},
		{"GET", "/openapi.yaml", public, serveOpenAPI},
		{"GET", "/metrics", operatorKey, s.serveMetrics},

		{"GET", "/api/v1/whoami", anyKey, s.whoami},
		{"GET", "/api/v1/orgs", userKey, s.listOrgs},
		{"POST", "/api/v1/orgs", userKey, s.createOrg},
		{"GET", "/api/v1/orgs/{org}", userKey, s.getOrg},
		{"GET", "/api/v1/orgs/{org}/projects", userKey, s.listProjects},
		{"POST", "/api/v1/orgs/{org}/projects", userKey, s.createProject},
		{"GET", "/api/v1/orgs/{org}/users", userKey, s.listUsers},
		{"POST", "/api/v1/orgs/{org}/users", userKey, s.createUser},
		{"POST", "/api/v1/orgs/{org}/users/{user}/disable", userKey, s.disableUser},
		{"POST", "/api/v1/orgs/{org}/users/{user}/enable", userKey, s.enableUser},
		{"PUT", "/api/v1/orgs/{org}/users/{user}/project", userKey, s.setUserProject},
		{"POST", "/api/v1/orgs/{org}/users/{user}/invitation", userKey, s.inviteUser},
		{"GET", "/api/v1/orgs/{org}/guardrail", userKey, s.getGuardrail},
		{"PUT", "/api/v1/orgs/{org}/guardrail", userKey, s.putGuardrail},
		{"GET", "/api/v1/orgs/{org}/projects/{project}/guardrail", userKey, s.getGuardrail},
		{"PUT", "/api/v1/orgs/{org}/projects/{project}/guardrail", userKey, s.putGuardrail},
		{"GET", "/api/v1/orgs/{org}/agent-config", userKey, s.getAgentConfig},
		{"PUT", "/api/v1/orgs/{org}/agent-config", userKey, s.putAgentConfig},
		{"GET", "/api/v1/orgs/{org}/projects/{project}/agent-config", userKey, s.getAgentConfig},
		{"PUT", "/api/v1/orgs/{org}/projects/{project}/agent-config", userKey, s.putAgentConfig},
		{"GET", "/api/v1/orgs/{org}/projects/{project}/secrets", userKey, s.listSecrets},
		{"PUT", "/api/v1/orgs/{org}/projects/{project}/secrets/{name}", userKey, s.setSecret},
		{"DELETE", "/api/v1/orgs/{org}/projects/{project}/secrets/{name}", userKey, s.deleteSecret},
		{"GET", "/api/v1/orgs/{org}/projects/{project}/triggers", userKey, s.listTriggers},
		{"GET", "/api/v1/orgs/{org}/projects/{project}/triggers/{name}", userKey, s.getTrigger},
		{"PUT", "/api/v1/orgs/{org}/projects/{project}/triggers/{name}", userKey, s.putTrigger},
		{"DELETE", "/api/v1/orgs/{org}/projects/{project}/triggers/{name}", userKey, s.deleteTrigger},
		// Webhooks: the signature (GitHub's, the trigger's secret) is the
		// credential; the handlers check it before reading anything else.
		{"POST", api.GitHubHookPath, public, s.githubHook},
		{"POST", "/hooks/v1/triggers/{id}", public, s.triggerHook},
		{"GET", "/api/v1/keys", userKey, s.listKeys},
		{"POST", "/api/v1/keys", userKey, s.createKey},
		{"DELETE", "/api/v1/keys/{id}", userKey, s.revokeKey},
		// The one-time invitation in the body is the credential.
		{"POST", api.InvitationRedeemPath, public, s.redeemInvitation},
		{"GET", "/api/v1/audit", userKey, s.auditLog},
		// Signing in through the identity provider: whether there is one,
		// and berth login --sso's code exchange (the code and its PKCE
		// verifier are the credential); organisations' mappings.
		{"GET", api.SSOPath, public, s.ssoInfo},
		{"POST", api.SSOTokenPath, public, s.ssoToken},
		{"POST", api.SSODevicePath, public, s.ssoDevice},
		{"POST", api.SSODeviceTokenPath, public, s.ssoDeviceToken},
		{"GET", "/api/v1/orgs/{org}/sso", userKey, s.getSSOMapping},
		{"PUT", "/api/v1/orgs/{org}/sso", userKey, s.putSSOMapping},

		{"GET", "/sandbox/v1/classes", userKey, s.listClasses},
		{"PUT", "/sandbox/v1/classes", userKey, s.applyClasses},
		{"DELETE", "/sandbox/v1/classes/{name}", userKey, s.deleteClass},
		{"GET", "/sandbox/v1/usage", userKey, s.usageReport},
		{"GET", "/sandbox/v1/sandboxes", userKey, s.listSandboxes},
		{"POST", "/sandbox/v1/sandboxes", userKey, s.createSandbox},
		{"GET", "/sandbox/v1/sandboxes/{ref}", userKey, s.getSandbox},
		{"POST", "/sandbox/v1/sandboxes/{ref}/suspend", userKey, s.suspendSandbox},
		{"POST", "/sandbox/v1/sandboxes/{ref}/resume", userKey, s.resumeSandbox},
		{"POST", "/sandbox/v1/sandboxes/{ref}/extend", userKey, s.extendSandbox},
		{"POST", "/sandbox/v1/sandboxes/{ref}/terminate", userKey, s.terminateSandbox},
		{"POST", "/sandbox/v1/sandboxes/{ref}/previews", userKey, s.createPreview},
		// A session's next task; an agent sandbox's runs (a session's tasks:
		// not …/runs, which ServeMux refuses beside the tunnel's route).
		{"POST", "/sandbox/v1/sandboxes/{ref}/tasks", userKey, s.giveTask},
		{"POST", "/sandbox/v1/sandboxes/{ref}/fork", userKey, s.forkSandbox},
		{"GET", "/sandbox/v1/sandboxes/{ref}/run/all", userKey, s.listRuns},
		// Not .../{ref}/log: ServeMux refuses it beside the tunnel's GET
		// /sandbox/v1/{ref}/tcp/{port} (both match /sandbox/v1/sandboxes/tcp/log).
		{"GET", "/sandbox/v1/sandboxes/{ref}/run/log", userKey, s.runLog},
		{"GET", "/sandbox/v1/sandboxes/{ref}/run/verdict", userKey, s.runVerdict},
		{"GET", "/sandbox/v1/sandboxes/{ref}/run/diff", userKey, s.runDiff},
		// Not .../{ref}/egress, for the same reason.
		{"GET", "/sandbox/v1/sandboxes/{ref}/egress/hosts", userKey, s.sandboxEgress},
		{"POST", "/sandbox/v1/git-credential", anyKey, s.gitCredential},
		// An in-machine agent run (Kubernetes) fetches its task, streams
		// its output and reports its exit with its sandbox's key.
		{"GET", api.RunTaskPath, anyKey, s.runTask},
		{"POST", api.RunOutputPath, sandboxStream, s.runOutput},
		// The exit report carries the run's work (a bundle): it bounds
		// its body itself.
		{"POST", api.RunExitPath, sandboxStream, s.runExit},
		// The one-time bootstrap token is the credential; the handler checks it.
		{"POST", api.BootstrapPath, public, s.bootstrap},

		{"GET", "/git/{path...}", own, s.serveGit},
		{"POST", "/git/{path...}", own, s.serveGit},
		{"GET", "/forge/{path...}", own, s.serveForge},
		{"POST", "/forge/{path...}", own, s.serveForge},
		{"GET", "/sandbox/v1/{ref}/tcp/{port}", userKey, s.openTunnel},

		// Inference (SPEC S14): the vendors' own APIs, authenticated with
		// the key where each vendor's clients send theirs.
		{"POST", "/v1/messages", own, s.anthropicMessages},
		{"POST", "/v1/messages/count_tokens", own, s.anthropicCountTokens},
		{"POST", "/v1/chat/completions", own, s.openAIChat},
		{"POST", "/v1/responses", own, s.openAIResponses},
		{"POST", "/v1beta/models/{call}", own, s.gemini},
		{"GET", "/v1/models", own, s.vendorModels},
		{"GET", "/api/v1/models", anyKey, s.listModels},
		{"GET", "/api/v1/orgs/{org}/inference", userKey, s.getInference},
		{"PUT", "/api/v1/orgs/{org}/inference", userKey, s.putInference},
		{"GET", "/api/v1/orgs/{org}/projects/{project}/inference", userKey, s.getInference},
		{"PUT", "/api/v1/orgs/{org}/projects/{project}/inference", userKey, s.putInference},
	}
}

// Handler returns the API and the web panel with their middleware: panic
// recovery and request logging around the routes. The panel's pages are
// HTML, not API, so they are outside the routes table (and the OpenAPI
// description): it takes every path whose first segment no API route
// starts with, and an unknown path under the API's answers in JSON. A
// request for a host under the preview domain goes to the preview alone,
// whatever its path.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	apiRoots := map[string]bool{}
	for _, rt := range s.routes() {
		mux.Handle(rt.method+" "+rt.path, s.authenticate(rt))
		apiRoots[firstSegment(rt.path)] = true
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if s.panel != nil && !apiRoots[firstSegment(r.URL.Path)] {
			s.panel.ServeHTTP(w, r)
			return
		}
		writeJSON(w, http.StatusNotFound, api.Error{Code: api.CodeNotFound, Message: "no such route: " + r.Method + " " + r.URL.Path})
	})
	byHost := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isProxyRequest(r) {
			s.egress.ServeHTTP(w, r)
			return
		}
		if label, ok := s.previews.previewHost(r); ok {
			s.servePreview(w, r, label)
			return
		}
		mux.ServeHTTP(w, r)
	})
	return s.recoverPanics(s.logRequests(byHost))
}

// firstSegment is "api" of "/api/v1/whoami", "healthz" of "/healthz".
func firstSegment(path string) string {
	seg, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return seg
}

// authenticate resolves the caller's key and refuses what the route does
// not allow. The key comes as "Authorization: Bearer <key>".
func (s *Server) authenticate(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt.access == own {
			rt.handle(w, r, account.Principal{})
			return
		}
		if err := limitBody(w, r, s.bodyLimit(rt)); err != nil {
			s.writeError(w, r, err)
			return
		}
		if rt.access == public {
			rt.handle(w, r, account.Principal{})
			return
		}
		token, ok := bearer(r)
		if !ok {
			s.writeError(w, r, fault.Errorf(fault.Unauthenticated, "send your key as Authorization: Bearer <key>"))
			return
		}
		p, err := s.accounts.Authenticate(r.Context(), token)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if rt.access == sandboxStream && p.Sandbox == "" {
			s.writeError(w, r, fault.Errorf(fault.Forbidden, "only a sandbox's own key may use %s", rt.path))
			return
		}
		if rt.access != anyKey && rt.access != sandboxStream && p.Sandbox != "" {
			s.writeError(w, r, fault.Errorf(fault.Forbidden, "a sandbox's own key cannot use the control API"))
			return
		}
		if rt.access == operatorKey && !p.IsOperator() {
			s.writeError(w, r, fault.Errorf(fault.Forbidden, "%s is for operators", rt.path))
			return
		}
		rt.handle(w, r, p)
	})
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		return "", false
	}
	return strings.TrimSpace(token), true
}

// serveMetrics answers a scrape. The series name the classes of every
// organisation, so only operators may read them (Prometheus sends the key
// as its bearer credentials).
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request, _ account.Principal) {
	if s.metrics == nil {
		writeJSON(w, http.StatusNotFound, api.Error{Code: api.CodeNotFound, Message: "this gateway serves no metrics"})
		return
	}
	s.metrics.ServeHTTP(w, r)
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request, _ account.Principal) {
	writeJSON(w, http.StatusOK, api.Health{Status: "ok", Version: s.version, Commit: s.commit, Driver: s.driver})
}

// bodyLimits are the routes ("METHOD path", as in routes) whose body may
// hold more, or less, than api.MaxBody. A route here says so in
// openapi.yaml as x-berth-body-limit (a test checks both ways).
func (s *Server) bodyLimits() map[string]int64 {
	return map[string]int64{
		// A sandbox's create carries a task of up to sandbox.MaxTask
		// however JSON escapes it (six bytes for a control character, or
		// for the <, > and & Go's encoder escapes) and 1 MiB for the rest.
		"POST /sandbox/v1/sandboxes":             6*sandbox.MaxTask + api.MaxBody,
		"POST /sandbox/v1/sandboxes/{ref}/tasks": 6*sandbox.MaxTask + api.MaxBody,
		// A fork's body is a name, a count and a session's task.
		"POST /sandbox/v1/sandboxes/{ref}/fork": 6*sandbox.MaxTask + api.MaxBody,
		// An in-machine run's exit report carries its work as a bundle.
		"POST " + api.RunExitPath: maxRunExit,
		// Anybody may send one; it holds a secret and a key's name.
		"POST " + api.InvitationRedeemPath: maxRedeemBody,
		"POST " + api.SSOTokenPath:         maxSSOTokenBody,
		"POST " + api.SSODevicePath:        maxSSOTokenBody,
		"POST " + api.SSODeviceTokenPath:   maxSSOTokenBody,
		// A forge's delivery: the parser refuses more than event.MaxBody.
		"POST " + api.GitHubHookPath:   event.MaxBody + 1,
		"POST /hooks/v1/triggers/{id}": event.MaxBody + 1,
	}
}

// bodyLimit is the most rt's body may hold, or -1 when rt reads a stream
// (a run's output, git) or its handler limits what it reads itself (the
// model routes, which answer in their vendor's shape).
func (s *Server) bodyLimit(rt route) int64 {
	if n, ok := s.bodyLimits()[rt.method+" "+rt.path]; ok {
		return n
	}
	if rt.access == own || rt.access == sandboxStream {
		return -1
	}
	return api.MaxBody
}

// limitBody is the one body rule: a body over limit (-1: none) is refused
// whole with an *http.MaxBytesError, which writeError answers 413. It is
// refused here when its announced length is too long, else by the first
// read that reaches the limit, whoever reads it.
func limitBody(w http.ResponseWriter, r *http.Request, limit int64) error {
	if limit < 0 {
		return nil
	}
	if r.ContentLength > limit {
		return &http.MaxBytesError{Limit: limit}
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	return nil
}

// decode is the one JSON decoder of request bodies: one JSON value of v's
// type, no unknown field, nothing after it but white space. A body over
// the route's limit keeps its *http.MaxBytesError, so it is answered 413.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			return fmt.Errorf("read the body: %w", err)
		}
		return fault.Field("body", "not the JSON this route takes: %v", err)
	}
	switch _, err := dec.Token(); {
	case errors.Is(err, io.EOF):
		return nil
	case errors.As(err, new(*http.MaxBytesError)):
		return fmt.Errorf("read the body: %w", err)
	}
	return fault.Field("body", "holds more after its JSON value; send one value and nothing after it")
}

// byteSize words a body limit: "1 MiB", "4 KiB".
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (the tunnel
// takes it over).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		s.log.DebugContext(r.Context(), "request", "method", r.Method, "path", r.URL.Path,
			"status", sw.status, "took", time.Since(start))
	})
}

func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(r.Context(), "handler panicked", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v))
				writeJSON(w, http.StatusInternalServerError, api.Error{Code: api.CodeInternal, Message: "internal error"})
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func meterOr(m Meter) Meter {
	if m == nil {
		return noMeter{}
	}
	return m
}
