package gateway

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/gateway/panel"
	"berth.dev/berth/internal/reach"
	"berth.dev/berth/internal/sandbox"
)

// The HTTP preview of a sandbox's port (SPEC S10). A sandbox's app is
// somebody's code: served under the gateway's origin, its JavaScript could
// call the API and the panel with the signed-in user's cookie. So each
// port of each sandbox is served on an origin of its own, a host name
// under the deployment's preview domain (BERTH_PREVIEW_DOMAIN) that never
// reaches the API or the panel, and that never sees their credentials:
//
//  1. POST /sandbox/v1/sandboxes/{ref}/previews {port}, with a key (the
//     CLI) or from the signed-in panel, asks reach's rule (the owner or an
//     operator; an administrator is refused and audited; anybody else does
//     not find the sandbox) and answers a URL on the preview's host with a
//     one-time token that lasts a minute;
//  2. the browser opens it; the preview trades the token, once, for a
//     host-only cookie of its own (a few hours) and redirects to the same
//     URL without it;
//  3. each request with the cookie is checked again (the key it came from
//     still live, its user enabled, reach's rule) and proxied to the
//     sandbox's port through the tunnel's dial, without the cookie or an
//     Authorization header.
//
// Tokens and cookies live in this gateway's memory: with several replicas
// a preview host must reach the replica that minted it (or a restart
// means asking for a new preview).
const (
	previewTokenTTL  = time.Minute
	previewCookieTTL = 8 * time.Hour
	// previewParam carries the one-time token in the preview's URL.
	previewParam = "berth_preview"
	// previewCookie is the preview's cookie on http; on https it is
	// previewHostCookie, which a browser keeps host-only and Secure.
	previewCookie     = "berth_preview"
	previewHostCookie = "__Host-berth_preview"
)

// previewGrant is what a token or a cookie lets its bearer do: open port
// of sandbox, as whoever holds key, until expires.
type previewGrant struct {
	key     string // the id of the key the preview was asked for with
	sandbox sandbox.ID
	port    int
	expires time.Time
}

// previewSession is a redeemed token: the cookie's grant and the proxy
// that carries its requests (its connections are the grant's).
type previewSession struct {
	previewGrant
	proxy     *httputil.ReverseProxy
	transport *http.Transport
}

// previews are the deployment's preview domain and the tokens and
// sessions of this gateway.
type previews struct {
	domain string

	mu       sync.Mutex
	tokens   map[string]previewGrant
	sessions map[string]*previewSession
	conns    map[*previewConn]bool // open to sandboxes, WebSockets' included
	stopping bool
}

func newPreviews(domain string) *previews {
	if domain == "" {
		return nil
	}
	return &previews{domain: strings.ToLower(strings.TrimSuffix(domain, ".")),
		tokens: map[string]previewGrant{}, sessions: map[string]*previewSession{}, conns: map[*previewConn]bool{}}
}

// PreviewLabel is the DNS label of port of sandbox id under the preview
// domain: "p<port>-<id with _ as ->", as p3000-sbx-abc…; one label,
// lowercase, 31 characters for berth's ids, and no two sandboxes or ports
// share one (a port is digits up to the first "-", ids hold no "-").
func PreviewLabel(id sandbox.ID, port int) string {
	return "p" + strconv.Itoa(port) + "-" + strings.ReplaceAll(string(id), "_", "-")
}

// parsePreviewLabel is PreviewLabel backwards; false for any label it
// does not make.
func parsePreviewLabel(label string) (sandbox.ID, int, bool) {
	rest, ok := strings.CutPrefix(label, "p")
	if !ok {
		return "", 0, false
	}
	num, id, ok := strings.Cut(rest, "-")
	port, err := strconv.Atoi(num)
	if !ok || err != nil || port <= 0 {
		return "", 0, false
	}
	sid := sandbox.ID(strings.ReplaceAll(id, "-", "_"))
	if PreviewLabel(sid, port) != label {
		return "", 0, false
	}
	return sid, port, true
}

