package gateway_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/gateway"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/reach"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
	"berth.dev/berth/internal/trigger"
	"berth.dev/berth/internal/trigger/event"
	"berth.dev/berth/internal/tunnel"
	"berth.dev/berth/internal/tunnel/tunneltest"
	"berth.dev/berth/internal/workspace"
)

// The world of the authorization matrix (matrix_test.go): its objects,
// its callers' credentials, a browser for the panel, the fresh objects
// cells are sent against and what refused cells must leave as it was.

// matrixClasses are the world's classes: token mode for the engineer
// sandbox, so its key has a repository credential to ask for.
const matrixClasses = `sandboxes:
  - name: standard
    image: localhost/berth-sandbox:1
    isolation: standard
  - name: token
    image: localhost/berth-sandbox:1
    isolation: standard
    purposes: [engineer]
    git: token
`

// matrixInference serves one model, in-process, in every dialect.
const matrixInference = `
providers:
  - {name: scripted, kind: scripted}
models:
  - {id: scripted-model, provider: scripted, price: {input: 1, output: 2}}
`

// inMachineReacher is the fake driver as Kubernetes' is: agent runs run in
// their machines, and the gateway reaches a machine's ports.
type inMachineReacher struct {
	fake.InMachine
	d *fake.Driver
}

func (r inMachineReacher) Ports() reach.PortRange { return r.d.Ports() }

func (r inMachineReacher) Addr(ctx context.Context, id sandbox.ID, port int) (string, error) {
	return r.d.Addr(ctx, id, port)
}

// forkingInMachine is inMachineReacher that also saves engineer machines'
// memory and forks them (the fake's Checkpointing), so the cells of the
// fork routes that may fork do.
type forkingInMachine struct {
	inMachineReacher
	c *fake.Checkpointing
}

func (f forkingInMachine) Checkpoints(sb sandbox.Sandbox) string { return f.c.Checkpoints(sb) }

func (f forkingInMachine) Checkpoint(ctx context.Context, id sandbox.ID) (quantity.Bytes, error) {
	return f.c.Checkpoint(ctx, id)
}

func (f forkingInMachine) Restore(ctx context.Context, spec sandbox.Spec) (string, error) {
	return f.c.Restore(ctx, spec)
}

func (f forkingInMachine) Fork(ctx context.Context, src sandbox.ID, specs []sandbox.Spec) (quantity.Bytes, error) {
	return f.c.Fork(ctx, src, specs)
}

// matrix is the world the table runs in.
type matrix struct {
	*world
	keys     [nCallers]string
	users    map[string]account.User // by name
	vars     map[string]string       // {name} → what it stands for
	browsers map[caller]*browser
	client   *http.Client           // the world's own requests, from 127.0.0.1
	clients  [nCallers]*http.Client // each kind of caller's (callerTransport)
	n        int                    // numbers the names cells make
	idp      *standIn               // the identity provider (matrix_sso_test.go)
	// sessionKeys are the keys in the panel sessions of the callers whose
	// browser signed in with another key than theirs (through the
	// provider), for the session cookie made by hand once the panel
	// dropped theirs.
	sessionKeys map[caller]string
}

// callerTransport is c's own connection to the gateway: each kind of
// caller sends from an address of its own, 127.0.0.10 and its column (the
// whole of 127/8 is loopback), as different people's machines and
// sandboxes do. The routes limited per client address (git credentials,
// invitation redemption) count each caller apart, as they would.
func callerTransport(t *testing.T, c caller) *http.Transport {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(10+c))}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

