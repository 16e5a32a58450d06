package store_test

import (
	"berth.dev/berth/internal/agentrun"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
)

// testDeleteEnded: retention deletes the sandboxes that ended before the
// cut-off with their segments and keys, and nothing live, however old.
// Segments reference their sandbox, so the delete succeeding at all shows
// they went first.
func testDeleteEnded(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	userKey, _ := account.NewKey(fx.ann.ID, "laptop", t0)
	if err := st.CreateKey(ctx, userKey); err != nil {
		t.Fatal(err)
	}
	ran := func(name string, end sandbox.State, at time.Time) (sandbox.Sandbox, account.Key) {
		sb, key := newSandbox(fx, fx.ann, name, t0)
		mustCreate(t, st, sb, key)
		sb = move(t, st, sb, sandbox.StateRunning, t0)
		return move(t, st, sb, end, at), key
	}
	old, oldKey := ran("old", sandbox.StateTerminated, t0.Add(time.Hour))
	recent, recentKey := ran("recent", sandbox.StateTerminated, t0.Add(5*time.Hour))
	parked, parkedKey := ran("parked", sandbox.StateExpired, t0.Add(time.Hour)) // live: keeps its volume
	broken, brokenKey := ran("broken", sandbox.StateFailed, t0.Add(time.Hour))  // an engineer's: live
	// Model calls: old's of last month go with it, its call of this
	// month (a budget may be counting it) stays; recent's stay.
	call := func(sb sandbox.Sandbox, at time.Time) {
		t.Helper()
		if err := st.RecordInference(ctx, inference.Record{At: at, Org: sb.Org, Project: sb.Project, User: sb.Owner, Key: sb.KeyID,
			Sandbox: string(sb.ID), Session: string(sb.ID), Provider: "p", Model: "m", Dialect: inference.OpenAIChat, Status: 200,
			Usage: runner.Usage{Input: 10, Output: 1}, CostUSD: 0.5, Metered: true}); err != nil {
			t.Fatal(err)
		}
	}
	lastMonth := time.Date(2026, 10, 31, 23, 0, 0, 0, time.UTC)
	call(old, lastMonth)
	call(old, t0.Add(30*time.Minute))
	call(recent, lastMonth)

	ids, err := st.DeleteEnded(ctx, t0.Add(2*time.Hour))
	if err != nil || !slices.Equal(ids, []sandbox.ID{old.ID}) {
		t.Fatalf("DeleteEnded = %v, %v; want [%s] (old)", ids, err, old.ID)
	}
	if _, err := st.GetSandbox(ctx, old.ID); !errors.Is(err, fault.NotFound) {
		t.Errorf("GetSandbox(old) = %v, want fault.NotFound", err)
	}
	if _, err := st.GetKey(ctx, oldKey.ID); !errors.Is(err, fault.NotFound) {
		t.Errorf("GetKey(old's key) = %v, want fault.NotFound", err)
	}
	for _, kept := range []struct {
		sb  sandbox.Sandbox
		key account.Key
	}{{recent, recentKey}, {parked, parkedKey}, {broken, brokenKey}, {sandbox.Sandbox{}, userKey}} {
		if kept.sb.ID != "" {
			if got := mustGet(t, st, kept.sb.ID); got.Ran != time.Hour && got.Ran != 5*time.Hour {
				t.Errorf("%s kept with running time %v", got.Name, got.Ran)
			}
		}
		if _, err := st.GetKey(ctx, kept.key.ID); err != nil {
			t.Errorf("GetKey(%s) = %v; retention deleted a key it should keep", kept.key.Name, err)
		}
	}
	for _, tt := range []struct {
		sb   sandbox.Sandbox
		want int
	}{{old, 1}, {recent, 1}} {
		if m, err := st.MeteredOfSandbox(ctx, tt.sb.ID, agentrun.Span{}); err != nil || m.Requests != tt.want {
			t.Errorf("model calls of %s after retention = %d (%v), want %d", tt.sb.Name, m.Requests, err, tt.want)
		}
	}
	if ids, err := st.DeleteEnded(ctx, t0.Add(2*time.Hour)); err != nil || len(ids) != 0 {
		t.Errorf("DeleteEnded again = %v, %v; want none", ids, err)
	}
}

// testCountSandboxes: live sandboxes by state and class, across
// organisations; ended ones are not counted.
func testCountSandboxes(t *testing.T, st *store.Store) {
	acme, globex := newFixture(t, st, "acme"), newFixture(t, st, "globex")
	put := func(fx fixture, name, class string, to ...sandbox.State) {
		sb, key := newSandbox(fx, fx.ann, name, t0)
		sb.Class = class
		mustCreate(t, st, sb, key)
		for _, s := range to {
			sb = move(t, st, sb, s, t0)
		}
	}
	put(acme, "a", "small", sandbox.StateRunning)
	put(acme, "b", "small", sandbox.StateRunning)
	put(globex, "c", "small", sandbox.StateRunning)
	put(acme, "d", "big", sandbox.StateRunning, sandbox.StateSuspended)
	put(acme, "e", "big")
	put(acme, "f", "big", sandbox.StateRunning, sandbox.StateTerminated)
	got, err := st.CountSandboxes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []sandbox.Count{
		{State: sandbox.StateRunning, Class: "small", N: 3},
		{State: sandbox.StateStarting, Class: "big", N: 1},
		{State: sandbox.StateSuspended, Class: "big", N: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CountSandboxes (-want +got):\n%s", diff)
	}
}
