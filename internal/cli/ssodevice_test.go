package cli_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/cli"
)

// deviceUnit is how long a second of the device grant lasts in these tests
// (cli.WithSSOSecond): the gateway's interval of 5 is 100ms.
const deviceUnit = 20 * time.Millisecond

// deviceGateway plays the gateway's side of berth login --sso --device,
// checking what the real one checks (internal/gateway/sso.go ssoDevice
// and ssoDeviceToken, internal/sso/device.go): GET /api/v1/sso, POST
// /api/v1/sso/device and its polls, public routes taking no key, with
// bodies of exactly their wire types. Its polls answer as script says,
// then pending; a poll sooner than the interval (5, plus 5 for each 429
// it answered, RFC 8628 §3.5) fails the test. Any other request fails the
// test.
type deviceGateway struct {
	t         *testing.T
	url       string
	enabled   bool
	noDevice  bool     // an older gateway: no device routes (404)
	expiresIn int      // the grant's lifetime, in seconds of deviceUnit
	script    []string // the polls' answers in order: "pending", "slow", "ok", or a refusal's words
	now       time.Time

	mu       sync.Mutex
	calls    []string // "METHOD /path" of every request
	starts   []api.StartSSODevice
	code     string      // the device code handed out
	started  time.Time   // when it was
	polls    []time.Time // when each poll came
	interval time.Duration
	taken    bool
}

const userCode = "BCDF-GHJK"

func newDeviceGateway(t *testing.T, opts ...func(*deviceGateway)) *deviceGateway {
	gw := &deviceGateway{t: t, enabled: true, expiresIn: 600, interval: 5 * deviceUnit, now: time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)}
	for _, o := range opts {
		o(gw)
	}
	srv := httptest.NewServer(http.HandlerFunc(gw.serve))
	t.Cleanup(srv.Close)
	gw.url = srv.URL
	return gw
}

func (gw *deviceGateway) serve(w http.ResponseWriter, r *http.Request) {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	gw.calls = append(gw.calls, r.Method+" "+r.URL.Path)
	if a := r.Header.Get("Authorization"); a != "" {
		gw.t.Errorf("%s %s: sent a key (Authorization: %q) to a public route", r.Method, r.URL.Path, a)
	}
	switch route := r.Method + " " + r.URL.Path; {
	case route == "GET "+api.SSOPath:
		info := api.SSO{Enabled: gw.enabled, KeySignIn: true}
		if gw.enabled {
			info.Issuer, info.CLIStart = "https://idp.example.com", ssoStart
		}
		writeJSON(w, http.StatusOK, info)
	case gw.noDevice:
		gw.t.Logf("%s: an older gateway has no such route", route)
		writeJSON(w, http.StatusNotFound, api.Error{Code: api.CodeNotFound, Message: "no such route"})
	case route == "POST "+api.SSODevicePath:
		gw.start(w, r)
	case route == "POST "+api.SSODeviceTokenPath:
		gw.poll(w, r)
	default:
		gw.t.Errorf("the gateway was asked %s %s, which berth login --sso --device never asks", r.Method, r.URL)
		writeJSON(w, http.StatusNotFound, api.Error{Code: api.CodeNotFound, Message: "no such route"})
	}
}

// decodeStrict reads r's body into v as the gateway's decode does: JSON,
// with no field v does not have and nothing after it.
func decodeStrict(t *testing.T, r *http.Request, v any) bool {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, want application/json", r.Method, r.URL.Path, ct)
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Errorf("%s %s: the body is not a %T: %v", r.Method, r.URL.Path, v, err)
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Errorf("%s %s: more after the %T", r.Method, r.URL.Path, v)
		return false
	}
	return true
}