// previewHost reports whether r is for the preview domain, and the label
// under it ("" for the domain itself or a deeper name).
func (pv *previews) previewHost(r *http.Request) (label string, ok bool) {
	if pv == nil {
		return "", false
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == pv.domain {
		return "", true
	}
	label, ok = strings.CutSuffix(host, "."+pv.domain)
	if !ok {
		return "", false
	}
	if strings.Contains(label, ".") {
		return "", true
	}
	return label, true
}

// mint keeps a one-time token for g.
func (pv *previews) mint(g previewGrant, now time.Time) string {
	token := rand.Text()
	pv.keep(now, func() { pv.tokens[token] = g })
	return token
}

// keep runs put with mu held, after forgetting what expired.
func (pv *previews) keep(now time.Time, put func()) {
	pv.mu.Lock()
	ended := pv.sweep(now)
	put()
	pv.mu.Unlock()
	closeIdle(ended)
}

// redeem spends token (whatever it is redeemed for) and returns its grant
// when it is for port of id and not expired.
func (pv *previews) redeem(token string, id sandbox.ID, port int, now time.Time) (previewGrant, bool) {
	pv.mu.Lock()
	defer pv.mu.Unlock()
	g, ok := pv.tokens[token]
	delete(pv.tokens, token)
	if !ok || g.sandbox != id || g.port != port || !now.Before(g.expires) {
		return previewGrant{}, false
	}
	return g, true
}

// open keeps a session for g under a new cookie value.
func (pv *previews) open(sess *previewSession, now time.Time) string {
	value := rand.Text()
	pv.keep(now, func() { pv.sessions[value] = sess })
	return value
}

// session is the live session of a cookie's value for port of id.
func (pv *previews) session(value string, id sandbox.ID, port int, now time.Time) (*previewSession, bool) {
	pv.mu.Lock()
	sess, ok := pv.sessions[value]
	if !ok || sess.sandbox != id || sess.port != port {
		pv.mu.Unlock()
		return nil, false
	}
	if !now.Before(sess.expires) {
		delete(pv.sessions, value)
		pv.mu.Unlock()
		sess.transport.CloseIdleConnections()
		return nil, false
	}
	pv.mu.Unlock()
	return sess, true
}

// sweep forgets expired tokens and sessions, and returns the sessions'
// transports for the caller to close once it has let go of mu (closing a
// connection takes it). Called with mu held.
func (pv *previews) sweep(now time.Time) (ended []*http.Transport) {
	for t, g := range pv.tokens {
		if !now.Before(g.expires) {
			delete(pv.tokens, t)
		}
	}
	for v, sess := range pv.sessions {
		if !now.Before(sess.expires) {
			delete(pv.sessions, v)
			ended = append(ended, sess.transport)
		}
	}
	return ended
}

func closeIdle(transports []*http.Transport) {
	for _, tr := range transports {
		tr.CloseIdleConnections()
	}
}

// opened keeps pc until it closes; false when the gateway is stopping.
func (pv *previews) opened(pc *previewConn) bool {
	pv.mu.Lock()
	defer pv.mu.Unlock()
	if pv.stopping {
		return false
	}
	pv.conns[pc] = true
	return true
}

func (pv *previews) closed(pc *previewConn) {
	pv.mu.Lock()
	defer pv.mu.Unlock()
	delete(pv.conns, pc)
}

// stop closes every connection of every preview and opens no more: the
// gateway is stopping (CloseTunnels), and net/http forgets a WebSocket's
// connection once the proxy takes it over.
func (pv *previews) stop() {
	if pv == nil {
		return
	}
	pv.mu.Lock()
	pv.stopping = true
	conns := make([]*previewConn, 0, len(pv.conns))
	for pc := range pv.conns {
		conns = append(conns, pc)
	}
	var transports []*http.Transport
	for _, sess := range pv.sessions {
		transports = append(transports, sess.transport)
	}
	pv.mu.Unlock()
	closeIdle(transports)
	for _, pc := range conns {
		_ = pc.Close()
	}
}

// createPreview is POST /sandbox/v1/sandboxes/{ref}/previews: reach's rule
// decides, and the answer is a URL that opens the preview once.
func (s *Server) createPreview(w http.ResponseWriter, r *http.Request, p account.Principal) {
	u, err := s.mintPreview(r, p, r.PathValue("ref"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, u)
}

func (s *Server) mintPreview(r *http.Request, p account.Principal, ref string) (api.Preview, error) {
	var in api.CreatePreview
	if err := decode(r, &in); err != nil {
		return api.Preview{}, err
	}
	return s.previewURL(r, p, ref, in.Port)
}

// previewURL mints a preview of port of the sandbox ref for p, reached as
// r reached the gateway (its scheme and port).
func (s *Server) previewURL(r *http.Request, p account.Principal, ref string, port int) (api.Preview, error) {
	if s.previews == nil {
		return api.Preview{}, fault.Errorf(fault.Unserved, "this gateway serves no HTTP previews: its operator has not set BERTH_PREVIEW_DOMAIN (berth sandbox forward reaches a port without one)")
	}
	if s.reach == nil {
		return api.Preview{}, fault.Errorf(fault.Unavailable, "this gateway reaches no sandbox")
	}
	sb, err := s.reach.Admit(r.Context(), p, ref, port)
	if err != nil {
		return api.Preview{}, err
	}
	ports, ok := s.reach.Ports()
	if !ok {
		return api.Preview{}, fault.Errorf(fault.Unavailable, "this deployment's driver (%s) cannot reach a sandbox's ports", s.driver)
	}
	if !ports.Contains(port) {
		return api.Preview{}, fault.Field("port", "%d is not reachable: the %s driver reaches %s", port, s.driver, ports)
	}
	expires := s.now().Add(previewTokenTTL)
	token := s.previews.mint(previewGrant{key: p.KeyID, sandbox: sb.ID, port: port, expires: expires}, s.now())
	host := PreviewLabel(sb.ID, port) + "." + s.previews.domain
	if _, gwPort, err := net.SplitHostPort(r.Host); err == nil {
		host = net.JoinHostPort(host, gwPort)
	}
	scheme := "http"
	if secureRequest(r) {
		scheme = "https"
	}
	u := url.URL{Scheme: scheme, Host: host, Path: "/", RawQuery: previewParam + "=" + url.QueryEscape(token)}
	return api.Preview{URL: u.String(), ExpiresAt: expires.UTC()}, nil
}

// panelPreviews are the panel's way to previews: none without a preview
// domain.
func panelPreviews(s *Server) panel.Previews {
	if s.previews == nil {
		return nil
	}
	return previewMinter{s}
}

type previewMinter struct{ s *Server }

func (m previewMinter) Preview(r *http.Request, p account.Principal, ref string, port int) (api.Preview, error) {
	return m.s.previewURL(r, p, ref, port)
}

// secureRequest reports whether the browser reached the gateway over
// https, itself or through a proxy that says so.
func secureRequest(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// servePreview answers every request to a host under the preview domain:
// nothing of the API's or the panel's is served here.
func (s *Server) servePreview(w http.ResponseWriter, r *http.Request, label string) {
	id, port, ok := parsePreviewLabel(label)
	if !ok {
		previewPage(w, http.StatusNotFound, "No such preview", "This host name is not a preview of a sandbox's port.")
		return
	}
	now := s.now()
	q := r.URL.Query()
	if token := q.Get(previewParam); token != "" {
		g, ok := s.previews.redeem(token, id, port, now)
		if !ok {
			previewPage(w, http.StatusUnauthorized, "This preview link is spent",
				"A preview link opens once, within a minute of being asked for. Ask for a new one from the panel's sandbox page or with: berth sandbox preview NAME "+strconv.Itoa(port))
			return
		}
		g.expires = now.Add(previewCookieTTL)
		value := s.previews.open(s.newPreviewSession(g), now)
		name := previewCookie
		if secureRequest(r) {
			name = previewHostCookie
		}
		http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: int(previewCookieTTL / time.Second),
			HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secureRequest(r)})
		// The token leaves the address bar and the history.
		q.Del(previewParam)
		// Always a path on this host: "//elsewhere" would be another's.
		back := url.URL{Path: "/" + strings.TrimLeft(r.URL.Path, "/"), RawQuery: q.Encode()}
		http.Redirect(w, r, back.String(), http.StatusSeeOther)
		return
	}
	sess, ok := s.previewSessionOf(r, id, port, now)
	if !ok {
		previewPage(w, http.StatusUnauthorized, "Sign in through berth",
			"Open this preview from the sandbox's page in berth's panel, or with: berth sandbox preview NAME "+strconv.Itoa(port))
		return
	}
	// Asked again on every request: a key revoked, a user disabled or a
	// sandbox given away ends the preview.
	p, err := s.accounts.Principal(r.Context(), sess.key)
	if err == nil {
		_, err = s.reach.Admit(r.Context(), p, string(id), port)
	}
	if err != nil {
		s.previewError(w, r, err)
		return
	}
	sess.proxy.ServeHTTP(w, r)
}

func (s *Server) previewSessionOf(r *http.Request, id sandbox.ID, port int, now time.Time) (*previewSession, bool) {
	name := previewCookie
	if secureRequest(r) {
		name = previewHostCookie
	}
	c, err := r.Cookie(name)
	if err != nil {
		return nil, false
	}
	return s.previews.session(c.Value, id, port, now)
}

// newPreviewSession makes the proxy of g: its connections are dialled
// through reach as the tunnel's are (each one in the audit log as
// shell.open, each keeping the sandbox from idling while open).
func (s *Server) newPreviewSession(g previewGrant) *previewSession {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			p, err := s.accounts.Principal(ctx, g.key)
			if err != nil {
				return nil, err
			}
			c, err := s.reach.Connect(ctx, p, string(g.sandbox), g.port)
			if err != nil {
				return nil, err
			}
			pc := &previewConn{Conn: c.Conn, c: c, pv: s.previews}
			if !s.previews.opened(pc) {
				_ = pc.Close()
				return nil, fault.Errorf(fault.Unavailable, "the gateway is stopping")
			}
			return pc, nil
		},
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 5 * time.Minute,
	}
	target := &url.URL{Scheme: "http", Host: PreviewLabel(g.sandbox, g.port)}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// The app sees the host the browser asked for, as it would
			// behind any reverse proxy.
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
			// SetXForwarded says https only for the gateway's own TLS;
			// behind a proxy that ends TLS and says so, the gateway's
			// cookies are Secure, and the app is told so too.
			if secureRequest(pr.In) {
				pr.Out.Header.Set("X-Forwarded-Proto", "https")
			}
			pr.Out.Header.Del("Authorization")
			stripPreviewCookies(pr.Out.Header)
		},
		Transport:     tr,
		FlushInterval: -1, // server-sent events and streamed answers pass as they come
		ErrorHandler:  func(w http.ResponseWriter, r *http.Request, err error) { s.previewError(w, r, err) },
	}
	return &previewSession{previewGrant: g, proxy: proxy, transport: tr}
}

