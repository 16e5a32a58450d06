package gateway_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/sandbox"
)

// list GETs path with key and returns the status, how many entries the
// answer's list at field holds ("" for a top-level list), the answer's
// error and the next page's target from its Link header.
func list(t *testing.T, w *world, key, path, field string) (status, n int, e api.Error, next string) {
	t.Helper()
	resp := getAs(t, w, key, path)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, 0, e, ""
	}
	var items []json.RawMessage
	var err error
	if field == "" {
		err = json.NewDecoder(resp.Body).Decode(&items)
	} else {
		var obj map[string]json.RawMessage
		if err = json.NewDecoder(resp.Body).Decode(&obj); err == nil {
			err = json.Unmarshal(obj[field], &items)
		}
	}
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, len(items), e, nextOf(resp.Header.Get("Link"))
}

// with adds a query parameter ("name=value") to path.
func with(path, param string) string {
	if strings.Contains(path, "?") {
		return path + "&" + param
	}
	return path + "?" + param
}

// getAs GETs path with key; the caller closes the answer's body.
func getAs(t *testing.T, w *world, key, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", w.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

var nextRE = regexp.MustCompile(`^<([^>]+)>; rel="next"$`)

// nextOf is the target of a Link header's rel="next", "" without one.
func nextOf(link string) string {
	if m := nextRE.FindStringSubmatch(link); m != nil {
		return m[1]
	}
	return ""
}

// TestListsAreBounded: every list answer holds one page, api.DefaultLimit
// entries unless limit asks for another number up to api.MaxLimit (more
// is refused naming limit), with a Link to the next page; the client
// follows the pages to the whole list. The audit log, oldest first, is
// whole too: its oldest and its newest events are in it.
func TestListsAreBounded(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	op := account.Principal{User: mustWhoami(t, w.operator)}
	n := api.MaxLimit + 1
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
	for _, tt := range []struct{ path, field string }{
		{"/api/v1/orgs/acme/users", ""},
		{"/api/v1/keys", ""},
		{"/sandbox/v1/sandboxes", "sandboxes"},
		{"/sandbox/v1/sandboxes?all=true", "sandboxes"},
		{"/api/v1/audit?since=1h", "events"},
	} {
		for _, c := range []struct {
			path string
			want int
		}{{tt.path, api.DefaultLimit}, {with(tt.path, "limit=7"), 7}, {with(tt.path, fmt.Sprintf("limit=%d", api.MaxLimit)), api.MaxLimit}} {
			status, got, e, next := list(t, w, w.opKey, c.path, tt.field)
			if status != http.StatusOK || got != c.want || next == "" {
				t.Errorf("GET %s: %d, %d entries, next %q (%v); want %d and a next page", c.path, status, got, next, e, c.want)
			}
		}
		for _, bad := range []string{"0", "-1", "x", fmt.Sprint(api.MaxLimit + 1)} {
			status, _, e, _ := list(t, w, w.opKey, with(tt.path, "limit="+bad), tt.field)
			if status != http.StatusBadRequest || e.Field != "limit" || !strings.Contains(e.Message, fmt.Sprint(api.MaxLimit)) {
				t.Errorf("GET %s limit=%s: %d %+v; want 400 naming limit and its maximum", tt.path, bad, status, e)
			}
		}
	}
	if status, got, _, next := list(t, w, w.opKey, "/api/v1/orgs/acme/projects", ""); status != http.StatusOK || got != 1 || next != "" {
		t.Errorf("a short list: %d, %d entries, next %q; want one and no next page", status, got, next)
	}
	// The client follows the pages to the end.
	users, err := w.operator.Users(ctx, "acme")
	if err != nil || len(users) < n {
		t.Errorf("client: %d users, %v; want at least %d", len(users), err, n)
	}
	sbs, err := w.operator.Sandboxes(ctx, client.ListOptions{})
	if err != nil || len(sbs) != n+1 {
		t.Errorf("client: %d sandboxes, %v; want %d", len(sbs), err, n+1)
	}
	log, err := w.operator.Audit(ctx, client.AuditOptions{Since: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	newest, oldest := false, false
	for _, e := range log {
		newest = newest || e.Action == "sandbox.create" && e.Target == "newest"
		oldest = oldest || e.Action == "user.create" && e.Target == "user0000"
	}
	if !newest || !oldest {
		t.Errorf("the audit log read through its pages holds its newest event %v, its oldest %v; want both", newest, oldest)
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
