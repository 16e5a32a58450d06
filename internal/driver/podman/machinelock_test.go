package podman_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"berth.dev/berth/internal/driver/drivertest"
	"berth.dev/berth/internal/driver/podman"
	"berth.dev/berth/internal/fault"
)

// TestRemoveWhileStarting removes sandboxes while their machines start,
// at several moments of the start, as a terminate does that comes while
// the create's start is under way: every removal returns, and nothing of
// the sandbox is left. (podman deadlocked here: the removal's `volume rm
// --force` and the start's `podman run` each waited for a lock the other
// held, for ever.) On the isolated tier too when BERTH_TEST_RUNSC names
// runsc: its machines are the podman binary's, not its service's.
func TestRemoveWhileStarting(t *testing.T) {
	podmanRoot(t)
	tiers := map[string]string{"standard": ""}
	if runsc := os.Getenv("BERTH_TEST_RUNSC"); runsc != "" {
		tiers["isolated"] = runsc
	}
	for tier, runtime := range tiers {
		t.Run(tier, func(t *testing.T) {
			cfg := podman.Config{}
			if runtime != "" {
				cfg.Runtimes = map[string]string{"runsc": runtime}
			}
			d := newDriverWith(t, cfg)
			for i := range 6 {
				spec := drivertest.Spec(drivertest.Options{Image: testImage, SSHKey: testKey})
				spec.Sandbox.Runtime = runtime
				started := make(chan error, 1)
				go func() { started <- d.Start(context.Background(), spec) }()
				time.Sleep(time.Duration(i) * 60 * time.Millisecond)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				err := d.Remove(ctx, spec.Sandbox.ID)
				cancel()
				if err != nil {
					t.Fatalf("remove %d ms into a start: %v", i*60, err)
				}
				<-started // it fails or succeeds; either way it is over
				// A start that made its machine after the removal leaves
				// it, as in the service, to the removal that follows.
				if err := d.Remove(context.Background(), spec.Sandbox.ID); err != nil {
					t.Fatal(err)
				}
				if _, err := d.Inspect(context.Background(), spec.Sandbox.ID); !errors.Is(err, fault.NotFound) {
					t.Errorf("after the removals the sandbox has a machine or volume (%v)", err)
				}
			}
		})
	}
}
