package podman_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"berth.dev/berth/internal/driver/drivertest"
	"berth.dev/berth/internal/driver/podman"
	"berth.dev/berth/internal/sandbox"
)

// TestKilledBehindItsBackIsToldAtOnce: a container killed with podman
// kill, not by the driver, is told by Watch within two seconds (podman's
// events, not a sweep), and Inspect says how and when it ended: exit 137,
// at podman's exit time.
func TestKilledBehindItsBackIsToldAtOnce(t *testing.T) {
	root := podmanRoot(t)
	d := newDriver(t)
	changed, done := drivertest.Watch(t, d)
	spec := drivertest.Spec(drivertest.Options{Image: testImage, SSHKey: testKey})
	id := spec.Sandbox.ID
	sctx, scancel := context.WithTimeout(t.Context(), time.Minute)
	defer scancel()
	if err := d.Start(sctx, spec); err != nil {
		t.Fatal(err)
	}
	kill := exec.Command("podman", "kill", "berth-"+string(id))
	kill.Env = podman.Config{StateDir: root}.Env()
	killed := time.Now()
	if out, err := kill.CombinedOutput(); err != nil {
		t.Fatalf("podman kill: %v: %s", err, out)
	}
	deadline := time.After(2*time.Second - time.Since(killed))
	for told := false; !told; {
		select {
		case got := <-changed:
			told = got == id
		case err := <-done:
			t.Fatalf("Watch ended: %v", err)
		case <-deadline:
			t.Fatalf("the killed container was not told within 2s of its kill")
		}
	}
	m, err := d.Inspect(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != sandbox.MachineStopped || m.ExitCode != 137 {
		t.Errorf("Inspect = %+v, want stopped, exit 137", m)
	}
	if m.FinishedAt.Before(killed.Add(-time.Second)) || m.FinishedAt.After(time.Now()) {
		t.Errorf("finished at %v, want between the kill (%v) and now", m.FinishedAt, killed)
	}
}

// TestWatchOutlivesPodmanEvents: podman events ends on its own (its file
// logger cuts the file at 1 MiB, which a busy store fills in minutes);
// Watch follows the events again at once, so a container killed after
// that is still told within seconds, and Watch does not end.
func TestWatchOutlivesPodmanEvents(t *testing.T) {
	root := podmanRoot(t)
	d := newDriver(t)
	changed, done := drivertest.Watch(t, d)
	time.Sleep(1500 * time.Millisecond) // past the first second, after which an ended podman events is followed again
	// This process's podman events: ended as by the cut of its file.
	out, err := exec.Command("pkill", "-TERM", "-P", strconv.Itoa(os.Getpid()), "-f", "podman events").CombinedOutput()
	if err != nil {
		t.Fatalf("pkill podman events: %v: %s", err, out)
	}
	spec := drivertest.Spec(drivertest.Options{Image: testImage, SSHKey: testKey})
	id := spec.Sandbox.ID
	sctx, scancel := context.WithTimeout(t.Context(), time.Minute)
	defer scancel()
	if err := d.Start(sctx, spec); err != nil {
		t.Fatal(err)
	}
	kill := exec.Command("podman", "kill", "berth-"+string(id))
	kill.Env = podman.Config{StateDir: root}.Env()
	if out, err := kill.CombinedOutput(); err != nil {
		t.Fatalf("podman kill: %v: %s", err, out)
	}
	deadline := time.After(10 * time.Second)
	for told := false; !told; {
		select {
		case got := <-changed:
			told = got == id
		case err := <-done:
			t.Fatalf("Watch ended when podman events did: %v", err)
		case <-deadline:
			t.Fatalf("the container killed after podman events ended was not told within 10s")
		}
	}
}
