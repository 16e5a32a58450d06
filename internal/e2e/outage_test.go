package e2e_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
)

// TestAgentExitDuringAnOutageIsChargedToItsExit: an agent run's container
// exits while the gateway is down (killed), and the gateway comes back
// seconds later. It finishes the run, and the sandbox's running time ends
// at the container's exit as podman tells it (FinishedAt), not at the
// restart. The run is a Kelos-shaped image whose setup command sleeps:
// it needs no model, so it can end with no gateway to call.
func TestAgentExitDuringAnOutageIsChargedToItsExit(t *testing.T) {
	g := startAgentGateway(t, inferenceYAML, "claude-code")
	g.kelosClass("slow", `    setup_command: ["sleep", "6"]`)
	g.seedRepo("acme/app")
	ctx := context.Background()
	sb, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: "slow", Class: "slow", Purpose: "agent", Repo: "acme/app", Task: "wait"})
	if err != nil {
		t.Fatal(err)
	}
	g.waitState(g.operator, sb.ID, "running", 2*time.Minute)
	g.kill()

	// The container ends by itself while nothing watches it.
	name := "berth-" + sb.ID
	var finished time.Time
	for deadline := time.Now().Add(time.Minute); ; {
		var got []struct {
			State struct {
				Status     string
				FinishedAt time.Time
			}
		}
		if err := json.Unmarshal([]byte(g.podman("inspect", "--format", "json", name)), &got); err != nil || len(got) != 1 {
			t.Fatalf("podman inspect %s: %v", name, err)
		}
		if got[0].State.Status == "exited" {
			finished = got[0].State.FinishedAt
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run's container is still %s a minute after the gateway went down", got[0].State.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(5 * time.Second) // the outage goes on after the exit
	g.start()

	end := g.waitEnded(sb.ID, 2*time.Minute)
	if end.State != "terminated" || end.Run == nil || end.Run.State != "succeeded" {
		t.Fatalf("sandbox %s (%s), run %+v", end.State, end.Reason, end.Run)
	}
	st, err := store.Open(ctx, filepath.Join(g.dataDir, "berth.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	row, err := st.GetSandbox(ctx, sandbox.ID(sb.ID))
	if err != nil {
		t.Fatal(err)
	}
	if got := row.FirstRan.Add(row.Ran); !row.RunningSince.IsZero() || got.Sub(finished).Abs() > time.Second {
		t.Errorf("its running time ends at %v (%v after it began), want at the container's exit %v (off by %v)",
			got, row.Ran, finished, got.Sub(finished))
	}
}
