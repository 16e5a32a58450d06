package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/runner"
)

// TestRealPiThroughTheGateway runs the real Pi CLI on the host against the
// gateway, configured only by the models.json and settings.json the
// gateway rendered for an agent sandbox and that sandbox's environment:
// the tokens Pi reports equal the tokens the gateway metered for the
// sandbox's session, and so does the cost. It needs Pi installed from the
// npm registry in BERTH_TEST_AGENT_CLIS (see internal/modelserver's CLI
// tests) and Node on PATH.
func TestRealPiThroughTheGateway(t *testing.T) {
	dir := os.Getenv("BERTH_TEST_AGENT_CLIS")
	if dir == "" {
		t.Skip("BERTH_TEST_AGENT_CLIS is not set (a directory with the agent CLIs in node_modules)")
	}
	bin := filepath.Join(dir, "node_modules", ".bin", "pi")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("pi is not installed in %s", dir)
	}
	m := newModelWorld(t)
	sb, _ := m.agentKey(t, "pi-run", "")
	env := m.envOf(t, sb)
	home := t.TempDir()
	for name, v := range map[string]string{"models.json": env["BERTH_PI_CONFIG"], "settings.json": env["BERTH_PI_SETTINGS"]} {
		p := filepath.Join(home, ".pi", "agent", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r, err := runner.Get("pi")
	if err != nil {
		t.Fatal(err)
	}
	args, err := r.ContainerArgs(runner.Options{Model: env["BERTH_MODEL"]})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = t.TempDir()
	// Only what the sandbox is given: its key, its session, the gateway.
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "PI_OFFLINE=1",
		"BERTH_API_KEY=" + env["BERTH_API_KEY"], "BERTH_SESSION=" + env["BERTH_SESSION"], "BERTH_BASE_URL=" + env["BERTH_BASE_URL"]}
	cmd.Stdin = strings.NewReader("Say hello\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("pi: %v\nstderr:\n%s", err, stderr.String())
	}
	var tel runner.Telemetry
	tel.Model = env["BERTH_MODEL"]
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		r.ParseLine(&tel, sc.Bytes())
	}
	tel.Settle(m.inference.Catalog().Prices())
	if tel.Error != "" || tel.Turns == 0 {
		t.Fatalf("pi's run: %+v\nstdout:\n%s\nstderr:\n%s", tel, stdout.String(), stderr.String())
	}
	got, err := m.inference.Usage(t.Context(), sb)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tel.Usage, got.Usage); diff != "" || got.Requests != tel.Turns {
		t.Errorf("tokens Pi reported vs the gateway metered for session %s (-pi +gateway):\n%s requests %d, pi turns %d", sb, diff, got.Requests, tel.Turns)
	}
	if d := tel.CostUSD - got.CostUSD; d > 1e-9 || d < -1e-9 {
		t.Errorf("cost: Pi $%.9f (%s), gateway $%.9f", tel.CostUSD, tel.Cost, got.CostUSD)
	}
	t.Logf("pi: %d turns, %+v, $%.6f; gateway: %d requests, %+v, $%.6f", tel.Turns, tel.Usage, tel.CostUSD, got.Requests, got.Usage, got.CostUSD)
}
