package panel_test

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/sandbox"
)

// TestForkForm (issue 25): a running engineer sandbox's page offers its
// owner and an operator the fork form, on a deployment whose machines
// save their memory, and nobody else, nor a suspended sandbox, nor a
// deployment whose machines cannot. One fork goes to its page, several
// to the list; a name taken comes back above the form, what was typed
// kept; an administrator is refused.
func TestForkForm(t *testing.T) {
	w := newWorld(t, forking)
	dev := w.running(t, w.create(t, "alice", "dev").ID)
	idle := w.running(t, w.create(t, "alice", "idle").ID)
	if _, err := w.sandboxes.Suspend(t.Context(), w.principal("alice"), string(idle.ID)); err != nil {
		t.Fatal(err)
	}
	form := `action="/sandboxes/` + string(dev.ID) + `/fork"`
	alice, ops, ada := w.browser(t), w.browser(t), w.browser(t)
	at := alice.signIn(w.keys["alice"])
	ops.signIn(w.keys["ops"])
	adt := ada.signIn(w.keys["ada"])
	if pg := alice.get("/sandboxes/" + string(dev.ID)); !strings.Contains(pg.body, form) || !strings.Contains(pg.body, `id="count" name="count" value="1"`) {
		t.Errorf("alice's page of dev has no fork form asking for one fork\n%s", pg.body)
	}
	if pg := ops.get("/sandboxes/" + string(dev.ID)); !strings.Contains(pg.body, form) {
		t.Errorf("the operator's page of dev has no fork form")
	}
	if pg := ada.get("/sandboxes/" + string(dev.ID)); pg.status != http.StatusOK || strings.Contains(pg.body, "/fork") {
		t.Errorf("the administrator's page of dev: %d, with a fork form: %t; want 200 without", pg.status, strings.Contains(pg.body, "/fork"))
	}
	if pg := alice.get("/sandboxes/" + string(idle.ID)); strings.Contains(pg.body, "/fork") {
		t.Errorf("the page of a suspended sandbox offers a fork")
	}
	plain := newWorld(t)
	other := plain.running(t, plain.create(t, "alice", "dev").ID)
	b := plain.browser(t)
	b.signIn(plain.keys["alice"])
	if pg := b.get("/sandboxes/" + string(other.ID)); pg.status != http.StatusOK || strings.Contains(pg.body, "/fork") {
		t.Errorf("on machines that cannot save their memory, dev's page: %d, with a fork form: %t; want 200 without", pg.status, strings.Contains(pg.body, "/fork"))
	}

	path := "/sandboxes/" + string(dev.ID) + "/fork"
	pg := alice.post(path, url.Values{"csrf": {at}, "name": {"copy"}})
	if pg.status != http.StatusSeeOther || !strings.HasPrefix(pg.header.Get("Location"), "/sandboxes/sbx_") {
		t.Fatalf("alice forks dev into copy: %d to %q, want 303 to the fork's page\n%s", pg.status, pg.header.Get("Location"), pg.body)
	}
	id := sandbox.ID(strings.TrimPrefix(pg.header.Get("Location"), "/sandboxes/"))
	if made := w.running(t, id); made.Name != "copy" || w.forks.ForkedFrom(id) != dev.ID {
		t.Errorf("the fork is %s, made from %q; want copy, from dev", made.Name, w.forks.ForkedFrom(id))
	}
	if pg := alice.get(pg.header.Get("Location")); !strings.Contains(pg.body, "Forked: copy is starting from where its source was.") ||
		!strings.Contains(pg.body, `<dt>Forked from</dt><dd><a href="/sandboxes/`+string(dev.ID)+`">`) {
		t.Errorf("the fork's page does not say it was forked, and from what\n%s", pg.body)
	}
	pg = ops.post(path, url.Values{"csrf": {ops.get("/sandboxes/" + string(dev.ID)).csrf(t)}, "name": {"pair"}, "count": {"2"}})
	if pg.status != http.StatusSeeOther || pg.header.Get("Location") != "/sandboxes" {
		t.Fatalf("the operator forks dev into two: %d to %q, want 303 to the list\n%s", pg.status, pg.header.Get("Location"), pg.body)
	}
	if list := ops.get("/sandboxes"); !strings.Contains(list.body, ">pair-1<") || !strings.Contains(list.body, ">pair-2<") ||
		!strings.Contains(list.body, "Forked: pair-1, pair-2 are starting") {
		t.Errorf("the list after a fork into two shows no pair-1 and pair-2, or does not say so\n%s", list.body)
	}

	// copy is alice's now: a second fork of that name is taken.
	pg = alice.post(path, url.Values{"csrf": {at}, "name": {"copy"}, "count": {"1"}})
	if pg.status != http.StatusConflict || !strings.Contains(pg.body, `id="form-error"`) || !strings.Contains(pg.body, "is taken") ||
		!strings.Contains(pg.body, `id="name" name="name" value="copy"`) {
		t.Errorf("a fork into a name taken: %d, want 409 with the page saying so above the form, the name kept\n%s", pg.status, pg.body)
	}
	if pg := ada.post(path, url.Values{"csrf": {adt}, "name": {"mine"}}); pg.status != http.StatusForbidden || !strings.Contains(pg.body, "only the owner of sandbox dev forks it") {
		t.Errorf("the administrator forks dev: %d, want 403 saying only the owner does\n%s", pg.status, pg.body)
	}
}

// TestReviewNamesTheBest: the page of a reviewer that compared two
// agents' attempts says which its verdict judged best.
func TestReviewNamesTheBest(t *testing.T) {
	w := newWorld(t)
	w.agentRun(t, "alice", "try-1")
	w.agentRun(t, "alice", "try-2")
	w.drv.SetAgent(func(spec sandbox.Spec) ([]string, int) {
		verdict := `{"verdict": "approve", "summary": "the second is tidier", "best": "try-2"}`
		if err := os.WriteFile(filepath.Join(spec.Run.Work, ".berth-review-verdict.json"), []byte(verdict), 0o644); err != nil {
			t.Error(err)
		}
		return nil, 0
	})
	judge, err := w.sandboxes.Create(t.Context(), w.principal("alice"), sandbox.CreateRequest{Name: "judge", Purpose: "agent", Class: "standard", Role: "reviewer",
		Repo: "acme/app", Branch: "main", Task: "Which is best?", Runner: "claude-code", Compare: []string{"try-1", "try-2"}})
	if err != nil {
		t.Fatal(err)
	}
	w.wait(t, judge.ID, func(sb sandbox.Sandbox) bool { return !sb.Live() || sb.State == sandbox.StateFailed })
	alice := w.browser(t)
	alice.signIn(w.keys["alice"])
	if pg := alice.get("/sandboxes/" + string(judge.ID)); !strings.Contains(pg.body, "<dt>Review</dt><dd>approved, best attempt <strong>try-2</strong>: the second is tidier") {
		t.Errorf("the reviewer's page does not name the best attempt\n%s", pg.body)
	}
}