// start is POST /api/v1/sso/device: a device code, the user code and the
// gateway's page.
func (gw *deviceGateway) start(w http.ResponseWriter, r *http.Request) {
	var req api.StartSSODevice
	if !decodeStrict(gw.t, r, &req) {
		writeJSON(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalid, Message: "bad body"})
		return
	}
	gw.starts = append(gw.starts, req)
	if err := account.CheckText("key_name", req.KeyName, account.MaxKeyName); err != nil {
		gw.t.Errorf("start: %v", err)
	}
	if err := account.CheckText("org", req.Org, 100); err != nil {
		gw.t.Errorf("start: %v", err)
	}
	if gw.code != "" {
		gw.t.Errorf("start: a second device grant begun")
	}
	gw.code, gw.started = rand.Text()+rand.Text(), time.Now()
	page := gw.url + "/sign-in/sso/device"
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, api.SSODevice{DeviceCode: gw.code, UserCode: userCode, VerificationURI: page,
		VerificationURIComplete: page + "?code=" + userCode, ExpiresIn: gw.expiresIn, Interval: 5})
}

// poll is POST /api/v1/sso/device/token.
func (gw *deviceGateway) poll(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	var req api.PollSSODevice
	if !decodeStrict(gw.t, r, &req) {
		writeJSON(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalid, Message: "bad body"})
		return
	}
	if req.DeviceCode != gw.code || gw.code == "" || gw.taken {
		gw.t.Errorf("poll: device code %q, want the one handed out (%q), once", req.DeviceCode, gw.code)
		writeJSON(w, http.StatusUnauthorized, api.Error{Code: api.CodeUnauthenticated, Message: "the device code is unknown or was used: start berth login --sso --device again"})
		return
	}
	last := gw.started
	if n := len(gw.polls); n > 0 {
		last = gw.polls[n-1]
	}
	if gap := now.Sub(last); gap < gw.interval {
		gw.t.Errorf("poll %d came %v after the last, sooner than the interval %v", len(gw.polls)+1, gap, gw.interval)
	}
	// The CLI counts the lifetime from when the answer reached it, a
	// little after the stand-in did.
	if end := gw.started.Add(time.Duration(gw.expiresIn)*deviceUnit + 50*time.Millisecond); now.After(end) {
		gw.t.Errorf("poll %d came %v after the grant expired", len(gw.polls)+1, now.Sub(end))
	}
	gw.polls = append(gw.polls, now)
	answer := "pending"
	if len(gw.script) > 0 {
		answer, gw.script = gw.script[0], gw.script[1:]
	}
	switch answer {
	case "pending":
		writeJSON(w, http.StatusConflict, api.Error{Code: api.CodePending, Message: "nobody has signed in for this device code yet: poll again after the interval"})
	case "slow":
		gw.interval += 5 * deviceUnit
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusTooManyRequests, api.Error{Code: api.CodeRateLimited, Message: "slow_down: poll at most every 5s"})
	case "ok":
		gw.taken = true
		expires := gw.now.Add(12 * time.Hour)
		name := gw.starts[0].KeyName
		writeJSON(w, http.StatusCreated, api.Enrollment{
			User:         api.User{ID: "usr_1", Organisation: "org_1", Name: "alice", Role: "member"},
			Organisation: api.Organisation{ID: "org_1", Name: "acme", CreatedAt: gw.now},
			Key: api.NewKey{Key: api.Key{ID: "key_dev1", User: "usr_1", Name: name, CreatedAt: gw.now, ExpiresAt: &expires},
				Secret: ssoSecret},
		})
	default:
		writeJSON(w, http.StatusUnauthorized, api.Error{Code: api.CodeUnauthenticated, Message: answer})
	}
}

func (gw *deviceGateway) seen() []string {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	return append([]string(nil), gw.calls...)
}

func (gw *deviceGateway) startRequests() []api.StartSSODevice {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	return append([]api.StartSSODevice(nil), gw.starts...)
}

// gaps is the time from the grant's start to the first poll, and between
// each poll and the next.
func (gw *deviceGateway) gaps() []time.Duration {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	var out []time.Duration
	last := gw.started
	for _, p := range gw.polls {
		out = append(out, p.Sub(last))
		last = p
	}
	return out
}

var waitingRE = regexp.MustCompile(`Waiting for you to sign in`)

