package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
)

// idleClassYAML is an agent class whose sessions wait at most a minute
// (session_idle's least) for their next task.
const idleClassYAML = `sandboxes:
  - name: talk
    image: localhost/berth-sandbox:latest
    isolation: standard
    cpu: "1"
    memory: 1Gi
    default_ttl: 1h
    max_ttl: 2h
    purposes: [agent]
    session_idle: 1m
`

// TestSessionIdleEndToEnd: a session whose first task is done waits
// suspended; once it has waited its class's session_idle the sweep
// terminates it, saying why, and nothing of it is left: no machine, no
// volume, no checkout, no home. Its run stays as it ended.
func TestSessionIdleEndToEnd(t *testing.T) {
	g := startAgentGateway(t, inferenceYAML, "claude-code")
	if !imageBuilt(g.root, agentImage("claude-code")) {
		t.Skip("the claude-code image is not built")
	}
	g.seedRepo("acme/app")
	classes := filepath.Join(t.TempDir(), "talk.yaml")
	if err := os.WriteFile(classes, []byte(idleClassYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	g.berth("sandbox", "apply", "-f", classes)
	if list := string(g.berth("sandbox", "classes")); !strings.Contains(list, " 1m ") {
		t.Fatalf("berth sandbox classes does not show talk's session_idle:\n%s", list)
	}
	ctx := context.Background()
	sb, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: "idle-talk", Class: "talk", Purpose: "agent", Repo: "acme/app",
		Task: "Write f.txt and commit it.", Runner: "claude-code", Session: true})
	if err != nil {
		t.Fatal(err)
	}
	first := g.waitState(g.operator, sb.ID, "suspended", 4*time.Minute)
	waiting := time.Now()
	if first.Run == nil || first.Run.State != "succeeded" {
		log, _ := g.berthErr("sandbox", "logs", "--raw", sb.Name)
		t.Fatalf("after task 1: %s (%s), run %+v; log:\n%s", first.State, first.Reason, first.Run, log)
	}
	for _, dir := range []string{string(sb.ID), string(sb.ID) + ".home"} {
		if _, err := os.Stat(filepath.Join(g.dataDir, "work", dir)); err != nil {
			t.Errorf("the waiting session's %s: %v, want it kept for the next task", dir, err)
		}
	}

	ended := g.waitState(g.operator, sb.ID, "terminated", 2*time.Minute)
	if waited := time.Since(waiting); waited < 55*time.Second {
		t.Errorf("the session ended %s after its task, before its class's session_idle of 1m", waited)
	}
	if !strings.HasPrefix(ended.Reason, "idle for ") || !strings.HasSuffix(ended.Reason, ", past its class's session_idle (1m)") {
		t.Errorf("reason %q, want idle for …, past its class's session_idle (1m)", ended.Reason)
	}
	if c, v := g.waitGone(string(sb.ID), 10*time.Second); c != "" || v != "" {
		t.Errorf("left behind: containers %q volumes %q", c, v)
	}
	// The sweep removes them once the machine is gone, a moment after.
	for _, dir := range []string{string(sb.ID), string(sb.ID) + ".home"} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := os.Stat(filepath.Join(g.dataDir, "work", dir))
			if os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s is still there 10s after the machine went: %v", dir, err)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	runs, err := g.operator.Runs(ctx, string(sb.ID))
	if err != nil || len(runs) != 1 || runs[0].State != "succeeded" {
		t.Errorf("runs after the idle end: %+v %v; want task 1's, succeeded", runs, err)
	}
}
