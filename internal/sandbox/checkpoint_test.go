package sandbox_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/sandbox"
)

// withCheckpoints puts the env's service on a checkpointing driver.
func (e *env) withCheckpoints(t *testing.T) *fake.Checkpointing {
	t.Helper()
	c := fake.NewCheckpointing(e.drv)
	e.svc = sandbox.NewService(e.st, c, e.accounts, e.cfg, e.w.Log, e.clock.Now, e.opts...)
	e.reach = e.wayIn(e.svc, nil)
	return c
}

// details lists the audit log's entries of a sandbox with action.
func (e *env) details(t *testing.T, id sandbox.ID, action string) []string {
	t.Helper()
	return e.w.Details(t, id, action)
}

// TestSuspendWithMemory: on a driver that saves a machine's memory, a
// suspend records the checkpoint's size on the row and in the audit log,
// and the resume restores it; the running row has none left.
func TestSuspendWithMemory(t *testing.T) {
	e := newEnv(t)
	c := e.withCheckpoints(t)
	e.run(t)
	ctx := t.Context()
	sb := e.engineer(t, e.alice, "dev")
	e.waitState(t, sb.ID, sandbox.StateRunning)
	if memory, why := e.svc.SuspendKind(sb); !memory {
		t.Fatalf("SuspendKind = stop (%s), want memory", why)
	}

	got, err := e.svc.Suspend(ctx, e.alice, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != sandbox.StateSuspended || got.Checkpoint != 12<<20 {
		t.Fatalf("after suspend: %s with checkpoint %d, want suspended with 12Mi", got.State, got.Checkpoint)
	}
	if d := e.details(t, sb.ID, audit.SandboxCheckpoint); len(d) != 1 || !strings.Contains(d[0], "its memory saved: 12Mi") {
		t.Errorf("audit of the checkpoint: %q", d)
	}
	if d := e.details(t, sb.ID, audit.SandboxExtend); len(d) != 0 {
		t.Errorf("recording the checkpoint's size was audited as an extend: %q", d)
	}
	if _, err := e.svc.Resume(ctx, e.alice, "dev"); err != nil {
		t.Fatal(err)
	}
	got = e.waitState(t, sb.ID, sandbox.StateRunning)
	if got.Checkpoint != 0 || c.Restores() != 1 {
		t.Errorf("after resume: checkpoint %d, %d restores; want none left after one restore", got.Checkpoint, c.Restores())
	}
	if d := e.details(t, sb.ID, audit.SandboxRestore); len(d) != 1 || !strings.Contains(d[0], "restored from its checkpoint (12Mi)") {
		t.Errorf("audit of the restore: %q", d)
	}
}

// TestSuspendWithMemoryFailurePaths: whatever goes wrong leaves a
// suspended sandbox with its volume that a cold start brings back, and
// the audit log says what happened.
func TestSuspendWithMemoryFailurePaths(t *testing.T) {
	e := newEnv(t)
	c := e.withCheckpoints(t)
	e.run(t)
	ctx := t.Context()
	sb := e.engineer(t, e.alice, "dev")
	e.waitState(t, sb.ID, sandbox.StateRunning)

	// The checkpoint fails (a full disk): the machine is stopped instead.
	c.FailNextCheckpoint(errors.New("runsc checkpoint: no space left on device"))
	got, err := e.svc.Suspend(ctx, e.alice, "dev")
	if err != nil {
		t.Fatalf("a suspend whose checkpoint failed: %v, want it suspended all the same", err)
	}
	if got.State != sandbox.StateSuspended || got.Checkpoint != 0 {
		t.Errorf("after a failed checkpoint: %s with checkpoint %d, want suspended without", got.State, got.Checkpoint)
	}
	if m, _ := e.drv.Inspect(ctx, sb.ID); m.Status != sandbox.MachineStopped {
		t.Errorf("after a failed checkpoint the machine is %s, want stopped", m.Status)
	}
	if d := e.details(t, sb.ID, audit.SandboxCheckpoint); len(d) != 1 || !strings.Contains(d[0], "no space left on device") || !strings.Contains(d[0], "stopped instead") {
		t.Errorf("audit of the failed checkpoint: %q", d)
	}
	if _, err := e.svc.Resume(ctx, e.alice, "dev"); err != nil {
		t.Fatal(err)
	}
	e.waitState(t, sb.ID, sandbox.StateRunning)
	if c.Restores() != 0 {
		t.Errorf("a sandbox with no checkpoint recorded was restored %d times, want a cold start", c.Restores())
	}

	// The restore is refused: a cold start, said and audited.
	if _, err := e.svc.Suspend(ctx, e.alice, "dev"); err != nil {
		t.Fatal(err)
	}
	c.ColdNextRestore("runsc did not restore it: urpc method \"containerManager.Restore\" failed: EOF")
	if _, err := e.svc.Resume(ctx, e.alice, "dev"); err != nil {
		t.Fatal(err)
	}
	got = e.waitState(t, sb.ID, sandbox.StateRunning)
	if got.Checkpoint != 0 {
		t.Errorf("after a cold resume the row keeps checkpoint %d", got.Checkpoint)
	}
	if d := e.details(t, sb.ID, audit.SandboxRestore); len(d) != 1 || !strings.Contains(d[0], "could not be restored, so it started from its volume") || !strings.Contains(d[0], "containerManager.Restore") {
		t.Errorf("audit of the refused restore: %q", d)
	}

	// Expired while suspended with its memory: the memory holds the old
	// key, so the resume starts it afresh and the checkpoint goes.
	if _, err := e.svc.Suspend(ctx, e.alice, "dev"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(25 * time.Hour)
	restores := c.Restores()
	if _, err := e.svc.Resume(ctx, e.alice, "dev"); err != nil {
		t.Fatal(err)
	}
	got = e.waitState(t, sb.ID, sandbox.StateRunning)
	if c.Restores() != restores || got.Checkpoint != 0 {
		t.Errorf("a resume after expiry restored (%d → %d) or kept checkpoint %d", restores, c.Restores(), got.Checkpoint)
	}
}

// TestIdleSuspendKeepsMemory: the sweep's idle suspend saves the memory
// too, so an idle sandbox resumes warm.
func TestIdleSuspendKeepsMemory(t *testing.T) {
	e := newEnv(t, func(c *sandbox.Config) { c.IdleSuspend = 30 * time.Minute })
	c := e.withCheckpoints(t)
	e.run(t)
	ctx := t.Context()
	sb := e.engineer(t, e.alice, "quiet")
	e.waitState(t, sb.ID, sandbox.StateRunning)
	e.clock.Advance(31 * time.Minute)
	// This sweep, or the one the machine's start event set off (the fake
	// driver tells it, and it may come after the clock moved), suspends
	// it: either is the idle suspend.
	if _, err := e.svc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	got := e.waitState(t, sb.ID, sandbox.StateSuspended)
	if got.Checkpoint != 12<<20 || !strings.HasPrefix(got.Reason, "idle for 30m") {
		t.Errorf("an idle suspend recorded checkpoint %d (%q), want its memory saved (12Mi), idle", got.Checkpoint, got.Reason)
	}
	if _, err := e.svc.Resume(ctx, e.alice, "quiet"); err != nil {
		t.Fatal(err)
	}
	e.waitState(t, sb.ID, sandbox.StateRunning)
	if c.Restores() != 1 {
		t.Errorf("the idle sandbox was restored %d times at resume, want once", c.Restores())
	}
}
