package cli_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/cli"
)

// TestLoginSSO: berth prints the gateway's start page with a loopback
// port, an S256 challenge and a state; the browser goes there and is sent
// back to berth's listener, which answers a page saying who is signed in;
// berth trades the code and its verifier for a key, saves it (0600) and
// says who it is logged in as, with which key, and when it expires.
func TestLoginSSO(t *testing.T) {
	gw := newSSOGateway(t)
	l := startSSOLogin(t, gw, nil, 0, "login", "--sso", "--no-browser")
	addr := l.address(t)
	if want := gw.url + ssoStart; addr.Scheme+"://"+addr.Host+addr.Path != want {
		t.Errorf("berth printed %s, want the gateway's start page %s", addr, want)
	}
	if addr.Query().Has("org") {
		t.Errorf("berth printed %s: an org without --org", addr)
	}

	status, body, resp := browse(t, "GET", addr.String())
	if status != http.StatusOK || !strings.Contains(body, "Signed in") || !strings.Contains(body, "alice (member of acme)") {
		t.Errorf("the browser got %d:\n%s\nwant 200 saying alice is signed in", status, body)
	}
	cb := resp.Request.URL
	if cb.Host != "127.0.0.1:"+addr.Query().Get("port") || cb.Path != "/callback" || cb.Query().Get("state") != addr.Query().Get("state") {
		t.Errorf("the page came from %s, want berth's /callback on port %s with the state it printed", cb, addr.Query().Get("port"))
	}
	for h, want := range map[string]string{"Content-Type": "text/html; charset=utf-8", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("the page's %s is %q, want %q", h, got, want)
		}
	}
	// The page needs nothing else: the address it came from holds the code.
	for _, ref := range []string{"src=", "href=", "<script", "<link", "url("} {
		if strings.Contains(body, ref) {
			t.Errorf("the page loads something (%s):\n%s", ref, body)
		}
	}

	code, out, errs := l.exit(t)
	if code != 0 {
		t.Fatalf("berth login --sso exited %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	host, _ := os.Hostname()
	wantName := "sso " + host
	if len(wantName) > account.MaxKeyName {
		wantName = wantName[:account.MaxKeyName]
	}
	wantLines(t, "stdout", out,
		`^logged in to `+regexp.QuoteMeta(gw.url)+` as alice \(member of acme\) with your new key key_sso1 "`+regexp.QuoteMeta(wantName)+`"; saved in `+regexp.QuoteMeta(l.config)+`$`,
		`^the key expires 2026-07-01 22:00 UTC \(in 12h\): sign in again then, with berth login --sso$`)
	wantLines(t, "stderr", errs,
		`^To sign in to `+regexp.QuoteMeta(gw.url)+` through https://idp\.example\.com, open this address in a browser on this machine:$`,
		`^Waiting for the browser to come back to 127\.0\.0\.1:\d+ \(at most 5m; Ctrl-C stops\)\.\.\.$`)
	if strings.Contains(errs, "opening it with") {
		t.Errorf("--no-browser opened a browser:\n%s", errs)
	}

	wantLoginFile(t, l.config, gw.url)
	if toks := gw.tokenRequests(); len(toks) != 1 || toks[0].KeyName != wantName {
		t.Errorf("token requests %+v, want one for a key named %q", toks, wantName)
	}
	want := []string{"GET " + api.SSOPath, "GET " + ssoStart, "POST " + api.SSOTokenPath}
	if got := gw.seen(); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("the gateway was asked %q, want %q", got, want)
	}
	wantClosed(t, addr)
}

// TestLoginSSOOrgAndKeyName: --org goes to the gateway's start page, and
// --key-name names the key.
func TestLoginSSOOrgAndKeyName(t *testing.T) {
	gw := newSSOGateway(t)
	l := startSSOLogin(t, gw, nil, 0, "login", "--sso", "--no-browser", "--org", "acme", "--key-name", "ada's laptop")
	addr := l.address(t)
	browse(t, "GET", addr.String())
	code, out, errs := l.exit(t)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if s := gw.startQueries(); len(s) != 1 || s[0].Get("org") != "acme" {
		t.Errorf("the start page was asked %v, want org=acme", s)
	}
	if toks := gw.tokenRequests(); len(toks) != 1 || toks[0].KeyName != "ada's laptop" {
		t.Errorf("token requests %+v, want one for a key named \"ada's laptop\"", toks)
	}
	wantLines(t, "stdout", out, `with your new key key_sso1 "ada's laptop"`)
}

