package sandbox_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/sandbox"
)

// TestSweepEndsIdleSessions: a session suspended longer than its class's
// session_idle is terminated by the sweep, saying so, with its machine
// and volume; one idle less, one whose task still runs, one of a class
// without session_idle or of a deleted class, and an engineer sandbox of
// a class with session_idle, are kept.
func TestSweepEndsIdleSessions(t *testing.T) {
	e := newEnv(t)
	e.run(t)
	ctx := t.Context()
	classOf := func(spec class.Spec) class.Class {
		t.Helper()
		c, err := class.Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// talk is for both purposes: an engineer's sandbox of it is no session.
	talk := classOf(class.Spec{Name: "talk", Image: "localhost/berth-agent:1", Isolation: "standard", DefaultTTL: "4h", MaxTTL: "8h", SessionIdle: "30m"})
	gone := classOf(class.Spec{Name: "gone", Image: "localhost/berth-agent:1", Isolation: "standard", DefaultTTL: "4h", MaxTTL: "8h",
		Purposes: []string{"agent"}, SessionIdle: "30m"})
	if _, err := e.st.PutClasses(ctx, e.acme.ID, []class.Class{talk, gone}); err != nil {
		t.Fatal(err)
	}
	session := func(name, cls string) sandbox.Sandbox {
		t.Helper()
		sb, err := e.svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: name, Purpose: "agent", Class: cls, Repo: "acme/app",
			Task: "first", Session: true, TTL: "2h"}) // the agent class's longest: no expiry here
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		return sb
	}
	idle, fresh, busy := session("idle", "talk"), session("fresh", "talk"), session("busy", "talk")
	plain, orphan := session("plain", "agent"), session("orphan", "gone") // agent: no session_idle
	dev, err := e.svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: "dev", Class: "talk", SSHKeys: []string{testKey}})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range []sandbox.Sandbox{idle, fresh, busy, plain, orphan, dev} {
		e.waitState(t, sb.ID, sandbox.StateRunning)
	}
	if err := e.classes.Delete(ctx, e.admin, "", "gone"); err != nil {
		t.Fatal(err)
	}
	// The first task of each session ends (as the runs service ends it),
	// at different times; busy's goes on.
	endTask := func(sb sandbox.Sandbox) {
		t.Helper()
		if err := e.svc.EndTask(ctx, sb.ID, "task 1 finished", time.Time{}); err != nil {
			t.Fatalf("end %s's task: %v", sb.Name, err)
		}
		e.waitState(t, sb.ID, sandbox.StateSuspended)
	}
	e.clock.Advance(10 * time.Minute)
	for _, sb := range []sandbox.Sandbox{idle, plain, orphan} {
		endTask(sb)
	}
	suspendedAt := e.clock.Now()
	if _, err := e.svc.Suspend(ctx, e.alice, "dev"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(20 * time.Minute)
	endTask(fresh)
	if got, _ := e.st.GetSandbox(ctx, idle.ID); !got.LastRanUntil.Equal(suspendedAt) {
		t.Errorf("idle's LastRanUntil %v, want %v, when its task ended", got.LastRanUntil, suspendedAt)
	}

	// idle 29 minutes after its task: nothing is past its session_idle.
	e.clock.Advance(9 * time.Minute)
	res, err := e.svc.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Ended) != 0 {
		t.Fatalf("sweep 29m after a task ended %v, want nothing before the class's session_idle of 30m", res.Ended)
	}

	// idle 35 minutes: it ends; fresh (15 minutes) waits on.
	e.clock.Advance(6 * time.Minute)
	res, err = e.svc.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Ended, []sandbox.ID{idle.ID}) || len(res.Errors) != 0 {
		t.Fatalf("sweep 35m after a task ended %v (errors %v), want only idle (%s)", res.Ended, res.Errors, idle.ID)
	}
	got := e.waitState(t, idle.ID, sandbox.StateTerminated)
	if want := "idle for 35m, past its class's session_idle (30m)"; got.Reason != want || got.EndedAt.IsZero() {
		t.Errorf("idle session: reason %q, ended %v; want %q, ended", got.Reason, got.EndedAt, want)
	}
	if e.drv.Has(idle.ID) {
		t.Error("an idle session's machine and volume outlived it")
	}
	if rt := got.RunningTime(e.clock.Now()); rt != 10*time.Minute {
		t.Errorf("idle session charged %v, want its task's 10m only", rt)
	}
	for _, k := range []struct {
		sb    sandbox.Sandbox
		state sandbox.State
		why   string
	}{
		{fresh, sandbox.StateSuspended, "idle less than session_idle"},
		{busy, sandbox.StateRunning, "its task still runs"},
		{plain, sandbox.StateSuspended, "its class has no session_idle"},
		{orphan, sandbox.StateSuspended, "its class is deleted"},
		{dev, sandbox.StateSuspended, "an engineer sandbox is no session"},
	} {
		if got, err := e.st.GetSandbox(ctx, k.sb.ID); err != nil || got.State != k.state {
			t.Errorf("%s (%s): %s %v, want %s", k.sb.Name, k.why, got.State, err, k.state)
		}
	}
	entries, _, err := e.st.ListAudit(ctx, audit.Filter{}, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(entries, func(a audit.Event) bool {
		return a.Sandbox == string(idle.ID) && a.Actor == "" && strings.Contains(a.Detail, "→ terminated") && strings.Contains(a.Detail, "session_idle")
	}) {
		t.Errorf("the idle session's end is not in the audit log as berth's, with its reason")
	}

	// Later fresh is past it too; busy, running all along, is not idle.
	e.clock.Advance(20 * time.Minute)
	res, err = e.svc.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Ended, []sandbox.ID{fresh.ID}) {
		t.Fatalf("sweep 35m after fresh's task ended %v, want only fresh (%s)", res.Ended, fresh.ID)
	}
	if got := e.waitState(t, fresh.ID, sandbox.StateTerminated); !strings.HasPrefix(got.Reason, "idle for 35m,") {
		t.Errorf("fresh: reason %q", got.Reason)
	}
	if got, _ := e.st.GetSandbox(ctx, busy.ID); got.State != sandbox.StateRunning {
		t.Errorf("busy, running for 65m: %s (%s), want running", got.State, got.Reason)
	}
}
