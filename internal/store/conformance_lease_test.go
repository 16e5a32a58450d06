package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/store"
)

// testLeases checks inference.Leases: a grant reads each scope's spend,
// the other replicas' live leases and its own, writes what decide says on
// top of its own, and writes nothing when decide refuses; a record
// releases what its request held from its replica's leases as it is
// committed; returns, drops and renewals; and an expired lease counts no
// more and is removed by another replica's renewal.
func testLeases(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	month := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	scopes := []string{"", fx.prj.ID} // the organisation's budget, then the project's
	grant := func(replica string, at time.Time, add ...float64) []inference.Leased {
		t.Helper()
		var seen []inference.Leased
		g := inference.LeaseGrant{Replica: replica, Org: fx.org.ID, Projects: scopes, Month: month, Now: at, Expires: at.Add(30 * time.Second)}
		if err := st.Lease(ctx, g, func(fs []inference.Leased) ([]float64, error) { seen = fs; return add, nil }); err != nil {
			t.Fatalf("Lease by %s: %v", replica, err)
		}
		return seen
	}
	status := func(project string, at time.Time) [2]float64 {
		t.Helper()
		spent, held, err := st.LeaseStatus(ctx, fx.org.ID, project, month, at)
		if err != nil {
			t.Fatal(err)
		}
		return [2]float64{spent, held}
	}
	// Spent this month in the project, in another project of the
	// organisation, and last month (which counts in neither).
	for _, r := range []inference.Record{
		{At: now, Org: fx.org.ID, Project: fx.prj.ID, CostUSD: 1},
		{At: now, Org: fx.org.ID, Project: "prj_other", CostUSD: 2},
		{At: month.Add(-time.Hour), Org: fx.org.ID, Project: fx.prj.ID, CostUSD: 64},
	} {
		r.Provider, r.Model, r.Dialect, r.Status, r.Metered = "p", "m", inference.Anthropic, 200, true
		if err := st.RecordInference(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := grant("rep_a", now, 10, 5), []inference.Leased{{Spent: 3}, {Spent: 1}}; !cmp.Equal(got, want) {
		t.Errorf("a's first grant saw %+v, want %+v", got, want)
	}
	if got, want := grant("rep_b", now, 20, 20), []inference.Leased{{Spent: 3, Others: 10}, {Spent: 1, Others: 5}}; !cmp.Equal(got, want) {
		t.Errorf("b's grant saw %+v, want %+v", got, want)
	}
	// A grant adds to what the lease holds.
	if got, want := grant("rep_a", now, 1, 1), []inference.Leased{{Spent: 3, Others: 20, Mine: 10, Have: true}, {Spent: 1, Others: 20, Mine: 5, Have: true}}; !cmp.Equal(got, want) {
		t.Errorf("a's second grant saw %+v, want %+v", got, want)
	}
	// A refusal writes nothing.
	refused := errors.New("over budget")
	err := st.Lease(ctx, inference.LeaseGrant{Replica: "rep_a", Org: fx.org.ID, Projects: scopes, Month: month, Now: now, Expires: now.Add(time.Minute)},
		func([]inference.Leased) ([]float64, error) { return nil, refused })
	if !errors.Is(err, refused) {
		t.Errorf("a refused grant: %v, want decide's error", err)
	}
	if got, want := status("", now), [2]float64{3, 31}; got != want {
		t.Errorf("the organisation: spent and held %v, want %v", got, want)
	}
	// A record of a's takes what its request held off a's leases of the
	// scopes it was reserved against, in the same commit: the project's
	// spend grows by the cost, what is held shrinks by the reservation.
	rel := inference.Release{Replica: "rep_a", Month: month, Projects: scopes, Amount: 2}
	if err := st.RecordInference(ctx, inference.Record{At: now, Org: fx.org.ID, Project: fx.prj.ID, Provider: "p", Model: "m",
		Dialect: inference.Anthropic, Status: 200, CostUSD: 0.5, Metered: true, Lease: rel}); err != nil {
		t.Fatal(err)
	}
	if got, want := status(fx.prj.ID, now), [2]float64{1.5, 24}; got != want {
		t.Errorf("the project after a's record: spent and held %v, want %v", got, want)
	}
	if got, want := status("", now), [2]float64{3.5, 29}; got != want {
		t.Errorf("the organisation after a's record: spent and held %v, want %v", got, want)
	}
	if err := st.ReturnLease(ctx, "rep_b", fx.org.ID, fx.prj.ID, month, 15); err != nil {
		t.Fatal(err)
	}
	if err := st.DropLease(ctx, "rep_a", fx.org.ID, fx.prj.ID, month); err != nil {
		t.Fatal(err)
	}
	if got, want := status(fx.prj.ID, now), [2]float64{1.5, 5}; got != want {
		t.Errorf("the project after b returned 15 and a dropped its lease: %v, want %v", got, want)
	}
	// a renews; b does not, and its leases expire: they count no more, and
	// a's renewal removes them.
	later := now.Add(20 * time.Second)
	if err := st.RenewLeases(ctx, "rep_a", later, later.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	expired := now.Add(40 * time.Second)
	if got, want := status("", expired), [2]float64{3.5, 9}; got != want {
		t.Errorf("the organisation once b's leases expired: %v, want a's 9 alone", got)
	}
	if err := st.RenewLeases(ctx, "rep_a", expired, expired.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	// Read at the time b's leases were still live, they are gone.
	if got, want := status("", now), [2]float64{3.5, 9}; got != want {
		t.Errorf("the organisation after a's renewal removed b's expired leases: %v, want %v", got, want)
	}
	// b, back, finds its lease gone and starts again from nothing.
	if got := grant("rep_b", expired, 1, 1); got[0].Mine != 0 || got[0].Have || got[0].Others != 9 {
		t.Errorf("b after its leases were removed saw %+v, want none of its own and a's 9", got[0])
	}
}
