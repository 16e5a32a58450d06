package server

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/sandbox"
)

// TestMinTTLIsNoSetting: the shortest lifetime a sandbox may ask for (5m)
// is lowered by an option of Build only, which tests pass; a deployment's
// environment cannot lower it, BERTH_TEST_MIN_TTL included.
func TestMinTTLIsNoSetting(t *testing.T) {
	classes := filepath.Join(t.TempDir(), "sandboxes.yaml")
	if err := os.WriteFile(classes, []byte("sandboxes:\n  - name: standard\n    image: localhost/berth-sandbox:1\n    isolation: standard\n    purposes: [engineer]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		opts    []Option
		wantErr string // "" for none
	}{
		{"the environment alone", nil, "ttl: 2s is under the 5m minimum"},
		{"WithMinTTL", []Option{WithMinTTL(time.Second)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"BERTH_DATA_DIR": t.TempDir(), "BERTH_SANDBOX_DRIVER": "fake",
				"BERTH_SANDBOXES_FILE": classes, "BERTH_TEST_MIN_TTL": "1s"}
			cfg, err := LoadConfig(func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			a, err := Build(t.Context(), cfg, slog.New(slog.NewTextHandler(t.Output(), nil)), tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer a.store.Close()
			_, _, _, k, err := a.accounts.Bootstrap(t.Context(), "acme", "default", "ops")
			if err != nil {
				t.Fatal(err)
			}
			p, err := a.accounts.Authenticate(t.Context(), k.Secret.Reveal())
			if err != nil {
				t.Fatal(err)
			}
			_, err = a.sandboxes.Create(t.Context(), p, sandbox.CreateRequest{Name: "brief", Class: "standard", TTL: "2s",
				SSHKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGQ0n8q0dvGXmfhT3x7Jt0yq4xNn6JkJ3sJ8QmV4c2Xk alice@laptop"}})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("create with ttl 2s = %v, want it admitted", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("create with ttl 2s = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
