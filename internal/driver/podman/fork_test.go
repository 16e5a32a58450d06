package podman_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/driver/drivertest"
	"berth.dev/berth/internal/driver/podman"
	"berth.dev/berth/internal/sandbox"
)

// forkSpecs are n forks of src: each its own id, name and key.
func forkSpecs(src sandbox.Spec, n int) []sandbox.Spec {
	out := make([]sandbox.Spec, n)
	for i := range out {
		sb := src.Sandbox
		sb.ID, sb.Name = sandbox.NewID(), "fork-"+string(rune('a'+i))
		env := maps.Clone(src.Env)
		env["BERTH_SANDBOX_ID"], env["BERTH_SANDBOX_NAME"] = string(sb.ID), sb.Name
		env["BERTH_API_KEY"] = "berth_fork" + string(rune('a'+i)) + "forkfork_SECRETVALUE"
		out[i] = sandbox.Spec{Sandbox: sb, Env: env}
	}
	return out
}

// forkWorld is a running machine on the isolated tier with a loop
// counting into its root filesystem (which gVisor keeps in memory) and a
// file on its volume; count reads a machine's count. The count is
// renamed into place whole: a save made between a write's truncation
// and its bytes would leave a fork (whose copy of the loop a restore
// ends) an empty file for good (CI saw it so).
func forkWorld(t *testing.T) (d *podman.Driver, src sandbox.Spec, pod func(args ...string) (string, error), count func(name string) (pid string, n int)) {
	t.Helper()
	d, src, pod = isolatedDriver(t)
	ctx := context.Background()
	if err := d.Start(ctx, src); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Remove(context.Background(), src.Sandbox.ID) })
	name := "berth-" + string(src.Sandbox.ID)
	if out, err := pod("exec", "-d", name, "sh", "-c", `i=0; while :; do i=$((i+1)); echo "$$ $i" > /var/tmp/count.new; mv /var/tmp/count.new /var/tmp/count; sleep 0.05; done`); err != nil {
		t.Fatalf("podman exec: %v: %s", err, out)
	}
	if out, err := pod("exec", name, "sh", "-c", "echo source > /home/berth/mine"); err != nil {
		t.Fatalf("podman exec: %v: %s", err, out)
	}
	count = func(name string) (string, int) {
		t.Helper()
		var f []string
		waitUntil(t, 10*time.Second, func() bool {
			out, _ := pod("exec", name, "cat", "/var/tmp/count")
			f = strings.Fields(out)
			return len(f) == 2
		})
		n := 0
		for _, c := range f[1] {
			n = n*10 + int(c-'0')
		}
		return f[0], n
	}
	waitUntil(t, 10*time.Second, func() bool { _, n := count(name); return n >= 10 })
	return d, src, pod, count
}

