package panel_test

import (
	"context"
	"strings"
	"testing"

	cdpage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
)

// The panel items of issue 19, in Chromium, each photographed at a
// laptop's and a phone's size.

// adminWithHistory is a Chromium tab signed in as administrator ada of a
// world with a month of history (seedHistory).
func adminWithHistory(t *testing.T) (*chrome, *world, context.Context) {
	t.Helper()
	c := newChrome(t)
	w := newWorld(t)
	seedHistory(t, w)
	ctx := c.tab()
	c.signIn(ctx, w.url, w.keys["ada"])
	return c, w, ctx
}

// aliceWithDev is a Chromium tab signed in as member alice, whose
// engineer sandbox dev runs.
func aliceWithDev(t *testing.T) (*chrome, *world, context.Context, sandbox.Sandbox) {
	t.Helper()
	c := newChrome(t)
	w := newWorld(t)
	dev := w.running(t, w.create(t, "alice", "dev").ID)
	ctx := c.tab()
	c.signIn(ctx, w.url, w.keys["alice"])
	return c, w, ctx, dev
}

// TestBrowserFormErrorsBesideTheField: a bad lifetime on the create form
// shows its message right under the lifetime's input, with everything
// typed still there; so does one on the extend form.
func TestBrowserFormErrorsBesideTheField(t *testing.T) {
	c, w, ctx, dev := aliceWithDev(t)
	c.run(ctx, "the create form", chromedp.Navigate(w.url+"/sandboxes/new"), chromedp.WaitVisible(chromedp.CSS("#name")))
	c.run(ctx, "fill it in with a bad lifetime",
		chromedp.SendKeys(chromedp.CSS("#name"), "typed"),
		chromedp.SetValue(chromedp.CSS("#ssh_keys"), sshKey),
		chromedp.SendKeys(chromedp.CSS("#ttl"), "soon"),
	)
	c.follow(ctx, "create", `form[action="/sandboxes/new"] button[type=submit]`, "#ttl-error")
	if got := c.text(ctx, "#ttl-error"); !strings.HasPrefix(got, `ttl: "soon" is not a duration`) {
		t.Errorf("beside the lifetime: %q", got)
	}
	below := `(function(){var i=document.getElementById("ttl").getBoundingClientRect(), e=document.getElementById("ttl-error").getBoundingClientRect();
		return e.top >= i.bottom - 1 && e.top - i.bottom < 24 && Math.abs(e.left - i.left) < 4})()`
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](below)); err != nil || !ok {
		t.Errorf("the lifetime's message is not right under its input (%v)", err)
	}
	if got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("name").value`)); got != "typed" {
		t.Errorf("the name typed is %q after the refusal, want typed", got)
	}
	c.shot(ctx, "form-error-create")

	c.run(ctx, "dev's page", chromedp.Navigate(w.url+"/sandboxes/"+string(dev.ID)), chromedp.WaitVisible(chromedp.CSS("#ttl")))
	c.run(ctx, "a bad lifetime", chromedp.SendKeys(chromedp.CSS("#ttl"), "a while"))
	c.follow(ctx, "extend", `form.extend button[type=submit]`, "#ttl-error")
	if got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("ttl").value`)); got != "a while" {
		t.Errorf("the lifetime typed is %q after the refusal", got)
	}
	c.shot(ctx, "form-error-extend")
}

