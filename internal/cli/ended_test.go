package cli_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/sandbox"
)

// TestEndedSandboxesSayWhenTheyEnded: a terminated or failed sandbox
// expires no more; list and show say when it ended, never "expires in 8h".
func TestEndedSandboxesSayWhenTheyEnded(t *testing.T) {
	g := newEngineerGateway(t)
	if code, _, errs := g.berth(t, "alice", "sandbox", "create", "gone", "--ssh-key", g.keyFile); code != 0 {
		t.Fatalf("create: %s", errs)
	}
	if code, _, errs := g.berth(t, "alice", "sandbox", "terminate", "gone"); code != 0 {
		t.Fatalf("terminate: %s", errs)
	}
	// broke: its start fails.
	release := g.drv.Hold()
	code, _, errs := g.berth(t, "alice", "sandbox", "create", "broke", "--ssh-key", g.keyFile, "--no-wait")
	if code != 0 {
		t.Fatalf("create: %s", errs)
	}
	sb, err := g.client("alice").Sandbox(t.Context(), "broke")
	if err != nil {
		t.Fatal(err)
	}
	g.drv.FailStart(sandbox.ID(sb.ID), errors.New("no room"))
	release()
	for deadline := time.Now().Add(10 * time.Second); sb.State != "failed"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("broke is %s after 10s, want failed", sb.State)
		}
		if sb, err = g.client("alice").Sandbox(t.Context(), "broke"); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"gone", "broke"} {
		code, out, errs := g.berth(t, "alice", "sandbox", "show", name)
		if code != 0 {
			t.Fatalf("show %s: %s", name, errs)
		}
		wantLines(t, "show "+name, out, `^ended: +\S+ \((now|\d+m ago)\)$`)
		if strings.Contains(out, "expires:") {
			t.Errorf("show %s of an ended sandbox says when it expires:\n%s", name, out)
		}
	}
	code, out, errs := g.berth(t, "alice", "sandbox", "list", "--all")
	if code != 0 {
		t.Fatalf("list: %s", errs)
	}
	wantLines(t, "list", out, `^gone +\S+ +terminated .* ended (now|\d+m ago) +\S+$`, `^broke +\S+ +failed .* ended (now|\d+m ago) +\S+$`)
}

// TestApplyWarnsOfTheDefaultTier: a class that names no isolation gets
// the isolated tier; where the deployment has not mapped it, apply still
// writes the class and says the tier is not mapped here, why the class
// has it, and which tiers run.
func TestApplyWarnsOfTheDefaultTier(t *testing.T) {
	g := newEngineerGateway(t)
	file := filepath.Join(t.TempDir(), "classes.yaml")
	if err := os.WriteFile(file, []byte("sandboxes:\n  - name: plain\n    image: localhost/berth-sandbox:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := g.berth(t, "ann", "sandbox", "apply", "-f", file)
	if code != 0 {
		t.Fatalf("apply exited %d: %s", code, errs)
	}
	wantLines(t, "apply", out, `^class plain created$`)
	wantLines(t, "apply stderr", errs, `^warning: class plain: tier isolated is not mapped to a runtime, so it cannot start sandboxes until an operator sets BERTH_SANDBOX_RUNTIME_ISOLATED \(isolated is the tier of a class that names no isolation:; this deployment runs standard\)$`)
}
