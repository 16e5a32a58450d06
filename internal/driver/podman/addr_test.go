package podman_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"berth.dev/berth/internal/driver/podman"
	"berth.dev/berth/internal/reach"
)

// TestAddrIsCached: the tunnel asks for a sandbox's address on every
// connection; podman is asked once, and again after anything started,
// stopped or removed a container (addresses are reused).
func TestAddrIsCached(t *testing.T) {
	var mu sync.Mutex
	var inspects int
	ip := "10.88.0.7"
	run := func(_ context.Context, _ []string, args ...string) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case slices.Contains(args, "inspect"):
			inspects++
			return []byte(`[{"State":{"Running":true},"NetworkSettings":{"IPAddress":"` + ip + `"}}]`), nil
		case args[0] == "stop":
			return nil, nil
		}
		return nil, errors.New("unexpected podman " + args[0])
	}
	d := podman.NewWithRunner(podman.Config{StateDir: t.TempDir()}, slog.New(slog.DiscardHandler), run)
	addr := func() string {
		t.Helper()
		a, err := d.Addr(t.Context(), "sbx_1", 2222)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a, b := addr(), addr(); a != "10.88.0.7:2222" || b != a || inspects != 1 {
		t.Fatalf("Addr twice = %s, %s with %d inspects; want 10.88.0.7:2222 from one", a, b, inspects)
	}
	if err := d.Stop(t.Context(), "sbx_2"); err != nil { // another sandbox: its address may be handed on
		t.Fatal(err)
	}
	mu.Lock()
	ip = "10.88.0.9"
	mu.Unlock()
	if a := addr(); a != "10.88.0.9:2222" || inspects != 2 {
		t.Errorf("after a stop Addr = %s with %d inspects; want podman asked again", a, inspects)
	}
	if got := d.Ports(); got != (reach.PortRange{Lo: 1024, Hi: 65535}) {
		t.Errorf("Ports = %v, want 1024–65535 (sshd's 2222 and the engineer's servers)", got)
	}
	if a, err := d.Addr(t.Context(), "sbx_1", 3000); err != nil || a != "10.88.0.9:3000" {
		t.Errorf("Addr(3000) = %s, %v; want the container's address on port 3000", a, err)
	}
}
