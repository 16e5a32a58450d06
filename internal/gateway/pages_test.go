package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/sandbox"
)

// entries GETs path with key and returns the ids of the entries of its
// list at field ("" for a top-level list: "id", else "name", of each) and
// the next page's target; any answer but 200 fails the test.
func entries(t *testing.T, w *world, key, path, field string) (ids []string, next string) {
	t.Helper()
	resp := getAs(t, w, key, path)
	defer resp.Body.Close()
	var body json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s %v", path, resp.Status, body, err)
	}
	if field != "" {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(body, &obj); err != nil {
			t.Fatal(err)
		}
		body = obj[field]
	}
	var items []map[string]any
	if err := json.Unmarshal(body, &items); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	for _, it := range items {
		id, ok := it["id"]
		if !ok {
			id = it["name"]
		}
		ids = append(ids, fmt.Sprint(id))
	}
	return ids, nextOf(resp.Header.Get("Link"))
}

// refusal GETs path with key and returns its status and error.
func refusal(t *testing.T, w *world, key, path string) (int, api.Error) {
	t.Helper()
	status, _, e, _ := list(t, w, key, path, "")
	return status, e
}

// seedSandboxes writes n sandboxes of owner to the store as Create writes
// them, suspended (nothing starts them), two at each millisecond from
// base on; every third is of class "other", the rest "standard".
func seedSandboxes(t *testing.T, w *world, owner account.User, n int, base time.Time) []sandbox.Sandbox {
	t.Helper()
	prj, err := w.accounts.DefaultProject(t.Context(), owner.Org)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]sandbox.Sandbox, n)
	for i := range n {
		class := "standard"
		if i%3 == 2 {
			class = "other"
		}
		at := base.Add(time.Duration(i/2) * time.Millisecond)
		out[i] = seedOne(t, w, owner, prj.ID, fmt.Sprintf("s%d", i), class, at)
	}
	return out
}

func seedOne(t *testing.T, w *world, owner account.User, project, name, class string, at time.Time) sandbox.Sandbox {
	t.Helper()
	sb := sandbox.Sandbox{ID: sandbox.NewID(), Name: name, Org: owner.Org, Project: project, Owner: owner.ID,
		Purpose: sandbox.PurposeEngineer, Class: class, Image: "localhost/berth-sandbox:1", Isolation: sandbox.TierStandard,
		State: sandbox.StateSuspended, CreatedAt: at, ExpiresAt: at.Add(24 * time.Hour)}
	key, _ := account.NewSandboxKey(owner.ID, string(sb.ID), project, sb.ExpiresAt, at)
	sb.KeyID = key.ID
	if err := w.st.CreateSandbox(t.Context(), sb, key, func(sandbox.Live) error { return nil }); err != nil {
		t.Fatal(err)
	}
	return sb
}

