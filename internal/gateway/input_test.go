package gateway_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/sandbox"
)

// list GETs path with the operator's key and returns how many entries
// the answer's list at key holds ("" for a top-level list) and whether it
// says it was cut.
func list(t *testing.T, w *world, path, key string) (int, bool) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", w.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+w.opKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	var items []json.RawMessage
	if key == "" {
		err = json.NewDecoder(resp.Body).Decode(&items)
	} else {
		var obj map[string]json.RawMessage
		if err = json.NewDecoder(resp.Body).Decode(&obj); err == nil {
			err = json.Unmarshal(obj[key], &items)
		}
	}
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return len(items), resp.Header.Get(api.TruncatedHeader) == "true"
}

// TestListsAreBounded: every list answer holds at most api.MaxList
// entries, and one cut there says so; the client hands that on as a
// warning. The audit log keeps the newest.
func TestListsAreBounded(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	op := account.Principal{User: mustWhoami(t, w.operator)}
	n := api.MaxList + 1
	var last account.User
	for i := range n {
		u, err := w.accounts.CreateUser(ctx, op, "acme", fmt.Sprintf("user%04d", i), "", account.RoleMember)
		if err != nil {
			t.Fatal(err)
		}
		last = u
		if _, err := w.accounts.CreateKey(ctx, op, "", fmt.Sprintf("key%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// Sandboxes, written to the store as Create writes them (through the
	// service, a thousand take half a minute under the race detector);
	// suspended, so nothing starts them.
	prj, err := w.accounts.DefaultProject(ctx, last.Org)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := range n {
		sb := sandbox.Sandbox{ID: sandbox.NewID(), Name: fmt.Sprintf("s%d", i), Org: last.Org, Project: prj.ID, Owner: last.ID,
			Purpose: sandbox.PurposeEngineer, Class: "standard", Image: "localhost/berth-sandbox:1", Isolation: sandbox.TierStandard,
			State: sandbox.StateSuspended, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
		key, _ := account.NewSandboxKey(last.ID, string(sb.ID), prj.ID, sb.ExpiresAt, now)
		sb.KeyID = key.ID
		if err := w.st.CreateSandbox(ctx, sb, key, func(sandbox.Live) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	// And one through the service, which the audit log shows last.
	if _, err := w.sandboxes.Create(ctx, account.Principal{User: last}, sandbox.CreateRequest{Name: "newest", Class: "standard",
		SSHKeys: []string{sshKey}}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, key string }{
		{"/api/v1/orgs/acme/users", ""},
		{"/api/v1/keys", ""},
		{"/sandbox/v1/sandboxes", "sandboxes"},
		{"/sandbox/v1/sandboxes?all=true", "sandboxes"},
		{"/api/v1/audit?since=1h", "events"},
	} {
		got, cut := list(t, w, tt.path, tt.key)
		if got != api.MaxList || !cut {
			t.Errorf("GET %s: %d entries, cut %v; want %d and the %s header", tt.path, got, cut, api.MaxList, api.TruncatedHeader)
		}
	}
	if got, cut := list(t, w, "/api/v1/orgs/acme/projects", ""); got != 1 || cut {
		t.Errorf("a short list: %d entries, cut %v", got, cut)
	}
	// The audit log keeps the newest: the sandbox made last is in it, the
	// users made first are not.
	log, err := w.operator.Audit(ctx, client.AuditOptions{Since: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	newest := false
	for _, e := range log {
		newest = newest || e.Action == "sandbox.create" && e.Target == "newest"
		if e.Action == "user.create" && e.Target == "user0000" {
			t.Errorf("the audit log holds %s %s, one of its oldest events; want the newest 1000", e.Action, e.Target)
		}
	}
	if !newest {
		t.Error("the audit log does not hold the newest event, the last sandbox's creation")
	}
	var warnings []string
	c := client.New(w.url, w.opKey, nil).WithWarnings(func(s string) { warnings = append(warnings, s) })
	if _, err := c.Users(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Projects(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "cut the list at 1000 entries (GET /api/v1/orgs/acme/users)") {
		t.Errorf("warnings: %q; want one, for the users", warnings)
	}
}

func mustWhoami(t *testing.T, c *client.Client) account.User {
	t.Helper()
	who, err := c.Whoami(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return account.User{ID: who.User.ID, Org: who.Organisation.ID, Name: who.User.Name, Role: account.Role(who.User.Role)}
}

// TestFreeTextIsBounded: a user's email address and a key's name are
// bounded, refused naming the field and the limit.
func TestFreeTextIsBounded(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	var e *api.Error
	_, err := w.operator.CreateUser(ctx, "acme", api.CreateUser{Name: "long", Email: strings.Repeat("e", 300) + "@x", Role: "member"})
	if !errors.As(err, &e) || e.Code != api.CodeInvalid || e.Field != "email" || !strings.Contains(e.Message, "at most 254") {
		t.Errorf("an email address of 302 bytes: %v; want 400 invalid on email naming 254", err)
	}
	_, err = w.operator.CreateKey(ctx, api.CreateKey{Name: strings.Repeat("k", 101)})
	if !errors.As(err, &e) || e.Code != api.CodeInvalid || e.Field != "name" || !strings.Contains(e.Message, "at most 100") {
		t.Errorf("a key name of 101 bytes: %v; want 400 invalid on name naming 100", err)
	}
	_, err = w.operator.CreateKey(ctx, api.CreateKey{Name: "a\nb"})
	if !errors.As(err, &e) || e.Field != "name" {
		t.Errorf("a key name with a newline: %v; want 400 invalid on name", err)
	}
	status, _, b := postJSON(t, w.url+api.InvitationRedeemPath, "POST", "", []byte(`{"invitation":"x","key_name":"`+strings.Repeat("k", 101)+`"}`))
	if err := json.Unmarshal(b, &e); err != nil || status != http.StatusBadRequest || e.Field != "key_name" || !strings.Contains(e.Message, "at most 100") {
		t.Errorf("redeeming with a key name of 101 bytes: %d %s; want 400 invalid on key_name naming 100", status, b)
	}
}

// TestClassAliasBombOverHTTP: the file through PUT
// /sandbox/v1/classes (212 KB, one 200 KB string aliased 4,000 times) is
// refused at once, 400 on sandboxes naming the limit, and the classes
// answer stays small.
func TestClassAliasBombOverHTTP(t *testing.T) {
	w := newWorld(t)
	var b strings.Builder
	b.WriteString("sandboxes:\n  - name: bomb\n    image: localhost/berth-sandbox:1\n    purposes: [agent]\n    contract: kelos\n")
	b.WriteString("    setup_command: [&s \"" + strings.Repeat("a", 200_000) + "\"" + strings.Repeat(", *s", 3999) + "]\n")
	_, err := w.operator.ApplyClasses(t.Context(), "", strings.NewReader(b.String()))
	var e *api.Error
	if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Field != "sandboxes" || !strings.Contains(e.Message, "(1048576 bytes)") {
		t.Fatalf("the issue's class file: %.300v; want 400 invalid on sandboxes naming the limit", err)
	}
	classes, err := w.operator.Classes(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range classes {
		if c.Name == "bomb" {
			t.Errorf("the refused class was stored")
		}
	}
}
