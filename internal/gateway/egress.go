package gateway

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/egress"
	"berth.dev/berth/internal/egress/proxy"
	"berth.dev/berth/internal/sandbox"
)

// The egress proxy (package egress/proxy) answers on the gateway's own
// port, so that a sandbox whose network reaches only the gateway has
// one way out: a CONNECT, or a request in absolute form, goes to it
// whatever its path. The caller is a running sandbox, by its own key
// (HTTPS_PROXY=http://x:KEY@gateway), and goes out under the policy on
// its row; every refusal is in the audit log.

// isProxyRequest reports whether r is for the egress proxy.
func isProxyRequest(r *http.Request) bool {
	return r.Method == http.MethodConnect || r.URL.IsAbs()
}

func (s *Server) newEgressProxy() *proxy.Proxy {
	p := &proxy.Proxy{Authenticate: s.egressCaller, Record: s.egressRecord}
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
	if sb.State != sandbox.StateRunning {
		return proxy.Caller{}, fmt.Errorf("sandbox %s is %s", sb.Name, sb.State)
	}
	pol := egress.None // an agent sandbox made before egress policies
	if sb.Egress != "" {
		if pol, err = egress.Parse(sb.Egress); err != nil {
			return proxy.Caller{}, fmt.Errorf("sandbox %s: egress: %w", sb.Name, err)
		}
	}
	return proxy.Caller{Sandbox: string(sb.ID), Org: sb.Org, Owner: sb.Owner, Class: sb.Class, Policy: pol}, nil
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

// egressRecord counts every connection (Prometheus), writes a refusal to
// the audit log, and logs the others at debug.
func (s *Server) egressRecord(c proxy.Connection) {
	ctx := context.Background()
	s.meter.Egress(c.Class, c.Allowed, c.Up, c.Down)
	target := c.Host + ":" + strconv.Itoa(c.Port)
	if !c.Allowed {
		s.log.InfoContext(ctx, "egress refused", "sandbox", c.Sandbox, "to", target, "why", c.Why)
		audit.Record(ctx, s.auditRec, s.log, s.now, audit.Event{At: c.Began, Org: c.Org, Actor: c.Owner, Sandbox: c.Sandbox,
			Action: audit.EgressRefuse, Target: target, Outcome: audit.Refused, Detail: c.Why})
		return
	}
	s.log.DebugContext(ctx, "egress", "sandbox", c.Sandbox, "to", target, "addr", c.Addr, "up", c.Up, "down", c.Down, "took", c.Took)
}
