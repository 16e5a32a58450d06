package gateway

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/egress"
	"berth.dev/berth/internal/egress/placeholder"
	"berth.dev/berth/internal/egress/proxy"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/secret"
)

// The egress proxy (package egress/proxy) answers on the gateway's own
// port, so that a sandbox whose network reaches only the gateway has
// one way out: a CONNECT, or a request in absolute form, goes to it
// whatever its path. The caller is a running sandbox, by its own key
// (HTTPS_PROXY=http://x:KEY@gateway), and goes out under the policy on
// its row; every refusal is in the audit log.

// auditedRefusals bounds the refusals of one sandbox written to the audit
// log in a minute, per replica.
const auditedRefusals = 30

// isProxyRequest reports whether r is for the egress proxy.
func isProxyRequest(r *http.Request) bool {
	return r.Method == http.MethodConnect || r.URL.IsAbs()
}

func (s *Server) newEgressProxy() *proxy.Proxy {
	p := &proxy.Proxy{Authenticate: s.egressCaller, Record: s.egressRecord, Opened: s.egressOpened}
	own, err := proxy.HostAddrs()
	if err != nil {
		s.log.Warn("the egress proxy does not know this host's addresses: only the private and loopback ranges are refused", "err", err)
	} else {
		p.Own = own
	}
	return p
}

// egressCaller is the proxy's Authenticate: a sandbox's own key, as the
// password of Basic credentials or as a Bearer token, of a running
// sandbox.
func (s *Server) egressCaller(ctx context.Context, header string) (proxy.Caller, error) {
	key, ok := proxyKey(header)
	if !ok {
		return proxy.Caller{}, errors.New("no key")
	}
	p, err := s.accounts.Authenticate(ctx, key)
	if err != nil {
		return proxy.Caller{}, errors.New("unknown, revoked or expired key")
	}
	sb, err := s.sandboxes.Own(ctx, p)
	if err != nil {
		return proxy.Caller{}, errors.New("only a sandbox's own key goes out through the proxy")
	}
	if sb.Purpose != sandbox.PurposeAgent {
		// Its own network is its way out (egress open); the proxy would
		// only move where its connections come from.
		return proxy.Caller{}, fmt.Errorf("sandbox %s is an engineer's: it goes out on its own network, not through the proxy", sb.Name)
	}
	if sb.State != sandbox.StateRunning && sb.State != sandbox.StateStarting {
		// Starting too: its machine runs its agent before the gateway has
		// recorded the start's end.
		return proxy.Caller{}, fmt.Errorf("sandbox %s is %s", sb.Name, sb.State)
	}
	pol := egress.None // an agent sandbox made before egress policies
	if sb.Egress != "" {
		if pol, err = egress.Parse(sb.Egress); err != nil {
			return proxy.Caller{}, fmt.Errorf("sandbox %s: egress: %w", sb.Name, err)
		}
	}
	c := proxy.Caller{Sandbox: string(sb.ID), Org: sb.Org, Owner: sb.Owner, Class: sb.Class, Policy: pol,
		OwnStack: sb.Isolation == sandbox.TierIsolated || sb.Isolation == sandbox.TierVM}
	if s.secrets != nil {
		rs, err := s.secrets.For(ctx, string(sb.ID), sb.Project)
		if err != nil {
			return proxy.Caller{}, fmt.Errorf("sandbox %s: its project's secrets: %w", sb.Name, err)
		}
		for _, r := range rs {
			c.Secrets = append(c.Secrets, proxy.Replacement{Hosts: r.Hosts, Placeholder: r.Placeholder, Value: r.Value})
		}
	}
	return c, nil
}

// proxyKey reads a key from Proxy-Authorization: Basic (the key is the
// password; curl --proxy-user x:KEY, and HTTPS_PROXY=http://x:KEY@…) or
// Bearer.
func proxyKey(header string) (string, bool) {
	scheme, cred, ok := strings.Cut(header, " ")
	if !ok {
		return "", false
	}
	switch strings.ToLower(scheme) {
	case "bearer":
		return cred, cred != ""
	case "basic":
		raw, err := base64.StdEncoding.DecodeString(cred)
		if err != nil {
			return "", false
		}
		_, pass, ok := strings.Cut(string(raw), ":")
		return pass, ok && pass != ""
	}
	return "", false
}