// TestLoginSSOIgnoresWhatIsNotItsCallback: only GET /callback with the
// sign-in's state counts. Another path is 404, another method 405, and
// another state 400; berth keeps waiting, spends nothing, and then takes
// the real sign-in.
func TestLoginSSOIgnoresWhatIsNotItsCallback(t *testing.T) {
	gw := newSSOGateway(t)
	l := startSSOLogin(t, gw, nil, 0, "login", "--sso", "--no-browser")
	addr := l.address(t)
	listener := "http://127.0.0.1:" + addr.Query().Get("port")
	state := url.QueryEscape(addr.Query().Get("state"))
	for _, tt := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/callback?code=forged&state=wrong", http.StatusBadRequest},
		{"GET", "/callback?code=forged", http.StatusBadRequest},
		{"GET", "/callback?error=access_denied&error_description=forged&state=" + state[:len(state)-1], http.StatusBadRequest},
		{"GET", "/other?code=forged&state=" + state, http.StatusNotFound},
		{"GET", "/?code=forged&state=" + state, http.StatusNotFound},
		{"POST", "/callback?code=forged&state=" + state, http.StatusMethodNotAllowed},
		{"HEAD", "/callback?code=forged&state=" + state, http.StatusMethodNotAllowed},
	} {
		status, body, _ := browse(t, tt.method, listener+tt.path)
		if status != tt.want {
			t.Errorf("%s %s: %d, want %d\n%s", tt.method, tt.path, status, tt.want, body)
		}
		l.running(t)
	}
	if toks := gw.tokenRequests(); len(toks) != 0 {
		t.Fatalf("berth traded a code it was not given by its sign-in: %+v", toks)
	}

	status, body, _ := browse(t, "GET", addr.String())
	if status != http.StatusOK {
		t.Errorf("the real sign-in: %d\n%s", status, body)
	}
	code, out, errs := l.exit(t)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	wantLines(t, "stdout", out, `^logged in to .* as alice \(member of acme\)`)
	// Once login is over, nothing listens.
	wantClosed(t, addr)
}

// TestLoginSSORefused: a sign-in the gateway refused comes back as an
// error; the browser and berth both say why, berth exits 1 and saves
// nothing, and no code is traded.
func TestLoginSSORefused(t *testing.T) {
	words := "Your account at the identity provider is not given access to berth: ask your administrator."
	gw := newSSOGateway(t, func(gw *ssoGateway) { gw.refusal = words })
	l := startSSOLogin(t, gw, nil, 0, "login", "--sso", "--no-browser")
	addr := l.address(t)
	status, body, _ := browse(t, "GET", addr.String())
	if status != http.StatusForbidden || !strings.Contains(body, "Your account at the identity provider is not given access to berth") {
		t.Errorf("the browser got %d:\n%s\nwant 403 with the gateway's words", status, body)
	}
	code, out, errs := l.exit(t)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", code, out, errs)
	}
	wantLines(t, "stderr", errs, `^berth: login to `+regexp.QuoteMeta(gw.url)+`: the sign-in did not come through: `+regexp.QuoteMeta(words)+` \(access_denied\); nothing was saved$`)
	if out != "" {
		t.Errorf("stdout: %s, want nothing", out)
	}
	wantNoLoginFile(t, l.config)
	if toks := gw.tokenRequests(); len(toks) != 0 {
		t.Errorf("token requests after a refusal: %+v", toks)
	}
	wantClosed(t, addr)
}

// TestLoginSSOCodeRefused: a code the gateway will not trade (used or
// expired) ends login with the gateway's words; the browser is told to
// look at the terminal; nothing is saved.
func TestLoginSSOCodeRefused(t *testing.T) {
	gw := newSSOGateway(t, func(gw *ssoGateway) { gw.spent = true })
	l := startSSOLogin(t, gw, nil, 0, "login", "--sso", "--no-browser")
	status, body, _ := browse(t, "GET", l.address(t).String())
	if status != http.StatusBadGateway || !strings.Contains(body, "see your terminal") {
		t.Errorf("the browser got %d:\n%s\nwant 502 pointing to the terminal", status, body)
	}
	code, out, errs := l.exit(t)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", code, out, errs)
	}
	wantLines(t, "stderr", errs, `^berth: login to \S+: the gateway refused the sign-in: the sign-in code is unknown, used or expired: sign in again; nothing was saved$`)
	wantNoLoginFile(t, l.config)
}

