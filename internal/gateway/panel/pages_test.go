package panel_test

import (
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/sandbox"
)

var (
	sandboxRow = regexp.MustCompile(`<th scope="row" data-label="Name">`)
	olderLink  = regexp.MustCompile(`<a href="([^"]+)">Older sandboxes</a>`)
)

// TestSandboxesScreenPages: the sandboxes screen never reads them all: it
// shows the newest 100 with a link to the older ones, which shows the
// rest; a cursor altered or of another sign-in's key is refused.
func TestSandboxesScreenPages(t *testing.T) {
	w := newWorld(t)
	alice := w.users["alice"]
	prj, err := w.accounts.DefaultProject(t.Context(), alice.Org)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := range 130 {
		at := now.Add(time.Duration(i-200) * time.Second)
		sb := sandbox.Sandbox{ID: sandbox.NewID(), Name: fmt.Sprintf("s%03d", i), Org: alice.Org, Project: prj.ID, Owner: alice.ID,
			Purpose: sandbox.PurposeEngineer, Class: "standard", Image: "localhost/berth-sandbox:latest", Isolation: sandbox.TierStandard,
			State: sandbox.StateSuspended, CreatedAt: at, ExpiresAt: at.Add(24 * time.Hour)}
		key, _ := account.NewSandboxKey(alice.ID, string(sb.ID), prj.ID, sb.ExpiresAt, at)
		sb.KeyID = key.ID
		if err := w.st.CreateSandbox(t.Context(), sb, key, func(sandbox.Live) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	b := w.browser(t)
	b.signIn(w.keys["alice"])
	first := b.get("/sandboxes")
	m := olderLink.FindStringSubmatch(first.body)
	if first.status != http.StatusOK || len(sandboxRow.FindAllString(first.body, -1)) != 100 || m == nil ||
		!strings.Contains(first.body, ">s129<") || strings.Contains(first.body, ">s029<") {
		t.Fatalf("first page: %d, %d rows, link %v; want the newest 100 and a link", first.status, len(sandboxRow.FindAllString(first.body, -1)), m)
	}
	more := html.UnescapeString(m[1])
	second := b.get(more)
	if second.status != http.StatusOK || len(sandboxRow.FindAllString(second.body, -1)) != 30 || olderLink.MatchString(second.body) ||
		!strings.Contains(second.body, ">s029<") || !strings.Contains(second.body, ">s000<") {
		t.Errorf("second page: %d, %d rows; want the oldest 30 and no link", second.status, len(sandboxRow.FindAllString(second.body, -1)))
	}
	if p := b.get(more + "x"); p.status != http.StatusBadRequest {
		t.Errorf("an altered cursor: %d; want 400", p.status)
	}
	bob := w.browser(t)
	bob.signIn(w.keys["bob"])
	if p := bob.get(more); p.status != http.StatusBadRequest {
		t.Errorf("alice's cursor in bob's browser: %d; want 400", p.status)
	}
}