// egressOpened notes a learning sandbox's host as its connection opens,
// so its freeze learns it even while the connection is still open.
func (s *Server) egressOpened(c proxy.Caller, conn proxy.Connection) {
	if s.ledger != nil && c.Policy.Mode == egress.ModeLearn {
		s.ledger.Reached(conn.Sandbox, conn.Host, conn.Port, s.now())
	}
}

// egressRecord counts every connection (Prometheus, the sandbox's egress
// summary), writes a refusal to the audit log (the first
// auditedRefusals of each sandbox in a minute: a sandbox that loops on a
// refused host is one stream of writes otherwise), and logs the others at
// debug.
func (s *Server) egressRecord(c proxy.Connection) {
	ctx := context.Background()
	s.meter.Egress(c.Class, c.Allowed, c.Up, c.Down)
	if s.ledger != nil {
		s.ledger.Count(egress.Tally{Sandbox: c.Sandbox, Host: c.Host, Port: c.Port, Allowed: c.Allowed, Up: c.Up, Down: c.Down,
			First: c.Began, Last: c.Began.Add(c.Took), Why: c.Why})
	}
	target := c.Host + ":" + strconv.Itoa(c.Port)
	if !c.Allowed {
		if !s.refusalAudit.allow(c.Sandbox, s.now()) {
			// A sandbox looping on a refused host: its egress summary
			// counts every one; the log and the audit log have enough.
			s.log.DebugContext(ctx, "egress refused, past the audited refusals of this minute", "sandbox", c.Sandbox, "to", target)
			return
		}
		s.log.InfoContext(ctx, "egress refused", "sandbox", c.Sandbox, "to", target, "why", c.Why)
		audit.Record(ctx, s.auditRec, s.log, s.now, audit.Event{At: c.Began, Org: c.Org, Actor: c.Owner, Sandbox: c.Sandbox,
			Action: audit.EgressRefuse, Target: target, Outcome: audit.Refused, Detail: c.Why})
		return
	}
	s.log.DebugContext(ctx, "egress", "sandbox", c.Sandbox, "to", target, "addr", c.Addr, "up", c.Up, "down", c.Down, "took", c.Took)
}

