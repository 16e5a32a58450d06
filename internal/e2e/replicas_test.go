package e2e_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/store/storetest"
)

// startReplica starts a `berth serve` on the fake driver and the
// PostgreSQL database url, with a data directory of its own: a replica.
// The first one (boot) bootstraps the deployment; the others use its key.
func startReplica(t testing.TB, url string, boot *gateway, extra ...string) *gateway {
	t.Helper()
	g, dir, classes, port := newGateway(t)
	g.env = append(os.Environ(),
		"HOME="+dir,
		"BERTH_DATA_DIR="+g.dataDir,
		"BERTH_DATABASE_URL="+url,
		"BERTH_ADDR=127.0.0.1:"+port,
		"BERTH_URL="+g.url,
		"BERTH_SANDBOX_DRIVER=fake",
		"BERTH_SANDBOXES_FILE="+classes,
		"BERTH_SWEEP_INTERVAL=200ms",
		"BERTH_TEST_MIN_TTL=2s",
		"BERTH_LOG_LEVEL=debug",
	)
	g.env = append(g.env, extra...)
	g.start()
	t.Cleanup(g.stop)
	if boot == nil {
		out := g.berth("admin", "bootstrap", "-o", "json")
		var b api.Bootstrap
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatalf("bootstrap: %v: %s", err, out)
		}
		g.key = b.Key.Secret
	} else {
		g.key = boot.key
	}
	g.operator = client.New(g.url, g.key, nil)
	return g
}

// leads reports whether a replica's log says it leads the sweep now.
func (g *gateway) leads() bool {
	log := g.log.String()
	return strings.LastIndex(log, "this replica leads the sweep") > strings.LastIndex(log, "this replica no longer leads the sweep")
}

// TestReplicasOnPostgres runs two gateways on one PostgreSQL database:
// creates spread over both never pass a quota, exactly one sweeps, and
// when that one is killed the other takes the sweep over.
func TestReplicasOnPostgres(t *testing.T) {
	url := storetest.PostgresURL(t)
	a := startReplica(t, url, nil)
	b := startReplica(t, url, a)
	ctx := t.Context()

	// Creates spread over both replicas at once, against an organisation
	// limit of 10.
	const limit, creates = 10, 50
	who, err := a.operator.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	org := who.Organisation.ID
	n := limit
	if _, err := a.operator.SetGuardrail(ctx, org, "", api.Guardrail{MaxSandboxes: &n}); err != nil {
		t.Fatal(err)
	}
	var (
		wg               sync.WaitGroup
		mu               sync.Mutex
		admitted, denied int
	)
	for i := range creates {
		c := []*gateway{a, b}[i%2].operator
		wg.Go(func() {
			_, err := c.CreateSandbox(ctx, api.CreateSandbox{Name: fmt.Sprintf("q%d", i), Class: "standard", SSHKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl e2e"}})
			mu.Lock()
			defer mu.Unlock()
			var apiErr *api.Error
			switch {
			case err == nil:
				admitted++
			case errors.As(err, &apiErr) && apiErr.Code == api.CodeQuotaExceeded:
				denied++
			default:
				t.Errorf("create q%d: %v", i, err)
			}
		})
	}
	wg.Wait()
	live, err := b.operator.Sandboxes(ctx, client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if admitted != limit || denied != creates-limit || len(live) != limit {
		t.Fatalf("%d creates over two replicas: %d admitted, %d refused, %d live; want %d, %d, %d",
			creates, admitted, denied, len(live), limit, creates-limit, limit)
	}
	for _, sb := range live {
		if _, err := a.operator.Terminate(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
	}

	// Exactly one replica leads the sweep: a, which started first.
	waitFor(t, "a to lead the sweep", 10*time.Second, a.leads)
	if b.leads() {
		t.Fatal("both replicas lead the sweep")
	}

	// Kill the leader as a crash would. b takes the sweep over, and its
	// sweep expires a sandbox created on it after the kill.
	a.kill()
	waitFor(t, "b to lead the sweep after a was killed", 10*time.Second, b.leads)
	sb, err := b.operator.CreateSandbox(ctx, api.CreateSandbox{Name: "short", Class: "standard", TTL: "2s",
		SSHKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl e2e"}})
	if err != nil {
		t.Fatal(err)
	}
	b.waitState(b.operator, sb.ID, "expired", 15*time.Second)
}

// waitFor polls cond until it holds, failing t after within.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
