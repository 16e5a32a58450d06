package podman_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/driver/drivertest"
	"berth.dev/berth/internal/driver/podman"
	"berth.dev/berth/internal/sandbox"
)

// isolatedDriver is a driver on the shared root whose isolated tier is
// gVisor's runsc (BERTH_TEST_RUNSC), keeping standbys as the gateway does
// by default, and a small engineer sandbox spec on that tier; it skips
// without runsc.
func isolatedDriver(t *testing.T) (*podman.Driver, sandbox.Spec, func(args ...string) (string, error)) {
	t.Helper()
	return isolatedDriverWith(t, 24*time.Hour)
}

// isolatedDriverWith is isolatedDriver keeping standbys for standby.
func isolatedDriverWith(t *testing.T, standby time.Duration) (*podman.Driver, sandbox.Spec, func(args ...string) (string, error)) {
	t.Helper()
	runsc := os.Getenv("BERTH_TEST_RUNSC")
	if runsc == "" {
		t.Skip("set BERTH_TEST_RUNSC to a runsc binary (scripts/build-runsc) to checkpoint on the isolated tier")
	}
	root := podmanRoot(t)
	d := newDriverWith(t, podman.Config{Runtimes: map[string]string{"runsc": runsc}, Standby: standby})
	spec := drivertest.Spec(drivertest.Options{Image: testImage, SSHKey: testKey})
	spec.Sandbox.Isolation, spec.Sandbox.Runtime = sandbox.TierIsolated, runsc
	pod := func(args ...string) (string, error) {
		cmd := exec.Command("podman", args...)
		cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+root+"/containers.conf", "CONTAINERS_STORAGE_CONF="+root+"/storage.conf")
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	return d, spec, pod
}

