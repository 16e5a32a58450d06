package store_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
)

// testInference checks inference.Store: settings round-trip whole, nil
// and empty lists stay apart, spend sums by scope and time, and session
// usage sums by session.
func testInference(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	other := newFixture(t, st, "other")

	got, err := st.GetInferenceSettings(ctx, fx.org.ID, "")
	if err != nil || !cmp.Equal(got, inference.Settings{}) {
		t.Fatalf("never written = %+v, %v; want the zero Settings", got, err)
	}
	budget := 25.5
	want := inference.Settings{Models: []string{"a", "b"}, BudgetUSD: &budget,
		Rate: &inference.Rate{Requests: 60, Per: time.Minute}, SystemPrompt: "Be brief."}
	if err := st.PutInferenceSettings(ctx, fx.org.ID, fx.prj.ID, want); err != nil {
		t.Fatal(err)
	}
	if got, err = st.GetInferenceSettings(ctx, fx.org.ID, fx.prj.ID); err != nil || !cmp.Equal(got, want) {
		t.Errorf("round trip: %v\n%s", err, cmp.Diff(want, got))
	}
	// Written whole: an empty list allows nothing and is not "not set".
	empty := inference.Settings{Models: []string{}}
	if err := st.PutInferenceSettings(ctx, fx.org.ID, fx.prj.ID, empty); err != nil {
		t.Fatal(err)
	}
	if got, _ = st.GetInferenceSettings(ctx, fx.org.ID, fx.prj.ID); got.Models == nil || len(got.Models) != 0 || got.BudgetUSD != nil || got.Rate != nil {
		t.Errorf("after writing an empty list: %+v, want an empty, non-nil list and nothing else", got)
	}
	wantErr(t, "PutInferenceSettings(unknown organisation)",
		st.PutInferenceSettings(ctx, "org_nope", "", inference.Settings{}), fault.NotFound)

	rec := func(org, project, session string, at time.Time, cost float64, metered bool) {
		t.Helper()
		err := st.RecordInference(ctx, inference.Record{At: at, Org: org, Project: project, User: "usr_x", Key: "key_x",
			Session: session, Provider: "p", Model: "m-" + session, Dialect: inference.OpenAIChat, Status: 200,
			Usage: runner.Usage{Input: 120, CacheRead: 30, CacheWrite: 5, Output: 17, Reasoning: 3}, CostUSD: cost, Metered: metered})
		if err != nil {
			t.Fatal(err)
		}
	}
	rec(fx.org.ID, fx.prj.ID, "sbx_1", t0, 1, true)
	rec(fx.org.ID, fx.prj.ID, "sbx_1", t0.Add(time.Hour), 2, false)
	rec(fx.org.ID, "prj_b", "", t0.Add(time.Hour), 4, true)
	rec(fx.org.ID, fx.prj.ID, "", t0.Add(-time.Hour), 8, true)
	rec(other.org.ID, other.prj.ID, "sbx_2", t0, 16, true)

	for _, c := range []struct {
		org, project string
		want         float64
	}{
		{fx.org.ID, "", 7}, {fx.org.ID, fx.prj.ID, 3}, {fx.org.ID, "prj_b", 4}, {other.org.ID, "", 16},
	} {
		if got, err := st.InferenceSpend(ctx, c.org, c.project, t0); err != nil || got != c.want {
			t.Errorf("InferenceSpend(%s, %q, t0) = %v, %v; want %v", c.org, c.project, got, err, c.want)
		}
	}
	u, err := st.SessionUsage(ctx, "sbx_1")
	if err != nil {
		t.Fatal(err)
	}
	wantU := inference.SessionUsage{Requests: 2, Usage: runner.Usage{Input: 240, CacheRead: 60, CacheWrite: 10, Output: 34, Reasoning: 6},
		CostUSD: 3, Models: []string{"m-sbx_1"}, Unmetered: 1}
	if diff := cmp.Diff(wantU, u); diff != "" {
		t.Errorf("SessionUsage(sbx_1) (-want +got):\n%s", diff)
	}
	if u, err := st.SessionUsage(ctx, "sbx_none"); err != nil || u.Requests != 0 {
		t.Errorf("SessionUsage(unknown) = %+v, %v; want nothing", u, err)
	}

	// By sandbox: everything its key asked, with or without a session.
	for _, session := range []string{"sbx_3", ""} {
		if err := st.RecordInference(ctx, inference.Record{At: t0, Org: fx.org.ID, Project: fx.prj.ID, User: "usr_x", Key: "key_3",
			Sandbox: "sbx_3", Session: session, Provider: "p", Model: "m", Dialect: inference.Gemini, Status: 200,
			Usage: runner.Usage{Input: 10, Output: 1}, CostUSD: 0.5, Metered: true}); err != nil {
			t.Fatal(err)
		}
	}
	// An answer that said no usage: charged its worst case, no tokens.
	if err := st.RecordInference(ctx, inference.Record{At: t0, Org: fx.org.ID, Project: fx.prj.ID, User: "usr_x", Key: "key_3",
		Sandbox: "sbx_3", Session: "sbx_3", Provider: "p", Model: "m", Dialect: inference.Gemini, Status: 200, CostUSD: 0.25}); err != nil {
		t.Fatal(err)
	}
	m, err := st.MeteredOfSandbox(ctx, "sbx_3", agentrun.Span{})
	if err != nil {
		t.Fatal(err)
	}
	wantM := agentrun.Metered{Requests: 3, Usage: runner.Usage{Input: 20, Output: 2}, CostUSD: 1.25, Models: []string{"m"}, Unmetered: 1, UnmeteredCostUSD: 0.25}
	if diff := cmp.Diff(wantM, m); diff != "" {
		t.Errorf("MeteredOfSandbox(sbx_3) (-want +got):\n%s", diff)
	}
	by, err := st.MeteredBySandbox(ctx, fx.org.ID, t0.Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[sandbox.ID]agentrun.Metered{"sbx_3": {Requests: 3, Usage: runner.Usage{Input: 20, Output: 2}, CostUSD: 1.25, Unmetered: 1, UnmeteredCostUSD: 0.25}}, by); diff != "" {
		t.Errorf("MeteredBySandbox, want sbx_3's requests only (-want +got):\n%s", diff)
	}
	// One by one, oldest first, as many as asked.
	calls, err := st.MeteredCallsOfSandbox(ctx, "sbx_3", agentrun.Span{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	one := agentrun.MeteredCall{Model: "m", Status: 200, Usage: runner.Usage{Input: 10, Output: 1}, CostUSD: 0.5, Metered: true}
	if diff := cmp.Diff([]agentrun.MeteredCall{one, one, {Model: "m", Status: 200, CostUSD: 0.25}}, calls); diff != "" {
		t.Errorf("MeteredCallsOfSandbox(sbx_3) (-want +got):\n%s", diff)
	}
	if calls, err := st.MeteredCallsOfSandbox(ctx, "sbx_3", agentrun.Span{}, 2); err != nil || len(calls) != 2 {
		t.Errorf("MeteredCallsOfSandbox(sbx_3, 2) = %d calls, %v; want 2", len(calls), err)
	}
	// A session's run: its calls in its own time, ends included.
	if err := st.RecordInference(ctx, inference.Record{At: t0.Add(time.Minute), Org: fx.org.ID, Project: fx.prj.ID, User: "usr_x", Key: "key_4",
		Sandbox: "sbx_3", Session: "sbx_3", Provider: "p", Model: "m", Dialect: inference.Gemini, Status: 200,
		Usage: runner.Usage{Input: 7, Output: 7}, CostUSD: 2, Metered: true}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		span     agentrun.Span
		requests int
		cost     float64
	}{
		{agentrun.Span{From: t0, To: t0}, 3, 1.25},
		{agentrun.Span{From: t0.Add(time.Second)}, 1, 2},
		{agentrun.Span{To: t0.Add(time.Minute)}, 4, 3.25},
		{agentrun.Span{From: t0.Add(time.Second), To: t0.Add(2 * time.Second)}, 0, 0},
	} {
		m, err := st.MeteredOfSandbox(ctx, "sbx_3", c.span)
		if err != nil || m.Requests != c.requests || m.CostUSD != c.cost {
			t.Errorf("MeteredOfSandbox(sbx_3, %+v) = %d requests $%v, %v; want %d, $%v", c.span, m.Requests, m.CostUSD, err, c.requests, c.cost)
		}
		calls, err := st.MeteredCallsOfSandbox(ctx, "sbx_3", c.span, 10)
		if err != nil || len(calls) != c.requests {
			t.Errorf("MeteredCallsOfSandbox(sbx_3, %+v) = %d calls, %v; want %d", c.span, len(calls), err, c.requests)
		}
	}
}