// stripPreviewCookies takes the preview's own cookie out of h, keeping
// the app's.
func stripPreviewCookies(h http.Header) {
	cookies := (&http.Request{Header: h}).Cookies()
	h.Del("Cookie")
	var kept []string
	for _, c := range cookies {
		if c.Name != previewCookie && c.Name != previewHostCookie {
			kept = append(kept, c.Name+"="+c.Value)
		}
	}
	if len(kept) > 0 {
		h.Set("Cookie", strings.Join(kept, "; "))
	}
}

// previewError answers what went wrong as a small page: berth's refusals
// in the API's words and statuses, anything else as the sandbox's port
// failing (502).
func (s *Server) previewError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	if fault.Of(err) == "" {
		s.log.WarnContext(r.Context(), "preview: the sandbox's port failed", "host", r.Host, "err", err)
		previewPage(w, http.StatusBadGateway, "The sandbox's port failed", "The app on this port did not answer HTTP: "+err.Error())
		return
	}
	status, body := s.errorStatus(w, r, err)
	previewPage(w, status, http.StatusText(status), body.Message)
}

// previewPage writes a small HTML page: the preview's answers are for a
// browser.
func previewPage(w http.ResponseWriter, status int, title, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>%s</title></head>\n<body style=\"font-family:sans-serif;max-width:40em;margin:3em auto\"><h1>%s</h1><p>%s</p><p><small>berth preview</small></p></body></html>\n",
		html.EscapeString(title), html.EscapeString(title), html.EscapeString(msg))
}

// previewConn is one connection of a preview to the sandbox's port: its
// bytes restart the sandbox's idle clock (at most once a second), and
// closing it records it.
type previewConn struct {
	net.Conn
	c        *reach.Connection
	pv       *previews
	up, down atomic.Int64
	last     atomic.Int64 // unix seconds of the last activity told
}

func (pc *previewConn) active() {
	if now := time.Now().Unix(); pc.last.Swap(now) != now {
		pc.c.Active()
	}
}

func (pc *previewConn) Read(b []byte) (int, error) {
	n, err := pc.Conn.Read(b)
	if n > 0 {
		pc.down.Add(int64(n))
		pc.active()
	}
	return n, err
}

func (pc *previewConn) Write(b []byte) (int, error) {
	n, err := pc.Conn.Write(b)
	if n > 0 {
		pc.up.Add(int64(n))
		pc.active()
	}
	return n, err
}

func (pc *previewConn) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pc.c.Close(ctx, reach.Traffic{Up: pc.up.Load(), Down: pc.down.Load(), End: "closed by the preview"})
	pc.pv.closed(pc)
	return nil
}