// sandboxEgress is GET /sandbox/v1/sandboxes/{ref}/egress/hosts: where a
// sandbox the caller may see went out to, and was refused.
func (s *Server) sandboxEgress(w http.ResponseWriter, r *http.Request, p account.Principal) {
	sb, err := s.sandboxes.Get(r.Context(), p, r.PathValue("ref"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.SandboxEgress{Sandbox: string(sb.ID), Name: sb.Name, Policy: sb.Egress, Hosts: []api.EgressHost{}}
	var ts []egress.Tally
	if s.ledger != nil {
		if ts, err = s.ledger.Of(r.Context(), string(sb.ID)); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	for _, t := range ts {
		h := api.EgressHost{Host: t.Host, Port: t.Port, Decision: "allowed", Connections: t.Connections, BytesUp: t.Up, BytesDown: t.Down,
			First: t.First.UTC(), Last: t.Last.UTC(), Why: t.Why}
		if !t.Allowed {
			h.Decision = "refused"
		}
		out.Hosts = append(out.Hosts, h)
	}
	out.Learned = egress.Learned(ts).Words()
	writeJSON(w, http.StatusOK, out)
}

// refusedOf is what the egress proxy refused sb, for its run's answer.
func (s *Server) refusedOf(ctx context.Context, sb sandbox.Sandbox) []string {
	if s.ledger == nil {
		return nil
	}
	refused, err := s.ledger.Refused(ctx, string(sb.ID))
	if err != nil && ctx.Err() == nil {
		s.log.WarnContext(ctx, "could not read the hosts a sandbox was refused", "sandbox", sb.ID, "err", err)
	}
	return refused
}

// StopEgress writes the egress counts the gateway still holds and counts
// no more, for a gateway on its way out.
func (s *Server) StopEgress() {
	if s.ledger != nil {
		_ = s.ledger.Stop(context.Background())
	}
}

// EndLearning ends a learning sandbox's learning (egress learn), once:
// its setup ended, or its agent called a model, so what it reached so far
// is all it reaches from now on. The list is in the audit log. A sandbox
// that does not learn is left as it is.
func (s *Server) EndLearning(ctx context.Context, sb sandbox.Sandbox, why string) {
	if sb.Egress != string(egress.ModeLearn) || s.freezer == nil {
		s.learnt.Store(sb.ID, struct{}{})
		return
	}
	set := func(ctx context.Context, to string) (bool, error) { return s.freezer.FreezeEgress(ctx, sb.ID, to) }
	p := egress.None
	var froze bool
	var err error
	if s.ledger != nil {
		p, froze, err = s.ledger.Freeze(ctx, string(sb.ID), set)
	} else {
		froze, err = set(ctx, p.String())
	}
	if err != nil {
		s.log.ErrorContext(ctx, "a learning sandbox's egress is not frozen: it stays open to public hosts", "sandbox", sb.ID, "err", err)
		return
	}
	s.learnt.Store(sb.ID, struct{}{})
	if !froze {
		return // another replica, or another of this one's requests, did
	}
	s.log.InfoContext(ctx, "egress learnt", "sandbox", sb.ID, "egress", p.String(), "why", why)
	audit.Record(ctx, s.auditRec, s.log, s.now, audit.Event{Org: sb.Org, Actor: sb.Owner, Sandbox: string(sb.ID),
		Action: audit.EgressLearn, Target: p.String(), Outcome: audit.OK, Detail: why})
}

// endLearningAtModel ends the learning of the sandbox whose key calls a
// model: its agent has begun. A sandbox known to learn no more costs no
// read.
func (s *Server) endLearningAtModel(ctx context.Context, p account.Principal) {
	if p.Sandbox == "" {
		return
	}
	id := sandbox.ID(p.Sandbox)
	if _, done := s.learnt.Load(id); done {
		return
	}
	sb, err := s.sandboxes.Own(ctx, p)
	if err != nil {
		return
	}
	s.EndLearning(ctx, sb, "its agent called a model")
}

// listSecrets is GET /api/v1/orgs/{org}/projects/{project}/secrets: a
// project's secrets, never their values.
func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request, p account.Principal) {
	if s.secrets == nil {
		writeJSON(w, http.StatusOK, []api.SecretInfo{})
		return
	}
	all, err := s.secrets.List(r.Context(), p, r.PathValue("org"), r.PathValue("project"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]api.SecretInfo, len(all))
	for i, x := range all {
		out[i] = apiSecret(x)
	}
	writeJSON(w, http.StatusOK, out)
}

// setSecret is PUT /api/v1/orgs/{org}/projects/{project}/secrets/{name}.
func (s *Server) setSecret(w http.ResponseWriter, r *http.Request, p account.Principal) {
	if s.secrets == nil {
		s.writeError(w, r, fault.Errorf(fault.Unserved, "this gateway keeps no secrets"))
		return
	}
	var req api.SecretValue
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	x, err := s.secrets.Set(r.Context(), p, r.PathValue("org"), r.PathValue("project"), r.PathValue("name"), req.Hosts, secret.New(req.Value))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiSecret(x))
}

// deleteSecret is DELETE /api/v1/orgs/{org}/projects/{project}/secrets/{name}.
func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request, p account.Principal) {
	if s.secrets == nil {
		s.writeError(w, r, fault.Errorf(fault.NotFound, "secret %s", r.PathValue("name")))
		return
	}
	if err := s.secrets.Delete(r.Context(), p, r.PathValue("org"), r.PathValue("project"), r.PathValue("name")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func apiSecret(x placeholder.Credential) api.SecretInfo {
	return api.SecretInfo{Name: x.Name, Hosts: x.Hosts, CreatedAt: x.CreatedAt, CreatedBy: x.CreatedBy}
}
