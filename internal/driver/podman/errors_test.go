package podman_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"berth.dev/berth/internal/driver/drivertest"
	"berth.dev/berth/internal/driver/podman"
)

// TestFailureSaysWhyInPodmansWords: a podman command that fails comes
// back as the verb, how it ended and podman's error lines, without its
// "Error: " and without the warnings it prints on the way (a pull's
// retries repeat the error): what a failed start's reason carries after
// berth's own words.
func TestFailureSaysWhyInPodmansWords(t *testing.T) {
	for _, tt := range []struct {
		name, stderr, want string
	}{
		{"a pull that cannot reach the registry",
			`time="2026-12-01T17:31:58Z" level=warning msg="Failed, retrying in 1s ... (2/3). Error: initializing source docker://localhost/x:latest: pinging container registry localhost: connection refused"\n` +
				`Error: initializing source docker://localhost/x:latest: pinging container registry localhost: connection refused\n`,
			"podman volume create exited 125: initializing source docker://localhost/x:latest: pinging container registry localhost: connection refused"},
		{"the runtime refusing the container",
			`Error: runc: runc create failed: unable to start container process: exec: "/sbin/berth-init": no such file or directory: OCI runtime attempted to invoke a command that was not found\n`,
			`podman volume create exited 125: runc: runc create failed: unable to start container process: exec: "/sbin/berth-init": no such file or directory: OCI runtime attempted to invoke a command that was not found`},
		{"no error line: the last lines, warnings dropped",
			`time="x" level=warning msg="something"\nsomething broke\n`,
			"podman volume create exited 125: something broke"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "podman")
			if err := os.WriteFile(filepath.Join(dir, "stderr"), []byte(tt.stderr), 0o644); err != nil {
				t.Fatal(err)
			}
			script := "#!/bin/sh\nprintf \"$(cat '" + filepath.Join(dir, "stderr") + "')\" >&2\nexit 125\n"
			if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			d, err := podman.New(podman.Config{Binary: bin, StateDir: filepath.Join(dir, "state")}, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			err = d.Start(context.Background(), drivertest.Spec(drivertest.Options{Image: "localhost/x:latest", SSHKey: "ssh-ed25519 AAAA e2e"}))
			if err == nil || err.Error() != tt.want {
				t.Errorf("Start = %v\nwant %s", err, tt.want)
			}
		})
	}
}
