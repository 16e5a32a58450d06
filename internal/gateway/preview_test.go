package gateway_test

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/gateway"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/sandbox"
)

const previewDomain = "preview.localhost"

// previewWorld is a world whose gateway serves previews under
// preview.localhost, on a clock the test can move forward.
func previewWorld(t *testing.T) (*world, *atomic.Int64) {
	t.Helper()
	var skew atomic.Int64
	w := newWorld(t, func(c *worldConfig) {
		c.now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
		c.options = func(o *gateway.Options) { o.PreviewDomain = previewDomain }
	})
	return w, &skew
}

// seen is what the app behind a preview saw of a request.
type seen struct {
	Host, Path, Query, Authorization, Cookie string
	ForwardedHost, ForwardedProto            string
}

// app starts a sandbox's web app: "/" answers what it saw, "/ws" is a
// WebSocket echo, "/away" redirects.
func app(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/ws", websocket.Handler(func(c *websocket.Conn) {
		for {
			var msg string
			if websocket.Message.Receive(c, &msg) != nil || websocket.Message.Send(c, msg) != nil {
				return
			}
		}
	}))
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://example.com/", http.StatusFound)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(seen{Host: r.Host, Path: r.URL.Path, Query: r.URL.RawQuery, Authorization: r.Header.Get("Authorization"),
			Cookie: r.Header.Get("Cookie"), ForwardedHost: r.Header.Get("X-Forwarded-Host"), ForwardedProto: r.Header.Get("X-Forwarded-Proto")})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// serving creates a running sandbox of the owner's whose port 3000 is app.
func (w *world) serving(t *testing.T, name string) api.Sandbox {
	t.Helper()
	sb := w.create(t, w.owner, name)
	w.drv.Point(sandbox.ID(sb.ID), 3000, app(t))
	return sb
}

// browser is a browser on the test's machine: it resolves every name to
// the gateway (as Chromium does *.localhost), keeps cookies, follows
// redirects, and sends what extra says with every request.
func (w *world) browser(t *testing.T, extra http.Header) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	gw := strings.TrimPrefix(w.url, "http://")
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, gw)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Jar: jar, Timeout: 20 * time.Second, Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		for k, v := range extra {
			r.Header[k] = v
		}
		return tr.RoundTrip(r)
	})}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// previewURL asks c for a preview of port of sb.
