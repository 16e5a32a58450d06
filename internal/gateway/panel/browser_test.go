package panel_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdpage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"berth.dev/berth/internal/browsertest"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
)

// The browser tests drive the panel in real headless Chromium: gated on
// BERTH_TEST_CHROMIUM, which names its binary (.ci/run installs Debian's
// chromium and sets it). Each screen's screenshot is written as a PNG to
// BERTH_TEST_SCREENSHOTS (default: a new temporary directory, logged).

// chrome is one Chromium for a test, and where its screenshots go.
type chrome struct {
	t     *testing.T
	alloc context.Context
	shots string
}

func newChrome(t *testing.T) *chrome {
	t.Helper()
	alloc := browsertest.Allocator(t, 1366, 768, chromedp.Flag("lang", "en-GB"))
	return &chrome{t: t, alloc: alloc, shots: browsertest.Screenshots(t)}
}

// tab opens a browser of its own (no cookies shared with other tabs),
// accepting every confirm() the panel asks. Every action in it must finish
// within a minute.
func (c *chrome) tab() context.Context {
	c.t.Helper()
	browser, cancel := chromedp.NewContext(c.alloc)
	if err := chromedp.Do(browser); err != nil { // starts the browser, with no deadline: one would stop it
		cancel()
		c.t.Fatal(err)
	}
	ctx, cancelTimeout := context.WithTimeout(browser, time.Minute)
	dialogs := chromedp.Events(ctx, cdpage.JavascriptDialogOpening)
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, err := range dialogs {
			if err != nil {
				return // the tab is closing
			}
			_, _ = chromedp.Call(ctx, cdpage.HandleJavaScriptDialog, cdpage.HandleJavaScriptDialogParams{Accept: true})
		}
	})
	// Anything the page's script or its policy complains of fails the
	// test: a refused script or style would leave the page half working.
	// A page answered with an error status is logged too, and is expected.
	console := chromedp.Console(ctx)
	var (
		mu       sync.Mutex
		problems []string
	)
	wg.Go(func() {
		for m, err := range console {
			if err != nil {
				return
			}
			if (m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException) && !strings.HasPrefix(m.Text, "Failed to load resource") {
				mu.Lock()
				problems = append(problems, m.Text)
				mu.Unlock()
			}
		}
	})
	c.t.Cleanup(func() {
		cancelTimeout()
		cancel()
		wg.Wait()
		for _, p := range problems {
			c.t.Errorf("the browser's console: %s", p)
		}
	})
	return ctx
}

// run runs actions, failing the test with what was being done.
func (c *chrome) run(ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	c.t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

// shot writes a full-page screenshot, laptop-sized (1366x768) and
// phone-sized (390x844).
func (c *chrome) shot(ctx context.Context, name string) {
	c.t.Helper()
	for _, size := range []struct {
		suffix string
		w, h   int64
		mobile bool
	}{{"", 1366, 768, false}, {"-phone", 390, 844, true}} {
		opts := []chromedp.EmulateViewportOption{}
		if size.mobile {
			opts = append(opts, chromedp.EmulateMobile)
		}
		c.run(ctx, "resize for "+name+size.suffix, chromedp.EmulateViewport(size.w, size.h, opts...))
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
		if err != nil {
			c.t.Fatalf("screenshot %s: %v", name+size.suffix, err)
		}
		path := filepath.Join(c.shots, name+size.suffix+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			c.t.Fatal(err)
		}
	}
	c.run(ctx, "back to the laptop's size", chromedp.EmulateViewport(1366, 768))
	c.t.Logf("screenshot %s", filepath.Join(c.shots, name+".png"))
}

// signIn signs in as a person would with the keyboard: the key field has
// the focus when the page opens, Enter sends the form.
func (c *chrome) signIn(ctx context.Context, base, key string) {
	c.t.Helper()
	c.run(ctx, "sign in",
		chromedp.Navigate(base+"/sign-in"),
		chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.KeyEvent(key),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("nav[aria-label=Main]")),
	)
}

