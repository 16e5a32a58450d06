package panel_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/paging"
)

// nextTricks are addresses a sign-in link may carry as its next page that
// a browser would take to another origin, or that are no page at all:
// scheme-relative, backslashes (which browsers read as slashes), control
// characters and white space (which browsers drop from a URL, so /<TAB>/
// is //), encoded slashes, schemes with and without slashes, and userinfo.
var nextTricks = []string{
	"//evil.example/",
	"///evil.example/",
	`/\evil.example/`,
	`\\evil.example/`,
	`\/evil.example/`,
	"/\t/evil.example/",
	"/\n/evil.example/",
	"/\r/evil.example/",
	"\t//evil.example/",
	" //evil.example/",
	"/ /evil.example/",
	"/\x00/evil.example/",
	"/\x7f/evil.example/",
	"/\u00a0/evil.example/",
	"%2F%2Fevil.example/",
	"/%2F/evil.example/",
	"/%2f/evil.example/",
	"/%5Cevil.example/",
	"/%09/evil.example/",
	"https:evil.example",
	"https://evil.example/",
	"HTTPS://evil.example/",
	"javascript:alert(1)",
	"data:text/html,hi",
	"//user@evil.example/",
	"/.//evil.example/",
	"/./\\evil.example/",
	"evil.example",
	"sandboxes",
	"",
}

// TestSignInStaysOnTheGateway: whatever next page a sign-in link names,
// the browser ends on this gateway: a local path is kept, anything else
// is dropped for the home page. Both in the form the page renders and in
// the redirect after signing in.
func TestSignInStaysOnTheGateway(t *testing.T) {
	w := newWorld(t)
	base, err := url.Parse(w.url)
	if err != nil {
		t.Fatal(err)
	}
	check := func(next, location string) {
		t.Helper()
		to, err := base.Parse(location)
		if err != nil {
			t.Errorf("next %q: sent to %q, which does not parse: %v", next, location, err)
			return
		}
		if to.Scheme != base.Scheme || to.Host != base.Host || strings.ContainsAny(location, "\\\t\r\n") || strings.HasPrefix(location, "//") {
			t.Errorf("next %q: signed in to %q (%s), not a path of %s", next, location, to, w.url)
		}
	}
	for _, next := range nextTricks {
		// Through the form's hidden field, as the sign-in page sends it,
		// and straight from a link's query as a forged form might.
		b := w.browser(t)
		form := b.get("/sign-in?next=" + url.QueryEscape(next))
		res := b.post("/sign-in", url.Values{"csrf": {form.csrf(t)}, "key": {w.keys["alice"]}, "next": {next}})
		if res.status != http.StatusSeeOther {
			t.Fatalf("sign in with next %q: %d", next, res.status)
		}
		check(next, res.header.Get("Location"))
		if loc := res.header.Get("Location"); loc != "/" {
			t.Errorf("next %q: signed in to %q, want / (it is no page of this gateway)", next, loc)
		}
	}
	// A page of the gateway is kept, with its query.
	for _, next := range []string{"/sandboxes", "/sandboxes/dev?tab=log", "/classes/new", "/a%2Fb"} {
		b := w.browser(t)
		form := b.get("/sign-in?next=" + url.QueryEscape(next))
		res := b.post("/sign-in", url.Values{"csrf": {form.csrf(t)}, "key": {w.keys["alice"]}, "next": {next}})
		if loc := res.header.Get("Location"); loc != next {
			t.Errorf("next %q: signed in to %q, want it kept", next, loc)
		}
	}
}

// TestFormBodyOverTheLimit: a form over its limit is refused whole with
// the gateway's one answer to a body too large, 413 naming the limit, and
// nothing is done.
func TestFormBodyOverTheLimit(t *testing.T) {
	w := newWorld(t)
	b := w.browser(t)
	token := b.signIn(w.keys["ada"])
	big := strings.Repeat("a", api.MaxBody)
	pg := b.post("/classes/apply", url.Values{"csrf": {token}, "file": {"sandboxes:\n  - name: huge\n    image: x\n    description: " + big}})
	if pg.status != http.StatusRequestEntityTooLarge || !strings.Contains(pg.body, "(1048576 bytes)") {
		t.Errorf("a class file form over 1 MiB: %d, want 413 naming the limit\n%s", pg.status, pg.body)
	}
	classes, _, err := w.classes.List(t.Context(), w.principal("ada"), "", paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range classes {
		if c.Name == "huge" {
			t.Error("the class of a refused form was applied")
		}
	}
	form := b.get("/sign-in")
	pg = b.post("/sign-in", url.Values{"csrf": {form.csrf(t)}, "key": {w.keys["ada"]}, "next": {strings.Repeat("/a", 40<<10)}})
	if pg.status != http.StatusRequestEntityTooLarge || !strings.Contains(pg.body, "(65536 bytes)") {
		t.Errorf("a sign-in form over 64 KiB: %d, want 413 naming the limit\n%s", pg.status, pg.body)
	}
}
