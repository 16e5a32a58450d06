package podman_test

import (
	"context"
	"crypto/rand"
	"log/slog"
	"os"
	"strings"
	"testing"

	"berth.dev/berth/internal/driver/drivertest"
	"berth.dev/berth/internal/driver/podman"
	"berth.dev/berth/internal/sandbox"
)

// testImage is what `make images` builds.
const testImage = "localhost/berth-sandbox:latest"

const testKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGQ0n8q0dvGXmfhT3x7Jt0yq4xNn6JkJ3sJ8QmV4c2Xk contract@test"

// podmanRoot returns the podman state directory the real-podman tests use,
// or skips: BERTH_TEST_PODMAN names a root that holds the sandbox image
// (`make images` builds it into .berth/data/podman).
func podmanRoot(t *testing.T) string {
	root := os.Getenv("BERTH_TEST_PODMAN")
	if root == "" {
		t.Skip("set BERTH_TEST_PODMAN to a podman root holding " + testImage + " (make images) to run real-podman tests")
	}
	return root
}

// newDriver returns a driver on the shared root under a deployment label of
// its own, and removes whatever it made when the test ends.
func newDriver(t *testing.T) *podman.Driver { return newDriverWith(t, podman.Config{}) }

// newDriverWith is newDriver with cfg's other settings.
func newDriverWith(t *testing.T, cfg podman.Config) *podman.Driver {
	t.Helper()
	cfg.StateDir, cfg.Deployment = podmanRoot(t), "berthtest"+strings.ToLower(rand.Text()[:8])
	d, err := podman.New(cfg, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer d.Close()
		ms, err := d.List(context.Background())
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		for _, m := range ms {
			if err := d.Remove(context.Background(), m.ID); err != nil {
				t.Errorf("cleanup %s: %v", m.ID, err)
			}
		}
	})
	return d
}

func TestContract(t *testing.T) {
	podmanRoot(t)
	drivertest.Run(t, drivertest.Options{
		NewDriver: func(t *testing.T) sandbox.Driver { return newDriver(t) },
		Image:     testImage,
		SSHKey:    testKey,
		SSHD:      true,
	})
}
