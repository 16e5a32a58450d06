// Package e2e_test drives the real berth binary end to end: `berth serve`
// as a process on the podman driver, the CLI and the API against it, real
// containers, and the real OpenSSH client into them. It runs when
// BERTH_TEST_PODMAN names a podman root holding the sandbox image.
package e2e_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// stallingPodman is a podman wrapper that stalls the first `podman run`
// until released, after saying which env file it was given; its podman
// service never starts, so that every run is the binary's (the service's
// take their environment in the request, with no env file); every other
// command goes to podman.
type stallingPodman struct {
	path, envFile, fifo string
}

func newStallingPodman(t *testing.T) stallingPodman {
	t.Helper()
	dir := t.TempDir()
	p := stallingPodman{path: filepath.Join(dir, "podman"), envFile: filepath.Join(dir, "env-file"), fifo: filepath.Join(dir, "release")}
	if err := syscall.Mkfifo(p.fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	script := `#!/bin/sh
[ "$1" = system ] && [ "$2" = service ] && exit 1
if [ "$1" = run ] && mkdir '` + dir + `/stalled' 2>/dev/null; then
	prev=
	for a; do
		[ "$prev" = --env-file ] && printf '%s\n' "$a" > '` + p.envFile + `.tmp' && mv '` + p.envFile + `.tmp' '` + p.envFile + `'
		prev=$a
	done
	read -r _ < '` + p.fifo + `'
	exit 1
fi
exec podman "$@"
`
	if err := os.WriteFile(p.path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.release)
	return p
}

// stalled waits for the stalled run and returns its env file.
func (p stallingPodman) stalled(t *testing.T, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		b, err := os.ReadFile(p.envFile)
		if err == nil {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("podman run did not stall within %s", within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// release lets the stalled run end (it fails); without one it does
// nothing.
func (p stallingPodman) release() {
	if _, err := os.Stat(filepath.Join(filepath.Dir(p.path), "stalled")); err != nil {
		return
	}
	// The open waits for the wrapper's read, which is past its mkdir.
	opened := make(chan struct{})
	go func() {
		if f, err := os.OpenFile(p.fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		close(opened)
	}()
	select {
	case <-opened:
	case <-time.After(10 * time.Second):
	}
}

// TestKilledDuringRunLeavesNoEnvFile: while podman run reads a container's
// env file, it is 0600 in a 0700 directory; a gateway killed with SIGKILL
// then leaves it behind, with the sandbox's key in it, and the next start
// removes it (and finishes the start).
func TestKilledDuringRunLeavesNoEnvFile(t *testing.T) {
	wrapper := newStallingPodman(t)
	g := startGateway(t, "BERTH_SANDBOX_PODMAN_BINARY="+wrapper.path)
	_, pub := sshKey(t)
	sb, err := g.operator.CreateSandbox(context.Background(), api.CreateSandbox{Name: "stalled", Class: "standard", SSHKeys: []string{pub}})
	if err != nil {
		t.Fatal(err)
	}
	file := wrapper.stalled(t, 2*time.Minute)
	if dir := filepath.Join(g.root, "env"); filepath.Dir(file) != dir {
		t.Errorf("the env file is %s, want it in %s", file, dir)
	}
	for path, want := range map[string]os.FileMode{file: 0o600, filepath.Dir(file): 0o700} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v (%v), want mode %v", path, fi.Mode().Perm(), err, want)
		}
	}
	if b, err := os.ReadFile(file); err != nil || !strings.Contains("\n"+string(b), "\nBERTH_API_KEY=berth_") {
		t.Errorf("the env file holds no sandbox key (%v): the test stalled the wrong run", err)
	}

	g.kill()
	wrapper.release()
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("after the kill the env file is gone already (%v): the test shows nothing", err)
	}
	g.start()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := os.Stat(file)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30s after the restart the env file %s is still there (%v)", file, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The start the kill interrupted made no container: the restart
	// finishes it, with a fresh key in a new env file, gone once podman
	// has read it.
	g.waitState(g.operator, sb.ID, "running", 2*time.Minute)
	if left := g.envFiles(t, []string{sb.ID}); len(left) > 0 {
		t.Errorf("env files of the finished start left: %v", left)
	}
}
