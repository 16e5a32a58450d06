package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestKilledBehindItsBackFailsAtOnce: a sandbox's container killed with
// podman kill, not through berth, is failed within two seconds of the
// kill, saying how it ended, though the gateway sweeps only hourly here:
// the driver's watch of podman's events tells it.
func TestKilledBehindItsBackFailsAtOnce(t *testing.T) {
	g := startGateway(t, "BERTH_SWEEP_INTERVAL=1h")
	ctx := context.Background()
	alice := g.newMember(t, "alice")
	sb := alice.engineer(g, "dev")

	killed := time.Now()
	g.podman("kill", "berth-"+sb.ID)
	deadline := killed.Add(2 * time.Second)
	for {
		got, err := alice.api.Sandbox(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State == "failed" {
			if !strings.Contains(got.Reason, "exited 137") {
				t.Errorf("reason %q does not say the process was killed (137)", got.Reason)
			}
			t.Logf("failed %v after the kill", time.Since(killed).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox is %s (%s) 2s after its container was killed, want failed", got.State, got.Reason)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
