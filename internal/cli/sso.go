package cli

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/name"
)

// ssoWait is how long berth login --sso waits for the browser to come
// back (Env.ssoWait, in tests, shortens it).
const ssoWait = 5 * time.Minute

// ssoLogin is what "berth login --sso" was asked for.
type ssoLogin struct {
	org       string // the organisation to sign in to; "" lets the gateway ask
	keyName   string // "" is "sso " + the host's name
	noBrowser bool
	device    bool // --device: a device grant, signed in from a browser anywhere
}

// ssoTarget is the gateway a sign-in through its identity provider goes
// to, and where the key it gives is saved.
type ssoTarget struct {
	c    *client.Client // with no key: the sign-in routes are public
	base string         // the gateway's address
	info api.SSO
	path string // the login file's, checked to take a new file
}

// ssoSetup checks what berth login --sso was asked for, asks the gateway
// whether it has an identity provider, and settles where the key will be
// saved, all before any sign-in starts.
func (g *globals) ssoSetup(ctx context.Context, o *ssoLogin) (ssoTarget, error) {
	if o.keyName == "" {
		o.keyName = defaultSSOKeyName()
	} else if err := account.CheckText("--key-name", o.keyName, account.MaxKeyName); err != nil {
		return ssoTarget{}, usageError{err}
	}
	if o.org != "" && name.Check(o.org) != nil && name.Check(strings.TrimPrefix(o.org, "org_")) != nil {
		return ssoTarget{}, usageError{fmt.Errorf("--org %q: give an organisation's name or id", o.org)}
	}
	base, err := g.loginURL()
	if err != nil {
		return ssoTarget{}, err
	}
	c := client.New(base, "", g.env.HTTP)
	info, err := c.SSO(ctx)
	if ae, ok := errors.AsType[*api.Error](err); ok && ae.Code == api.CodeNotFound {
		return ssoTarget{}, fmt.Errorf("login to %s: the gateway does not sign people in through an identity provider (it may be older than berth login --sso); sign in with a key: berth login", base)
	}
	if err != nil {
		return ssoTarget{}, fmt.Errorf("login to %s: %w", base, err)
	}
	if !info.Enabled {
		return ssoTarget{}, fmt.Errorf("login to %s: the gateway has no identity provider; sign in with a key: berth login", base)
	}
	// Settled before anyone signs in: a key that cannot be saved would be
	// minted in vain.
	path, err := g.configPath()
	if err != nil {
		return ssoTarget{}, err
	}
	if err := canWrite(path); err != nil {
		return ssoTarget{}, fmt.Errorf("login: the login file cannot be written, so no sign-in was started: %w", err)
	}
	return ssoTarget{c: c, base: base, info: info, path: path}, nil
}

// loginSSO is "berth login --sso": the person signs in through the
// gateway's identity provider in a browser, which the gateway sends back
// to a listener of ours on 127.0.0.1 with a one-time code; the code and
// the PKCE verifier only we hold are traded for a key, which is saved as
// berth login saves one. With --device it is loginSSODevice instead.
func (g *globals) loginSSO(ctx context.Context, o ssoLogin) error {
	s, err := g.ssoSetup(ctx, &o)
	if err != nil {
		return err
	}
	if o.device {
		return g.loginSSODevice(ctx, s, o)
	}
	c, base, info, path := s.c, s.base, s.info, s.path
	if !strings.HasPrefix(info.CLIStart, "/") || strings.HasPrefix(info.CLIStart, "//") {
		return fmt.Errorf("login to %s: the gateway names no sign-in page for berth login (cli_start %q): is it older than this berth?", base, info.CLIStart)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("login: listen on 127.0.0.1 for the browser to come back: %w", err)
	}
	cb := &callbacks{state: rand.Text(), calls: make(chan callback), done: make(chan struct{})}
	verifier := pkceVerifier()
	start, err := url.Parse(base + info.CLIStart)
	if err != nil {
		ln.Close()
		return fmt.Errorf("login to %s: the gateway's sign-in page %q: %w", base, info.CLIStart, err)
	}
	q := start.Query()
	q.Set("port", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	q.Set("challenge", pkceChallenge(verifier))
	q.Set("state", cb.state)
	if o.org != "" {
		q.Set("org", o.org)
	}
	start.RawQuery = q.Encode()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /callback", cb.serve)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		close(cb.done) // a callback still waiting hears that login is over
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx) // lets the last page be written
		<-served
	}()

	wait := ssoWait
	if g.env.ssoWait > 0 {
		wait = g.env.ssoWait
	}
	fmt.Fprintf(g.env.Stderr, "To sign in to %s through %s, open this address in a browser on this machine:\n\n  %s\n\n",
		base, printable(through(info)), start)
	var opened <-chan error
	if !o.noBrowser {
		opened = openBrowser(g.env, start.String())
	}
	fmt.Fprintf(g.env.Stderr, "Waiting for the browser to come back to %s (at most %s; Ctrl-C stops)...\n", ln.Addr(), short(wait))

	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case err := <-opened:
			opened = nil
			if err != nil {
				fmt.Fprintf(g.env.Stderr, "(the browser did not open: %v; open the address yourself)\n", err)
			}
			continue
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return fmt.Errorf("login to %s: the browser did not come back within %s; nothing was saved: run berth login --sso again", base, short(wait))
		case call := <-cb.calls:
			page, err := g.finishSSO(ctx, c, base, path, verifier, o.keyName, call.query)
			call.reply <- page
			return err
		}
	}
}

