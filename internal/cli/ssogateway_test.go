package cli_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/cli"
)

// ssoGateway plays the gateway's side of berth login --sso, checking what
// the real one checks (internal/gateway/sso.go, internal/sso): GET
// /api/v1/sso, the CLI's start page, and the code exchange, the public
// routes, taking no key. The provider's part is not the CLI's business:
// the start page sends the browser straight back to the CLI's callback,
// as the gateway does once the provider has signed the person in. Any
// other request fails the test.
type ssoGateway struct {
	t       *testing.T
	url     string
	enabled bool
	refusal string // when set, the sign-in is refused with these words
	spent   bool   // when set, every code is refused as used or expired
	now     time.Time

	mu       sync.Mutex
	calls    []string          // "METHOD /path" of every request
	starts   []url.Values      // the start page's queries
	handoffs map[string]string // code -> the challenge it was given for
	tokens   []api.SSOToken
}

func newSSOGateway(t *testing.T, opts ...func(*ssoGateway)) *ssoGateway {
	gw := &ssoGateway{t: t, enabled: true, now: time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC), handoffs: map[string]string{}}
	for _, o := range opts {
		o(gw)
	}
	srv := httptest.NewServer(http.HandlerFunc(gw.serve))
	t.Cleanup(srv.Close)
	gw.url = srv.URL
	return gw
}

const ssoStart = "/sign-in/sso/cli"

func (gw *ssoGateway) serve(w http.ResponseWriter, r *http.Request) {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	gw.calls = append(gw.calls, r.Method+" "+r.URL.Path)
	if r.URL.Path != ssoStart && r.Header.Get("Authorization") != "" {
		gw.t.Errorf("%s %s: sent a key (Authorization: %q) to a public route", r.Method, r.URL.Path, r.Header.Get("Authorization"))
	}
	switch r.Method + " " + r.URL.Path {
	case "GET " + api.SSOPath:
		info := api.SSO{Enabled: gw.enabled, KeySignIn: true}
		if gw.enabled {
			info.Issuer, info.CLIStart = "https://idp.example.com", ssoStart
		}
		writeJSON(w, http.StatusOK, info)
	case "GET " + ssoStart:
		gw.start(w, r)
	case "POST " + api.SSOTokenPath:
		gw.token(w, r)
	default:
		gw.t.Errorf("the gateway was asked %s %s, which berth login --sso never asks", r.Method, r.URL)
		writeJSON(w, http.StatusNotFound, api.Error{Code: api.CodeNotFound, Message: "no such route"})
	}
}

// start is the gateway's /sign-in/sso/cli: its query checked as
// sso.Service.Begin checks it, then the browser sent to the CLI's
// listener with a one-time code, or with the refusal.
func (gw *ssoGateway) start(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	gw.starts = append(gw.starts, q)
	port, err := strconv.Atoi(q.Get("port"))
	if err != nil || port < 1024 || port > 65535 {
		gw.t.Errorf("start: port %q is not a port berth login listens on", q.Get("port"))
	}
	if b, err := base64.RawURLEncoding.DecodeString(q.Get("challenge")); err != nil || len(b) != sha256.Size {
		gw.t.Errorf("start: challenge %q is not an S256 PKCE challenge", q.Get("challenge"))
	}
	state := q.Get("state")
	if state == "" || len(state) > 256 || strings.ContainsFunc(state, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		gw.t.Errorf("start: state %q is not 1-256 printable ASCII characters", state)
	}
	if err := account.CheckText("org", q.Get("org"), 100); err != nil {
		gw.t.Errorf("start: %v", err)
	}
	back := url.Values{}
	if gw.refusal != "" {
		back.Set("error", "access_denied")
		back.Set("error_description", gw.refusal)
	} else {
		code := rand.Text() + rand.Text()
		gw.handoffs[code] = q.Get("challenge")
		back.Set("code", code)
	}
	back.Set("state", state)
	http.Redirect(w, r, "http://127.0.0.1:"+strconv.Itoa(port)+"/callback?"+back.Encode(), http.StatusSeeOther)
}

var verifierRE = regexp.MustCompile(`^[A-Za-z0-9._~-]{43,128}$`)

// token is POST /api/v1/sso/token: a code is spent by any attempt, and
// given a key only with the verifier whose S256 is its challenge.
func (gw *ssoGateway) token(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		gw.t.Errorf("token: Content-Type %q, want application/json", ct)
	}
	var req api.SSOToken
	dec := json.NewDecoder(io.LimitReader(r.Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		gw.t.Errorf("token: body is not an api.SSOToken: %v", err)
		writeJSON(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalid, Message: err.Error()})
		return
	}
	gw.tokens = append(gw.tokens, req)
	if !verifierRE.MatchString(req.Verifier) {
		gw.t.Errorf("token: verifier %q is not 43-128 characters of [A-Za-z0-9-._~] (RFC 7636)", req.Verifier)
	}
	if err := account.CheckText("key_name", req.KeyName, account.MaxKeyName); err != nil {
		writeJSON(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalid, Message: err.Error(), Field: "key_name"})
		return
	}
	challenge, ok := gw.handoffs[req.Code]
	delete(gw.handoffs, req.Code)
	if !ok || gw.spent {
		writeJSON(w, http.StatusUnauthorized, api.Error{Code: api.CodeUnauthenticated, Message: "the sign-in code is unknown, used or expired: sign in again"})
		return
	}
	sum := sha256.Sum256([]byte(req.Verifier))
	if base64.RawURLEncoding.EncodeToString(sum[:]) != challenge {
		gw.t.Errorf("token: the verifier's S256 is not the challenge the sign-in started with")
		writeJSON(w, http.StatusUnauthorized, api.Error{Code: api.CodeUnauthenticated, Message: "the verifier does not match the sign-in: sign in again"})
		return
	}
	name := req.KeyName
	if name == "" {
		name = "sso"
	}
	expires := gw.now.Add(12 * time.Hour)
	writeJSON(w, http.StatusCreated, api.Enrollment{
		User:         api.User{ID: "usr_1", Organisation: "org_1", Name: "alice", Role: "member"},
		Organisation: api.Organisation{ID: "org_1", Name: "acme", CreatedAt: gw.now},
		Key: api.NewKey{Key: api.Key{ID: "key_sso1", User: "usr_1", Name: name, CreatedAt: gw.now, ExpiresAt: &expires},
			Secret: ssoSecret},
	})
}

