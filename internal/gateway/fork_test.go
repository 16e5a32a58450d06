package gateway_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/sandbox"
)

// forking puts the world's sandboxes on the fake driver that saves
// machines' memory and forks them, and hands it to *c.
func forking(c **fake.Checkpointing) func(*worldConfig) {
	return func(cfg *worldConfig) {
		cfg.driver = func(d *fake.Driver) sandbox.Driver {
			*c = fake.NewCheckpointing(d)
			return *c
		}
	}
}

// TestForkOverHTTP is POST /sandbox/v1/sandboxes/{ref}/fork: the owner's
// fork answers 201 with the forks as the list route lists sandboxes,
// starting, each restored from the source's save and then running, and
// the audit log has sandbox.fork on both sides and each fork's
// sandbox.restore.
func TestForkOverHTTP(t *testing.T) {
	var drv *fake.Checkpointing
	w := newWorld(t, forking(&drv))
	ctx := t.Context()
	dev := w.create(t, w.owner, "dev")

	status, _, body := postJSON(t, w.url+"/sandbox/v1/sandboxes/"+dev.ID+"/fork", "POST", w.opKey, []byte(`{"name":"copy","count":2}`))
	if status != http.StatusCreated {
		t.Fatalf("the operator forks dev: %d %s, want 201", status, body)
	}
	var list api.SandboxList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("the answer is no sandbox list: %v\n%s", err, body)
	}
	var names []string
	for _, sb := range list.Sandboxes {
		names = append(names, sb.Name)
		if sb.State != api.StateStarting || sb.OwnerName != "alice" || sb.Class != dev.Class || sb.ID == dev.ID {
			t.Errorf("fork %s: %s, owner %q, class %s, id %s; want starting, alice's, of dev's class, an id of its own", sb.Name, sb.State, sb.OwnerName, sb.Class, sb.ID)
		}
	}
	if !slices.Equal(names, []string{"copy-1", "copy-2"}) {
		t.Fatalf("the forks are %q, want copy-1 and copy-2", names)
	}

	forks, err := w.owner.Fork(ctx, "dev", api.Fork{Name: "mine"})
	if err != nil || len(forks) != 1 || forks[0].Name != "mine" {
		t.Fatalf("alice forks dev by name: %v %+v, want one fork named mine", err, forks)
	}
	for _, sb := range append(list.Sandboxes, forks...) {
		w.waitState(t, w.owner, sb.ID, api.StateRunning)
		if from := drv.ForkedFrom(sandbox.ID(sb.ID)); from != sandbox.ID(dev.ID) {
			t.Errorf("fork %s was made from %q, want dev (%s)", sb.Name, from, dev.ID)
		}
	}
	if src, err := w.owner.Sandbox(ctx, dev.ID); err != nil || src.State != api.StateRunning {
		t.Errorf("dev after its forks: %v %s, want running on", err, src.State)
	}

	evs, err := w.operator.Audit(ctx, client.AuditOptions{Org: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, e := range evs {
		if e.Action == "sandbox.fork" || e.Action == "sandbox.restore" {
			seen[e.Action+" "+e.Target]++
		}
	}
	for _, want := range []string{"sandbox.fork dev", "sandbox.fork copy-1", "sandbox.fork copy-2", "sandbox.fork mine",
		"sandbox.restore copy-1", "sandbox.restore copy-2", "sandbox.restore mine"} {
		if seen[want] == 0 {
			t.Errorf("the audit log has no %s: %v", want, seen)
		}
	}
	if seen["sandbox.fork dev"] != 2 {
		t.Errorf("dev's sandbox.fork events: %d, want one a fork", seen["sandbox.fork dev"])
	}
}

// TestForkRefusals: what the fork route refuses, and how. A body that is
// not a fork's is refused before anything is looked up; the service's
// refusals come through the one mapper: an administrator may not fork
// (403), another member does not find the sandbox (404), a source that is
// not running cannot be forked (409), forks that do not fit the quota are
// refused whole (403 quota_exceeded), and a save that fails makes no fork
// (409 unavailable). No refusal leaves a live fork.
func TestForkRefusals(t *testing.T) {
	var drv *fake.Checkpointing
	w := newWorld(t, forking(&drv))
	ctx := t.Context()
	dev := w.create(t, w.owner, "dev")
	idle := w.create(t, w.owner, "idle")
	if _, err := w.owner.Suspend(ctx, idle.ID); err != nil {
		t.Fatal(err)
	}
	path := w.url + "/sandbox/v1/sandboxes/" + dev.ID + "/fork"
	for _, tc := range []struct{ what, body, field string }{
		{"no name", `{"count":2}`, "name"},
		{"an unknown field", `{"name":"x","forks":2}`, "body"},
		{"nine forks", `{"name":"x","count":9}`, "count"},
		{"a name that is no hostname", `{"name":"X_1"}`, "name"},
	} {
		status, _, body := postJSON(t, path, "POST", w.opKey, []byte(tc.body))
		var e api.Error
		_ = json.Unmarshal(body, &e)
		if status != http.StatusBadRequest || e.Code != api.CodeInvalid || e.Field != tc.field {
			t.Errorf("%s: %d %s, want 400 invalid naming %s", tc.what, status, body, tc.field)
		}
	}

	// The quota: dev and idle count; three more do not fit in five.
	five := 5
	if _, err := w.operator.SetGuardrail(ctx, "acme", "default", api.Guardrail{MaxSandboxes: &five}); err != nil {
		t.Fatal(err)
	}
	drv.FailNextFork(errors.New("no room for the save"))
	for _, tc := range []struct {
		what   string
		c      *client.Client
		ref    string
		req    api.Fork
		status int
		code   string
		says   string
	}{
		{"by an administrator", w.admin, dev.ID, api.Fork{Name: "x"}, http.StatusForbidden, api.CodeForbidden, "only the owner of sandbox dev forks it"},
		{"by another member", w.member, dev.ID, api.Fork{Name: "x"}, http.StatusNotFound, api.CodeNotFound, ""},
		{"of a suspended sandbox", w.owner, idle.ID, api.Fork{Name: "x"}, http.StatusConflict, api.CodeConflict, "sandbox idle cannot be forked: it is suspended"},
		{"past the quota", w.owner, dev.ID, api.Fork{Name: "x", Count: 4}, http.StatusForbidden, api.CodeQuotaExceeded, "4 forks do not fit"},
		{"whose save fails", w.owner, dev.ID, api.Fork{Name: "x"}, http.StatusConflict, api.CodeUnavailable, "sandbox dev was not forked: no room for the save"},
	} {
		_, err := tc.c.Fork(ctx, tc.ref, tc.req)
		var e *api.Error
		if !errors.As(err, &e) || e.Status != tc.status || e.Code != tc.code || !strings.Contains(e.Message, tc.says) {
			t.Errorf("a fork %s: %v, want %d %s saying %q", tc.what, err, tc.status, tc.code, tc.says)
		}
	}
	all, err := w.operator.Sandboxes(ctx, client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range all {
		if sb.Name != "dev" && sb.Name != "idle" {
			t.Errorf("a refused fork left %s, %s", sb.Name, sb.State)
		}
	}
}