// TestBrowserSandboxListSearch: an administrator searches the list with
// its box (Enter sends it) and filters it by state; the repository and
// project columns show.
func TestBrowserSandboxListSearch(t *testing.T) {
	c, w, ctx := adminWithHistory(t)
	c.run(ctx, "the list", chromedp.WaitVisible(chromedp.CSS("#sandbox-list table")))
	c.run(ctx, "ended ones too, by the checkbox", chromedp.Click(chromedp.CSS(`input[name=all]`)))
	c.follow(ctx, "show", `form.filters button[type=submit]`, `#sandbox-list td[data-label=Repository] code`)
	if got := c.text(ctx, `#sandbox-list td[data-label=Repository] code`); got != "acme/app" {
		t.Errorf("the repository column: %q", got)
	}
	if got := c.text(ctx, `#sandbox-list td[data-label=Project]`); got != "default" {
		t.Errorf("the project column: %q", got)
	}
	c.shot(ctx, "sandbox-list-filters")
	c.run(ctx, "search for build-2", chromedp.SendKeys(chromedp.CSS("#q"), "build-2"))
	loads := chromedp.Events(ctx, cdpage.LoadEventFired)
	c.run(ctx, "send the search with Enter", chromedp.KeyEvent(kb.Enter))
	for _, err := range loads {
		if err != nil {
			t.Fatal(err)
		}
		break
	}
	c.run(ctx, "the results", chromedp.WaitVisible(chromedp.CSS(`#q[value="build-2"]`)))
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil || !strings.Contains(loc, "q=build-2") {
		t.Errorf("the search is not in the address: %s (%v)", loc, err)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#sandbox-list tbody th a")).map(a => a.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rows, " ") != "build-2 build-21 build-27" {
		t.Errorf("searching build-2 lists %q", rows)
	}
	c.run(ctx, "state suspended", chromedp.Navigate(w.url+"/sandboxes?state=suspended"), chromedp.WaitVisible(chromedp.CSS("#sandbox-list")))
	if got := c.text(ctx, "#sandbox-list tbody th a"); got != "web" {
		t.Errorf("suspended: %q, want web", got)
	}
	c.shot(ctx, "sandbox-list-suspended")
}

// TestBrowserEngineerConnect: an engineer sandbox's page shows its
// connections and last activity, the ssh lines and the VS Code link; an
// extend that would shorten it says when it would end as it is typed,
// then asks before doing it.
func TestBrowserEngineerConnect(t *testing.T) {
	c, w, ctx, dev := aliceWithDev(t)
	c.run(ctx, "dev's page", chromedp.Navigate(w.url+"/sandboxes/"+string(dev.ID)), chromedp.WaitVisible(chromedp.CSS("#sandbox .state-running")))
	href, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("a[href^='vscode:']").getAttribute("href")`))
	if err != nil || href != "vscode://vscode-remote/ssh-remote+berth-dev/home/berth" {
		t.Errorf("Open in VS Code: %q (%v)", href, err)
	}
	facts := c.text(ctx, "dl.facts")
	for _, want := range []string{"Connections\n0 open through the gateway", "Last activity\nnone yet"} {
		if !strings.Contains(facts, want) {
			t.Errorf("the details have no %q:\n%s", want, facts)
		}
	}
	c.shot(ctx, "engineer-connect")

	c.run(ctx, "type a shorter lifetime", chromedp.SendKeys(chromedp.CSS("#ttl"), "10m"))
	if got := c.text(ctx, "#ttl-new"); !strings.Contains(got, "earlier than it expires now, so this shortens it") {
		t.Errorf("as 10m is typed the form says %q", got)
	}
	c.shot(ctx, "extend-typed")
	c.follow(ctx, "extend by 10m", `form.extend:not(.confirm) button[type=submit]`, "#extend-confirm")
	if got := c.text(ctx, "#extend-confirm"); !strings.Contains(got, "This shortens dev.") {
		t.Errorf("the question: %q", got)
	}
	if got, _ := w.st.GetSandbox(t.Context(), dev.ID); !got.ExpiresAt.Equal(dev.ExpiresAt) {
		t.Errorf("asking moved the expiry")
	}
	c.shot(ctx, "extend-confirm")
	c.follow(ctx, "shorten it", `#extend-confirm button[type=submit]`, "p.flash")
	if got := c.flash(ctx); !strings.HasPrefix(got, "Extended dev: it now expires") {
		t.Errorf("after confirming: %q", got)
	}
}