// TestFork: two forks of a running machine each go on from its memory
// (the count its root filesystem held at the save, by the same process)
// and a copy of its volume, tell new sessions their own name and key, and
// greet on their own address; the source was unpaused and counts on; the
// three then go their own ways; Remove takes a fork's volume and save.
func TestFork(t *testing.T) {
	d, src, pod, count := forkWorld(t)
	ctx := context.Background()
	name := "berth-" + string(src.Sandbox.ID)
	pid, before := count(name)
	forks := forkSpecs(src, 2)
	for _, f := range forks {
		t.Cleanup(func() { _ = d.Remove(context.Background(), f.Sandbox.ID) })
	}
	size, err := d.Fork(ctx, src.Sandbox.ID, forks)
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	if size <= 0 {
		t.Errorf("the save's size is %d", size)
	}
	_, at := count(name)
	waitUntil(t, 10*time.Second, func() bool { _, n := count(name); return n > at+5 })
	if m, err := d.Inspect(ctx, src.Sandbox.ID); err != nil || m.Status != sandbox.MachineRunning {
		t.Errorf("the source after the fork: %+v (%v), want running", m, err)
	}
	_, after := count(name)
	for _, f := range forks {
		fname := "berth-" + string(f.Sandbox.ID)
		if m, err := d.Inspect(ctx, f.Sandbox.ID); err != nil || m.Status != sandbox.MachineStopped {
			t.Fatalf("fork %s before its restore: %+v (%v), want made, not started", f.Sandbox.Name, m, err)
		}
		cold, err := d.Restore(ctx, sandbox.Spec{Sandbox: f.Sandbox})
		if err != nil || cold != "" {
			t.Fatalf("Restore of fork %s: cold %q, err %v", f.Sandbox.Name, cold, err)
		}
		fpid, n := count(fname)
		if fpid != pid || n < before || n > after {
			t.Errorf("fork %s's count is pid %s's %d, want pid %s's between %d and %d: the source's memory at the save", f.Sandbox.Name, fpid, n, pid, before, after)
		}
		if out, err := pod("exec", fname, "cat", "/home/berth/mine"); err != nil || out != "source" {
			t.Errorf("fork %s's ~/mine = %q (%v), want the source's", f.Sandbox.Name, out, err)
		}
		for _, file := range []string{".ssh/environment", ".berth/env.sh"} {
			out, err := pod("exec", fname, "cat", "/home/berth/"+file)
			if err != nil || !strings.Contains(out, string(f.Sandbox.ID)) || !strings.Contains(out, f.Env["BERTH_API_KEY"]) ||
				strings.Contains(out, string(src.Sandbox.ID)) || strings.Contains(out, src.Env["BERTH_API_KEY"]) {
				t.Errorf("fork %s's ~/%s does not name the fork alone (%v):\n%s", f.Sandbox.Name, file, err, out)
			}
		}
		addr, err := d.Addr(ctx, f.Sandbox.ID, 2222)
		if err != nil {
			t.Fatal(err)
		}
		if got := drivertest.Greeting(t, addr); !strings.HasPrefix(got, "SSH-2.0-") {
			t.Errorf("fork %s's sshd said %q", f.Sandbox.Name, got)
		}
		if out, err := pod("exec", fname, "sh", "-c", "echo "+f.Sandbox.Name+" > /home/berth/mine"); err != nil {
			t.Fatalf("podman exec: %v: %s", err, out)
		}
		if left, _ := filepath.Glob(filepath.Join(podmanRoot(t), "checkpoints", fname, "*")); len(left) != 0 {
			t.Errorf("fork %s's restore left %v", f.Sandbox.Name, left)
		}
	}
	for _, f := range append([]sandbox.Spec{src}, forks...) {
		want := f.Sandbox.Name
		if f.Sandbox.ID == src.Sandbox.ID {
			want = "source"
		}
		if out, _ := pod("exec", "berth-"+string(f.Sandbox.ID), "cat", "/home/berth/mine"); out != want {
			t.Errorf("%s's ~/mine = %q, want %q: the homes are one", f.Sandbox.Name, out, want)
		}
	}
	if err := d.Remove(ctx, forks[0].Sandbox.ID); err != nil {
		t.Fatal(err)
	}
	if out, err := pod("volume", "inspect", "berth-"+string(forks[0].Sandbox.ID)); err == nil {
		t.Errorf("Remove left the fork's volume: %s", out)
	}
}

// TestForkFailureLeavesNothing: a fork whose second machine cannot be
// made (its image is missing) fails saying so, leaves no volume,
// container or save of either fork, and the source runs, not paused.
func TestForkFailureLeavesNothing(t *testing.T) {
	d, src, pod, count := forkWorld(t)
	ctx := context.Background()
	forks := forkSpecs(src, 2)
	forks[1].Sandbox.Image = "localhost/berth-no-such-image:latest"
	_, err := d.Fork(ctx, src.Sandbox.ID, forks)
	if err == nil || !strings.Contains(err.Error(), "no-such-image") {
		t.Fatalf("Fork with a missing image: %v, want an error naming it", err)
	}
	for _, f := range forks {
		fname := "berth-" + string(f.Sandbox.ID)
		if out, err := pod("container", "exists", fname); err == nil {
			t.Errorf("fork %s's container is left: %s", f.Sandbox.Name, out)
		}
		if out, err := pod("volume", "exists", fname); err == nil {
			t.Errorf("fork %s's volume is left: %s", f.Sandbox.Name, out)
		}
		if _, err := os.Stat(filepath.Join(podmanRoot(t), "checkpoints", fname)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("fork %s's save is left (%v)", f.Sandbox.Name, err)
		}
	}
	name := "berth-" + string(src.Sandbox.ID)
	if out, _ := pod("inspect", "--format", "{{.State.Status}}", name); out != "running" {
		t.Errorf("the source after a failed fork is %q, want running", out)
	}
	_, at := count(name)
	waitUntil(t, 10*time.Second, func() bool { _, n := count(name); return n > at+5 })
}

