package store_test

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
	"berth.dev/berth/internal/store/storetest"
)

func TestReplicaOnSQLite(t *testing.T) {
	st := openStore(t, store.DefaultPath(t.TempDir()))
	if r, err := st.Replica(t.Context(), slog.New(slog.DiscardHandler)); r != nil || err != nil {
		t.Fatalf("Replica on SQLite = %v, %v; want nil, nil: one gateway owns an SQLite database", r, err)
	}
}

// TestPostgresReplicas opens one PostgreSQL database as two replicas of
// the gateway would: each Store has its own connections.
func TestPostgresReplicas(t *testing.T) {
	url := storetest.PostgresURL(t)
	var (
		stores [2]*store.Store
		wg     sync.WaitGroup
	)
	// Replicas starting together migrate once between them.
	for i := range stores {
		wg.Go(func() { stores[i] = openStore(t, url) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	a, b := stores[0], stores[1]

	t.Run("DeploymentID", func(t *testing.T) {
		var ids [2]string
		var errs [2]error
		var wg sync.WaitGroup
		for i, st := range stores {
			wg.Go(func() { ids[i], errs[i] = st.DeploymentID(t.Context()) })
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil || ids[0] != ids[1] {
			t.Fatalf("DeploymentID on two replicas = %q, %v and %q, %v; want one id", ids[0], errs[0], ids[1], errs[1])
		}
	})

	t.Run("ConcurrentAdmission", func(t *testing.T) {
		// 50 creates split between the replicas against a limit of 10.
		ctx := t.Context()
		fx := newFixture(t, a, "acme")
		const limit, callers = 10, 50
		maxLive := limit
		if err := a.PutGuardrail(ctx, fx.org.ID, "", guardrail.Guardrail{MaxSandboxes: &maxLive}); err != nil {
			t.Fatalf("PutGuardrail: %v", err)
		}
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for i := range callers {
			st := stores[i%2]
			admit := admitOrg(t, st, fx.org.ID)
			wg.Go(func() {
				sb, key := newSandbox(fx, fx.bob, fmt.Sprintf("sb-%d", i), t0.Add(time.Duration(i)*time.Millisecond))
				errs[i] = st.CreateSandbox(ctx, sb, key, admit)
			})
		}
		wg.Wait()
		admitted := 0
		for i, err := range errs {
			switch {
			case err == nil:
				admitted++
			case !errors.Is(err, fault.Exceeded):
				t.Errorf("create %d: %v", i, err)
			}
		}
		live, err := b.ListSandboxes(ctx, sandbox.Filter{Org: fx.org.ID})
		if err != nil {
			t.Fatalf("ListSandboxes: %v", err)
		}
		if admitted != limit || len(live) != limit {
			t.Errorf("%d admitted, %d live; want %d and %d", admitted, len(live), limit, limit)
		}
	})
}
