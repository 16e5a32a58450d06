package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/egress"
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