// TestLoginSSOWithoutProvider: a gateway without an identity provider is
// a clear error, before anything listens or is printed to open.
func TestLoginSSOWithoutProvider(t *testing.T) {
	gw := newSSOGateway(t, func(gw *ssoGateway) { gw.enabled = false })
	l := startSSOLogin(t, gw, nil, 0, "login", "--sso", "--no-browser")
	code, out, errs := l.exit(t)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if want := "berth: login to " + gw.url + ": the gateway has no identity provider; sign in with a key: berth login\n"; errs != want {
		t.Errorf("stderr %q, want %q", errs, want)
	}
	wantNoLoginFile(t, l.config)
	if got := gw.seen(); len(got) != 1 {
		t.Errorf("the gateway was asked %q, want only GET %s", got, api.SSOPath)
	}
}

// TestLoginSSOLoginFileFirst: where the login file goes is settled before
// the sign-in starts: a key that cannot be saved is not minted.
func TestLoginSSOLoginFileFirst(t *testing.T) {
	gw := newSSOGateway(t)
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l := startSSOLogin(t, gw, map[string]string{"BERTH_CONFIG": filepath.Join(file, "config.json")}, 0, "login", "--sso", "--no-browser")
	code, out, errs := l.exit(t)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", code, out, errs)
	}
	wantLines(t, "stderr", errs, `^berth: login: the login file cannot be written, so no sign-in was started: `)
	if addressRE.MatchString(errs) {
		t.Errorf("berth printed an address to open:\n%s", errs)
	}
}

// TestLoginSSOTimesOut: berth waits for the browser a bounded time, then
// says so, exits 1, saves nothing and stops listening.
func TestLoginSSOTimesOut(t *testing.T) {
	gw := newSSOGateway(t)
	l := startSSOLogin(t, gw, nil, time.Second, "login", "--sso", "--no-browser")
	addr := l.address(t)
	code, out, errs := l.exit(t)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", code, out, errs)
	}
	wantLines(t, "stderr", errs,
		`\(at most 1s; Ctrl-C stops\)`,
		`^berth: login to \S+: the browser did not come back within 1s; nothing was saved: run berth login --sso again$`)
	wantNoLoginFile(t, l.config)
	wantClosed(t, addr)
	// A browser that comes back late finds nobody.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", addr.String(), nil)
	if resp, err := browser.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("a late sign-in reached berth's listener: %s", resp.Status)
	}
}

// TestLoginSSOInterrupted: Ctrl-C (the context's end) stops the wait
// cleanly: the interrupt's exit status, its one line, nothing saved.
func TestLoginSSOInterrupted(t *testing.T) {
	gw := newSSOGateway(t)
	l := startSSOLogin(t, gw, nil, 0, "login", "--sso", "--no-browser")
	addr := l.address(t)
	l.cancel()
	code, out, errs := l.exit(t)
	if code != 130 {
		t.Fatalf("exit %d, want 130\nstdout: %s\nstderr: %s", code, out, errs)
	}
	wantLines(t, "stderr", errs, `^berth: interrupted before the command finished$`)
	wantNoLoginFile(t, l.config)
	wantClosed(t, addr)
}

// TestLoginSSOOpensTheBrowser: without --no-browser berth starts $BROWSER
// on the address it prints (in place of %s), and a browser that fails to
// start is only a note: the address is still there to open.
func TestLoginSSOOpensTheBrowser(t *testing.T) {
	dir := t.TempDir()
	got := filepath.Join(dir, "opened")
	script := filepath.Join(dir, "browser")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nprintf '%s\\n' \"$*\" > "+got+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Run("opened", func(t *testing.T) {
		gw := newSSOGateway(t)
		l := startSSOLogin(t, gw, map[string]string{"BROWSER": "no-such-browser-here:" + script + " --new-tab %s"}, 0, "login", "--sso")
		addr := l.address(t)
		var opened string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if b, err := os.ReadFile(got); err == nil && strings.HasSuffix(string(b), "\n") {
				opened = strings.TrimSpace(string(b))
				break
			}
		}
		if want := "--new-tab " + addr.String(); opened != want {
			t.Fatalf("$BROWSER was run with %q, want %q", opened, want)
		}
		browse(t, "GET", opened[len("--new-tab "):])
		code, out, errs := l.exit(t)
		if code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
		}
		wantLines(t, "stderr", errs, `^\(opening it with browser\)$`)
	})
	t.Run("failed", func(t *testing.T) {
		gw := newSSOGateway(t)
		l := startSSOLogin(t, gw, map[string]string{"BROWSER": "false"}, 0, "login", "--sso")
		addr := l.address(t)
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(l.errs.String(), "the browser did not open") && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		l.running(t)
		browse(t, "GET", addr.String())
		code, out, errs := l.exit(t)
		if code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
		}
		wantLines(t, "stderr", errs, `^\(the browser did not open: false: exit status 1; open the address yourself\)$`)
	})
	t.Run("none", func(t *testing.T) {
		gw := newSSOGateway(t)
		l := startSSOLogin(t, gw, nil, 0, "login", "--sso") // no BROWSER, no DISPLAY
		browse(t, "GET", l.address(t).String())
		code, out, errs := l.exit(t)
		if code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
		}
		wantLines(t, "stderr", errs, `^\(no browser to open it with: set BROWSER, or open the address yourself\)$`)
	})
}

