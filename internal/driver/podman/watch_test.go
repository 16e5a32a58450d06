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
	killed := killBehindItsBack(t, root, id)
	toldWithin(t, changed, done, id, 2*time.Second-time.Since(killed))
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
	killBehindItsBack(t, root, id)
	toldWithin(t, changed, done, id, 10*time.Second)
}

// killBehindItsBack kills the sandbox's container with podman kill, not
// through the driver, and returns when.
func killBehindItsBack(t *testing.T, root string, id sandbox.ID) time.Time {
	t.Helper()
	kill := exec.Command("podman", "kill", "berth-"+string(id))
	kill.Env = podman.Config{StateDir: root}.Env()
	killed := time.Now()
	if out, err := kill.CombinedOutput(); err != nil {
		t.Fatalf("podman kill: %v: %s", err, out)
	}
	return killed
}

// toldWithin waits for Watch to tell of id, failing if it ends first or
// does not tell within d.
func toldWithin(t *testing.T, changed <-chan sandbox.ID, done <-chan error, id sandbox.ID, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case got := <-changed:
			if got == id {
				return
			}
		case err := <-done:
			t.Fatalf("Watch ended: %v", err)
		case <-deadline:
			t.Fatalf("the killed container %s was not told within %s of its kill", id, d.Round(time.Millisecond))
		}
	}
}