func previewURL(t *testing.T, c *client.Client, sb api.Sandbox, port int) *url.URL {
	t.Helper()
	p, err := c.Preview(t.Context(), sb.ID, port)
	if err != nil {
		t.Fatalf("preview of port %d of %s: %v", port, sb.Name, err)
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// fetch GETs u with b and returns the status and body.
func fetch(t *testing.T, b *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := b.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func decodeSeen(t *testing.T, body string) seen {
	t.Helper()
	var s seen
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("not the app's answer: %v\n%s", err, body)
	}
	return s
}

// TestPreviewTokenFlow: a preview asked for by the owner opens once in a
// browser, which gets a cookie of the preview's own and lands on the app
// without the token in its address; the app sees neither the cookie nor
// the Authorization header the browser sent, but its own cookies; a token
// used again, or too late, opens nothing; a cookie is for its own sandbox
// and port only.
func TestPreviewTokenFlow(t *testing.T) {
	w, skew := previewWorld(t)
	sb := w.serving(t, "web")
	other := w.serving(t, "other")
	w.drv.Point(sandbox.ID(sb.ID), 3001, app(t))

	u := previewURL(t, w.owner, sb, 3000)
	wantHost := "p3000-" + strings.ReplaceAll(sb.ID, "_", "-") + "." + previewDomain
	if u.Hostname() != wantHost || u.Port() != strings.Split(strings.TrimPrefix(w.url, "http://"), ":")[1] || u.Query().Get("berth_preview") == "" {
		t.Fatalf("preview URL %s: want http://%s:<the gateway's port>/?berth_preview=<token>", u, wantHost)
	}
	b := w.browser(t, http.Header{"Authorization": {"Bearer not-for-the-app"}})
	app0, _ := url.Parse("http://" + u.Host + "/")
	b.Jar.SetCookies(app0, []*http.Cookie{{Name: "app", Value: "mine"}})
	resp, body := fetch(t, b, u.String()+"&tab=2")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("first visit: %d %s", resp.StatusCode, body)
	}
	got := decodeSeen(t, body)
	if resp.Request.URL.Query().Has("berth_preview") || got.Query != "tab=2" {
		t.Errorf("after the redirect the browser is at %s, the app saw query %q: want the token gone, the rest kept", resp.Request.URL, got.Query)
	}
	if got.Authorization != "" || got.Cookie != "app=mine" {
		t.Errorf("the app saw Authorization %q and Cookie %q: want none and only its own cookie", got.Authorization, got.Cookie)
	}
	if got.Host != u.Host || got.ForwardedHost != u.Host || got.ForwardedProto != "http" {
		t.Errorf("the app saw %+v: want the preview's host, forwarded", got)
	}
	var cookie *http.Cookie
	for _, c := range b.Jar.Cookies(app0) {
		if c.Name == "berth_preview" {
			cookie = c
		}
	}
	if cookie == nil {
		t.Fatal("the browser holds no preview cookie")
	}
	// The cookie is what the browser was given: HttpOnly, SameSite=Lax, host-only.
	b2 := w.browser(t, nil)
	direct, _ := http.NewRequest("GET", u.String(), nil)
	rr, err := b2.Transport.RoundTrip(direct)
	if err != nil {
		t.Fatal(err)
	}
	rr.Body.Close()
	if rr.StatusCode != http.StatusUnauthorized {
		t.Errorf("the token used again: %d, want 401", rr.StatusCode)
	}

	// The app's redirects go to the browser, not followed by the gateway.
	nofollow := *b
	nofollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if resp, _ := fetch(t, &nofollow, "http://"+u.Host+"/away"); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "https://example.com/" {
		t.Errorf("the app's redirect: %d to %q, want its 302 as it sent it", resp.StatusCode, resp.Header.Get("Location"))
	}

	// The cookie opens nothing else.
	for _, host := range []string{
		"p3001-" + strings.ReplaceAll(sb.ID, "_", "-") + "." + previewDomain,
		"p3000-" + strings.ReplaceAll(other.ID, "_", "-") + "." + previewDomain,
	} {
		req, _ := http.NewRequest("GET", "http://"+host+":"+u.Port()+"/", nil)
		req.AddCookie(&http.Cookie{Name: "berth_preview", Value: cookie.Value})
		resp, err := b2.Transport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(body), `"Path"`) {
			t.Errorf("the cookie of port 3000 of web at %s: %d %s, want 401 and not the app", host, resp.StatusCode, body)
		}
	}

	// The redirect that drops the token stays on the preview's host.
	nofollow2 := *w.browser(t, nil)
	nofollow2.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	odd := previewURL(t, w.owner, sb, 3000)
	if resp, _ := fetch(t, &nofollow2, "http://"+odd.Host+"//example.com/x?"+odd.RawQuery); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/example.com/x" {
		t.Errorf("redeemed at //example.com/x: %d to %q, want 303 to /example.com/x", resp.StatusCode, resp.Header.Get("Location"))
	}

	// A token older than a minute opens nothing.
	late := previewURL(t, w.owner, sb, 3000)
	skew.Store(int64(61 * time.Second))
	if resp, body := fetch(t, w.browser(t, nil), late.String()); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a token 61 s old: %d %s, want 401", resp.StatusCode, body)
	}
	skew.Store(0)

	// A key revoked ends the previews opened with it.
	k, err := w.operator.CreateKey(t.Context(), api.CreateKey{User: sb.Owner})
	if err != nil {
		t.Fatal(err)
	}
	fresh := client.New(w.url, k.Secret, nil)
	b3 := w.browser(t, nil)
	if resp, body := fetch(t, b3, previewURL(t, fresh, sb, 3000).String()); resp.StatusCode != http.StatusOK {
		t.Fatalf("with a fresh key: %d %s", resp.StatusCode, body)
	}
	if err := w.operator.RevokeKey(t.Context(), k.ID); err != nil {
		t.Fatal(err)
	}
	if resp, body := fetch(t, b3, "http://"+u.Host+"/"); resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, `"Path"`) {
		t.Errorf("after the key was revoked: %d %s, want 401", resp.StatusCode, body)
	}
}