// TestSandboxPagesOverHTTP: 2,500 sandboxes read a page at a time over
// HTTP are the whole list, in its order, each once, while sandboxes are
// created and deleted between the pages: the rows there throughout are
// each on exactly one page, a deleted one not yet read is on none, one
// newer than the cursor is on none and one older is at the end.
func TestSandboxPagesOverHTTP(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	alice := mustWhoami(t, w.owner)
	prj, err := w.accounts.DefaultProject(ctx, alice.Org)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour)
	seeded := seedSandboxes(t, w, alice, 2500, base)
	whole, err := w.st.ListSandboxes(ctx, sandbox.Filter{})
	if err != nil || len(whole) != len(seeded) {
		t.Fatalf("the store lists %d sandboxes, %v", len(whole), err)
	}
	want := make([]string, len(whole))
	for i, sb := range whole {
		want[i] = string(sb.ID)
	}

	var got, older []string
	deleted := map[string]bool{}
	path := "/sandbox/v1/sandboxes"
	for page := 0; path != ""; page++ {
		ids, next := entries(t, w, w.opKey, path, "sandboxes")
		if len(ids) > api.DefaultLimit {
			t.Fatalf("page %d holds %d sandboxes; want at most %d", page, len(ids), api.DefaultLimit)
		}
		got = append(got, ids...)
		path = next
		if page%2 != 1 || next == "" {
			continue
		}
		// A newer sandbox (before the cursor), an older one than every
		// one (after it), and one not yet read terminated and deleted.
		seedOne(t, w, alice, prj.ID, fmt.Sprintf("newer%d", page), "standard", time.Now())
		old := seedOne(t, w, alice, prj.ID, fmt.Sprintf("older%d", page), "standard", base.Add(-time.Duration(page+1)*time.Minute))
		older = append(older, string(old.ID))
		victim := whole[min(len(got)+17, len(whole)-1)]
		if deleted[string(victim.ID)] {
			continue
		}
		ended := victim
		ended.State, ended.EndedAt = sandbox.StateTerminated, base
		if err := w.st.UpdateSandbox(ctx, sandbox.Update{Sandbox: ended, From: victim.State, At: base}); err != nil {
			t.Fatal(err)
		}
		if ids, err := w.st.DeleteEnded(ctx, base.Add(time.Second)); err != nil || len(ids) != 1 {
			t.Fatalf("DeleteEnded = %v, %v; want the victim", ids, err)
		}
		deleted[string(victim.ID)] = true
	}
	want = slices.DeleteFunc(want, func(id string) bool { return deleted[id] })
	want = append(want, older...)
	if len(deleted) < 10 {
		t.Fatalf("only %d sandboxes deleted between pages", len(deleted))
	}
	seen := map[string]bool{}
	for _, id := range got {
		if seen[id] {
			t.Errorf("sandbox %s is on two pages", id)
		}
		seen[id] = true
	}
	if !slices.Equal(got, want) {
		t.Errorf("pages: %d sandboxes, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestPageCursors: a cursor carries its list's filters, so a later page
// keeps them (a filter sent with it must be the same); a cursor that is not
// one the gateway gave, one altered, one given to another caller or for
// another list is 400 naming cursor.
func TestPageCursors(t *testing.T) {
	w := newWorld(t)
	alice := mustWhoami(t, w.owner)
	seedSandboxes(t, w, alice, 60, time.Now().Add(-time.Hour))
	classOf := map[string]string{}
	sbs, err := w.st.ListSandboxes(t.Context(), sandbox.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs {
		classOf[string(sb.ID)] = sb.Class
	}

	// Filters ride in the cursor.
	ids, next := entries(t, w, w.opKey, "/sandbox/v1/sandboxes?class=other&limit=7", "sandboxes")
	n := len(ids)
	for next != "" {
		for _, id := range ids {
			if classOf[id] != "other" {
				t.Fatalf("a page of class other holds %s, of class %q", id, classOf[id])
			}
		}
		if status, e := refusal(t, w, w.opKey, next+"&class=standard"); status != http.StatusBadRequest || e.Field != "class" {
			t.Fatalf("a cursor with another class: %d %+v; want 400 naming class", status, e)
		}
		if again, _ := entries(t, w, w.opKey, next+"&class=other", "sandboxes"); len(again) == 0 {
			t.Fatal("a cursor with its own class again: an empty page")
		}
		ids, next = entries(t, w, w.opKey, next, "sandboxes")
		n += len(ids)
	}
	if n != 20 {
		t.Errorf("class other in pages: %d sandboxes; want 20", n)
	}

	_, next = entries(t, w, w.opKey, "/sandbox/v1/sandboxes?limit=5", "sandboxes")
	_, auditNext := entries(t, w, w.opKey, "/api/v1/audit?limit=1", "events")
	_, adminNext := entries(t, w, w.adminKey, "/sandbox/v1/sandboxes?limit=5", "sandboxes")
	u, err := url.Parse(next)
	if err != nil {
		t.Fatal(err)
	}
	tampered := []byte(u.Query().Get("cursor"))
	tampered[3] ^= 1
	for _, c := range []struct{ name, path string }{
		{"not a cursor", "/sandbox/v1/sandboxes?cursor=garbage"},
		{"altered", "/sandbox/v1/sandboxes?cursor=" + url.QueryEscape(string(tampered))},
		{"another caller's", adminNext},
		{"another list's", "/sandbox/v1/sandboxes" + auditNext[strings.Index(auditNext, "?"):]},
		{"a sandbox cursor on the audit log", "/api/v1/audit" + next[strings.Index(next, "?"):]},
	} {
		if status, e := refusal(t, w, w.opKey, c.path); status != http.StatusBadRequest || e.Field != "cursor" {
			t.Errorf("%s: %d %+v; want 400 naming cursor", c.name, status, e)
		}
	}
}

// TestEveryListPages: every list route's pages, followed from a limit of
// one or two, are its whole list as one page of the most holds.
func TestEveryListPages(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	alice := mustWhoami(t, w.owner)
	seedSandboxes(t, w, alice, 5, time.Now().Add(-time.Hour))
	if _, err := w.operator.CreateProject(ctx, "acme", "second"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.admin.ApplyClasses(ctx, "", strings.NewReader(classes+"  - name: other\n    image: localhost/berth-sandbox:1\n")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := w.operator.CreateKey(ctx, api.CreateKey{Name: "more"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []struct{ path, field string }{
		{"/api/v1/orgs", ""},
		{"/api/v1/orgs/acme/projects", ""},
		{"/api/v1/orgs/acme/users", ""},
		{"/api/v1/keys", ""},
		{"/sandbox/v1/classes", ""},
		{"/sandbox/v1/sandboxes", "sandboxes"},
		{"/sandbox/v1/sandboxes?all=true", "sandboxes"},
		{"/api/v1/audit", "events"},
		{"/sandbox/v1/usage?by=class", "rows"},
	} {
		whole, next := entries(t, w, w.opKey, with(l.path, fmt.Sprintf("limit=%d", api.MaxLimit)), l.field)
		if len(whole) < 2 || next != "" {
			t.Fatalf("GET %s: %d entries, next %q; want at least 2 on one page", l.path, len(whole), next)
		}
		for _, limit := range []int{1, 2} {
			var got []string
			for path := with(l.path, fmt.Sprintf("limit=%d", limit)); path != ""; {
				var ids []string
				ids, path = entries(t, w, w.opKey, path, l.field)
				if len(ids) > limit {
					t.Fatalf("GET %s: %d entries; want at most %d", l.path, len(ids), limit)
				}
				got = append(got, ids...)
			}
			if !slices.Equal(got, whole) {
				t.Errorf("GET %s in pages of %d: %v; want %v", l.path, limit, got, whole)
			}
		}
	}
	// The default project is the first page's first, and no later page's.
	prjs, err := w.operator.WithLimit(0).Projects(ctx, "acme")
	if err != nil || len(prjs) != 2 || !prjs[0].Default || prjs[1].Default {
		t.Errorf("projects: %+v, %v; want the default first and only it", prjs, err)
	}
	var later []api.Project
	_, next := entries(t, w, w.opKey, "/api/v1/orgs/acme/projects?limit=1", "")
	resp := getAs(t, w, w.opKey, next)
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&later); err != nil || len(later) != 1 || later[0].Default {
		t.Errorf("the second page of projects: %+v, %v; want one, not the default", later, err)
	}
}

// TestListRoutesTakeLimit: every operation openapi.yaml marks x-berth-list
// declares limit and cursor and refuses a limit out of bounds naming it.
func TestListRoutesTakeLimit(t *testing.T) {
	w := newWorld(t)
	b, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]yaml.Node `yaml:"paths"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer("{org}", "acme")
	lists := 0
	for path, ops := range doc.Paths {
		node, ok := ops["get"]
		if !ok {
			continue
		}
		var op struct {
			List       bool `yaml:"x-berth-list"`
			Parameters []struct {
				Ref string `yaml:"$ref"`
			} `yaml:"parameters"`
		}
		if err := node.Decode(&op); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if !op.List {
			continue
		}
		lists++
		var refs []string
		for _, p := range op.Parameters {
			refs = append(refs, p.Ref)
		}
		if !slices.Contains(refs, "#/components/parameters/limit") || !slices.Contains(refs, "#/components/parameters/cursor") {
			t.Errorf("GET %s is a list without the limit and cursor parameters: %v", path, refs)
		}
		if status, e := refusal(t, w, w.opKey, fill.Replace(path)+"?limit=0"); status != http.StatusBadRequest || e.Field != "limit" {
			t.Errorf("GET %s?limit=0: %d %+v; want 400 naming limit", path, status, e)
		}
	}
	if lists != 9 {
		t.Errorf("%d list operations; want 9 (organisations, projects, users, keys, audit, classes, usage, sandboxes, models)", lists)
	}
}
