package store_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
	"berth.dev/berth/internal/trigger"
	"berth.dev/berth/internal/trigger/event"
)

// testTriggers checks trigger.Store: a trigger round-trips whole and is
// replaced by its id; a name is one per project; a delivery is recorded
// once; a trigger's live runs are its deliveries' live sandboxes; a
// report is claimed by one attempt at a time and due only once its
// sandbox has ended.
func testTriggers(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	e := audit.Event{At: t0, Org: fx.org.ID, Actor: fx.ann.ID, Action: audit.TriggerSet, Target: "default/fix", Outcome: audit.OK}
	tr := trigger.Trigger{
		ID: "trg_one", Org: fx.org.ID, Project: fx.prj.ID, Name: "fix",
		On:   trigger.On{Source: event.SourceGitHub, Kind: event.KindComment, Label: "l", Command: "/berth run"},
		Repo: "github.com/acme/app", Base: "main", Class: "agent", Runner: "claude-code", Model: "m", Role: "author",
		Task: "{{.Title}}", Concurrency: 2, DailyTokens: 1000, DailyUSD: 2.5, OpenPR: true, Session: true, Owner: fx.ann.ID,
		NextAt: t0.Add(time.Hour), CreatedAt: t0, UpdatedAt: t0.Add(time.Second),
	}
	checkAllSet(t, tr)
	if err := st.PutTrigger(ctx, tr, e); err != nil {
		t.Fatal(err)
	}
	if got, err := st.GetTrigger(ctx, tr.ID); err != nil || !cmp.Equal(got, tr) {
		t.Errorf("GetTrigger = %+v, %v; want %+v", got, err, tr)
	}
	tr.Concurrency, tr.OpenPR, tr.Session = 3, false, false
	if err := st.PutTrigger(ctx, tr, e); err != nil {
		t.Fatal(err)
	}
	if got, err := st.TriggerByName(ctx, fx.org.ID, fx.prj.ID, "fix"); err != nil || !cmp.Equal(got, tr) {
		t.Errorf("TriggerByName after a change = %+v, %v", got, err)
	}
	twin := tr
	twin.ID = "trg_two"
	wantErr(t, "a second trigger of the same name", st.PutTrigger(ctx, twin, e), fault.Conflict)
	other := tr
	other.ID, other.Name, other.On.Source = "trg_three", "other", event.SourceWebhook
	if err := st.PutTrigger(ctx, other, e); err != nil {
		t.Fatal(err)
	}
	if ts, err := st.TriggersOn(ctx, event.SourceGitHub, "github.com/acme/app"); err != nil || len(ts) != 1 || ts[0].ID != tr.ID {
		t.Errorf("TriggersOn github = %+v, %v", ts, err)
	}
	if ts, err := st.ListTriggers(ctx, fx.org.ID, fx.prj.ID); err != nil || len(ts) != 2 || ts[0].Name != "fix" {
		t.Errorf("ListTriggers = %+v, %v", ts, err)
	}

	// A schedule is due at its next firing; one replica moves it on.
	nightly := tr
	nightly.ID, nightly.Name, nightly.On = "trg_nightly", "nightly", trigger.On{Source: event.SourceSchedule, Kind: event.KindSchedule, Schedule: "0 3 * * *"}
	nightly.NextAt = t0.Add(3 * time.Hour)
	if err := st.PutTrigger(ctx, nightly, e); err != nil {
		t.Fatal(err)
	}
	if due, err := st.DueSchedules(ctx, t0.Add(time.Hour), 10); err != nil || len(due) != 0 {
		t.Errorf("DueSchedules before its time = %+v, %v", due, err)
	}
	due, err := st.DueSchedules(ctx, t0.Add(3*time.Hour), 10)
	if err != nil || len(due) != 1 || !cmp.Equal(due[0], nightly) {
		t.Fatalf("DueSchedules at its time = %+v, %v; want %+v", due, err, nightly)
	}
	if err := st.AdvanceSchedule(ctx, nightly.ID, nightly.NextAt, t0.Add(27*time.Hour)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "advancing it again from the old firing", st.AdvanceSchedule(ctx, nightly.ID, nightly.NextAt, t0.Add(27*time.Hour)), fault.Conflict)
	if due, _ := st.DueSchedules(ctx, t0.Add(4*time.Hour), 10); len(due) != 0 {
		t.Errorf("an advanced schedule is due: %+v", due)
	}

	live, key := newSandbox(fx, fx.ann, "fix-1", t0)
	mustCreate(t, st, live, key)
	ended, key2 := newSandbox(fx, fx.ann, "fix-2", t0)
	mustCreate(t, st, ended, key2)
	ended = move(t, st, ended, sandbox.StateTerminated, t0.Add(time.Minute))

	// admit sees the trigger's runs live or starting, and its outcome is
	// the delivery's.
	counted := -1
	admit := func(want trigger.Outcome) func(int) (trigger.Outcome, string) {
		return func(live int) (trigger.Outcome, string) { counted = live; return want, string(want) }
	}
	d := trigger.Delivery{Trigger: tr.ID, ID: "d-1", At: t0, Thread: forge.Thread{Kind: forge.ThreadIssue, Number: 7}, URL: "https://x/7"}
	if _, err := st.AddDelivery(ctx, d, admit("")); err != nil || counted != 0 {
		t.Fatalf("the first delivery: counted %d, %v", counted, err)
	}
	_, err = st.AddDelivery(ctx, d, admit(""))
	wantErr(t, "the same delivery again", err, fault.Conflict)
	// d-1 is on its way (recorded, not finished): it counts, for a while.
	if got, err := st.AddDelivery(ctx, trigger.Delivery{Trigger: tr.ID, ID: "d-busy", At: t0.Add(time.Minute)}, admit(trigger.Skipped)); err != nil || counted != 1 || got.Outcome != trigger.Skipped {
		t.Errorf("a delivery while one starts: counted %d, recorded %+v, %v", counted, got, err)
	}
	d.Outcome, d.Sandbox = trigger.Started, live.ID
	if err := st.FinishDelivery(ctx, d); err != nil {
		t.Fatal(err)
	}
	d2 := trigger.Delivery{Trigger: tr.ID, ID: "d-2", At: t0.Add(time.Hour), Sandbox: ended.ID}
	if d2, err = st.AddDelivery(ctx, d2, admit(trigger.Started)); err != nil || counted != 1 {
		t.Fatalf("with one run live: counted %d, %v", counted, err)
	}
	if ds, err := st.Deliveries(ctx, tr.ID, time.Time{}, 10); err != nil || len(ds) != 3 || !cmp.Equal(ds[0], d2) || !cmp.Equal(ds[2], d) {
		t.Errorf("Deliveries = %+v, %v; want the newest first", ds, err)
	}
	if ds, err := st.Deliveries(ctx, tr.ID, t0.Add(2*time.Minute), 10); err != nil || len(ds) != 1 || ds[0].ID != "d-2" {
		t.Errorf("Deliveries since = %+v, %v", ds, err)
	}
	if ids, err := st.LiveRuns(ctx, tr.ID); err != nil || !cmp.Equal(ids, []sandbox.ID{live.ID}) {
		t.Errorf("LiveRuns = %v, %v; want the live one only", ids, err)
	}
	_, err = st.AddDelivery(ctx, trigger.Delivery{Trigger: "trg_none", ID: "x", At: t0}, admit(""))
	wantErr(t, "a delivery to no trigger", err, fault.NotFound)

	for _, sb := range []sandbox.Sandbox{live, ended} {
		if err := st.AddReport(ctx, trigger.Report{Sandbox: sb.ID, Org: fx.org.ID, Repo: tr.Repo, Trigger: tr.ID, Thread: d.Thread, OpenPR: true, Comment: true}); err != nil {
			t.Fatal(err)
		}
	}
	wantErr(t, "a second report", st.AddReport(ctx, trigger.Report{Sandbox: live.ID}), fault.Conflict)
	reports, err := st.DueReports(ctx, t0.Add(time.Hour), 10)
	if err != nil || len(reports) != 1 || reports[0].Sandbox != ended.ID || reports[0].State != trigger.ReportPending || reports[0].Thread != d.Thread {
		t.Fatalf("DueReports = %+v, %v; want the ended sandbox's", reports, err)
	}
	r := reports[0]
	if err := st.ClaimReport(ctx, r, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "a second claim of the same attempt", st.ClaimReport(ctx, r, t0.Add(2*time.Hour)), fault.Conflict)
	if due, _ := st.DueReports(ctx, t0.Add(time.Hour), 10); len(due) != 0 {
		t.Errorf("a claimed report is due again before its next attempt: %+v", due)
	}
	r.Attempts, r.State, r.Change, r.Comments, r.Error = 1, trigger.ReportDone, forge.Change{Number: 3, URL: "https://x/pull/3", Existed: true}, []string{"https://x/7#c"}, ""
	if err := st.SaveReport(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetReport(ctx, ended.ID)
	r.NextAt = t0.Add(2 * time.Hour)
	if err != nil || !cmp.Equal(got, r) {
		t.Errorf("GetReport = %+v, %v; want %+v", got, err, r)
	}
	if due, _ := st.DueReports(ctx, t0.Add(3*time.Hour), 10); len(due) != 0 {
		t.Errorf("a done report is due: %+v", due)
	}
	_, err = st.GetReport(ctx, "sbx_none")
	wantErr(t, "the report of no sandbox", err, fault.NotFound)

	if err := st.DeleteTrigger(ctx, tr.ID, e); err != nil {
		t.Fatal(err)
	}
	_, err = st.GetTrigger(ctx, tr.ID)
	wantErr(t, "a deleted trigger", err, fault.NotFound)
	wantErr(t, "deleting it again", st.DeleteTrigger(ctx, tr.ID, e), fault.NotFound)
}

// testSessionReports checks the reports of a session's runs: each run
// owes its own, kept apart by seq; GetReport reads the latest, Claim and
// Save touch their run's alone; a session's report is due once the
// session waits suspended, as an ended sandbox's is; SessionOfChange finds
// the live session whose first report holds a change.
func testSessionReports(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	const repo = "github.com/acme/app"
	thread := forge.Thread{Kind: forge.ThreadIssue, Number: 7}
	report := func(sb sandbox.Sandbox, seq int) trigger.Report {
		return trigger.Report{Sandbox: sb.ID, Seq: seq, Org: fx.org.ID, Repo: repo, Base: "main", Trigger: "trg_one", Thread: thread,
			OpenPR: seq <= 1, Comment: true, State: trigger.ReportPending}
	}
	add := func(r trigger.Report) {
		t.Helper()
		if err := st.AddReport(ctx, r); err != nil {
			t.Fatalf("AddReport %s run %d: %v", r.Sandbox, r.Seq, err)
		}
	}
	save := func(r trigger.Report) {
		t.Helper()
		if err := st.SaveReport(ctx, r); err != nil {
			t.Fatalf("SaveReport %s run %d: %v", r.Sandbox, r.Seq, err)
		}
	}
	latest := func(sb sandbox.Sandbox, what string, want trigger.Report) {
		t.Helper()
		got, err := st.GetReport(ctx, sb.ID)
		if err != nil {
			t.Fatalf("GetReport %s: %v", what, err)
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("GetReport %s (-want +got):\n%s", what, diff)
		}
	}
	due := func(what string, now time.Time, want ...trigger.Report) {
		t.Helper()
		got, err := st.DueReports(ctx, now, 10)
		if err != nil {
			t.Fatalf("DueReports %s: %v", what, err)
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("DueReports %s (-want +got):\n%s", what, diff)
		}
	}

	sess := newSession(t, st, fx, "session")
	sess = move(t, st, sess, sandbox.StateRunning, t0)
	first, second := report(sess, 0), report(sess, 2)
	add(first)
	first.Seq = 1 // 0 reads as 1
	add(second)
	wantErr(t, "a second report of run 1", st.AddReport(ctx, report(sess, 1)), fault.Conflict)
	wantErr(t, "a second report of run 2", st.AddReport(ctx, report(sess, 2)), fault.Conflict)
	latest(sess, "of a session", second)

	// A non-session sandbox waiting suspended owes its report still: its
	// run is not over.
	plain, key := newSandbox(fx, fx.ann, "plain", t0)
	plain.Purpose, plain.SSHKeys = sandbox.PurposeAgent, nil
	mustCreate(t, st, plain, key)
	plain = move(t, st, plain, sandbox.StateRunning, t0)
	plain = move(t, st, plain, sandbox.StateSuspended, t0.Add(time.Minute))
	plainReport := report(plain, 1)
	add(plainReport)
	due("while the session runs", t0.Add(time.Hour))

	sess = move(t, st, sess, sandbox.StateSuspended, t0.Add(time.Minute))
	due("while the session waits suspended", t0.Add(time.Hour), first, second)

	// Claim and Save touch their run's report alone.
	if err := st.ClaimReport(ctx, first, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "a second claim of run 1's attempt", st.ClaimReport(ctx, first, t0.Add(2*time.Hour)), fault.Conflict)
	due("with run 1's claimed", t0.Add(time.Hour), second)
	first.Attempts, first.NextAt = 1, t0.Add(2*time.Hour)
	first.State, first.Change, first.Comments = trigger.ReportDone, forge.Change{Number: 5, URL: "https://x/pull/5"}, []string{"https://x/7#c"}
	save(first)
	latest(sess, "after run 1's was claimed and saved", second)
	if err := st.ClaimReport(ctx, second, t0.Add(3*time.Hour)); err != nil {
		t.Fatalf("claim run 2's report after run 1's: %v", err)
	}
	second.Attempts, second.NextAt = 1, t0.Add(3*time.Hour)
	second.Error, second.Change = "the forge said no", forge.Change{Number: 9, URL: "https://x/pull/9"}
	save(second)
	latest(sess, "after run 2's was claimed and saved", second)

	// The session follows change 5, which its run 1 opened.
	if got, err := st.SessionOfChange(ctx, repo, 5); err != nil {
		t.Errorf("SessionOfChange of the session's change: %v", err)
	} else if diff := cmp.Diff(first, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("SessionOfChange of the session's change (-want its run 1's report +got):\n%s", diff)
	}
	plainReport.Change = forge.Change{Number: 6}
	save(plainReport)
	gone := newSession(t, st, fx, "gone")
	goneReport := report(gone, 1)
	add(goneReport)
	goneReport.Change = forge.Change{Number: 8}
	save(goneReport)
	move(t, st, gone, sandbox.StateTerminated, t0.Add(time.Minute))
	for _, c := range []struct {
		what   string
		repo   string
		number int
	}{
		{"another change", repo, 4},
		{"another repository", "github.com/acme/other", 5},
		{"no change", repo, 0},
		{"a run 2's change", repo, 9},
		{"a non-session sandbox's change", repo, 6},
		{"an ended session's change", repo, 8},
	} {
		_, err := st.SessionOfChange(ctx, c.repo, c.number)
		wantErr(t, "SessionOfChange of "+c.what, err, fault.NotFound)
	}

	// Given its next task, the session runs again: its pending report
	// waits; once it has ended, it is due.
	sess = move(t, st, sess, sandbox.StateRunning, t0.Add(time.Hour))
	due("while the session runs its next task", t0.Add(4*time.Hour), goneReport)
	sess = move(t, st, sess, sandbox.StateTerminated, t0.Add(2*time.Hour))
	due("once the session has ended", t0.Add(4*time.Hour), goneReport, second)
	_, err := st.SessionOfChange(ctx, repo, 5)
	wantErr(t, "SessionOfChange of an ended session", err, fault.NotFound)
}