const ssoSecret = "berth_abcdefghij012345_TheKeyTheSignInGave"

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// seen is what the gateway was asked, in order.
func (gw *ssoGateway) seen() []string {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	return append([]string(nil), gw.calls...)
}

func (gw *ssoGateway) tokenRequests() []api.SSOToken {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	return append([]api.SSOToken(nil), gw.tokens...)
}

func (gw *ssoGateway) startQueries() []url.Values {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	return append([]url.Values(nil), gw.starts...)
}

// ssoLogin is a berth login --sso running in-process.
type ssoLogin struct {
	code   chan int
	out    bytes.Buffer // read once code has come
	errs   *watched
	cancel context.CancelFunc
	config string // the login file's path
}

// startSSOLogin runs berth args (login --sso ...) against gw, with the
// environment vars added, in the background.
func startSSOLogin(t *testing.T, gw *ssoGateway, vars map[string]string, wait time.Duration, args ...string) *ssoLogin {
	t.Helper()
	home := t.TempDir()
	env := map[string]string{"BERTH_URL": gw.url, "HOME": home}
	for k, v := range vars {
		env[k] = v
	}
	l := &ssoLogin{code: make(chan int, 1), errs: watch(`\n  (http://\S+)\n`), config: filepath.Join(home, ".config", "berth", "config.json")}
	if p, ok := env["BERTH_CONFIG"]; ok {
		l.config = p
	}
	ctx, cancel := context.WithCancel(t.Context())
	l.cancel = cancel
	e := cli.Env{Stdin: strings.NewReader(""), Stdout: &l.out, Stderr: l.errs, Getenv: func(k string) string { return env[k] },
		HTTP: &http.Client{Timeout: 10 * time.Second}, Now: func() time.Time { return gw.now }}
	if wait > 0 {
		e = cli.WithSSOWait(e, wait)
	}
	go func() { l.code <- cli.Main(ctx, args, e) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-l.code:
		case <-time.After(10 * time.Second):
			t.Error("berth login --sso did not end after its context was cancelled")
		}
	})
	return l
}

var addressRE = regexp.MustCompile(`\n  (http://\S+)\n`)

// address waits for the address berth prints to open, and returns it.
func (l *ssoLogin) address(t *testing.T) *url.URL {
	t.Helper()
	select {
	case <-l.errs.seen:
	case code := <-l.code:
		l.code <- code
		t.Fatalf("berth exited %d before printing an address to open\nstderr: %s", code, l.errs)
	case <-time.After(10 * time.Second):
		t.Fatalf("berth printed no address to open in 10s\nstderr: %s", l.errs)
	}
	u, err := url.Parse(addressRE.FindStringSubmatch(l.errs.String())[1])
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// exit waits for berth to end and returns its exit code and output.
func (l *ssoLogin) exit(t *testing.T) (int, string, string) {
	t.Helper()
	select {
	case code := <-l.code:
		l.code <- code // for the cleanup
		return code, l.out.String(), l.errs.String()
	case <-time.After(10 * time.Second):
		t.Fatalf("berth login --sso still running after 10s\nstderr: %s", l.errs)
		return 0, "", ""
	}
}

// running fails the test when berth has ended.
func (l *ssoLogin) running(t *testing.T) {
	t.Helper()
	select {
	case code := <-l.code:
		l.code <- code
		t.Fatalf("berth exited %d, want it still waiting\nstdout: %s\nstderr: %s", code, l.out.String(), l.errs)
	default:
	}
}

// browser plays the person's browser: it follows redirects, as one does.
var browser = &http.Client{Timeout: 10 * time.Second}

// browse requests addr and returns the last page's status, body and the
// address it came from.
func browse(t *testing.T, method, addr string) (int, string, *http.Response) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := browser.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, addr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp
}

// wantNoLoginFile fails the test when berth wrote its login file.
func wantNoLoginFile(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("login file %s: %v, want none written", path, err)
	}
}

// wantClosed fails the test when something still listens at addr's host.
func wantClosed(t *testing.T, addr *url.URL) {
	t.Helper()
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+addr.Query().Get("port"), time.Second); err == nil {
		c.Close()
		t.Errorf("berth's listener on port %s is still open after login ended", addr.Query().Get("port"))
	}
}
