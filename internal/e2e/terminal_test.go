package e2e_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/browsertest"
	"berth.dev/berth/internal/client"
)

// TestPanelTerminal is issue 18's terminal in the panel, on podman with the
// sandbox's real sshd: the owner, signed in to the panel in headless
// Chromium, opens a terminal on her sandbox's page, types a command and
// reads what the shell printed; an administrator's page offers none and
// the WebSocket refuses her (403, audited), another member does not find
// it (404), and a page of another origin is refused even with the owner's
// cookie.
func TestPanelTerminal(t *testing.T) {
	alloc := browsertest.Allocator(t, 1280, 900)
	g := startGateway(t)
	alice := g.newMember(t, "alice")
	bob := g.newMember(t, "bob")
	carol := g.newPerson(t, "carol", "admin")
	sb := alice.engineer(g, "dev")
	page := "/sandboxes/" + sb.ID
	// The browser opens the gateway at its public URL (BERTH_PUBLIC_URL's
	// default here): the terminal's WebSocket must come from that origin.
	public := strings.Replace(g.url, "127.0.0.1", "localhost", 1)

	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(browser, 3*time.Minute)
	defer cancel()
	// A script or style the page's policy refuses would leave the terminal
	// half drawn: anything the console complains of fails the test.
	var (
		mu       sync.Mutex
		problems []string
	)
	console := chromedp.Console(ctx)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			// (The favicon the page does not have is not a problem.)
			if (m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException) && !strings.HasPrefix(m.Text, "Failed to load resource") {
				mu.Lock()
				problems = append(problems, m.Text)
				mu.Unlock()
			}
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range problems {
			t.Errorf("the browser's console: %s", p)
		}
	}()
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	do("sign in as alice",
		chromedp.Navigate(public+"/sign-in"),
		chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), alice.apiKey()+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("nav[aria-label=Main]")),
	)
	do("open the terminal",
		chromedp.Navigate(public+page),
		chromedp.WaitVisible(chromedp.CSS("#terminal-open")),
		chromedp.Click(chromedp.CSS("#terminal-open")),
		chromedp.WaitVisible(chromedp.CSS("#terminal .xterm")),
	)
	// The screen, as xterm.js holds it: every line of its buffer.
	const screen = `(() => { const t = window.berthTerminal; if (!t) return ""; const b = t.buffer.active; const out = [];
		for (let i = 0; i < b.length; i++) out.push(b.getLine(i).translateToString(true)); return out.join("\n"); })()`
	read := func() string {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](screen))
		if err != nil {
			t.Fatalf("read the terminal: %v", err)
		}
		return s
	}
	prompt := regexp.MustCompile(`[$#] *$`)
	eventually(t, time.Minute, "the shell's prompt in the terminal", func() bool {
		return prompt.MatchString(strings.TrimRight(read(), "\n "))
	})
	// Typed as text into the focused terminal, then Enter as a bare key
	// press: chromedp's key events carry text too, which xterm.js would
	// read twice (as the keypress and as the input).
	do("focus the terminal", chromedp.Focus(chromedp.CSS("#terminal .xterm-helper-textarea")))
	if _, err := chromedp.Call(ctx, input.InsertText, input.InsertTextParams{Text: "echo hello-$((6*7))"}); err != nil {
		t.Fatalf("type a command: %v", err)
	}
	for _, typ := range []input.DispatchKeyEventType{input.DispatchKeyEventTypeRawKeyDown, input.DispatchKeyEventTypeKeyUp} {
		if _, err := chromedp.Call(ctx, input.DispatchKeyEvent, input.DispatchKeyEventParams{Type: typ, Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13}); err != nil {
			t.Fatalf("press Enter: %v", err)
		}
	}
	// The command line shows hello-$((6*7)); only the shell's answer is
	// hello-42, on a line of its own.
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("the terminal's screen:\n%s", last)
		}
	}()
	eventually(t, 30*time.Second, "hello-42 printed in the terminal", func() bool {
		last = read()
		return slices.Contains(strings.Split(last, "\n"), "hello-42")
	})
	shot(t, ctx, "panel-terminal")

	// An administrator sees the sandbox, with no terminal, and the
	// WebSocket refuses her; bob does not find it; another origin is
	// refused whoever asks.
	adminPage := panelGet(t, g, carol, page, nil)
	if strings.Contains(adminPage, "terminal-open") || !strings.Contains(adminPage, "administrators manage sandboxes but do not get inside them") {
		t.Errorf("an administrator's page of dev offers a terminal, or does not say why not:\n%s", adminPage)
	}
	for _, c := range []struct {
		who    *person
		origin string
		want   int
	}{
		{carol, public, http.StatusForbidden},
		{bob, public, http.StatusNotFound},
		{alice, "https://elsewhere.example", http.StatusForbidden},
	} {
		if got := terminalStatus(t, g, c.who, page+"/terminal", c.origin); got != c.want {
			t.Errorf("terminal WebSocket as %s from %s: %d, want %d", whoami(t, c.who).User.Name, c.origin, got, c.want)
		}
	}
	// Both are shell.open entries of port 2222: carol's refused, alice's
	// terminal recorded when it closes.
	shellOpen := func(outcome string, who *person, detail string) func() bool {
		id := whoami(t, who).User.ID
		return func() bool {
			events, err := g.operator.Audit(context.Background(), client.AuditOptions{Sandbox: sb.ID})
			return err == nil && slices.ContainsFunc(events, func(e api.AuditEvent) bool {
				return e.Action == "shell.open" && e.Outcome == outcome && e.Actor == id && e.Target == "port 2222" && strings.Contains(e.Detail, detail)
			})
		}
	}
	if !shellOpen("refused", carol, "")() {
		t.Error("no refused shell.open of carol's in the sandbox's audit log")
	}
	cancelBrowser()
	eventually(t, 30*time.Second, "alice's terminal in the audit log", shellOpen("ok", alice, "terminal"))
}

// apiKey is the person's API key.
func (p *person) apiKey() string {
	for _, kv := range p.env {
		if k, ok := strings.CutPrefix(kv, "BERTH_API_KEY="); ok {
			return k
		}
	}
	p.t.Fatal("no BERTH_API_KEY in the person's environment")
	return ""
}

// panelClient is an HTTP client signed in to the panel as p, through its
// sign-in form.
func panelClient(t *testing.T, g *gateway, p *person) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := panelGet(t, g, nil, "/sign-in", c)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(form)
	if m == nil {
		t.Fatalf("no token in the sign-in form:\n%s", form)
	}
	resp, err := c.PostForm(g.url+"/sign-in", url.Values{"csrf": {m[1]}, "key": {p.apiKey()}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %s", resp.Status)
	}
	return c
}

// panelGet reads a page as p (signed in), or with c.
func panelGet(t *testing.T, g *gateway, p *person, path string, c *http.Client) string {
	t.Helper()
	if c == nil {
		c = panelClient(t, g, p)
	}
	resp, err := c.Get(g.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	if _, err := io.Copy(&b, resp.Body); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// terminalStatus asks for the terminal's WebSocket as p, from a page of
// origin, and returns the status answered.
func terminalStatus(t *testing.T, g *gateway, p *person, path, origin string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", g.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Origin", origin)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	resp, err := panelClient(t, g, p).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// shot writes a screenshot where browsertest.Screenshots says.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := browsertest.Screenshots(t)
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", path)
}