// text reads the text of the first element sel matches.
func (c *chrome) text(ctx context.Context, sel string) string {
	c.t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
	if err != nil {
		c.t.Fatalf("read %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// follow clicks what sel finds, waits for the page it leads to, and on
// it for what ready finds to be visible. (Waiting for ready alone could
// find it on the page before: the live regions change on their own.)
func (c *chrome) follow(ctx context.Context, what, sel, ready string) {
	c.t.Helper()
	loads := chromedp.Events(ctx, cdpage.LoadEventFired)
	c.run(ctx, what, chromedp.Click(chromedp.CSS(sel)))
	for _, err := range loads {
		if err != nil {
			c.t.Fatalf("%s: waiting for the page: %v", what, err)
		}
		break
	}
	c.run(ctx, what, chromedp.WaitVisible(chromedp.CSS(ready)))
}

// flash waits for the message a form leaves and returns it.
func (c *chrome) flash(ctx context.Context) string {
	c.t.Helper()
	return c.text(ctx, "p.flash")
}

// TestBrowserEngineerSandbox: a member signs in, creates an engineer
// sandbox from the panel, sees it become running without reloading,
// suspends, resumes, extends and terminates it.
func TestBrowserEngineerSandbox(t *testing.T) {
	c := newChrome(t)
	w := newWorld(t)
	ctx := c.tab()

	c.run(ctx, "open the panel", chromedp.Navigate(w.url+"/sandboxes"), chromedp.WaitVisible(chromedp.CSS("#key")))
	c.shot(ctx, "sign-in")
	c.signIn(ctx, w.url, w.keys["alice"])
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if loc != w.url+"/sandboxes" {
		t.Errorf("signed in at %s, want back at /sandboxes where the browser was going", loc)
	}

	// The machine is held: the page must show it starting, then running
	// once the driver reports it ready, on its own.
	release := w.drv.Hold()
	c.follow(ctx, "open the create form", `a[href="/sandboxes/new"]`, "#name")
	c.run(ctx, "fill in the create form",
		chromedp.SendKeys(chromedp.CSS("#name"), "dev"),
		chromedp.SendKeys(chromedp.CSS("#ssh_keys"), sshKey),
	)
	c.shot(ctx, "create")
	c.follow(ctx, "create", `form[action="/sandboxes/new"] button[type=submit]`, "#sandbox .state-starting")
	if got := c.flash(ctx); got != "Created dev: it is starting." {
		t.Errorf("after create: %q", got)
	}
	release()
	c.run(ctx, "see it become running", chromedp.WaitVisible(chromedp.CSS("#sandbox .state-running")))
	if got := c.text(ctx, "pre.command"); got != "berth sandbox ssh dev" {
		t.Errorf("ssh command: %q, want berth sandbox ssh dev", got)
	}
	c.shot(ctx, "sandbox-engineer")

	c.follow(ctx, "suspend", `button[aria-label="Suspend dev"]`, "#sandbox .state-suspended")
	if got := c.flash(ctx); got != "Suspended dev." {
		t.Errorf("after suspend: %q", got)
	}
	c.follow(ctx, "resume", `button[aria-label="Resume dev"]`, "#sandbox .state-running")

	before := time.Now()
	// 90m is less than the class's default it has left: the panel asks.
	c.run(ctx, "extend by 90m", chromedp.SendKeys(chromedp.CSS("#ttl"), "90m"))
	c.follow(ctx, "extend by 90m", `form.extend button[type=submit]`, "#extend-confirm")
	c.follow(ctx, "confirm the shorter lifetime", `#extend-confirm button[type=submit]`, "p.flash")
	if got := c.flash(ctx); !strings.HasPrefix(got, "Extended dev: it now expires ") {
		t.Errorf("after extend: %q", got)
	}
	sbs, _, err := w.sandboxes.List(t.Context(), w.principal("alice"), sandbox.ListOptions{})
	if err != nil || len(sbs) != 1 {
		t.Fatalf("alice's sandboxes: %v, %v", sbs, err)
	}
	if d := sbs[0].ExpiresAt.Sub(before); d < 89*time.Minute || d > 91*time.Minute {
		t.Errorf("extended by 90m: expires in %v", d)
	}

	c.follow(ctx, "the list", `.crumbs a[href="/sandboxes"]`, "#sandbox-list .state-running")
	c.shot(ctx, "sandboxes")
	c.follow(ctx, "terminate from the list, confirming", `button[aria-label="Terminate dev"]`, "p.flash")
	if got := c.flash(ctx); got != "Terminated dev." {
		t.Errorf("after terminate: %q", got)
	}
	if sb := w.wait(t, sbs[0].ID, func(sb sandbox.Sandbox) bool { return sb.State == sandbox.StateTerminated }); sb.State != sandbox.StateTerminated {
		t.Errorf("after terminate the sandbox is %s", sb.State)
	}
}

// TestBrowserAdministrator: an administrator edits a class and the
// organisation's guardrail, and the fields neither form shows keep their
// values; the usage, quotas and agent-run screens are photographed.
func TestBrowserAdministrator(t *testing.T) {
	c := newChrome(t)
	w := newWorld(t)
	seedHistory(t, w)
	ctx := c.tab()
	c.signIn(ctx, w.url, w.keys["ada"])
	c.run(ctx, "the list", chromedp.WaitVisible(chromedp.CSS("#sandbox-list table")))
	c.shot(ctx, "sandboxes-admin")

	c.follow(ctx, "the classes", `nav a[href="/classes"]`, `a[aria-label="Edit agent"]`)
	c.shot(ctx, "classes")
	c.follow(ctx, "edit class agent", `a[aria-label="Edit agent"]`, "#description")
	c.run(ctx, "edit class agent",
		chromedp.SetValue(chromedp.CSS("#description"), "Coding agents, four cores"),
		chromedp.SetValue(chromedp.CSS("#cpu"), "4"),
	)
	c.shot(ctx, "class-edit")
	c.follow(ctx, "save class agent", `form button[type=submit].primary`, "p.flash")
	if got := c.flash(ctx); got != "Classes saved agent." {
		t.Errorf("after saving the class: %q", got)
	}
	spec := classSpec(t, w, "agent")
	if spec.Description != "Coding agents, four cores" || spec.CPU != "4" || spec.Contract != "kelos" || spec.Git != "gateway" ||
		strings.Join(spec.SetupCommand, " ") != "make deps" || strings.Join(spec.Purposes, ",") != "agent" {
		t.Errorf("class agent after the edit: %+v; want the new description and cpu, and contract, git, setup_command and purposes kept", spec)
	}

	c.follow(ctx, "the quotas", `nav a[href="/quotas"]`, `section.quota`)
	c.shot(ctx, "quotas")
	c.follow(ctx, "edit the organisation's quotas", `a[aria-label="Edit the quotas of the organisation"]`, "#max_sandboxes")
	c.run(ctx, "edit the organisation's quotas",
		chromedp.SendKeys(chromedp.CSS("#max_sandboxes"), "10"),
		chromedp.SetValue(chromedp.CSS("#max_sandbox_ttl"), "8h"),
	)
	c.shot(ctx, "quotas-edit")
	c.follow(ctx, "save the quotas", `form button[type=submit].primary`, "p.flash")
	g, err := w.accounts.Guardrail(t.Context(), w.operator, "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	if g.MaxSandboxes == nil || *g.MaxSandboxes != 10 || g.MaxSandboxTTL == nil || *g.MaxSandboxTTL != 8*time.Hour ||
		g.MaxSandboxCPU == nil || *g.MaxSandboxCPU != 8000 || strings.Join(g.AllowedRepos, ",") != "acme" {
		t.Errorf("guardrail after the edit: %s; want max-sandboxes 10, ttl 8h, the cpu ceiling 8 and allowed-repos acme kept", g)
	}

	c.follow(ctx, "the usage", `nav a[href="/usage"]`, `figure.chart svg rect.bar`)
	bars, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#main figure.chart:first-of-type rect.bar").length`))
	if err != nil {
		t.Fatal(err)
	}
	if bars < 30 {
		t.Errorf("the core-seconds chart of 30 days has %d bars, want one a day", bars)
	}
	c.shot(ctx, "usage")

	fix := findSandbox(t, w, "fix")
	c.run(ctx, "an agent sandbox", chromedp.Navigate(w.url+"/sandboxes/"+string(fix.ID)), chromedp.WaitVisible(chromedp.CSS(".t-totals")))
	c.shot(ctx, "sandbox-agent")
}

// TestBrowserMemberCannotSeeAnothersSandbox: a member who opens another
// member's sandbox gets the API's answer: not found.
func TestBrowserMemberCannotSeeAnothersSandbox(t *testing.T) {
	c := newChrome(t)
	w := newWorld(t)
	sb := w.create(t, "alice", "dev")
	w.running(t, sb.ID)
	ctx := c.tab()
	c.signIn(ctx, w.url, w.keys["bob"])
	if got := c.text(ctx, "#sandbox-list"); strings.Contains(got, "dev") {
		t.Errorf("bob's list shows alice's sandbox: %q", got)
	}
	for _, ref := range []string{string(sb.ID), "dev"} {
		res, err := chromedp.RunResponse(ctx, chromedp.Navigate(w.url+"/sandboxes/"+ref))
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != 404 {
			t.Errorf("bob opens /sandboxes/%s: status %d, want 404", ref, res.Status)
		}
		if got := c.text(ctx, "main h1"); got != "Not Found" {
			t.Errorf("bob opens /sandboxes/%s: heading %q, want Not Found", ref, got)
		}
	}
	c.shot(ctx, "not-found")
}

// seedHistory gives organisation acme a month of sandboxes: engineer
// sandboxes created on several days, some running for a while, one agent
// run with what the gateway metered of it, and sandboxes live now in
// several states.
func seedHistory(t *testing.T, w *world) {
	t.Helper()
	ctx := t.Context()
	for i, day := range []int{27, 21, 16, 12, 9, 5, 3, 2} {
		w.ago(time.Duration(day)*24*time.Hour + 3*time.Hour)
		user := []string{"alice", "bob"}[i%2]
		sb := w.create(t, user, fmt.Sprintf("build-%d", day))
		w.running(t, sb.ID)
		w.ago(time.Duration(day)*24*time.Hour + 3*time.Hour - time.Duration(30+i*25)*time.Minute)
		if _, err := w.sandboxes.Terminate(ctx, w.principal(user), string(sb.ID)); err != nil {
			t.Fatal(err)
		}
	}
	w.ago(0)
	fix := w.agentRun(t, "alice", "fix")
	if err := w.st.RecordInference(ctx, inference.Record{At: w.now(), Org: fix.Org, Project: fix.Project, User: fix.Owner,
		Sandbox: string(fix.ID), Session: string(fix.ID), Provider: "anthropic", Model: "claude-sonnet-4-5", Dialect: inference.Anthropic,
		Status: 200, Usage: runner.Usage{Input: 5200, Output: 900}, CostUSD: 0.0291, Metered: true}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct{ user, name string }{{"alice", "dev"}, {"bob", "web"}, {"ada", "scratch"}} {
		w.running(t, w.create(t, s.user, s.name).ID)
	}
	if _, err := w.sandboxes.Suspend(ctx, w.principal("bob"), "web"); err != nil {
		t.Fatal(err)
	}
}

func findSandbox(t *testing.T, w *world, name string) sandbox.Sandbox {
	t.Helper()
	sbs, _, err := w.sandboxes.List(t.Context(), w.operator, sandbox.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs {
		if sb.Name == name {
			return sb
		}
	}
	t.Fatalf("no sandbox %s", name)
	return sandbox.Sandbox{}
}

// TestBrowserSignInStaysOnTheGateway: a sign-in link whose next page a
// browser would read as another origin (a tab, a backslash, an encoded
// or a doubled slash) leaves the browser on the gateway after signing in.
// The other origin is a server of the test's own, so a browser sent there
// is seen arriving.
func TestBrowserSignInStaysOnTheGateway(t *testing.T) {
	c := newChrome(t)
	w := newWorld(t)
	elsewhere := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(rw, `<!doctype html><title>elsewhere</title><p id="elsewhere">another origin</p>`)
	}))
	t.Cleanup(elsewhere.Close)
	other := strings.TrimPrefix(elsewhere.URL, "http://")
	for _, next := range []string{"/%09/" + other + "/", "/%5C" + other + "/", `/\` + other + "/", "//" + other + "/", "/.//" + other + "/"} {
		ctx := c.tab()
		c.run(ctx, "sign in with next "+next,
			chromedp.Navigate(w.url+"/sign-in?next="+next),
			chromedp.WaitVisible(chromedp.CSS("#key")),
			chromedp.KeyEvent(w.keys["alice"]),
			chromedp.KeyEvent(kb.Enter),
		)
		// Signed in, the browser shows the panel's menu; sent away, the
		// other origin's page (or, where the panel's form-action policy
		// stops the redirect, nothing new).
		wait, cancel := context.WithTimeout(ctx, 15*time.Second)
		_, landed := chromedp.Run(wait, chromedp.WaitVisible(chromedp.CSS(`nav[aria-label=Main], #elsewhere`)))
		cancel()
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		if landed != nil || !strings.HasPrefix(loc, w.url+"/") || strings.HasPrefix(loc, w.url+"/sign-in") {
			t.Errorf("signed in from /sign-in?next=%s: the browser is at %s (%v), not on a page of the gateway %s", next, loc, landed, w.url)
		}
	}
}
