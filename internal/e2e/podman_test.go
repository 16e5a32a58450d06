// Package e2e_test drives the real berth binary end to end: `berth serve`
// as a process on the podman driver, the CLI and the API against it, real
// containers, and the real OpenSSH client into them. It runs when
// BERTH_TEST_PODMAN names a podman root holding the sandbox image.
package e2e_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
)

// TestEngineerSandbox is the podman issue's acceptance: create with an ssh
// key → running → a real ssh runs a command as the non-root user with no
// capabilities → a file in HOME survives suspend and resume → extend →
// terminate leaves no container and no volume.
func TestEngineerSandbox(t *testing.T) {
	g := startGateway(t)
	ctx := context.Background()
	key, pub := sshKey(t)
	sb, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: "dev", Class: "standard", SSHKeys: []string{pub}})
	if err != nil {
		t.Fatal(err)
	}
	sb = g.waitState(g.operator, sb.ID, "running", 2*time.Minute)

	ip := g.ip(sb.ID)
	got := lines(ssh(t, key, ip, "id -u; id -un; grep CapEff /proc/self/status; echo $BERTH_SANDBOX_NAME; echo kept > ~/kept.txt"))
	want := []string{"1001", "berth", "CapEff:\t0000000000000000", "dev"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("in the sandbox: %q, want %q", got, want)
	}

	if _, err := g.operator.Suspend(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if c, _ := g.objects(sb.ID); !stopped(c) {
		t.Errorf("after suspend the container is %q, want exited", c)
	}
	if _, err := g.operator.Resume(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	g.waitState(g.operator, sb.ID, "running", 2*time.Minute)
	if got := ssh(t, key, g.ip(sb.ID), "cat ~/kept.txt"); got != "kept" {
		t.Errorf("after suspend and resume ~/kept.txt holds %q, want kept", got)
	}

	ext, err := g.operator.Extend(ctx, sb.ID, "3h")
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(ext.ExpiresAt); d < 2*time.Hour+58*time.Minute || d > 3*time.Hour {
		t.Errorf("extend 3h: expires in %v", d)
	}
	if _, err := g.operator.Terminate(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if c, v := g.objects(sb.ID); c != "" || v != "" {
		t.Errorf("terminate left containers %q and volumes %q", c, v)
	}
}

// TestExpiry: the sweep suspends an engineer sandbox whose lifetime ended
// (its volume kept, its key revoked) and, when the gateway was down across
// the expiry, does it at start-up.
func TestExpiry(t *testing.T) {
	g := startGateway(t)
	ctx := context.Background()
	_, pub := sshKey(t)
	sb, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: "short", Class: "standard", TTL: "8s", SSHKeys: []string{pub}})
	if err != nil {
		t.Fatal(err)
	}
	g.waitState(g.operator, sb.ID, "running", 2*time.Minute)
	got := g.waitState(g.operator, sb.ID, "expired", 30*time.Second)
	// The row says expired first (its key is revoked at once); the machine
	// stops right after.
	if c, v := g.waitStopped(sb.ID, 10*time.Second); !stopped(c) || v == "" {
		t.Errorf("expired engineer sandbox: container %q volume %q, want it stopped with its volume", c, v)
	}
	if got.RunningSeconds > 9 {
		t.Errorf("charged %ds for an 8s lifetime", got.RunningSeconds)
	}

	// An agent sandbox is removed at expiry: nothing in it is worth keeping.
	g.seedRepo("acme/app")
	agent, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: "task", Purpose: "agent", Repo: "acme/app", Task: "wait", TTL: "6s"})
	if err != nil {
		t.Fatal(err)
	}
	g.waitState(g.operator, agent.ID, "running", 2*time.Minute)
	g.waitState(g.operator, agent.ID, "terminated", 30*time.Second)
	// The row says terminated first (its key is revoked at once); the
	// machine goes right after.
	if c, v := g.waitGone(agent.ID, 10*time.Second); c != "" || v != "" {
		t.Errorf("expired agent sandbox left container %q volume %q", c, v)
	}

	// Across a stopped gateway: the start-up sweep ends what should have ended.
	sb2, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: "across", Class: "standard", TTL: "6s", SSHKeys: []string{pub}})
	if err != nil {
		t.Fatal(err)
	}
	g.waitState(g.operator, sb2.ID, "running", 2*time.Minute)
	g.stop()
	time.Sleep(time.Until(sb2.ExpiresAt) + time.Second)
	if c, _ := g.objects(sb2.ID); !strings.Contains(c, "running") {
		t.Fatalf("with the gateway down the container is %q; the test needs it still running", c)
	}
	g.start()
	g.waitState(g.operator, sb2.ID, "expired", 10*time.Second)
	if c, _ := g.waitStopped(sb2.ID, 10*time.Second); !stopped(c) {
		t.Errorf("after the start-up sweep the container is %q, want exited", c)
	}
}