func newMatrix(t *testing.T) *matrix {
	t.Helper()
	ctx := t.Context()
	cfg, err := inference.ParseConfig(strings.NewReader(matrixInference))
	if err != nil {
		t.Fatal(err)
	}
	cat, err := inference.NewCatalog(cfg, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	var provider *standIn
	w := newWorld(t, withSSO(&provider), func(c *worldConfig) {
		c.template = matrixClasses
		c.options = func(o *gateway.Options) { o.PreviewDomain = "preview.localhost" }
		c.driver = func(d *fake.Driver) sandbox.Driver {
			return forkingInMachine{inMachineReacher: inMachineReacher{InMachine: fake.NewInMachine(d), d: d}, c: fake.NewCheckpointing(d)}
		}
		c.agents = func(w *world, rc *agentrun.Config) {
			rc.Images, rc.Model, rc.LogDir = map[string]string{"claude-code": "localhost/berth-agent-claude-code:latest"}, "scripted-model", t.TempDir()
			rc.Workspaces = workspace.New(t.TempDir(), os.Getuid(), w.forge, workspace.Local{Forge: w.forge})
		}
		c.inference = func(st *store.Store, accounts *account.Service, url string) (*inference.Service, http.Handler) {
			return inference.NewService(inference.Options{Catalog: cat, Store: st, Accounts: accounts, Audit: st, PublicURL: url, Log: c.log}),
				newVendor(t, inference.KindScripted, "")
		}
	})
	m := &matrix{world: w, users: map[string]account.User{}, browsers: map[caller]*browser{}, idp: provider, sessionKeys: map[caller]string{},
		client: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	for c := range nCallers {
		m.clients[c] = &http.Client{Transport: callerTransport(t, c), CheckRedirect: m.client.CheckRedirect}
	}
	w.allowRepos(t, "acme")
	_, oscar := w.userKey(t, "other", "oscar", "admin")
	w.user(t, "acme", "carol", "admin") // another administrator of acme's, whose keys ada handles
	op := m.principal(t, w.opKey)
	for _, org := range []string{"acme", "other"} {
		us, _, err := w.accounts.Users(ctx, op, org, paging.Request{})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range us {
			m.users[u.Name] = u
		}
	}
	key := func(name string) string {
		k, err := w.accounts.CreateKey(ctx, op, m.users[name].ID, "matrix")
		if err != nil {
			t.Fatal(err)
		}
		return k.Secret.Reveal()
	}
	m.keys[cOperator], m.keys[cAdmin], m.keys[cForeignAdmin] = w.opKey, key("ada"), oscar
	m.keys[cOwner], m.keys[cMember], m.keys[cForeignMember] = key("alice"), key("bob"), key("sam")
	if _, err := w.accounts.CreateProject(ctx, op, "acme", "ml"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.classes.Apply(ctx, op, "acme", strings.NewReader(
		"sandboxes:\n  - name: acme-only\n    image: localhost/berth-sandbox:1\n    isolation: standard\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.triggers.Set(ctx, op, "acme", "default", trigger.Trigger{Name: "standing", Repo: "acme/app", Concurrency: 1,
		On: trigger.On{Source: event.SourceWebhook, Kind: event.KindWebhook}}); err != nil {
		t.Fatal(err)
	}

	owner := m.principal(t, m.keys[cOwner])
	dev, err := w.sandboxes.Create(ctx, owner, sandbox.CreateRequest{Name: "dev", Class: "token", Repo: "acme/app", SSHKeys: []string{sshKey}})
	if err != nil {
		t.Fatal(err)
	}
	m.running(t, dev.ID)
	w.drv.Point(dev.ID, 2222, tunneltest.Listen(t, tunneltest.Echo))
	m.keys[cEngineer] = w.envOf(t, string(dev.ID))["BERTH_API_KEY"]
	agent := m.agent(t, owner, "fix", "")
	m.keys[cAgent] = w.envOf(t, string(agent.ID))["BERTH_API_KEY"]
	// The run's log exists once its machine streamed some output.
	if st, _, body := m.post(t, api.RunOutputPath, m.keys[cAgent], "o {}\n"); st != http.StatusNoContent {
		t.Fatalf("the agent's first output: %d %s", st, body)
	}
	rev := m.agent(t, owner, "rev", "reviewer")
	m.keys[cReviewer] = w.envOf(t, string(rev.ID))["BERTH_API_KEY"]
	// A reviewer run that ended with its verdict, for the verdict route.
	reviewed := m.agent(t, owner, "reviewed", "reviewer")
	exit, _ := json.Marshal(api.RunExit{Verdict: []byte(`{"verdict":"approve","summary":"fine"}`), VerdictFile: ".berth-review-verdict.json"})
	if st, _, body := m.post(t, api.RunExitPath, w.envOf(t, string(reviewed.ID))["BERTH_API_KEY"], string(exit)); st != http.StatusOK {
		t.Fatalf("the reviewed run's exit: %d %s", st, body)
	}

	// The revoked key was a working one: a browser signed in with it
	// first, and the panel's cells send that session.
	revoked, err := w.accounts.CreateKey(ctx, op, m.users["alice"].ID, "revoked")
	if err != nil {
		t.Fatal(err)
	}
	m.keys[cRevoked] = revoked.Secret.Reveal()
	m.browsers[cRevoked] = m.signIn(t, cRevoked)
	if err := w.accounts.RevokeKey(ctx, op, revoked.Key.ID); err != nil {
		t.Fatal(err)
	}
	id, _, _ := account.ParseSecret(m.keys[cOwner])
	m.keys[cGarbage] = "berth_" + strings.TrimPrefix(id, "key_") + "_" + "NOTTHESECRET"
	m.signInThroughIdP(t)

	org, err := w.accounts.Organisation(ctx, op, "acme")
	if err != nil {
		t.Fatal(err)
	}
	m.vars = map[string]string{
		"operator": m.users["ops"].ID, "owner": m.users["alice"].ID, "co-admin": m.users["carol"].ID, "acme": org.ID,
		"owner-key": m.keys[cOwner],
		"dev":       string(dev.ID), "agent": string(agent.ID), "rev": string(rev.ID), "reviewed": string(reviewed.ID), "ssh-key": sshKey,
	}
	return m
}

// principal authenticates a key as the gateway would.
func (m *matrix) principal(t *testing.T, key string) account.Principal {
	t.Helper()
	p, err := m.accounts.Authenticate(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// agent creates an agent sandbox of owner's on acme/app, its run in its
// machine, as the given role ("" for an author).
func (m *matrix) agent(t *testing.T, owner account.Principal, name, role string) sandbox.Sandbox {
	t.Helper()
	sb, err := m.sandboxes.Create(t.Context(), owner, sandbox.CreateRequest{Name: name, Purpose: "agent", Class: "standard", Repo: "acme/app", Branch: "main",
		Task: "look at it", Runner: "claude-code", Role: role})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return sb
}

// running waits until a sandbox runs.
func (m *matrix) running(t *testing.T, id sandbox.ID) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		sb, err := m.st.GetSandbox(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if sb.State == sandbox.StateRunning {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s is %s, want running", sb.Name, sb.State)
		}
	}
}

// post sends body to path with key as the bearer credential.
func (m *matrix) post(t *testing.T, path, key, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", m.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	return m.do(t, m.client, req)
}

func (m *matrix) do(t *testing.T, c *http.Client, req *http.Request) (int, http.Header, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp.StatusCode, resp.Header, "" // a tunnel: closed at once
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", req.Method, req.URL.Path, err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// browser is a web browser on the panel, on its caller's connection: a
// cookie jar, redirects not followed, and the token its forms carry.
type browser struct {
	c    *http.Client
	csrf string
	key  string // the key a sign-in through the provider gave its session
}

func (m *matrix) newBrowser(t *testing.T, c caller) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{c: &http.Client{Jar: jar, Transport: m.clients[c].Transport, CheckRedirect: m.client.CheckRedirect}}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// get reads a page and takes the token of its forms.
func (m *matrix) get(t *testing.T, b *browser, path string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", m.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, h, body := m.do(t, b.c, req)
	// The sign-in page's token is the sign-in form's own, not a session's.
	if f := csrfField.FindStringSubmatch(body); f != nil && !strings.HasPrefix(path, "/sign-in") {
		b.csrf = f[1]
	}
	return st, h, body
}

// upgrade asks for a WebSocket at path, as a page of origin would.
func (m *matrix) upgrade(t *testing.T, b *browser, path, origin string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", m.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Origin", origin)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	return m.do(t, b.c, req)
}

func (m *matrix) postForm(t *testing.T, b *browser, path string, form url.Values) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", m.url+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return m.do(t, b.c, req)
}

// signInToken reads the sign-in page for its form's token.
func (m *matrix) signInToken(t *testing.T, b *browser) string {
	t.Helper()
	_, _, body := m.get(t, b, "/sign-in")
	f := csrfField.FindStringSubmatch(body)
	if f == nil {
		t.Fatalf("no token on the sign-in page:\n%s", body)
	}
	return f[1]
}

// signIn signs a new browser of c's in with c's key through the sign-in
// form, and reads a page for its forms' token.
func (m *matrix) signIn(t *testing.T, c caller) *browser {
	t.Helper()
	b := m.newBrowser(t, c)
	if st, _, body := m.postForm(t, b, "/sign-in", url.Values{"csrf": {m.signInToken(t, b)}, "key": {m.keys[c]}}); st != http.StatusSeeOther {
		t.Fatalf("sign in: %d\n%s", st, body)
	}
	if st, _, _ := m.get(t, b, "/quotas"); st != http.StatusOK {
		t.Fatalf("the quotas page after signing in: %d", st)
	}
	return b
}

// browser is c's browser: signed in through the form with c's key when
// the panel signs that key in, or through the identity provider for
// cSSO; otherwise holding the session cookie the panel would have set for
// c's key (its session's, sessionKeys), made by hand, as an attacker who
// holds the key would (the sign-in form refuses a sandbox's key).
func (m *matrix) browser(t *testing.T, c caller) *browser {
	t.Helper()
	if b, ok := m.browsers[c]; ok {
		return b
	}
	var b *browser
	switch c {
	case cOperator, cAdmin, cForeignAdmin, cOwner, cMember, cForeignMember:
		b = m.signIn(t, c)
	case cSSO:
		b = m.ssoSignIn(t, c, aliceSubject)
	default:
		b = m.newBrowser(t, c)
		key, ok := m.sessionKeys[c]
		if !ok {
			key = m.keys[c]
		}
		if key != "" {
			u, _ := url.Parse(m.url)
			b.c.Jar.SetCookies(u, []*http.Cookie{{Name: "berth_session", Value: "matrixnonce." + key, Path: "/"}})
			b.csrf = "not-a-token-of-this-session"
		}
	}
	m.browsers[c] = b
	return b
}

// signedIn reports whether b still holds a session cookie.
func (m *matrix) signedIn(b *browser) bool {
	u, _ := url.Parse(m.url)
	for _, ck := range b.c.Jar.Cookies(u) {
		if ck.Name == "berth_session" {
			return true
		}
	}
	return false
}

// send sends r's request as c, its placeholders expanded by expand, and
// returns the answer.
func (m *matrix) send(t *testing.T, r request, c caller, expand func(string) string) (int, http.Header, string) {
	t.Helper()
	key := m.keys[c]
	path := expand(r.path)
	switch r.place {
	case proxyAuth:
		return m.proxy(t, r.method, path, key)
	case cookie:
		b := m.browser(t, c)
		defer func() {
			if m.signedIn(b) {
				return
			}
			delete(m.browsers, c) // signed out: the next cell signs in again
			// Signing out revokes the key a sign-in through the provider
			// gave; the panel drops no session whose key still works.
			if b.key == "" {
				return
			}
			if _, err := m.accounts.Authenticate(t.Context(), b.key); err == nil {
				t.Errorf("as %s: %s %s dropped the panel's session, yet the key its sign-in through the identity provider gave still works", c, r.method, path)
			}
		}()
		if r.method == "GET" && r.origin != "" {
			return m.upgrade(t, b, path, strings.ReplaceAll(r.origin, "{self}", m.url))
		}
		if r.method == "GET" {
			return m.get(t, b, path)
		}
		form := url.Values{"csrf": {b.csrf}}
		for k, vs := range r.form {
			for _, v := range vs {
				form.Add(k, expand(v))
			}
		}
		return m.postForm(t, b, path, form)
	case signInForm:
		b := m.newBrowser(t, c)
		return m.postForm(t, b, path, url.Values{"csrf": {m.signInToken(t, b)}, "key": {key}})
	}
	if r.place == queryKey && key != "" {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		path += sep + "key=" + url.QueryEscape(key)
	}
	req, err := http.NewRequestWithContext(t.Context(), r.method, m.url+path, strings.NewReader(expand(r.body)))
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case r.place == basic && r.method == "POST":
		req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
	case r.body != "":
		req.Header.Set("Content-Type", "application/json")
	}
	if r.tunnel {
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", tunnel.Protocol)
	}
	if key != "" {
		switch r.place {
		case bearer:
			req.Header.Set("Authorization", "Bearer "+key)
		case basic:
			req.SetBasicAuth("sandbox", key)
		case xAPIKey:
			req.Header.Set("X-Api-Key", key)
			req.Header.Set("Anthropic-Version", "2023-06-01")
		case googKey:
			req.Header.Set("X-Goog-Api-Key", key)
		}
	}
	return m.do(t, m.clients[c], req)
}

// proxy sends a proxy request as a sandbox's tools do: a CONNECT to
// target, or a request in absolute form for it, on a connection of its
// own, the key in Proxy-Authorization.
func (m *matrix) proxy(t *testing.T, method, target, key string) (int, http.Header, string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(m.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	host, _, _ := strings.Cut(strings.TrimPrefix(target, "http://"), "/")
	line := method + " " + target + " HTTP/1.1\r\nHost: " + host + "\r\n"
	if key != "" {
		line += "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("x:"+key)) + "\r\n"
	}
	if _, err := io.WriteString(conn, line+"\r\n"); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(method, "http://"+host, nil)
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, resp.Header, string(b)
}
