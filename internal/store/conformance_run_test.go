package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
)

// ignoreTelemetryState compares runs by what their telemetry says, not
// by the parser's state, which is never stored.
var ignoreTelemetryState = cmpopts.IgnoreUnexported(runner.Telemetry{})

// newSession creates an agent sandbox of fx's ann that is a session.
func newSession(t *testing.T, st *store.Store, fx fixture, name string) sandbox.Sandbox {
	t.Helper()
	sb, key := newSandbox(fx, fx.ann, name, t0)
	sb.Purpose, sb.Session, sb.SSHKeys = sandbox.PurposeAgent, true, nil
	mustCreate(t, st, sb, key)
	return sb
}

// wantRuns fails unless ListRuns of id is want.
func wantRuns(t *testing.T, st *store.Store, id sandbox.ID, what string, want []agentrun.Run) {
	t.Helper()
	got, err := st.ListRuns(t.Context(), id)
	if err != nil {
		t.Fatalf("ListRuns %s: %v", what, err)
	}
	if diff := cmp.Diff(want, got, ignoreTelemetryState); diff != "" {
		t.Errorf("ListRuns %s (-want +got):\n%s", what, diff)
	}
}

// wantLatest fails unless GetRun of id is want.
func wantLatest(t *testing.T, st *store.Store, id sandbox.ID, what string, want agentrun.Run) {
	t.Helper()
	got, err := st.GetRun(t.Context(), id)
	if err != nil {
		t.Fatalf("GetRun %s: %v", what, err)
	}
	if diff := cmp.Diff(want, got, ignoreTelemetryState); diff != "" {
		t.Errorf("GetRun %s (-want +got):\n%s", what, diff)
	}
}

// testRunSessions: a session's runs are kept apart by their seq. GetRun
// reads the latest, ListRuns every one in order; a run's output and its
// claimed end touch the latest alone, and a run written again leaves the
// others as they were.
func testRunSessions(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	sb := newSession(t, st, fx, "session")
	runs, err := st.ListRuns(ctx, sb.ID)
	if err != nil || runs == nil || len(runs) != 0 {
		t.Fatalf("ListRuns before any = %#v, %v; want an empty list", runs, err)
	}

	// The first run is left running without an end (as if its report
	// were lost): only the latest run's end may be claimed all the same.
	first := agentrun.Run{Sandbox: sb.ID, Seq: 1, Task: "fix the build", Runner: "pi", Model: "m", State: agentrun.RunRunning,
		Branch: "berth/session", Commit: "c1", Lines: 4, StartedAt: t0}
	first.Telemetry.Usage.Input, first.Telemetry.CostUSD = 100, 0.25
	second := agentrun.Run{Sandbox: sb.ID, Seq: 2, Task: "now add a test", Onto: "c1", Runner: "pi", Model: "m2",
		State: agentrun.RunRunning, StartedAt: t0.Add(time.Hour)}
	for _, r := range []agentrun.Run{first, second} {
		if err := st.PutRun(ctx, r); err != nil {
			t.Fatalf("PutRun %d: %v", r.Seq, err)
		}
	}
	wantLatest(t, st, sb.ID, "of two runs", second)
	wantRuns(t, st, sb.ID, "of two runs", []agentrun.Run{first, second})

	out := second
	out.Lines, out.Ignored, out.Outputs = 7, 1, []string{"pr: 8"}
	out.State, out.Error = agentrun.RunFailed, "not saved by PutRunOutput"
	if err := st.PutRunOutput(ctx, out); err != nil {
		t.Fatalf("PutRunOutput: %v", err)
	}
	end := t0.Add(2 * time.Hour)
	if err := st.ClaimRunEnd(ctx, sb.ID, end); err != nil {
		t.Fatalf("ClaimRunEnd: %v", err)
	}
	// The first run is still running without an end, but it is not the
	// latest: nothing is left to claim.
	wantErr(t, "ClaimRunEnd again", st.ClaimRunEnd(ctx, sb.ID, end.Add(time.Minute)), fault.Conflict)
	second.Lines, second.Ignored, second.Outputs, second.EndedAt = 7, 1, []string{"pr: 8"}, end
	wantRuns(t, st, sb.ID, "after the latest's output and end", []agentrun.Run{first, second})

	// Run 1 written again (its close, late) leaves run 2 as it was.
	first.State, first.Exited, first.EndedAt, first.Commit = agentrun.RunSucceeded, true, t0.Add(30*time.Minute), "c1b"
	if err := st.PutRun(ctx, first); err != nil {
		t.Fatalf("PutRun 1 again: %v", err)
	}
	wantRuns(t, st, sb.ID, "after run 1 was written again", []agentrun.Run{first, second})
	wantLatest(t, st, sb.ID, "after run 1 was written again", second)

	// Another sandbox's runs are its own.
	other := newSession(t, st, fx, "other")
	wantRuns(t, st, other.ID, "of another sandbox", []agentrun.Run{})
	_, err = st.GetRun(ctx, other.ID)
	wantErr(t, "GetRun of another sandbox", err, fault.NotFound)
	wantErr(t, "ClaimRunEnd of another sandbox", st.ClaimRunEnd(ctx, other.ID, end), fault.Conflict)
}