// finishSSO ends a sign-in the browser came back from with query: a
// refusal is an error; a code is traded for a key, which is saved. It
// returns the page to answer the browser with, and the command's error.
func (g *globals) finishSSO(ctx context.Context, c *client.Client, base, path, verifier, keyName string, query url.Values) (ssoPage, error) {
	if e := query.Get("error"); e != "" {
		msg := printable(query.Get("error_description"))
		if msg == "" {
			msg = "the identity provider did not sign you in"
		}
		return ssoPage{Status: http.StatusForbidden, Title: "Not signed in", Text: msg},
			fmt.Errorf("login to %s: the sign-in did not come through: %s (%s); nothing was saved", base, msg, printable(e))
	}
	code := query.Get("code")
	if code == "" {
		return ssoPage{Status: http.StatusBadRequest, Title: "Not signed in", Text: "The gateway sent this browser back without a sign-in code. Run berth login --sso again."},
			fmt.Errorf("login to %s: the browser came back without a sign-in code; nothing was saved: run berth login --sso again", base)
	}
	failed := ssoPage{Status: http.StatusBadGateway, Title: "Not signed in", Text: "berth could not finish signing you in: see your terminal."}
	e, err := c.SSOToken(ctx, api.SSOToken{Code: code, Verifier: verifier, KeyName: keyName})
	if ae, ok := errors.AsType[*api.Error](err); ok && ae.Code == api.CodeUnauthenticated {
		return failed, fmt.Errorf("login to %s: the gateway refused the sign-in: %s; nothing was saved", base, ae.Message)
	}
	if err != nil {
		return failed, fmt.Errorf("login to %s: %w", base, err)
	}
	if err := g.saveSSOKey(base, path, e, "berth login --sso"); err != nil {
		return failed, err
	}
	return ssoPage{Status: http.StatusOK, Title: "Signed in",
		Text: fmt.Sprintf("berth is signed in to %s as %s (%s of %s). You may close this tab.", base, e.User.Name, e.User.Role, e.Organisation.Name)}, nil
}

// saveSSOKey saves the key a sign-in through the identity provider gave,
// and says who berth is logged in as and when to sign in again (with
// again, the command).
func (g *globals) saveSSOKey(base, path string, e api.Enrollment, again string) error {
	if err := writeLogin(path, loginFile{URL: base, Key: e.Key.Secret}); err != nil {
		// The key exists but nobody has it: say which, so it can be revoked.
		return fmt.Errorf("login: your new key %s could not be saved (revoke it with berth key revoke %s once you have another): %w",
			e.Key.ID, e.Key.ID, err)
	}
	fmt.Fprintf(g.env.Stdout, "logged in to %s as %s (%s of %s) with your new key %s %q; saved in %s\n",
		base, e.User.Name, e.User.Role, e.Organisation.Name, e.Key.ID, e.Key.Name, path)
	if x := e.Key.ExpiresAt; x != nil {
		fmt.Fprintf(g.env.Stdout, "the key expires %s (%s): sign in again then, with %s\n",
			x.UTC().Format("2006-01-02 15:04 MST"), until(g.env.Now(), *x), again)
	} else {
		fmt.Fprintln(g.env.Stdout, "the key does not expire")
	}
	return nil
}

// callbacks is the loopback listener's side of a sign-in: it hands the
// one callback that carries the sign-in's state to loginSSO, and answers
// the browser with the page loginSSO gives back.
type callbacks struct {
	state string
	calls chan callback
	done  chan struct{} // closed when login is over
}

// callback is the browser come back with query; the page to answer it
// with is sent on reply, once.
type callback struct {
	query url.Values
	reply chan ssoPage
}