// TestForkRestoreRefused: a fork whose save cannot be restored starts
// cold: from its copy of the source's home, with its own environment, and
// says why.
func TestForkRestoreRefused(t *testing.T) {
	d, src, pod, _ := forkWorld(t)
	ctx := context.Background()
	forks := forkSpecs(src, 1)
	f := forks[0]
	t.Cleanup(func() { _ = d.Remove(context.Background(), f.Sandbox.ID) })
	if _, err := d.Fork(ctx, src.Sandbox.ID, forks); err != nil {
		t.Fatal(err)
	}
	fname := "berth-" + string(f.Sandbox.ID)
	if err := os.Truncate(filepath.Join(podmanRoot(t), "checkpoints", fname, "image", "checkpoint.img"), 512); err != nil {
		t.Fatal(err)
	}
	cold, err := d.Restore(ctx, sandbox.Spec{Sandbox: f.Sandbox})
	if err != nil || cold == "" {
		t.Fatalf("Restore of a damaged fork: cold %q, err %v; want a cold start saying why", cold, err)
	}
	t.Logf("cold: %s", cold)
	if out, err := pod("exec", fname, "cat", "/var/tmp/count"); err == nil {
		t.Errorf("a cold fork has the source's memory: %q", out)
	}
	if out, err := pod("exec", fname, "cat", "/home/berth/mine"); err != nil || out != "source" {
		t.Errorf("the cold fork's ~/mine = %q (%v), want the source's home", out, err)
	}
	if out, err := pod("exec", fname, "cat", "/home/berth/.ssh/environment"); err != nil || !strings.Contains(out, string(f.Sandbox.ID)) || strings.Contains(out, string(src.Sandbox.ID)) {
		t.Errorf("the cold fork's environment (%v):\n%s", err, out)
	}
}

// TestPausedIsRunning: a machine paused (as a fork's save holds its
// source) has not exited: Inspect and List say it runs, so no sweep takes
// it for a machine that stopped by itself and suspends it. A gateway
// killed mid-fork leaves its source paused, which would never wake: Tidy
// (every sweep) unpauses it.
func TestPausedIsRunning(t *testing.T) {
	d, spec, pod := isolatedDriver(t)
	ctx := context.Background()
	if err := d.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Remove(context.Background(), spec.Sandbox.ID) })
	name := "berth-" + string(spec.Sandbox.ID)
	if out, err := pod("pause", name); err != nil {
		t.Fatalf("podman pause: %v: %s", err, out)
	}
	if m, err := d.Inspect(ctx, spec.Sandbox.ID); err != nil || m.Status != sandbox.MachineRunning {
		t.Errorf("Inspect of a paused machine: %+v (%v), want running", m, err)
	}
	ms, err := d.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.ID == spec.Sandbox.ID && m.Status != sandbox.MachineRunning {
			t.Errorf("List has the paused machine %+v, want running", m)
		}
	}
	tidied, err := d.Tidy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(tidied, name) {
		t.Errorf("Tidy did %q, want %s unpaused", tidied, name)
	}
	if out, _ := pod("inspect", "--format", "{{.State.Status}}", name); out != "running" {
		t.Errorf("after Tidy the machine is %q, want running", out)
	}
}
