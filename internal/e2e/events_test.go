package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
)

// TestKilledBehindItsBackFailsAtOnce: a sandbox's container killed with
// podman kill, not through berth, is failed within two seconds of the
// kill, saying how it ended, though the gateway sweeps only hourly here:
// the driver's watch of podman's events tells it. berth sandbox ssh then
// says so in berth's words, not podman's.
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

	// The gateway's tunnel, and the CLI before it starts ssh.
	var refused *api.Error
	if _, err := alice.api.Tunnel(ctx, sb.ID, 2222); !errors.As(err, &refused) || refused.Status != http.StatusConflict ||
		!strings.Contains(refused.Message, "sandbox dev is failed (its process exited 137") || strings.Contains(refused.Message, "podman") {
		t.Errorf("a tunnel to the killed sandbox: %v, want 409 in berth's words: the sandbox failed, its process exited 137", err)
	}
	cmd := exec.Command(berthBin, "sandbox", "ssh", "dev", "-i", alice.key, "--", "true")
	cmd.Env, cmd.Dir = alice.env, alice.home
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("berth sandbox ssh into a failed sandbox succeeded")
	}
	if msg := stderr.String(); !strings.Contains(msg, "sandbox dev is failed (its process exited 137") || strings.Contains(msg, "podman") {
		t.Errorf("berth sandbox ssh says %q, want berth's words: the sandbox failed, its process exited 137", msg)
	}
}
