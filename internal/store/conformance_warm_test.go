package store_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
	"berth.dev/berth/internal/warm"
)

// testWarmPools covers what warm pools keep (SPEC S12): the classes with a
// pool across organisations, and one-time bootstrap tokens used once,
// never after they expire, and deleted with their sandbox.
func testWarmPools(t *testing.T, st *store.Store) {
	ctx := t.Context()
	acme, globex := newFixture(t, st, "acme"), newFixture(t, st, "globex")
	cold := class.Class{Name: "cold", Image: "img", Isolation: sandbox.TierStandard, CPU: 1000, Memory: 1 << 30, DefaultTTL: time.Hour, MaxTTL: time.Hour}
	hot := cold
	hot.Name, hot.Warm = "warm", 3
	for _, fx := range []fixture{acme, globex} {
		if _, err := st.PutClasses(ctx, fx.org.ID, []class.Class{cold, hot}); err != nil {
			t.Fatalf("PutClasses: %v", err)
		}
	}
	got, err := st.ListWarmClasses(ctx)
	if err != nil {
		t.Fatalf("ListWarmClasses: %v", err)
	}
	want := []warm.Class{{Org: acme.org.ID, Class: hot}, {Org: globex.org.ID, Class: hot}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListWarmClasses (-want +got):\n%s", diff)
	}

	sb, key := newSandbox(acme, acme.ann, "pooled", t0)
	sb.FromPool = true
	mustCreate(t, st, sb, key)
	for i, tok := range []warm.Token{
		{Hash: "h1", Sandbox: sb.ID, CreatedAt: t0, ExpiresAt: t0.Add(time.Minute)},
		{Hash: "h2", Sandbox: sb.ID, CreatedAt: t0, ExpiresAt: t0.Add(time.Minute)},
	} {
		if err := st.AddBootstrap(ctx, tok); err != nil {
			t.Fatalf("AddBootstrap %d: %v", i, err)
		}
	}
	wantErr(t, "AddBootstrap(same hash)", st.AddBootstrap(ctx, warm.Token{Hash: "h1", Sandbox: sb.ID, CreatedAt: t0, ExpiresAt: t0}), fault.Conflict)
	wantErr(t, "AddBootstrap(unknown sandbox)", st.AddBootstrap(ctx, warm.Token{Hash: "h3", Sandbox: "sbx_nope", CreatedAt: t0, ExpiresAt: t0}), fault.NotFound)

	id, err := st.UseBootstrap(ctx, "h1", t0.Add(time.Second))
	if err != nil || id != sb.ID {
		t.Fatalf("UseBootstrap(h1) = %s, %v; want %s", id, err, sb.ID)
	}
	_, err = st.UseBootstrap(ctx, "h1", t0.Add(2*time.Second))
	wantErr(t, "UseBootstrap(used)", err, fault.NotFound)
	_, err = st.UseBootstrap(ctx, "h2", t0.Add(time.Minute))
	wantErr(t, "UseBootstrap(expired)", err, fault.NotFound)
	_, err = st.UseBootstrap(ctx, "nope", t0)
	wantErr(t, "UseBootstrap(unknown)", err, fault.NotFound)

	// An ended sandbox goes with its tokens after the retention.
	ended := mustGet(t, st, sb.ID)
	next := ended
	next.State, next.EndedAt = sandbox.StateTerminated, t0.Add(time.Hour)
	if err := st.UpdateSandbox(ctx, sandbox.Update{Sandbox: next, From: ended.State, At: next.EndedAt, RevokeKey: true}); err != nil {
		t.Fatalf("UpdateSandbox: %v", err)
	}
	if ids, err := st.DeleteEnded(ctx, t0.Add(2*time.Hour)); err != nil || len(ids) != 1 {
		t.Fatalf("DeleteEnded = %v, %v; want one", ids, err)
	}
}