// startDeviceLogin runs berth args (login --sso --device ...) against gw,
// with the environment vars added, in the background.
func startDeviceLogin(t *testing.T, gw *deviceGateway, vars map[string]string, args ...string) *ssoLogin {
	t.Helper()
	home := t.TempDir()
	env := map[string]string{"BERTH_URL": gw.url, "HOME": home}
	for k, v := range vars {
		env[k] = v
	}
	l := &ssoLogin{code: make(chan int, 1), errs: watch(waitingRE.String()), config: filepath.Join(home, ".config", "berth", "config.json")}
	if p, ok := env["BERTH_CONFIG"]; ok {
		l.config = p
	}
	ctx, cancel := context.WithCancel(t.Context())
	l.cancel = cancel
	e := cli.WithSSOSecond(cli.Env{Stdin: strings.NewReader(""), Stdout: &l.out, Stderr: l.errs, Getenv: func(k string) string { return env[k] },
		HTTP: &http.Client{Timeout: 10 * time.Second}, Now: func() time.Time { return gw.now }}, deviceUnit)
	go func() { l.code <- cli.Main(ctx, args, e) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-l.code:
		case <-time.After(10 * time.Second):
			t.Error("berth login --sso --device did not end after its context was cancelled")
		}
	})
	return l
}

// TestLoginSSODevice: berth begins a device grant, prints the gateway's
// page, the code and the page holding it, opens no browser, and polls
// every interval; told to slow down, it polls 5 seconds less often from
// then on; when the gateway hands over the key it saves it (0600) and says
// who it is logged in as, with which key, and when it expires.
func TestLoginSSODevice(t *testing.T) {
	gw := newDeviceGateway(t, func(gw *deviceGateway) {
		gw.script = []string{"pending", "pending", "pending", "slow", "pending", "ok"}
	})
	dir := t.TempDir()
	opened := filepath.Join(dir, "opened")
	script := filepath.Join(dir, "browser")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$*\" > "+opened+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	l := startDeviceLogin(t, gw, map[string]string{"BROWSER": script, "DISPLAY": ":0"}, "login", "--sso", "--device")
	code, out, errs := l.exit(t)
	if code != 0 {
		t.Fatalf("berth login --sso --device exited %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	host, _ := os.Hostname()
	wantName := "sso " + host
	if len(wantName) > account.MaxKeyName {
		wantName = wantName[:account.MaxKeyName]
	}
	page := gw.url + "/sign-in/sso/device"
	if want := "To sign in to " + gw.url + " through https://idp.example.com, open this address in a browser on any machine:\n\n" +
		"  " + page + "\n\nand enter the code:\n\n  BCDF-GHJK\n\n" +
		"Or open this address, which holds the code:\n\n  " + page + "?code=BCDF-GHJK\n\n" +
		"Sign in only if the page shows the code BCDF-GHJK.\n" +
		"Waiting for you to sign in (at most 12s; Ctrl-C stops)...\n"; errs != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", errs, want)
	}
	wantLines(t, "stdout", out,
		`^logged in to `+regexp.QuoteMeta(gw.url)+` as alice \(member of acme\) with your new key key_dev1 "`+regexp.QuoteMeta(wantName)+`"; saved in `+regexp.QuoteMeta(l.config)+`$`,
		`^the key expires 2026-07-01 22:00 UTC \(in 12h\): sign in again then, with berth login --sso --device$`)

	wantLoginFile(t, l.config, gw.url)
	if s := gw.startRequests(); len(s) != 1 || s[0] != (api.StartSSODevice{KeyName: wantName}) {
		t.Errorf("device grants begun: %+v, want one for a key named %q and no org", s, wantName)
	}
	want := []string{"GET " + api.SSOPath, "POST " + api.SSODevicePath}
	for range 6 {
		want = append(want, "POST "+api.SSODeviceTokenPath)
	}
	if got := gw.seen(); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("the gateway was asked %q, want %q", got, want)
	}
	// The stand-in checked the lower bounds; the slowing down is seen
	// here: the polls after the 429 are twice as far apart.
	gaps := gw.gaps()
	t.Logf("gaps between polls: %v", gaps)
	for i, g := range gaps {
		lo := 5 * deviceUnit
		if i >= 4 {
			lo = 10 * deviceUnit
		}
		if g < lo {
			t.Errorf("poll %d came %v after the last, want at least %v", i+1, g, lo)
		}
	}
	if _, err := os.Stat(opened); err == nil {
		t.Errorf("--device started $BROWSER")
	}
}

