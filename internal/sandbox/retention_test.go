package sandbox_test

import (
	"errors"
	"testing"
	"time"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/sandbox"
)

// TestRetentionDeletesEndedSandboxes: the sweep deletes a sandbox that
// ended longer ago than the retention, with its key; a live one stays,
// however old, and so does one that ended within the retention.
func TestRetentionDeletesEndedSandboxes(t *testing.T) {
	const retention = 90 * 24 * time.Hour
	e := newEnv(t, func(c *sandbox.Config) { c.Retention = retention })
	e.run(t)
	ctx := t.Context()
	gone := e.engineer(t, e.alice, "gone")
	kept := e.engineer(t, e.alice, "kept")
	late := e.engineer(t, e.bob, "late")
	for _, id := range []sandbox.ID{gone.ID, kept.ID, late.ID} {
		e.waitState(t, id, sandbox.StateRunning)
	}
	if _, err := e.svc.Terminate(ctx, e.alice, "gone"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(retention - time.Hour)
	if _, err := e.svc.Terminate(ctx, e.bob, "late"); err != nil {
		t.Fatal(err)
	}
	if res, err := e.svc.Sweep(ctx); err != nil || res.Deleted != 0 {
		t.Fatalf("sweep within the retention deleted %d (%v), want 0", res.Deleted, err)
	}
	e.clock.Advance(2 * time.Hour)
	res, err := e.svc.Sweep(ctx)
	if err != nil || res.Deleted != 1 {
		t.Fatalf("sweep past the retention deleted %d (%v), want 1", res.Deleted, err)
	}
	if _, err := e.st.GetSandbox(ctx, gone.ID); !errors.Is(err, fault.NotFound) {
		t.Errorf("the sandbox ended past the retention: %v, want it deleted", err)
	}
	if _, err := e.st.GetKey(ctx, gone.KeyID); err == nil {
		t.Error("its key is still in the database")
	}
	all, _, _ := e.svc.List(ctx, e.operator, sandbox.ListOptions{All: true})
	if len(all) != 2 {
		t.Errorf("after retention %d sandboxes listed, want 2 (the old live one, the recently ended one)", len(all))
	}
	if got, _ := e.st.GetSandbox(ctx, kept.ID); got.State != sandbox.StateExpired {
		t.Errorf("the old live sandbox is %s, want expired and kept", got.State)
	}
}