// TestKilledDuringCreate: a gateway killed with SIGKILL in the middle of
// creates leaves, after a restart, no stray container, volume or Created
// leftover, and every row running or failed.
func TestKilledDuringCreate(t *testing.T) {
	g := startGateway(t)
	ctx := context.Background()
	_, pub := sshKey(t)
	var ids []string
	for i, delay := range []time.Duration{100 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1200 * time.Millisecond} {
		sb, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: "crash-" + string(rune('a'+i)), Class: "standard", SSHKeys: []string{pub}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
		time.Sleep(delay)
		g.kill()
		g.start()
	}
	for _, id := range ids {
		deadline := time.Now().Add(2 * time.Minute)
		var sb api.Sandbox
		for time.Now().Before(deadline) {
			var err error
			if sb, err = g.operator.Sandbox(ctx, id); err != nil {
				t.Fatal(err)
			}
			if sb.State == "running" || sb.State == "failed" {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		c, v := g.objects(id)
		switch sb.State {
		case "running":
			if !strings.Contains(c, "running") {
				t.Errorf("%s is running but its container is %q", id, c)
			}
		case "failed":
			if strings.Contains(c, "created") || strings.Contains(c, "running") {
				t.Errorf("%s failed (%s) but left container %q", id, sb.Reason, c)
			}
		default:
			t.Errorf("%s is %s after the restart, want running or failed", id, sb.State)
		}
		t.Logf("%s: %s (%s); containers %q volumes %q", id, sb.State, sb.Reason, c, v)
	}
	// Nothing the database does not know: every container and volume of
	// this deployment belongs to one of the rows.
	known := map[string]bool{}
	for _, id := range ids {
		known[id] = true
	}
	deployments := map[string]bool{}
	for _, kind := range [][]string{{"ps", "--all"}, {"volume", "ls"}} {
		out := g.podman(append(kind, "--format", `{{index .Labels "berth.deployment"}} {{index .Labels "berth.sandbox"}}`)...)
		for _, l := range lines(out) {
			dep, id, _ := strings.Cut(l, " ")
			if known[id] {
				deployments[dep] = true
			}
		}
		for _, l := range lines(out) {
			dep, id, _ := strings.Cut(l, " ")
			if deployments[dep] && !known[id] {
				t.Errorf("%s: an object of this deployment the database does not know: %s", kind[0], id)
			}
		}
	}
	for _, id := range ids {
		if _, err := g.operator.Terminate(ctx, id); err != nil {
			t.Errorf("terminate %s: %v", id, err)
		}
		if c, v := g.objects(id); c != "" || v != "" {
			t.Errorf("terminate %s left %q %q", id, c, v)
		}
	}
}

// stopped reports whether objects' container listing shows one container,
// not running (podman says exited or stopped).
func stopped(containers string) bool {
	return containers != "" && !strings.Contains(containers, "\n") && !strings.HasSuffix(containers, " running")
}

// TestIsolatedTier runs an engineer sandbox of a class on the isolated tier
// under gVisor: BERTH_SANDBOX_RUNTIME_ISOLATED names the runsc binary, and
// the sandbox's kernel is gVisor's. It runs when BERTH_TEST_RUNSC names a
// runsc binary (CI builds one from the Go module proxy and caches it).
func TestIsolatedTier(t *testing.T) {
	runsc := os.Getenv("BERTH_TEST_RUNSC")
	if runsc == "" {
		t.Skip("set BERTH_TEST_RUNSC to a runsc binary to test the isolated tier")
	}
	g := startGateway(t, "BERTH_SANDBOX_RUNTIME_ISOLATED="+runsc)
	ctx := context.Background()
	file := `sandboxes:
  - name: isolated
    image: localhost/berth-sandbox:latest
    isolation: isolated
    cpu: "1"
    memory: 1Gi
    purposes: [engineer]
`
	if _, err := g.operator.ApplyClasses(ctx, "", strings.NewReader(file)); err != nil {
		t.Fatal(err)
	}
	key, pub := sshKey(t)
	sb, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: "iso", Class: "isolated", SSHKeys: []string{pub}})
	if err != nil {
		t.Fatal(err)
	}
	sb = g.waitState(g.operator, sb.ID, "running", 2*time.Minute)
	if rt := g.podman("inspect", "--format", "{{.OCIRuntime}}", "berth-"+sb.ID); rt != "runsc" {
		t.Errorf("the container runs on %q, want runsc", rt)
	}
	got := lines(ssh(t, key, g.ip(sb.ID), "uname -r; id -u; grep CapEff /proc/self/status"))
	if len(got) != 3 || !strings.Contains(got[0], "gvisor") || got[1] != "1001" || got[2] != "CapEff:\t0000000000000000" {
		t.Errorf("in the isolated sandbox: %q, want a gVisor kernel, uid 1001, no capabilities", got)
	}
}