// TestLoginSSODeviceOrgAndKeyName: --org and --key-name go to the
// gateway when the grant begins; --no-browser is accepted and changes
// nothing.
func TestLoginSSODeviceOrgAndKeyName(t *testing.T) {
	gw := newDeviceGateway(t, func(gw *deviceGateway) { gw.script = []string{"ok"} })
	l := startDeviceLogin(t, gw, nil, "login", "--sso", "--device", "--no-browser", "--org", "acme", "--key-name", "ada's laptop")
	code, out, errs := l.exit(t)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if s := gw.startRequests(); len(s) != 1 || s[0] != (api.StartSSODevice{KeyName: "ada's laptop", Org: "acme"}) {
		t.Errorf("device grants begun: %+v, want one for acme and a key named \"ada's laptop\"", s)
	}
	wantLines(t, "stdout", out, `with your new key key_dev1 "ada's laptop"`)
}

// TestLoginSSODeviceRefused: a grant the gateway refuses (denied at the
// provider, expired there, or used) ends login with the gateway's words:
// exit 1, nothing saved, no more polls.
func TestLoginSSODeviceRefused(t *testing.T) {
	for _, words := range []string{
		"the sign-in was refused: your account at the identity provider is not given access to berth",
		"the device code expired: start berth login --sso --device again",
	} {
		t.Run(words[:20], func(t *testing.T) {
			gw := newDeviceGateway(t, func(gw *deviceGateway) { gw.script = []string{"pending", words} })
			l := startDeviceLogin(t, gw, nil, "login", "--sso", "--device")
			code, out, errs := l.exit(t)
			if code != 1 {
				t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", code, out, errs)
			}
			wantLines(t, "stderr", errs, `^berth: login to `+regexp.QuoteMeta(gw.url)+`: the gateway refused the sign-in: `+regexp.QuoteMeta(words)+`; nothing was saved$`)
			if out != "" {
				t.Errorf("stdout: %s, want nothing", out)
			}
			wantNoLoginFile(t, l.config)
			if n := len(gw.gaps()); n != 2 {
				t.Errorf("%d polls, want 2: none after the refusal", n)
			}
		})
	}
}

// TestLoginSSODeviceExpires: berth polls no longer than the grant lives
// (expires_in), then says so, exits 1 and saves nothing.
func TestLoginSSODeviceExpires(t *testing.T) {
	gw := newDeviceGateway(t, func(gw *deviceGateway) { gw.expiresIn = 50 }) // 1s; polls every 100ms
	l := startDeviceLogin(t, gw, nil, "login", "--sso", "--device")
	code, out, errs := l.exit(t)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", code, out, errs)
	}
	wantLines(t, "stderr", errs,
		`\(at most 1s; Ctrl-C stops\)`,
		`^berth: login to \S+: nobody signed in with the code BCDF-GHJK within 1s, and it has expired; nothing was saved: run berth login --sso --device again$`)
	wantNoLoginFile(t, l.config)
	if n := len(gw.gaps()); n < 5 || n > 9 {
		t.Errorf("%d polls in 1s at an interval of 100ms, want 5 to 9", n)
	}
}

// TestLoginSSODeviceInterrupted: Ctrl-C (the context's end) stops the
// polling cleanly: the interrupt's exit status, its one line, nothing
// saved, no more polls.
func TestLoginSSODeviceInterrupted(t *testing.T) {
	gw := newDeviceGateway(t)
	l := startDeviceLogin(t, gw, nil, "login", "--sso", "--device")
	select {
	case <-l.errs.seen:
	case <-time.After(10 * time.Second):
		t.Fatalf("berth printed no code in 10s\nstderr: %s", l.errs)
	}
	for deadline := time.Now().Add(10 * time.Second); len(gw.gaps()) < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	l.cancel()
	code, out, errs := l.exit(t)
	if code != 130 {
		t.Fatalf("exit %d, want 130\nstdout: %s\nstderr: %s", code, out, errs)
	}
	wantLines(t, "stderr", errs, `^berth: interrupted before the command finished$`)
	wantNoLoginFile(t, l.config)
	n := len(gw.gaps())
	time.Sleep(15 * deviceUnit)
	if m := len(gw.gaps()); m != n {
		t.Errorf("%d polls after berth ended", m-n)
	}
}