// TestCheckpointKeepsProcesses: a machine on the isolated tier suspended
// with its memory is restored with what its memory held. A loop started
// in it counts into a file of its root filesystem (which gVisor keeps in
// memory); the restored machine has the count as it was at the
// checkpoint. (The loop itself is podman exec's, and gVisor ends exec'd
// processes at a restore; processes under the machine's init go on, which
// internal/e2e's TestSuspendWithMemory shows through ssh.) A damaged
// checkpoint falls back to a cold start; Remove takes the checkpoint.
func TestCheckpointKeepsProcesses(t *testing.T) {
	d, spec, pod := isolatedDriver(t)
	ctx := context.Background()
	if why := d.Checkpoints(spec.Sandbox); why != "" {
		t.Fatalf("Checkpoints = %q, want it to checkpoint", why)
	}
	if err := d.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	name := "berth-" + string(spec.Sandbox.ID)
	if out, err := pod("exec", "-d", name, "sh", "-c", `i=0; while :; do i=$((i+1)); echo "$$ $i" > /var/tmp/count.new; mv /var/tmp/count.new /var/tmp/count; sleep 0.05; done`); err != nil {
		t.Fatalf("podman exec: %v: %s", err, out)
	}
	count := func() (pid string, n int) {
		t.Helper()
		var out string
		waitUntil(t, 10*time.Second, func() bool {
			out, _ = pod("exec", name, "cat", "/var/tmp/count")
			return len(strings.Fields(out)) == 2
		})
		f := strings.Fields(out)
		n, _ = strconv.Atoi(f[1])
		return f[0], n
	}
	waitUntil(t, 10*time.Second, func() bool { _, n := count(); return n >= 20 })
	pid, before := count()
	read := time.Now()

	size, err := d.Checkpoint(ctx, spec.Sandbox.ID)
	if err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	// The loop counts at most once per 50 ms until runsc freezes it: under
	// load, podman's inspect before the checkpoint can take seconds.
	most := before + int(time.Since(read)/(50*time.Millisecond)) + 15
	if size <= 0 {
		t.Errorf("checkpoint size %d, want its bytes", size)
	}
	if m, err := d.Inspect(ctx, spec.Sandbox.ID); err != nil || m.Status != sandbox.MachineStopped {
		t.Fatalf("after the checkpoint the machine is %+v (%v), want stopped", m, err)
	}
	time.Sleep(time.Second) // a cold loop would count ~20 in this time

	cold, err := d.Restore(ctx, sandbox.Spec{Sandbox: spec.Sandbox})
	if err != nil || cold != "" {
		t.Fatalf("Restore: cold %q, err %v; want restored", cold, err)
	}
	pid2, after := count()
	if pid2 != pid || after < before || after > most {
		t.Errorf("after restore the count is pid %s's %d, want pid %s's from %d to %d: the memory as it was at the checkpoint", pid2, after, pid, before, most)
	}
	if left, _ := filepath.Glob(filepath.Join(podmanRoot(t), "checkpoints", name, "*")); len(left) != 0 {
		t.Errorf("the restore left %v behind", left)
	}
	// Ready means ready: sshd answers on its (new) address.
	addr, err := d.Addr(ctx, spec.Sandbox.ID, 2222)
	if err != nil {
		t.Fatal(err)
	}
	if got := drivertest.Greeting(t, addr); !strings.HasPrefix(got, "SSH-2.0-") {
		t.Errorf("sshd after restore said %q", got)
	}

	// A checkpoint that cannot be restored: the machine starts cold, from
	// its volume, and says why.
	if _, err := d.Checkpoint(ctx, spec.Sandbox.ID); err != nil {
		t.Fatalf("second Checkpoint: %v", err)
	}
	img := filepath.Join(podmanRoot(t), "checkpoints", name, "image", "checkpoint.img")
	if err := os.Truncate(img, 512); err != nil {
		t.Fatal(err)
	}
	cold, err = d.Restore(ctx, sandbox.Spec{Sandbox: spec.Sandbox})
	if err != nil || cold == "" {
		t.Fatalf("Restore of a damaged checkpoint: cold %q, err %v; want a cold start that says why", cold, err)
	}
	t.Logf("damaged checkpoint: %s", cold)
	if m, err := d.Inspect(ctx, spec.Sandbox.ID); err != nil || m.Status != sandbox.MachineRunning {
		t.Fatalf("after the cold start the machine is %+v (%v), want running", m, err)
	}
	if out, err := pod("exec", name, "cat", "/var/tmp/count"); err == nil {
		t.Errorf("a cold start still has the loop's file: %q", out)
	}
	if _, err := os.Stat(filepath.Join(podmanRoot(t), "checkpoints", name, "image")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the damaged checkpoint is still there (%v)", err)
	}

	// Remove takes a checkpoint with the machine.
	if _, err := d.Checkpoint(ctx, spec.Sandbox.ID); err != nil {
		t.Fatalf("third Checkpoint: %v", err)
	}
	if err := d.Remove(ctx, spec.Sandbox.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(podmanRoot(t), "checkpoints", name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Remove left the checkpoint (%v)", err)
	}
}

// markedMachine is a started machine on the isolated tier holding a mark
// on its root filesystem, which gVisor keeps in memory: a restore brings
// the mark back, a cold start does not.
type markedMachine struct {
	t    *testing.T
	d    *podman.Driver
	spec sandbox.Spec
	pod  func(args ...string) (string, error)
	name string
}

// startMarked starts spec's machine and writes its mark.
func startMarked(t *testing.T, d *podman.Driver, spec sandbox.Spec, pod func(args ...string) (string, error)) markedMachine {
	t.Helper()
	if err := d.Start(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	m := markedMachine{t: t, d: d, spec: spec, pod: pod, name: "berth-" + string(spec.Sandbox.ID)}
	if out, err := pod("exec", m.name, "sh", "-c", "echo kept > /var/tmp/mark"); err != nil {
		t.Fatalf("podman exec: %v: %s", err, out)
	}
	return m
}

// mark is what the machine holds as its mark: "" when it has none.
func (m markedMachine) mark() string {
	m.t.Helper()
	out, err := m.pod("exec", m.name, "cat", "/var/tmp/mark")
	if err != nil {
		return "" // no mark: cat's complaint is not one
	}
	return out
}

// suspend checkpoints the machine.
func (m markedMachine) suspend() {
	m.t.Helper()
	if _, err := m.d.Checkpoint(context.Background(), m.spec.Sandbox.ID); err != nil {
		m.t.Fatalf("Checkpoint: %v", err)
	}
}

// resume restores the machine and checks its mark came back from memory.
func (m markedMachine) resume() {
	m.t.Helper()
	if cold, err := m.d.Restore(context.Background(), sandbox.Spec{Sandbox: m.spec.Sandbox}); err != nil || cold != "" {
		m.t.Fatalf("Restore: cold %q, err %v; want restored", cold, err)
	}
	if got := m.mark(); got != "kept" {
		m.t.Errorf("after the restore the mark is %q, want the one in memory, \"kept\"", got)
	}
}

// status is podman's status of the machine's container.
func (m markedMachine) status() string {
	m.t.Helper()
	out, err := m.pod("container", "inspect", "--format", "{{.State.Status}}", m.name)
	if err != nil {
		m.t.Fatalf("podman inspect: %v: %s", err, out)
	}
	return out
}

// TestSuspendedMachineWaitsMade: a machine suspended with its memory waits
// made (podman's init: its network, its conmon, runsc's sandbox in
// "created"), so that its resume is a restore into it and no more. The
// standby outlives podman's clean-up of the checkpoint's exit; a resume
// restores into it (the same conmon) with the memory as it was; a resume
// whose standby was lost (as a reboot loses it) makes it and restores;
// a cold start of a waiting machine starts it afresh and leaves neither
// checkpoint nor note.
func TestSuspendedMachineWaitsMade(t *testing.T) {
	d, spec, pod := isolatedDriver(t)
	ctx := context.Background()
	m := startMarked(t, d, spec, pod)
	name := m.name
	state := func() (status, conmon string) {
		t.Helper()
		out, err := pod("container", "inspect", "--format", "{{.State.Status}} {{.State.ConmonPid}}", name)
		if f := strings.Fields(out); err == nil && len(f) == 2 {
			return f[0], f[1]
		}
		t.Fatalf("podman inspect: %v: %s", err, out)
		return "", ""
	}

	m.suspend()
	status, conmon := state()
	if status != "initialized" {
		// "created" is podman's word for a container it has not made:
		// a late clean-up of the checkpoint's exit undid the standby.
		t.Fatalf("after the checkpoint podman says the container is %s, want it made and waiting (initialized)", status)
	}
	full, err := pod("container", "inspect", "--format", "{{.Id}}", name)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(os.Getenv("BERTH_TEST_RUNSC"), "--root", filepath.Join(podmanRoot(t), "runsc"), "state", full).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"status": "created"`) {
		t.Errorf("runsc state of the suspended machine: %v: %s; want its sandbox created and waiting", err, out)
	}
	if m, err := d.Inspect(ctx, spec.Sandbox.ID); err != nil || m.Status != sandbox.MachineStopped {
		t.Errorf("the waiting machine is %+v (%v), want stopped", m, err)
	}
	time.Sleep(6 * time.Second) // podman's clean-up of the checkpoint's exit comes and goes
	if s2, c2 := state(); s2 != status || c2 != conmon {
		t.Fatalf("6 s after the checkpoint the container is %s under conmon %s, want still %s under %s", s2, c2, status, conmon)
	}
	m.resume()
	if _, c2 := state(); c2 != conmon {
		t.Errorf("the restore ran under conmon %s, not the standby's %s: it made the container again", c2, conmon)
	}

	// The standby lost: the resume makes the container and restores.
	m.suspend()
	if out, err := pod("stop", "--time", "1", name); err != nil {
		t.Fatalf("podman stop of the standby: %v: %s", err, out)
	}
	if s, _ := state(); s != "exited" && s != "stopped" {
		t.Fatalf("the standby stopped by hand is %s", s)
	}
	m.resume()

	// A cold start of a waiting machine starts afresh.
	m.suspend()
	if err := d.Start(ctx, sandbox.Spec{Sandbox: spec.Sandbox}); err != nil {
		t.Fatalf("cold Start of a waiting machine: %v", err)
	}
	if got := m.mark(); got != "" {
		t.Errorf("a cold start has the mark %q of the memory it should have dropped", got)
	}
	if left, _ := filepath.Glob(filepath.Join(podmanRoot(t), "checkpoints", name+"*")); len(left) != 0 {
		t.Errorf("the cold start left %v", left)
	}
	if notes, _ := filepath.Glob(filepath.Join(podmanRoot(t), "checkpoints", full+".restore")); len(notes) != 0 {
		t.Errorf("the cold start left the note %v", notes)
	}
}

// TestStandbyLetGo: Tidy lets go the standby of a machine suspended
// longer than Config.Standby, and only then: the container no longer
// waits (its conmon and runsc's sandbox end), its checkpoint and note
// stay, and its resume still restores the memory. A driver that keeps no
// standby leaves a suspended machine exited, and resumes it from memory.
func TestStandbyLetGo(t *testing.T) {
	const standby = 3 * time.Second
	d, spec, pod := isolatedDriverWith(t, standby)
	ctx := context.Background()
	m := startMarked(t, d, spec, pod)
	name := m.name

	m.suspend()
	suspended := time.Now()
	if s := m.status(); s != "initialized" {
		t.Fatalf("the suspended machine is %s, want initialized: waiting made", s)
	}
	tidied, err := d.Tidy(ctx)
	if err != nil {
		t.Fatalf("Tidy: %v", err)
	}
	if slices.Contains(tidied, name) || m.status() != "initialized" {
		t.Fatalf("Tidy %s after the suspend let its standby go (%v): it has %s to wait", time.Since(suspended).Round(time.Millisecond), tidied, standby)
	}
	time.Sleep(time.Until(suspended.Add(standby + 100*time.Millisecond)))
	if tidied, err = d.Tidy(ctx); err != nil {
		t.Fatalf("Tidy: %v", err)
	}
	if !slices.Contains(tidied, name) {
		t.Errorf("Tidy past the standby's time returned %v, without %s", tidied, name)
	}
	if s := m.status(); s != "exited" && s != "stopped" {
		t.Fatalf("the standby let go is %s, want it stopped", s)
	}
	if _, err := os.Stat(filepath.Join(podmanRoot(t), "checkpoints", name, "image", "checkpoint.img")); err != nil {
		t.Fatalf("letting the standby go took the checkpoint: %v", err)
	}
	m.resume()

	// No standby kept: the suspended machine is exited, and resumes.
	none, spec2, _ := isolatedDriverWith(t, 0)
	kept := startMarked(t, none, spec2, pod)
	kept.suspend()
	if s := kept.status(); s != "exited" && s != "stopped" {
		t.Errorf("with no standby kept the suspended machine is %s, want it stopped", s)
	}
	kept.resume()
}

// TestCheckpointDiskFull: a checkpoint that runs out of room fails, keeps
// nothing, and leaves a machine a stop and a cold start bring back.
func TestCheckpointDiskFull(t *testing.T) {
	d, spec, pod := isolatedDriver(t)
	ctx := context.Background()
	if err := d.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	name := "berth-" + string(spec.Sandbox.ID)
	dir := filepath.Join(podmanRoot(t), "checkpoints", name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs for the checkpoint: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	if _, err := d.Checkpoint(ctx, spec.Sandbox.ID); err == nil {
		t.Fatal("a checkpoint into 64 KiB succeeded")
	} else {
		t.Logf("checkpoint into 64 KiB: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("the failed checkpoint left %v", left)
	}
	if m, err := d.Inspect(ctx, spec.Sandbox.ID); err == nil {
		t.Logf("after the failed checkpoint the machine is %s", m.Status)
	}
	if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v: %s", err, out)
	}
	if err := d.Stop(ctx, spec.Sandbox.ID); err != nil {
		t.Fatalf("Stop after a failed checkpoint: %v", err)
	}
	if err := d.Start(ctx, sandbox.Spec{Sandbox: spec.Sandbox}); err != nil {
		t.Fatalf("cold start after a failed checkpoint: %v", err)
	}
	if out, err := pod("exec", name, "true"); err != nil {
		t.Errorf("the machine does not run after its cold start: %v: %s", err, out)
	}
}

func waitUntil(t *testing.T, within time.Duration, ok func() bool) {
	t.Helper()
	end := time.Now().Add(within)
	for !ok() {
		if time.Now().After(end) {
			t.Fatalf("not so within %s", within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
