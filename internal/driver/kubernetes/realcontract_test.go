package kubernetes_test

import (
	"log/slog"
	"testing"
	"time"

	"berth.dev/berth/internal/driver/drivertest"
	"berth.dev/berth/internal/driver/kubernetes"
	"berth.dev/berth/internal/sandbox"
)

// TestRealControllerContract runs the driver contract against the real
// agent-sandbox controller, each case on a namespace of its own. The
// kubelet stand-in runs no process, so sshd's greeting comes from a
// loopback listener, answering only for the IP of a live, running pod.
func TestRealControllerContract(t *testing.T) {
	dc := realClient(t)
	drivertest.Run(t, drivertest.Options{
		NewDriver: func(t *testing.T) sandbox.Driver {
			ns := namespace(t, dc)
			g := newGreeter(t, livePodsGreet(dc, ns))
			cfg := kubernetes.Config{Namespace: ns, Deployment: "berthtest0001", ReadyTimeout: time.Minute, Dial: g.dial,
				PublicURL: "http://gateway.test:8080"}
			return kubernetes.New(cfg, dc, slog.New(slog.NewTextHandler(t.Output(), nil)))
		},
		Image:   "ghcr.io/acme/dev:1",
		SSHKey:  sshKey,
		Timeout: time.Minute,
	})
}