// TestPreviewWho is reach's rule over the preview: an administrator sees
// the sandbox but is refused (403, audited as shell.open refused), another
// member and another organisation do not find it, an operator may.
func TestPreviewWho(t *testing.T) {
	w, _ := previewWorld(t)
	ctx := t.Context()
	sb := w.serving(t, "web")
	for _, row := range []struct {
		who    string
		c      *client.Client
		status int
	}{
		{"administrator", w.admin, 403},
		{"another member", w.member, 404},
		{"another organisation", w.foreign, 404},
	} {
		_, err := row.c.Preview(ctx, sb.ID, 3000)
		if st, _ := code(err); st != row.status {
			t.Errorf("%s: %v, want %d", row.who, err, row.status)
		}
	}
	events, _, err := w.st.ListAudit(ctx, audit.Filter{Sandbox: sb.ID}, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var refused int
	for _, e := range shells(events) {
		if e.Outcome == audit.Refused && e.Target == "port 3000" {
			refused++
		}
	}
	if refused != 1 {
		t.Errorf("audit: %+v, want the administrator's refusal", events)
	}
	if resp, body := fetch(t, w.browser(t, nil), previewURL(t, w.operator, sb, 3000).String()); resp.StatusCode != http.StatusOK {
		t.Errorf("the operator's preview: %d %s", resp.StatusCode, body)
	}
	if _, err := w.owner.Preview(ctx, sb.ID, 80); err == nil || !strings.Contains(err.Error(), "port") {
		t.Errorf("port 80: %v, want 400 naming port", err)
	}
}

// TestPreviewHostDispatch: a host under the preview domain never reaches
// the API or the panel, and the API's host never serves a preview.
func TestPreviewHostDispatch(t *testing.T) {
	w, _ := previewWorld(t)
	sb := w.serving(t, "web")
	host := "p3000-" + strings.ReplaceAll(sb.ID, "_", "-") + "." + previewDomain + ":" + strings.Split(strings.TrimPrefix(w.url, "http://"), ":")[1]
	b := w.browser(t, http.Header{"Authorization": {"Bearer " + w.opKey}})
	for _, path := range []string{"/api/v1/whoami", "/healthz", "/sandbox/v1/sandboxes", "/sandboxes"} {
		for _, h := range []string{host, previewDomain, "x.y." + previewDomain} {
			resp, body := fetch(t, b, "http://"+h+path)
			if resp.StatusCode == http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, "berth preview") {
				t.Errorf("%s%s: %d %s %s, want the preview's refusal", h, path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
		}
	}
	// The API's host does not redeem a token: the token still opens the preview.
	u := previewURL(t, w.owner, sb, 3000)
	if resp, body := fetch(t, w.browser(t, nil), w.url+"/?"+u.RawQuery); strings.Contains(body, `"Path"`) || resp.Header.Get("Set-Cookie") != "" && strings.Contains(resp.Header.Get("Set-Cookie"), "berth_preview") {
		t.Errorf("the API's host with a token: %d %s", resp.StatusCode, body)
	}
	if resp, body := fetch(t, w.browser(t, nil), u.String()); resp.StatusCode != http.StatusOK {
		t.Errorf("the token after the API's host saw it: %d %s", resp.StatusCode, body)
	}
}

// TestPreviewWebSocket: a WebSocket passes through a preview both ways.
func TestPreviewWebSocket(t *testing.T) {
	w, _ := previewWorld(t)
	sb := w.serving(t, "web")
	b := w.browser(t, nil)
	u := previewURL(t, w.owner, sb, 3000)
	if resp, body := fetch(t, b, u.String()); resp.StatusCode != http.StatusOK {
		t.Fatalf("open the preview: %d %s", resp.StatusCode, body)
	}
	origin := "http://" + u.Host
	cfg, err := websocket.NewConfig("ws://"+u.Host+"/ws", origin)
	if err != nil {
		t.Fatal(err)
	}
	home, _ := url.Parse(origin + "/")
	for _, c := range b.Jar.Cookies(home) {
		cfg.Header.Add("Cookie", c.Name+"="+c.Value)
	}
	raw, err := net.Dial("tcp", strings.TrimPrefix(w.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(20 * time.Second))
	ws, err := websocket.NewClient(cfg, raw)
	if err != nil {
		t.Fatalf("WebSocket handshake through the preview: %v", err)
	}
	defer ws.Close()
	for _, msg := range []string{"hello", strings.Repeat("x", 70000)} {
		if err := websocket.Message.Send(ws, msg); err != nil {
			t.Fatal(err)
		}
		var back string
		if err := websocket.Message.Receive(ws, &back); err != nil || back != msg {
			t.Fatalf("echo of %d bytes: %d bytes, %v", len(msg), len(back), err)
		}
	}
}

// TestPreviewErrors: what went wrong is a small page in berth's words: a
// sandbox that is not running, a port nothing listens on.
func TestPreviewErrors(t *testing.T) {
	w, _ := previewWorld(t)
	ctx := t.Context()
	sb := w.serving(t, "web")
	b := w.browser(t, nil)
	// Nothing listens on 3001: the preview opens, the page says so.
	if resp, body := fetch(t, b, previewURL(t, w.owner, sb, 3001).String()); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "port 3001") {
		t.Errorf("port 3001, where nothing listens: %d %s", resp.StatusCode, body)
	}
	u := previewURL(t, w.owner, sb, 3000)
	if resp, body := fetch(t, b, u.String()); resp.StatusCode != http.StatusOK {
		t.Fatalf("port 3000: %d %s", resp.StatusCode, body)
	}
	if _, err := w.owner.Suspend(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if resp, body := fetch(t, b, "http://"+u.Host+"/"); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "suspended") {
		t.Errorf("suspended: %d %s, want 409 saying so", resp.StatusCode, body)
	}
}

// TestPreviewOff: without a preview domain the gateway hands out no
// preview and says why, and a preview-like host is the API's.
func TestPreviewOff(t *testing.T) {
	w := newWorld(t)
	sb := w.serving(t, "web")
	_, err := w.owner.Preview(t.Context(), sb.ID, 3000)
	if st, _ := code(err); st != http.StatusNotFound || !strings.Contains(err.Error(), "BERTH_PREVIEW_DOMAIN") {
		t.Errorf("preview without a domain: %v, want 404 naming BERTH_PREVIEW_DOMAIN", err)
	}
	host := "p3000-" + strings.ReplaceAll(sb.ID, "_", "-") + "." + previewDomain
	if resp, body := fetch(t, w.browser(t, nil), "http://"+host+"/healthz"); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"ok"`) {
		t.Errorf("healthz on %s: %d %s, want the API's", host, resp.StatusCode, body)
	}
}

var previewLink = regexp.MustCompile(`id="preview-link" href="([^"]+)"`)

// TestPreviewFromPanel: signed in to the panel, the owner asks the
// sandbox's page for port 3000 and follows the link to the app; the app
// sees none of the panel's cookies.
func TestPreviewFromPanel(t *testing.T) {
	w, _ := previewWorld(t)
	sb := w.serving(t, "web")
	k, err := w.operator.CreateKey(t.Context(), api.CreateKey{User: sb.Owner})
	if err != nil {
		t.Fatal(err)
	}
	b := w.browser(t, nil)
	_, body := fetch(t, b, w.url+"/sign-in")
	f := csrfField.FindStringSubmatch(body)
	if f == nil {
		t.Fatalf("no token on the sign-in page:\n%s", body)
	}
	if resp, err := b.PostForm(w.url+"/sign-in", url.Values{"csrf": {f[1]}, "key": {k.Secret}}); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("sign in: %v %v", resp, err)
	}
	_, body = fetch(t, b, w.url+"/sandboxes/"+sb.ID)
	f = csrfField.FindStringSubmatch(body)
	if f == nil || !strings.Contains(body, `action="/sandboxes/`+sb.ID+`/preview"`) {
		t.Fatalf("the sandbox's page has no preview form:\n%s", body)
	}
	resp, err := b.PostForm(w.url+"/sandboxes/"+sb.ID+"/preview", url.Values{"csrf": {f[1]}, "port": {"3000"}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := previewLink.FindStringSubmatch(string(page))
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("the preview form: %d\n%s", resp.StatusCode, page)
	}
	link := html.UnescapeString(m[1])
	if !strings.Contains(link, "p3000-") || !strings.Contains(link, "."+previewDomain+":") {
		t.Fatalf("link %s: want the preview's own host", link)
	}
	resp, body = fetch(t, b, link)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the link: %d %s", resp.StatusCode, body)
	}
	if got := decodeSeen(t, body); got.Cookie != "" || got.Path != "/" {
		t.Errorf("the app saw %+v: want no cookie of the panel's", got)
	}
}

// TestPreviewBehindATLSProxy: behind a proxy that ends TLS and says so
// (X-Forwarded-Proto: https, as the gateway's own cookies trust), the
// app is told https too: an app that sends http visitors to https would
// otherwise redirect for ever.
func TestPreviewBehindATLSProxy(t *testing.T) {
	w, _ := previewWorld(t)
	sb := w.serving(t, "web")
	u := previewURL(t, w.owner, sb, 3000)
	b := w.browser(t, http.Header{"X-Forwarded-Proto": {"https"}})
	// The browser's addresses are https (its cookie jar keeps the
	// preview's Secure cookie for them); the proxy speaks http to the
	// gateway.
	proxy := b.Transport
	b.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.URL.Scheme = "http"
		return proxy.RoundTrip(r)
	})
	u.Scheme = "https"
	resp, body := fetch(t, b, u.String())
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("through the proxy: %d %s", resp.StatusCode, body)
	}
	if got := decodeSeen(t, body); got.ForwardedProto != "https" || got.ForwardedHost != u.Host {
		t.Errorf("the app saw X-Forwarded-Proto %q, X-Forwarded-Host %q: want https and %s", got.ForwardedProto, got.ForwardedHost, u.Host)
	}
}