// testRunWithoutSeq: a run from a caller written before sessions (Seq 0)
// is its sandbox's run 1, whichever call writes it.
func testRunWithoutSeq(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	sb, key := newSandbox(fx, fx.ann, "task", t0)
	sb.Purpose = sandbox.PurposeAgent
	mustCreate(t, st, sb, key)

	run := agentrun.Run{Sandbox: sb.ID, Runner: "pi", Model: "m", State: agentrun.RunRunning, StartedAt: t0}
	if err := st.PutRun(ctx, run); err != nil {
		t.Fatalf("PutRun: %v", err)
	}
	run.Lines = 3
	if err := st.PutRunOutput(ctx, run); err != nil {
		t.Fatalf("PutRunOutput: %v", err)
	}
	run.State, run.Exited, run.EndedAt = agentrun.RunSucceeded, true, t0.Add(time.Minute)
	if err := st.PutRun(ctx, run); err != nil {
		t.Fatalf("PutRun again: %v", err)
	}
	run.Seq = 1
	wantRuns(t, st, sb.ID, "of a run put without its seq", []agentrun.Run{run})
	wantLatest(t, st, sb.ID, "of a run put without its seq", run)
}

// testDeleteEndedRuns: deleting an ended sandbox deletes every run of it,
// and no other sandbox's.
func testDeleteEndedRuns(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	gone, kept := newSession(t, st, fx, "gone"), newSession(t, st, fx, "kept")
	for _, r := range []agentrun.Run{
		{Sandbox: gone.ID, Seq: 1, Task: "one", Runner: "pi", State: agentrun.RunSucceeded, StartedAt: t0},
		{Sandbox: gone.ID, Seq: 2, Task: "two", Runner: "pi", State: agentrun.RunSucceeded, StartedAt: t0},
		{Sandbox: kept.ID, Seq: 1, Task: "one", Runner: "pi", State: agentrun.RunSucceeded, StartedAt: t0},
	} {
		if err := st.PutRun(ctx, r); err != nil {
			t.Fatalf("PutRun %s %d: %v", r.Sandbox, r.Seq, err)
		}
	}
	move(t, st, gone, sandbox.StateTerminated, t0.Add(time.Hour))
	ids, err := st.DeleteEnded(ctx, t0.Add(2*time.Hour))
	if err != nil || len(ids) != 1 || ids[0] != gone.ID {
		t.Fatalf("DeleteEnded = %v, %v; want [%s]", ids, err, gone.ID)
	}
	wantRuns(t, st, gone.ID, "of a deleted sandbox", []agentrun.Run{})
	if _, err := st.GetRun(ctx, gone.ID); !errors.Is(err, fault.NotFound) {
		t.Errorf("GetRun of a deleted sandbox = %v, want fault.NotFound", err)
	}
	if runs, err := st.ListRuns(ctx, kept.ID); err != nil || len(runs) != 1 {
		t.Errorf("ListRuns of a sandbox kept = %d runs, %v; want 1", len(runs), err)
	}
}
