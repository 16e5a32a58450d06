package sandbox_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/sandbox"
)

// TestAuditOneEntryPerAction drives every kind of action the audit log
// records and checks it holds one entry for each, naming who did it (""
// for the sweep), and keys by id only.
func TestAuditOneEntryPerAction(t *testing.T) {
	e := newEnv(t)
	e.run(t)
	ctx := t.Context()
	before, _, err := e.st.ListAudit(ctx, audit.Filter{}, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := e.classes.Apply(ctx, e.admin, "", strings.NewReader("sandboxes:\n  - name: small\n    image: localhost/berth-sandbox:1\n    isolation: standard\n    cpu: 1\n")); err != nil {
		t.Fatal(err)
	}
	if err := e.classes.Delete(ctx, e.admin, "", "small"); err != nil {
		t.Fatal(err)
	}
	if err := e.accounts.SetGuardrail(ctx, e.admin, "", "", guardrail.Guardrail{MaxSandboxes: ptr(5), AllowedRepos: []string{"acme"}}); err != nil {
		t.Fatal(err)
	}
	k, err := e.accounts.CreateKey(ctx, e.alice, "", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.accounts.RevokeKey(ctx, e.admin, k.Key.ID); err != nil {
		t.Fatal(err)
	}
	sb := e.engineer(t, e.alice, "dev")
	e.waitState(t, sb.ID, sandbox.StateRunning)
	key1 := sb.KeyID
	e.clock.Advance(time.Minute)
	if _, err := e.svc.Suspend(ctx, e.alice, "dev"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Resume(ctx, e.alice, "dev"); err != nil {
		t.Fatal(err)
	}
	e.waitState(t, sb.ID, sandbox.StateRunning)
	if _, err := e.svc.Extend(ctx, e.alice, "dev", "1h"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Hour)
	if _, err := e.svc.Sweep(ctx); err != nil { // expires it
		t.Fatal(err)
	}
	got, err := e.svc.Resume(ctx, e.admin, string(sb.ID)) // a new key
	if err != nil {
		t.Fatal(err)
	}
	e.waitState(t, sb.ID, sandbox.StateRunning)
	key2 := got.KeyID
	if _, err := e.svc.Terminate(ctx, e.admin, string(sb.ID)); err != nil {
		t.Fatal(err)
	}

	all, _, err := e.st.ListAudit(ctx, audit.Filter{}, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	alice, ada, id := e.alice.User.ID, e.admin.User.ID, string(sb.ID)
	type row struct{ Actor, Sandbox, Action, Target, Detail string }
	want := []row{
		{ada, "", audit.ClassApply, "small", "created: image localhost/berth-sandbox:1, tier standard, cpu 1, memory 4Gi"},
		{ada, "", audit.ClassDelete, "small", ""},
		{ada, "", audit.GuardrailSet, "organisation", "max-sandboxes=5 max-sandbox-memory=none max-sandbox-cpu=none max-sandbox-ttl=none allowed-repos=[acme] egress=unset"},
		{alice, "", audit.KeyCreate, k.Key.ID, "a key of alice@acme.example named laptop"},
		{ada, "", audit.KeyRevoke, k.Key.ID, "a key of alice@acme.example named laptop"},
		{alice, id, audit.SandboxCreate, "dev", "engineer sandbox of class standard in project default, expires 2026-11-30T13:00:00Z"},
		{alice, id, audit.KeyCreate, key1, "the key of sandbox dev"},
		{"", id, audit.SandboxState, "dev", "starting → running"},
		{alice, id, audit.SandboxState, "dev", "running → suspended"},
		{alice, id, audit.SandboxState, "dev", "suspended → starting"},
		{"", id, audit.SandboxState, "dev", "starting → running"},
		{alice, id, audit.SandboxExtend, "dev", "expires 2026-11-30T10:01:00Z (was 2026-11-30T13:00:00Z)"},
		{"", id, audit.SandboxState, "dev", "running → expired: expired"},
		{"", id, audit.KeyRevoke, key1, "the key of sandbox dev"},
		{ada, id, audit.SandboxState, "dev", "expired → starting"},
		{ada, id, audit.KeyCreate, key2, "the key of sandbox dev"},
		{"", id, audit.SandboxState, "dev", "starting → running"},
		{ada, id, audit.SandboxState, "dev", "running → terminated: terminated by ada"},
		{ada, id, audit.KeyRevoke, key2, "the key of sandbox dev"},
	}
	var rows []row
	for _, ev := range all[len(before):] {
		if ev.Org != e.acme.ID || ev.Outcome != audit.OK || ev.At.IsZero() {
			t.Errorf("event %s: org %s, outcome %s, at %v; want acme's, ok, a time", ev.Action, ev.Org, ev.Outcome, ev.At)
		}
		rows = append(rows, row{ev.Actor, ev.Sandbox, ev.Action, ev.Target, ev.Detail})
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("audit log (-want +got):\n%s", diff)
	}
	for _, ev := range all {
		if strings.Contains(fmt.Sprint(ev), "berth_") {
			t.Errorf("an audit entry holds something shaped like a key's secret: %+v", ev)
		}
	}
}