func (cb *callbacks) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		// The mux lets HEAD through as GET; only the browser's GET counts.
		w.Header().Set("Allow", "GET")
		http.Error(w, "only GET", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(cb.state)) != 1 {
		// Not the sign-in we started (another tab, an old link, a forgery):
		// it changes nothing, and login keeps waiting.
		ssoPage{Status: http.StatusBadRequest, Title: "Not this sign-in",
			Text: "This is not the sign-in berth login is waiting for. Open the address berth login printed."}.write(w)
		return
	}
	call := callback{query: q, reply: make(chan ssoPage, 1)}
	select {
	case cb.calls <- call:
	case <-cb.done:
		ssoPage{Status: http.StatusGone, Title: "berth login is over",
			Text: "berth login is not waiting for this sign-in any more: see your terminal."}.write(w)
		return
	case <-r.Context().Done():
		return
	}
	select {
	case p := <-call.reply:
		p.write(w)
	case <-r.Context().Done():
	}
}

// ssoPage is what the loopback listener answers the browser: a small page
// that needs nothing else.
type ssoPage struct {
	Status      int
	Title, Text string
}

var ssoPageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>berth: {{.Title}}</title>
<style>body{font-family:system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;line-height:1.5;color:#222}h1{font-size:1.4rem}</style>
</head><body><h1>{{.Title}}</h1><p>{{.Text}}</p></body></html>
`))

func (p ssoPage) write(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// The address holds the one-time code: it goes nowhere else.
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	_ = ssoPageTemplate.Execute(w, p)
}

// openBrowser starts a browser on addr: $BROWSER (a program, or a
// colon-separated list of them, the first found used; %s in one is the
// address), else open on macOS, else xdg-open when there is a display. Its
// outcome comes on the channel: nil once it has run, or why it could not;
// the channel is nil when there is no browser to start. The program is
// not waited for beyond that: a browser may run long after login.
func openBrowser(env Env, addr string) <-chan error {
	argv := browserCommand(env.Getenv, addr)
	if argv == nil {
		fmt.Fprintln(env.Stderr, "(no browser to open it with: set BROWSER, or open the address yourself)")
		return nil
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	out := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		out <- fmt.Errorf("%s: %w", argv[0], err)
		return out
	}
	fmt.Fprintf(env.Stderr, "(opening it with %s)\n", filepath.Base(argv[0]))
	go func() {
		if err := cmd.Wait(); err != nil {
			out <- fmt.Errorf("%s: %w", filepath.Base(argv[0]), err)
			return
		}
		out <- nil
	}()
	return out
}

// browserCommand is the command line that opens addr in a browser, or nil.
func browserCommand(getenv func(string) string, addr string) []string {
	if b := getenv("BROWSER"); b != "" {
		for entry := range strings.SplitSeq(b, ":") {
			f := strings.Fields(entry)
			if len(f) == 0 {
				continue
			}
			if _, err := exec.LookPath(f[0]); err != nil {
				continue
			}
			substituted := false
			for i, a := range f[1:] {
				if strings.Contains(a, "%s") {
					f[i+1], substituted = strings.ReplaceAll(a, "%s", addr), true
				}
			}
			if !substituted {
				f = append(f, addr)
			}
			return f
		}
		return nil
	}
	opener := "xdg-open"
	if runtime.GOOS == "darwin" {
		opener = "open"
	} else if getenv("DISPLAY") == "" && getenv("WAYLAND_DISPLAY") == "" {
		// Without a display, xdg-open falls back to a text browser, which
		// would fight us for the terminal.
		return nil
	}
	path, err := exec.LookPath(opener)
	if err != nil {
		return nil
	}
	return []string{path, addr}
}

// defaultSSOKeyName is "sso " and the machine's host name, within the
// bound of a key's name.
func defaultSSOKeyName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "sso"
	}
	s := "sso " + strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, host)
	n := min(len(s), account.MaxKeyName)
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// printable is s for a terminal: what is not printable replaced, and at
// most 300 characters (the provider's words come through the browser).
func printable(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range strings.TrimSpace(s) {
		if n++; n > 300 {
			b.WriteString("...")
			break
		}
		if !unicode.IsPrint(r) {
			r = '?'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// canWrite makes sure a file can be written at path: its directory exists
// (made private when made) and takes a new file.
func canWrite(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// stdinHolds reports whether standard input holds a line that can be read
// without waiting: a file's, or a reader's of an in-process caller. A
// terminal or a pipe is not read: a pipe may never end (ssh with no
// terminal), and login would wait for it.
func (g *globals) stdinHolds() bool {
	if g.env.Stdin == nil {
		return false
	}
	if f, ok := g.env.Stdin.(*os.File); ok {
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
			return false
		}
	}
	line, _ := bufio.NewReader(g.env.Stdin).ReadString('\n')
	return strings.TrimSpace(line) != ""
}

// pkceVerifier is a PKCE code verifier (RFC 7636 §4.1): 32 random bytes,
// base64url without padding, 43 characters.
func pkceVerifier() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// pkceChallenge is verifier's S256 challenge (RFC 7636 §4.2).
func pkceChallenge(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
