package cli_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// TestMakeUpAgain runs the script behind `make up` (scripts/up) twice
// around every state the demo sandbox can be in, against the real gateway
// it starts, on the fake driver (no podman): never made, running,
// suspended, expired, terminated, and after `make down` (the fake driver
// forgets its machines, so the gateway finds demo failed when it comes
// back). Every run must exit 0 and leave exactly one demo, running.
func TestMakeUpAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("runs scripts/up a dozen times")
	}
	for _, tool := range []string{"bash", "curl", "git", "ssh-keygen", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("scripts/up needs %s: %v", tool, err)
		}
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "berth")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BERTH_") {
			env = append(env, kv)
		}
	}
	env = append(env, "BERTH_DEMO_DIR="+state, "BERTH_ADDR=127.0.0.1:"+port, "BERTH_SANDBOX_DRIVER=fake",
		"BERTH_SWEEP_INTERVAL=1s", "BERTH_DOWN_TIMEOUT=30",
		"XDG_STATE_HOME="+filepath.Join(state, "xdg-state")) // where berth serve records its settings
	script := func(name string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(root, "scripts", name))
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("scripts/%s: %v\n%s", name, err, out.String())
		}
		t.Logf("scripts/%s: %v", name, time.Since(start).Round(time.Millisecond))
	}
	t.Cleanup(func() { script("down") })
	berth := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(state, "bin", "berth"), args...)
		cmd.Env = append(env, "BERTH_CONFIG="+filepath.Join(state, "config.json"), "BERTH_URL=http://127.0.0.1:"+port)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := berth(args...)
		if err != nil {
			t.Fatalf("berth %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	demoState := func() string {
		out, err := berth("sandbox", "show", "demo", "-o", "json")
		if err != nil {
			return ""
		}
		var sb struct{ State string }
		if err := json.Unmarshal([]byte(out), &sb); err != nil {
			t.Fatalf("show demo -o json: %v\n%s", err, out)
		}
		return sb.State
	}
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for got := demoState(); got != want; got = demoState() {
			if time.Now().After(deadline) {
				t.Fatalf("demo is %q after 20s, want %s", got, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	upTwice := func(from string) {
		t.Helper()
		for i := range 2 {
			script("up")
			if got := demoState(); got != "running" {
				t.Fatalf("from %s, make up #%d left demo %q, want running", from, i+1, got)
			}
			live := 0
			for line := range strings.Lines(must("sandbox", "list")) {
				if strings.HasPrefix(line, "demo ") {
					live++
				}
			}
			if live != 1 {
				t.Fatalf("from %s, make up #%d left %d live sandboxes named demo, want 1", from, i+1, live)
			}
		}
	}

	upTwice("never made")
	upTwice("running")

	must("sandbox", "suspend", "demo")
	waitFor("suspended")
	upTwice("suspended")

	// Expired: its lifetime ran out (moved into the past in the database
	// rather than waited for), and the sweep noticed.
	id := strings.TrimSpace(must("sandbox", "show", "demo", "-o", "json"))
	var sb struct{ ID string }
	if err := json.Unmarshal([]byte(id), &sb); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(state, "data", "berth.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE sandboxes SET expires_at = ? WHERE id = ?`, time.Now().Add(-time.Minute).UnixNano(), sb.ID); err != nil {
		t.Fatal(err)
	}
	db.Close()
	waitFor("expired")
	upTwice("expired")

	must("sandbox", "terminate", "demo")
	waitFor("terminated")
	upTwice("terminated")

	script("down")
	upTwice("make down")
}