// TestLoginSSOUsage: what --sso does not combine with, and its flags
// without it, are usage mistakes (exit 2) that reach no gateway.
func TestLoginSSOUsage(t *testing.T) {
	tests := []struct {
		name  string
		vars  map[string]string
		stdin string
		args  []string
		want  string
	}{
		{"invitation", nil, "", []string{"--sso", "--invitation"}, `^berth: login: --sso and --invitation: choose one`},
		{"key in the environment", map[string]string{"BERTH_API_KEY": "berth_abcdefghij012345_x"}, "", []string{"--sso"},
			`^berth: login --sso: BERTH_API_KEY is set, but --sso reads no key: unset it, or leave out --sso to save that key$`},
		{"key on stdin", nil, "berth_abcdefghij012345_x\n", []string{"--sso"},
			`^berth: login --sso reads no key, but standard input holds one: leave out --sso to save that key$`},
		{"org without sso", nil, "", []string{"--org", "acme"}, `^berth: login: --org is for signing in through the identity provider: add --sso$`},
		{"no-browser without sso", nil, "", []string{"--no-browser"}, `^berth: login: --no-browser is for signing in through the identity provider: add --sso$`},
		{"long key name", nil, "", []string{"--sso", "--key-name", strings.Repeat("k", account.MaxKeyName+1)}, `^berth: --key-name: is 101 bytes; at most 100$`},
		{"control in key name", nil, "", []string{"--sso", "--key-name", "a\x1bb"}, `^berth: --key-name: holds a control character$`},
		{"bad org", nil, "", []string{"--sso", "--org", "Not An Org"}, `^berth: --org "Not An Org": give an organisation's name or id$`},
		{"argument", nil, "", []string{"--sso", "acme"}, `^berth: berth login: takes no arguments`},
	}
	gw := newSSOGateway(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loginUsage(t, gw.url, tt.vars, tt.stdin, tt.args, tt.want)
		})
	}
	if got := gw.seen(); len(got) != 0 {
		t.Errorf("usage mistakes reached the gateway: %q", got)
	}
}

// loginUsage runs berth login with args against the gateway at url, with
// vars set and stdin, which must exit 2 (a usage mistake) saying want.
func loginUsage(t *testing.T, url string, vars map[string]string, stdin string, args []string, want string) {
	t.Helper()
	env := map[string]string{"BERTH_URL": url, "HOME": t.TempDir()}
	for k, v := range vars {
		env[k] = v
	}
	var out, errs bytes.Buffer
	code := cli.Main(t.Context(), append([]string{"login"}, args...), cli.Env{Stdin: strings.NewReader(stdin),
		Stdout: &out, Stderr: &errs, Getenv: func(k string) string { return env[k] }, HTTP: &http.Client{}, Now: time.Now})
	if code != 2 {
		t.Fatalf("berth login %q exited %d, want 2\nstdout: %s\nstderr: %s", args, code, out.String(), errs.String())
	}
	wantLines(t, "stderr", errs.String(), want)
}

// TestLoginHelpSaysSSO: login's help describes --sso and its flags.
func TestLoginHelpSaysSSO(t *testing.T) {
	code, out, _ := berthAt(t, offline(t), "login", "--help")
	if code != 0 {
		t.Fatalf("login --help exited %d", code)
	}
	wantLines(t, "login --help", out,
		`^With --sso, you sign in through your organisation's identity provider$`,
		`^  berth login --sso --url https://berth\.example\.com$`,
		`^      --sso +sign in through the identity provider`,
		`^      --no-browser +with --sso: only print the address to open`,
		`^      --org string +with --sso: the organisation to sign in to`,
		`^      --key-name string +with --invitation or --sso: a name for the new key`)
}

// wantLoginFile checks the login file at path holds the gateway's
// address and the key the sign-in gave, readable by its owner only.
func wantLoginFile(t *testing.T, path, url string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lf struct{ URL, Key string }
	if err := json.Unmarshal(b, &lf); err != nil || lf.URL != url || lf.Key != ssoSecret {
		t.Errorf("login file %s = %s (%v), want the gateway's address and the new key", path, b, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("login file: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
}
