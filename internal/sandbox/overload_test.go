package sandbox_test

import (
	"testing"
	"time"

	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
	"berth.dev/berth/internal/store/storetest"
)

// TestStartWaitsOutAWriterStall: a machine that started while the
// database's writers stalled (another process holding the SQLite file's
// write lock far longer than any write waits) is written running once the
// stall ends: the state write waits, it is not dropped for the sweep to
// repair. Before, the write failed with SQLITE_BUSY at the busy timeout
// and the sandbox stayed starting ("sandbox started but its state cannot
// be written").
func TestStartWaitsOutAWriterStall(t *testing.T) {
	const wait = 50 * time.Millisecond
	e := newEnvOn(t, []store.Option{store.WithWriteWait(wait)})
	letStart := e.drv.Hold()
	e.run(t)
	sb := e.engineer(t, e.alice, "web")

	unlock := storetest.LockSQLite(t, e.path)
	letStart()
	for deadline := time.Now().Add(10 * time.Second); !e.drv.Has(sb.ID); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the machine never started")
		}
	}
	// The machine is up and its state write is waiting for the lock.
	<-time.After(20 * wait)
	if got, err := e.st.GetSandbox(t.Context(), sb.ID); err != nil || got.State != sandbox.StateStarting {
		t.Fatalf("during the stall: %s, %v; want still starting", got.State, err)
	}
	unlock()
	e.waitState(t, sb.ID, sandbox.StateRunning)
}
