package store_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/egress"
	"berth.dev/berth/internal/egress/placeholder"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
)

// testEgress checks egress.Tallies: what two replicas add for one
// sandbox, host, port and decision sums into one row (first the earliest,
// last the latest, the reason the latest given); allowed and refused stay
// apart; another sandbox's are its own; and a sandbox's rows go when it
// is deleted.
func testEgress(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	sb, key := newSandbox(fx, fx.ann, "agent", t0)
	mustCreate(t, st, sb, key)
	other, otherKey := newSandbox(fx, fx.ann, "other", t0)
	mustCreate(t, st, other, otherKey)
	id := string(sb.ID)
	add := func(ts ...egress.Tally) {
		t.Helper()
		if err := st.AddEgress(ctx, ts); err != nil {
			t.Fatal(err)
		}
	}
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	add(egress.Tally{Sandbox: id, Host: "registry.npmjs.org", Port: 443, Allowed: true, Connections: 3, Up: 100, Down: 5000, First: at(2), Last: at(3)},
		egress.Tally{Sandbox: id, Host: "evil.example", Port: 443, Connections: 1, First: at(2), Last: at(2), Why: "not in this sandbox's egress policy"},
		egress.Tally{Sandbox: string(other.ID), Host: "pypi.org", Port: 443, Allowed: true, Connections: 1, First: at(1), Last: at(1)})
	add(egress.Tally{Sandbox: id, Host: "registry.npmjs.org", Port: 443, Allowed: true, Connections: 2, Up: 10, Down: 50, First: at(1), Last: at(9)},
		egress.Tally{Sandbox: id, Host: "evil.example", Port: 443, Connections: 1, First: at(4), Last: at(4)})
	got, err := st.EgressOf(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b egress.Tally) int { return len(a.Host) - len(b.Host) })
	want := []egress.Tally{
		{Sandbox: id, Host: "evil.example", Port: 443, Connections: 2, First: at(2), Last: at(4), Why: "not in this sandbox's egress policy"},
		{Sandbox: id, Host: "registry.npmjs.org", Port: 443, Allowed: true, Connections: 5, Up: 110, Down: 5050, First: at(1), Last: at(9)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EgressOf (-want +got):\n%s", diff)
	}

	// A sandbox that learns is frozen once; an update from a copy read
	// before the freeze does not open it up again.
	learner, learnerKey := newSandbox(fx, fx.ann, "learner", t0)
	learner.Egress = "learn"
	mustCreate(t, st, learner, learnerKey)
	stale := learner
	for i, want := range []bool{true, false} {
		if froze, err := st.FreezeEgress(ctx, learner.ID, "registry.npmjs.org, pypi.org"); err != nil || froze != want {
			t.Errorf("FreezeEgress #%d = %v, %v; want %v", i+1, froze, err, want)
		}
	}
	move(t, st, stale, sandbox.StateRunning, t0)
	if got, err := st.GetSandbox(ctx, learner.ID); err != nil || got.Egress != "registry.npmjs.org, pypi.org" {
		t.Errorf("after an update from a stale copy, egress = %q, %v; want the frozen list", got.Egress, err)
	}
	if froze, err := st.FreezeEgress(ctx, sb.ID, "none"); err != nil || froze {
		t.Errorf("FreezeEgress of a sandbox that never learnt = %v, %v; want false", froze, err)
	}

	sb = move(t, st, sb, sandbox.StateRunning, t0)
	move(t, st, sb, sandbox.StateTerminated, at(10))
	if _, err := st.DeleteEnded(ctx, at(20)); err != nil {
		t.Fatal(err)
	}
	if got, err := st.EgressOf(ctx, id); err != nil || len(got) != 0 {
		t.Errorf("EgressOf a deleted sandbox = %+v, %v; want none", got, err)
	}
	if got, err := st.EgressOf(ctx, string(other.ID)); err != nil || len(got) != 1 {
		t.Errorf("EgressOf another sandbox = %+v, %v; want its one", got, err)
	}
}

// testSecrets checks placeholder.Store: a project's secrets by name, one
// per name (set again replaces it), each set and delete with its audit
// entry; at most placeholder.MaxSecrets; another project's are its own;
// deleting one that is not there is not found.
func testSecrets(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	put := func(name string, hosts ...string) error {
		x := placeholder.Sealed{Credential: placeholder.Credential{Org: fx.org.ID, Project: fx.prj.ID, Name: name, Hosts: hosts, CreatedAt: t0, CreatedBy: fx.ann.ID},
			Value: []byte("sealed " + name)}
		return st.PutSecret(ctx, x, audit.Event{At: t0, Org: fx.org.ID, Actor: fx.ann.ID, Action: audit.SecretSet, Target: "default/" + name, Outcome: audit.OK})
	}
	if err := put("TOKEN", "api.example.com"); err != nil {
		t.Fatal(err)
	}
	if err := put("TOKEN", "api.example.com", "*.example.org"); err != nil {
		t.Fatal(err)
	}
	got, err := st.Secrets(ctx, fx.prj.ID)
	if err != nil || len(got) != 1 || got[0].Name != "TOKEN" || !slices.Equal(got[0].Hosts, []string{"api.example.com", "*.example.org"}) ||
		string(got[0].Value) != "sealed TOKEN" || !got[0].CreatedAt.Equal(t0) || got[0].Org != fx.org.ID || got[0].CreatedBy != fx.ann.ID {
		t.Fatalf("Secrets = %+v, %v", got, err)
	}
	for i := 1; i < placeholder.MaxSecrets; i++ {
		if err := put(fmt.Sprintf("S%02d", i), "a.example"); err != nil {
			t.Fatal(err)
		}
	}
	wantErr(t, "PutSecret past the limit", put("ONE_MORE", "a.example"), fault.Conflict)
	if err := put("TOKEN", "b.example"); err != nil {
		t.Errorf("setting one of the project's again at its limit: %v", err)
	}
	if other, err := st.Secrets(ctx, "prj_other"); err != nil || len(other) != 0 {
		t.Errorf("another project's secrets: %+v, %v", other, err)
	}
	del := audit.Event{At: t0, Org: fx.org.ID, Actor: fx.ann.ID, Action: audit.SecretDelete, Target: "default/TOKEN", Outcome: audit.OK}
	if err := st.DeleteSecret(ctx, fx.prj.ID, "TOKEN", del); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "DeleteSecret again", st.DeleteSecret(ctx, fx.prj.ID, "TOKEN", del), fault.NotFound)
	events, _, err := st.ListAudit(ctx, audit.Filter{Org: fx.org.ID}, paging.Request{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	sets, dels := 0, 0
	for _, e := range events {
		switch e.Action {
		case audit.SecretSet:
			sets++
		case audit.SecretDelete:
			dels++
		}
	}
	if sets != placeholder.MaxSecrets+2 || dels != 1 { // TOKEN three times, the 63 others
		t.Errorf("audit: %d sets and %d deletes, want %d and 1", sets, dels, placeholder.MaxSecrets+2)
	}
}
