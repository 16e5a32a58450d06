package server

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/driver/kubernetes/kubetest"
)

// TestBuildKubernetes wires the gateway on the kubernetes driver the way
// `berth serve` does, against a real kube-apiserver reached through
// KUBECONFIG (gated on BERTH_TEST_KUBE), and checks a wrong KUBECONFIG
// stops the start naming it.
func TestBuildKubernetes(t *testing.T) {
	env := map[string]string{
		"BERTH_SANDBOX_DRIVER": "kubernetes", "BERTH_DATA_DIR": t.TempDir(), "BERTH_SANDBOX_WARM": "on",
		"KUBECONFIG": filepath.Join(t.TempDir(), "missing"),
	}
	load := func() Config {
		t.Helper()
		cfg, err := LoadConfig(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	if _, err := Build(t.Context(), load(), log); err == nil || !strings.Contains(err.Error(), "KUBECONFIG") {
		t.Fatalf("build with a missing KUBECONFIG = %v, want an error naming it", err)
	}

	bin := os.Getenv(kubetest.EnvBinaries)
	if bin == "" {
		t.Skipf("no real kube-apiserver: set %s", kubetest.EnvBinaries)
	}
	crds, err := kubetest.CRDDir(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	srv, err := kubetest.Start(ctx, bin, crds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(srv.Kubeconfig()), 0o600); err != nil {
		t.Fatal(err)
	}
	env["KUBECONFIG"] = kc
	a, err := Build(ctx, load(), log)
	if err != nil {
		t.Fatalf("build = %v", err)
	}
	defer a.store.Close()
	// With no warm class, the start-up sync lists and deletes nothing.
	if err := a.warm.SyncPools(ctx); err != nil {
		t.Errorf("SyncPools on the real API server = %v", err)
	}
	if _, err := a.sandboxes.Sweep(ctx); err != nil {
		t.Errorf("Sweep on the real API server = %v", err)
	}
}