// TestLoginSSODeviceBeforeStarting: what ends login before a grant is
// begun: a gateway without an identity provider, a login file that cannot
// be written, and a gateway older than --device.
func TestLoginSSODeviceBeforeStarting(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		opt  func(*deviceGateway)
		vars map[string]string
		want string
		asks int
	}{
		{"no provider", func(gw *deviceGateway) { gw.enabled = false }, nil,
			`^berth: login to \S+: the gateway has no identity provider; sign in with a key: berth login$`, 1},
		{"login file", func(*deviceGateway) {}, map[string]string{"BERTH_CONFIG": filepath.Join(file, "config.json")},
			`^berth: login: the login file cannot be written, so no sign-in was started: `, 1},
		{"older gateway", func(gw *deviceGateway) { gw.noDevice = true }, nil,
			`^berth: login to \S+: the gateway does not sign people in with a code \(it may be older than berth login --sso --device\); sign in where a browser can reach this machine: berth login --sso$`, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			gw := newDeviceGateway(t, tt.opt)
			l := startDeviceLogin(t, gw, tt.vars, "login", "--sso", "--device")
			code, out, errs := l.exit(t)
			if code != 1 {
				t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", code, out, errs)
			}
			wantLines(t, "stderr", errs, tt.want)
			if strings.Contains(errs, userCode) || strings.Contains(errs, "Waiting") {
				t.Errorf("berth showed a code or waited:\n%s", errs)
			}
			if tt.vars == nil { // else there cannot be one
				wantNoLoginFile(t, l.config)
			}
			if got := gw.seen(); len(got) != tt.asks {
				t.Errorf("the gateway was asked %q, want %d requests", got, tt.asks)
			}
		})
	}
}

// TestLoginSSODeviceUsage: --device without --sso, or with what --sso
// does not combine with, is a usage mistake (exit 2) that reaches no
// gateway.
func TestLoginSSODeviceUsage(t *testing.T) {
	gw := newDeviceGateway(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--device"}, `^berth: login: --device is for signing in through the identity provider: add --sso$`},
		{[]string{"--device", "--invitation"}, `^berth: login: --device is for signing in through the identity provider: add --sso$`},
		{[]string{"--sso", "--device", "--invitation"}, `^berth: login: --sso and --invitation: choose one`},
		{[]string{"--sso", "--device", "--org", "Not An Org"}, `^berth: --org "Not An Org": give an organisation's name or id$`},
		{[]string{"--sso", "--device", "--key-name", "a\x1bb"}, `^berth: --key-name: holds a control character$`},
		{[]string{"--sso", "--device=nope"}, `invalid argument "nope" for "--device"`},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			loginUsage(t, gw.url, nil, "", tt.args, tt.want)
		})
	}
	if got := gw.seen(); len(got) != 0 {
		t.Errorf("usage mistakes reached the gateway: %q", got)
	}
}

// TestLoginHelpSaysDevice: login's help describes --device, and what
// --no-browser does with it.
func TestLoginHelpSaysDevice(t *testing.T) {
	code, out, _ := berthAt(t, offline(t), "login", "--help")
	if code != 0 {
		t.Fatalf("login --help exited %d", code)
	}
	wantLines(t, "login --help", out,
		`^With --sso --device, for a terminal no browser can reach back`,
		`^minutes as the gateway is shipped\) or on Ctrl-C\. --no-browser is$`,
		`^  berth login --sso --device --url https://berth\.example\.com +# over ssh`,
		`^      --device +with --sso: sign in from a browser on any machine, with a code berth prints`,
		`^      --no-browser +with --sso: .*\(--device never starts one\)$`)
}