// TestBrowserQuotaEditorAndUsageFit: every placeholder of the quota
// editor fits its input, and every label of the usage charts' axes lies
// inside its drawing (the "$" of the cost axis too), at a laptop's size.
func TestBrowserQuotaEditorAndUsageFit(t *testing.T) {
	c := newChrome(t)
	w := newWorld(t)
	// A run that cost a third of a cent: the cost axis reads in
	// thousandths of a dollar, its widest label "$0.00375".
	fix := w.agentRun(t, "alice", "fix")
	if err := w.st.RecordInference(t.Context(), inference.Record{At: w.now(), Org: fix.Org, Project: fix.Project, User: fix.Owner,
		Sandbox: string(fix.ID), Session: string(fix.ID), Provider: "anthropic", Model: "claude-sonnet-4-5", Dialect: inference.Anthropic,
		Status: 200, Usage: runner.Usage{Input: 520, Output: 90}, CostUSD: 0.0031, Metered: true}); err != nil {
		t.Fatal(err)
	}
	ctx := c.tab()
	c.signIn(ctx, w.url, w.keys["ada"])
	c.run(ctx, "the quota editor", chromedp.Navigate(w.url+"/quotas/edit"), chromedp.WaitVisible(chromedp.CSS("#max_sandbox_cpu")))
	cutOff := `Array.from(document.querySelectorAll("input[placeholder]")).filter(function (i) {
		var s = getComputedStyle(i), g = document.createElement("canvas").getContext("2d");
		g.font = s.font;
		var room = i.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
		return g.measureText(i.placeholder).width > room;
	}).map(function (i) { return i.id; })`
	if got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](cutOff)); err != nil || len(got) > 0 {
		t.Errorf("placeholders cut off: %v (%v)", got, err)
	}
	c.shot(ctx, "quota-editor")

	c.run(ctx, "the usage", chromedp.Navigate(w.url+"/usage"), chromedp.WaitVisible(chromedp.CSS("figure.chart svg rect.bar")))
	outside := `Array.from(document.querySelectorAll("figure.chart svg")).flatMap(function (svg) {
		var vb = svg.viewBox.baseVal;
		return Array.from(svg.querySelectorAll("text.axis")).filter(function (t) {
			var b = t.getBBox();
			return b.x < vb.x || b.x + b.width > vb.x + vb.width;
		}).map(function (t) { return t.textContent; });
	})`
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](outside))
	if err != nil || len(got) > 0 {
		t.Errorf("axis labels drawn outside their chart: %q (%v)", got, err)
	}
	labels, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("figure.chart:nth-of-type(2) text.axis")).map(t => t.textContent)`))
	if !strings.Contains(strings.Join(labels, " "), "$0.00375") {
		t.Errorf("the cost axis's labels: %q, want $0.00375 among them", labels)
	}
	c.shot(ctx, "usage-axes")
}

// TestBrowserAdministratorScreens: an administrator reads the audit log,
// the users and a user's keys, and revokes one; a member's nav has none
// of these and the addresses are not found for them.
func TestBrowserAdministratorScreens(t *testing.T) {
	c, w, ctx := adminWithHistory(t)
	c.follow(ctx, "the audit log", `nav a[href="/audit"]`, "table.list")
	// The first row is the last event the store holds (read oldest first).
	all, _, err := w.st.ListAudit(t.Context(), audit.Filter{Org: w.users["ada"].Org}, paging.Request{})
	if err != nil || len(all) == 0 {
		t.Fatalf("acme's audit: %d events (%v)", len(all), err)
	}
	last := all[len(all)-1]
	if got := c.text(ctx, "table.list tbody tr:first-child th"); got != last.Action {
		t.Errorf("the audit's first row is %q, want the newest event, %s", got, last.Action)
	}
	c.shot(ctx, "audit")
	c.follow(ctx, "the users", `nav a[href="/users"]`, `a[href="/users/alice"]`)
	c.shot(ctx, "users")
	c.follow(ctx, "alice's keys", `a[href="/users/alice"]`, "table.list")
	c.shot(ctx, "user-keys")
	c.follow(ctx, "revoke alice's key", `button[aria-label^="Revoke key_"], table.list button.danger`, "p.flash")
	if got := c.flash(ctx); !strings.HasPrefix(got, "Revoked key") {
		t.Errorf("after revoking: %q", got)
	}

	member := c.tab()
	c.signIn(member, w.url, w.keys["bob"])
	if n, _ := chromedp.Run(member, chromedp.Evaluate[int](`document.querySelectorAll("nav a[href='/audit'], nav a[href='/users']").length`)); n != 0 {
		t.Errorf("a member's nav links %d administrators' screens", n)
	}
	for _, path := range []string{"/audit", "/users", "/users/alice"} {
		res, err := chromedp.RunResponse(member, chromedp.Navigate(w.url+path))
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != 404 {
			t.Errorf("bob opens %s: %d, want 404", path, res.Status)
		}
	}
}
