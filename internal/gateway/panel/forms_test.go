package panel_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/paging"
)

// fieldErrorOf is the message the page shows beside the input name, ""
// when none.
func fieldErrorOf(body, name string) string {
	m := regexp.MustCompile(`<p class="field-error" id="` + regexp.QuoteMeta(name) + `-error">([^<]*)</p>`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return m[1]
}

// TestRefusedFormsSayWhyBesideTheField (issue 19): every form of the
// panel refused for its input answers 400 with the page of the form, the
// message beside the field at fault (marked invalid), and what was typed
// kept; never the bare error page.
func TestRefusedFormsSayWhyBesideTheField(t *testing.T) {
	w := newWorld(t, previews("preview.test"), forking)
	dev := w.running(t, w.create(t, "alice", "dev").ID)
	alice := w.browser(t)
	at := alice.signIn(w.keys["alice"])
	ada := w.browser(t)
	adt := ada.signIn(w.keys["ada"])
	for _, tc := range []struct {
		name        string
		b           *browser
		path        string
		form        url.Values
		field, kept string
	}{
		{"create", alice, "/sandboxes/new", url.Values{"csrf": {at}, "name": {"typed-name"}, "purpose": {"engineer"}, "class": {"standard"},
			"ttl": {"soon"}, "ssh_keys": {sshKey}}, "ttl", `value="typed-name"`},
		{"extend", alice, "/sandboxes/" + string(dev.ID) + "/extend", url.Values{"csrf": {at}, "ttl": {"soon"}}, "ttl", `value="soon"`},
		{"preview", alice, "/sandboxes/" + string(dev.ID) + "/preview", url.Values{"csrf": {at}, "port": {"eighty"}}, "port", `value="eighty"`},
		{"preview, a port out of range", alice, "/sandboxes/" + string(dev.ID) + "/preview", url.Values{"csrf": {at}, "port": {"22"}}, "port", `value="22"`},
		{"fork, a name", alice, "/sandboxes/" + string(dev.ID) + "/fork", url.Values{"csrf": {at}, "name": {"Copy_1"}, "count": {"2"}}, "name", `value="Copy_1"`},
		{"fork, a count", alice, "/sandboxes/" + string(dev.ID) + "/fork", url.Values{"csrf": {at}, "name": {"copy"}, "count": {"many"}}, "count", `value="copy"`},
		{"fork, too many", alice, "/sandboxes/" + string(dev.ID) + "/fork", url.Values{"csrf": {at}, "name": {"copy"}, "count": {"9"}}, "count", `value="9"`},
		{"class", ada, "/classes/new", url.Values{"csrf": {adt}, "name": {"typed"}, "image": {"localhost/berth-sandbox:latest"},
			"isolation": {"standard"}, "memory": {"lots"}, "engineer": {"1"}}, "memory", `value="lots"`},
		{"quotas", ada, "/quotas/edit", url.Values{"csrf": {adt}, "max_sandboxes": {"7"}, "max_sandbox_cpu": {"many"}}, "max_sandbox_cpu", `value="7"`},
		{"key", alice, "/users/alice/keys", url.Values{"csrf": {at}, "name": {strings.Repeat("k", 101)}}, "name", `value="` + strings.Repeat("k", 101) + `"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg := tc.b.post(tc.path, tc.form)
			if pg.status != http.StatusBadRequest {
				t.Fatalf("POST %s: %d, want 400\n%s", tc.path, pg.status, pg.body)
			}
			if msg := fieldErrorOf(pg.body, tc.field); !strings.Contains(msg, tc.field) {
				t.Errorf("POST %s: beside %s the page says %q, want the message naming the field\n%s", tc.path, tc.field, msg, pg.body)
			}
			if !strings.Contains(pg.body, `aria-invalid="true" aria-errormessage="`+tc.field+`-error"`) {
				t.Errorf("POST %s: the input %s is not marked invalid", tc.path, tc.field)
			}
			if !strings.Contains(pg.body, tc.kept) {
				t.Errorf("POST %s: what was typed is not kept (%s)", tc.path, tc.kept)
			}
			if strings.Contains(pg.body, "the same answer the API gives") {
				t.Errorf("POST %s: answered the error page, not the form", tc.path)
			}
		})
	}
	if got, _ := w.st.GetSandbox(t.Context(), dev.ID); !got.ExpiresAt.Equal(dev.ExpiresAt) {
		t.Errorf("a refused extend moved the expiry: %v → %v", dev.ExpiresAt, got.ExpiresAt)
	}
}

// TestExtendThatShortensAsksFirst (issue 19): a lifetime that ends before
// the sandbox's expiry now is not applied: the page says when it would end
// and asks; the second submit, with confirm, shortens it. A longer one is
// done at once.
func TestExtendThatShortensAsksFirst(t *testing.T) {
	w := newWorld(t)
	dev := w.running(t, w.create(t, "alice", "dev").ID)
	b := w.browser(t)
	token := b.signIn(w.keys["alice"])
	path := "/sandboxes/" + string(dev.ID) + "/extend"
	pg := b.post(path, url.Values{"csrf": {token}, "ttl": {"30m"}})
	if pg.status != http.StatusOK || !strings.Contains(pg.body, "This shortens dev.") || !strings.Contains(pg.body, `name="confirm" value="1"`) {
		t.Fatalf("extend by 30m of a sandbox with hours left: %d, want 200 asking to confirm\n%s", pg.status, pg.body)
	}
	if got, _ := w.st.GetSandbox(t.Context(), dev.ID); !got.ExpiresAt.Equal(dev.ExpiresAt) {
		t.Fatalf("asking to confirm moved the expiry: %v → %v", dev.ExpiresAt, got.ExpiresAt)
	}
	want := w.now().Add(30 * time.Minute).UTC().Format("2006-01-02 15:04")
	if !strings.Contains(pg.body, "ends at <time") || !strings.Contains(pg.body, want) {
		t.Errorf("the question does not say the new expiry %s\n%s", want, pg.body)
	}
	if pg := b.post(path, url.Values{"csrf": {token}, "ttl": {"30m"}, "confirm": {"1"}}); pg.status != http.StatusSeeOther {
		t.Fatalf("confirmed: %d, want 303\n%s", pg.status, pg.body)
	}
	got, _ := w.st.GetSandbox(t.Context(), dev.ID)
	if d := got.ExpiresAt.Sub(w.now()); d > 31*time.Minute || d < 29*time.Minute {
		t.Errorf("after confirming, it expires in %v, want 30m", d)
	}
	if pg := b.post(path, url.Values{"csrf": {token}, "ttl": {"2h"}}); pg.status != http.StatusSeeOther {
		t.Errorf("a longer lifetime: %d, want 303 at once\n%s", pg.status, pg.body)
	}
	if pg := b.get("/sandboxes/" + string(dev.ID)); !strings.Contains(pg.body, "it was cut") && strings.Contains(pg.body, "Extended dev") {
		t.Logf("flash: no cut, as asked")
	}
	if pg := b.post(path, url.Values{"csrf": {token}, "ttl": {"90d"}}); pg.status != http.StatusSeeOther {
		t.Fatalf("90d: %d, want 303", pg.status)
	} else if flash := b.get("/sandboxes/" + string(dev.ID)); !strings.Contains(flash.body, "it was cut to the longest lifetime") {
		t.Errorf("a lifetime cut to the class's longest does not say so\n%s", flash.body)
	}
}

// TestSandboxListFilters (issue 19): the list filters by search (name or
// repository), state, purpose, class and owner, as query parameters; each
// is bounded and a bad one is a 400 naming it beside its field.
func TestSandboxListFilters(t *testing.T) {
	w := newWorld(t)
	w.running(t, w.create(t, "alice", "alpha").ID)
	beta := w.running(t, w.create(t, "bob", "beta").ID)
	if _, err := w.sandboxes.Suspend(t.Context(), w.principal("bob"), string(beta.ID)); err != nil {
		t.Fatal(err)
	}
	w.agentRun(t, "alice", "fix-it")
	ada := w.browser(t)
	ada.signIn(w.keys["ada"])
	names := regexp.MustCompile(`<th scope="row" data-label="Name"><a href="/sandboxes/[^"]+">([^<]+)</a>`)
	list := func(b *browser, query string) (int, []string, string) {
		pg := b.get("/sandboxes?" + query)
		var out []string
		for _, m := range names.FindAllStringSubmatch(pg.body, -1) {
			out = append(out, m[1])
		}
		return pg.status, out, pg.body
	}
	for _, tc := range []struct {
		query string
		want  string
	}{
		{"", "beta alpha"},
		{"all=1", "fix-it beta alpha"},
		{"q=ALP", "alpha"},
		{"q=acme%2Fapp&all=1", "fix-it"},
		{"q=%25", ""}, // a LIKE wildcard is matched as itself
		{"state=suspended", "beta"},
		{"state=succeeded", ""},
		{"purpose=agent&all=1", "fix-it"},
		{"purpose=engineer", "beta alpha"},
		{"class=standard&owner=bob", "beta"},
		{"owner=alice&all=1", "fix-it alpha"},
	} {
		status, got, body := list(ada, tc.query)
		if tc.query == "state=succeeded" {
			if status != http.StatusBadRequest || !strings.Contains(fieldErrorOf(body, "state"), "not a state") {
				t.Errorf("/sandboxes?%s: %d, want 400 naming state beside it", tc.query, status)
			}
			continue
		}
		if status != http.StatusOK || strings.Join(got, " ") != tc.want {
			t.Errorf("/sandboxes?%s: %d %q, want 200 %q", tc.query, status, got, tc.want)
		}
	}
	_, _, body := list(ada, "all=1")
	for _, want := range []string{`<td data-label="Repository"><code>acme/app</code></td>`, `<td data-label="Project">default</td>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the list has no %s", want)
		}
	}
	for _, tc := range []struct{ query, field string }{
		{"q=" + strings.Repeat("a", 101), "q"},
		{"purpose=robot", "purpose"},
		{"class=" + strings.Repeat("c", 65), "class"},
		{"owner=" + strings.Repeat("o", 65), "owner"},
		{"owner=nobody", "owner"},
	} {
		status, _, body := list(ada, tc.query)
		if status != http.StatusBadRequest || fieldErrorOf(body, tc.field) == "" {
			t.Errorf("/sandboxes?%.40s: %d, want 400 with a message beside %s", tc.query, status, tc.field)
		}
	}
	if status, got, _ := list(ada, "q="+strings.Repeat("a", 100)); status != http.StatusOK || len(got) != 0 {
		t.Errorf("a search of 100 characters: %d %q, want 200 and nothing", status, got)
	}
	// A member sees their own only, whatever the filter asks.
	alice := w.browser(t)
	alice.signIn(w.keys["alice"])
	if status, got, _ := list(alice, "all=1"); status != http.StatusOK || strings.Join(got, " ") != "fix-it alpha" {
		t.Errorf("alice's list: %d %q", status, got)
	}
	// The owner filter is not on a member's form: the summary says it.
	if status, _, body := list(alice, "owner=bob"); status != http.StatusBadRequest || !strings.Contains(body, "owner: you see your own sandboxes only") {
		t.Errorf("alice filters by bob: %d, want 400 saying owner is hers only", status)
	}
}

// TestEngineerSandboxPageHowToConnect (issue 19): an engineer sandbox's
// page says how many connections are open and when one last was, as
// berth sandbox show does, and the ssh lines and VS Code link that work
// for it (the host berth sandbox config writes: berth-NAME).
func TestEngineerSandboxPageHowToConnect(t *testing.T) {
	w := newWorld(t)
	dev := w.running(t, w.create(t, "alice", "dev").ID)
	b := w.browser(t)
	b.signIn(w.keys["alice"])
	pg := b.get("/sandboxes/" + string(dev.ID))
	for _, want := range []string{
		"<dt>Connections</dt><dd>0 open through the gateway</dd>",
		"<dt>Last activity</dt><dd>none yet</dd>",
		"<code>berth sandbox ssh dev</code>",
		"<code>berth sandbox config dev\nssh berth-dev</code>",
		`href="vscode://vscode-remote/ssh-remote&#43;berth-dev/home/berth"`,
	} {
		if !strings.Contains(pg.body, want) {
			t.Errorf("dev's page has no %q\n", want)
		}
	}
	// An operator gets the id: the owner's name may be ambiguous for them.
	op := w.browser(t)
	op.signIn(w.keys["ops"])
	if pg := op.get("/sandboxes/" + string(dev.ID)); !strings.Contains(pg.body, fmt.Sprintf("<code>berth sandbox config %s\nssh berth-dev</code>", dev.ID)) {
		t.Errorf("the operator's page of dev has no config line by id")
	}
}

// TestAdministratorScreens (issue 19): the audit log, newest first and
// paged, and the users and keys screens are an administrator's; a member
// has none of them (404) but the page of their own keys, and may revoke
// none of another's.
func TestAdministratorScreens(t *testing.T) {
	w := newWorld(t)
	for i := range 60 {
		if _, err := w.accounts.CreateKey(t.Context(), w.principal("alice"), "", fmt.Sprintf("k%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	ada := w.browser(t)
	ada.signIn(w.keys["ada"])
	pg := ada.get("/audit")
	if pg.status != http.StatusOK {
		t.Fatalf("/audit: %d\n%s", pg.status, pg.body)
	}
	named := regexp.MustCompile(`named (k\d\d)`)
	first := named.FindAllStringSubmatch(pg.body, -1)
	if len(first) != 50 || first[0][1] != "k59" || first[49][1] != "k10" {
		t.Fatalf("the audit's first page: %d events from %v, want 50 from k59 to k10", len(first), first[:min(len(first), 1)])
	}
	more := regexp.MustCompile(`<p class="more"><a href="([^"]+)">Older events</a>`).FindStringSubmatch(pg.body)
	if more == nil {
		t.Fatal("no link to older events")
	}
	next := ada.get(strings.ReplaceAll(more[1], "&amp;", "&"))
	if got := named.FindAllStringSubmatch(next.body, -1); len(got) != 10 || got[0][1] != "k09" || got[9][1] != "k00" {
		t.Errorf("the audit's second page: %d events, want k09 to k00", len(got))
	}
	if pg := ada.get("/audit?since=" + strings.Repeat("9", 17)); pg.status != http.StatusBadRequest || fieldErrorOf(pg.body, "since") == "" {
		t.Errorf("/audit with a long since: %d, want 400 beside since", pg.status)
	}
	if pg := ada.get("/users"); pg.status != http.StatusOK || !strings.Contains(pg.body, `href="/users/bob"`) {
		t.Errorf("/users: %d, want 200 listing bob", pg.status)
	}
	if pg := ada.get("/users/alice"); pg.status != http.StatusOK || strings.Count(pg.body, "/revoke") != 61 {
		t.Errorf("/users/alice: %d with %d revoke forms, want 200 and 61", pg.status, strings.Count(pg.body, "/revoke"))
	}
	alice := w.browser(t)
	at := alice.signIn(w.keys["alice"])
	for _, path := range []string{"/audit", "/users", "/users/bob", "/users/ops", "/users/" + w.users["ada"].ID} {
		if pg := alice.get(path); pg.status != http.StatusNotFound {
			t.Errorf("alice GET %s: %d, want 404", path, pg.status)
		}
	}
	if pg := alice.get("/users/alice"); pg.status != http.StatusOK {
		t.Errorf("alice's own keys: %d, want 200", pg.status)
	}
	bobKeys, _, err := w.accounts.Keys(t.Context(), w.principal("bob"), "", paging1())
	if err != nil || len(bobKeys) == 0 {
		t.Fatal(err)
	}
	if pg := alice.post("/users/bob/keys/"+bobKeys[0].ID+"/revoke", url.Values{"csrf": {at}}); pg.status != http.StatusNotFound {
		t.Errorf("alice revokes bob's key: %d, want 404", pg.status)
	}
	if pg := alice.post("/users/alice/keys/"+bobKeys[0].ID+"/revoke", url.Values{"csrf": {at}}); pg.status != http.StatusNotFound {
		t.Errorf("alice revokes bob's key under her own page: %d, want 404", pg.status)
	}
	if pg := alice.post("/users/alice/keys", url.Values{"csrf": {at}, "name": {"laptop"}}); pg.status != http.StatusOK || !strings.Contains(pg.body, "shown this once") {
		t.Errorf("alice makes a key: %d, want 200 showing its secret once\n%s", pg.status, pg.body)
	}
}

// previews serves HTTP previews under domain.
func previews(domain string) worldOption {
	return func(c *worldConfig) { c.previewDomain = domain }
}

func paging1() paging.Request { return paging.Request{Limit: 10} }
