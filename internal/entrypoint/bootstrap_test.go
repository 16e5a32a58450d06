package entrypoint_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/entrypoint"
)

// gatewayStandIn answers the bootstrap route for token with env, once,
// and fails the test on anything else.
func gatewayStandIn(t *testing.T, token string, env map[string]string) *httptest.Server {
	t.Helper()
	used := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != api.BootstrapPath {
			t.Errorf("unexpected call %s %s", r.Method, r.URL.Path)
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+token || used {
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(api.Error{Code: api.CodeUnauthenticated, Message: "the token is unknown, used or expired"})
			return
		}
		used = true
		_ = json.NewEncoder(w).Encode(api.Environment{Env: env})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestWarmPoolStart: in a pool's pod berth-init waits for the claim's
// token to appear among the pod's annotations, trades it at the gateway
// for the sandbox's environment, and starts the engineer sandbox with it.
func TestWarmPoolStart(t *testing.T) {
	needCommand(t, "ssh-keygen")
	env := engineerVars()
	srv := gatewayStandIn(t, "bst_ONETIME", env)
	annotations := filepath.Join(t.TempDir(), "annotations")
	h := newHarness(t, map[string]string{
		"BERTH_BOOTSTRAP_FILE": annotations, "BERTH_BASE_URL": srv.URL, "BERTH_SANDBOX_PURPOSE": "engineer",
	})
	go func() {
		// The claim arrives later, as the kubelet rewrites the file.
		time.Sleep(200 * time.Millisecond)
		content := `berth.dev/name="quick"` + "\n" + `berth.dev/bootstrap-token=` + strconv.Quote("bst_ONETIME") + "\n"
		_ = os.WriteFile(annotations+".tmp", []byte(content), 0o644)
		_ = os.Rename(annotations+".tmp", annotations)
	}()
	if code := h.main(); code != 1 {
		t.Fatalf("Main = %d, want 1 (exec stub); stderr:\n%s", code, h.stderr.String())
	}
	if len(h.execs) != 1 || h.execs[0].path != "/usr/sbin/sshd" {
		t.Fatalf("exec calls %v, want sshd; stderr:\n%s", h.execs, h.stderr.String())
	}
	if got := h.read(".ssh/authorized_keys"); !strings.Contains(got, "ssh-ed25519 AAAAone a@x") {
		t.Errorf("authorized_keys = %q, want the fetched keys", got)
	}
	if got := h.read(".ssh/environment"); !strings.Contains(got, "BERTH_SANDBOX_ID="+env["BERTH_SANDBOX_ID"]) {
		t.Errorf("~/.ssh/environment lacks the fetched sandbox id:\n%s", got)
	}
}

// TestWarmPoolRefused: a token the gateway refuses ends the start: the
// pod finishes, and its sandbox fails.
func TestWarmPoolRefused(t *testing.T) {
	srv := gatewayStandIn(t, "bst_GOOD", nil)
	annotations := filepath.Join(t.TempDir(), "annotations")
	if err := os.WriteFile(annotations, []byte(`berth.dev/bootstrap-token="bst_USED"`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, map[string]string{"BERTH_BOOTSTRAP_FILE": annotations, "BERTH_BASE_URL": srv.URL})
	if code := h.main(); code != 1 || len(h.execs) != 0 {
		t.Fatalf("Main = %d with %d execs, want 1 and none", code, len(h.execs))
	}
	if !strings.Contains(h.stderr.String(), "401") {
		t.Errorf("stderr does not say the gateway refused:\n%s", h.stderr.String())
	}
}

// TestWarmPoolOnPodman: a podman pool member's berth-init starts sshd
// before any claim, with none of a sandbox's environment and a stale
// ready file gone; the claim's token, written later into its directory,
// is noticed, traded once and removed; HOME gets the sandbox's keys; only
// then does the ready file appear, and berth-init stays sshd's parent
// instead of exec'ing it.
func TestWarmPoolOnPodman(t *testing.T) {
	needCommand(t, "ssh-keygen")
	env := engineerVars()
	srv := gatewayStandIn(t, "bst_ONETIME", env)
	dir := t.TempDir()
	claim, ready := filepath.Join(dir, "claim"), filepath.Join(dir, "ready")
	if err := os.WriteFile(ready, []byte("ready\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, map[string]string{
		"BERTH_BOOTSTRAP_FILE": claim, "BERTH_READY_FILE": ready, "BERTH_BASE_URL": srv.URL, "BERTH_SANDBOX_PURPOSE": "engineer",
	})
	e := h.env()
	var started []string
	startedEnv := ""
	e.Start = func(c *exec.Cmd) error {
		started = c.Args
		startedEnv = strings.Join(c.Env, "\n")
		if _, err := os.Stat(ready); err == nil {
			t.Error("sshd started while the last start's ready file was still there")
		}
		if _, err := os.Stat(claim); err == nil {
			t.Error("sshd started after the claim: it must answer before")
		}
		go func() {
			// The claim comes once sshd answers, as the driver writes it.
			content := `berth.dev/bootstrap-token=` + strconv.Quote("bst_ONETIME") + "\n"
			_ = os.WriteFile(filepath.Join(dir, ".claim.tmp"), []byte(content), 0o644)
			_ = os.Rename(filepath.Join(dir, ".claim.tmp"), claim)
		}()
		return nil
	}
	supervised := false
	e.Supervise = func(c *exec.Cmd, _ func(int)) int {
		supervised = true
		if _, err := os.Stat(ready); err != nil {
			t.Errorf("supervising sshd before saying ready: %v", err)
		}
		if got := h.read(".ssh/authorized_keys"); !strings.Contains(got, "ssh-ed25519 AAAAone a@x") {
			t.Errorf("ready with authorized_keys %q, want the fetched keys", got)
		}
		return 0
	}
	code := entrypoint.Main([]string{"/usr/local/bin/berth-init"}, e)
	if code != 0 || !supervised {
		t.Fatalf("Main = %d, supervised %v; stderr:\n%s", code, supervised, h.stderr.String())
	}
	if len(started) == 0 || started[0] != "/usr/sbin/sshd" || len(h.execs) != 0 {
		t.Fatalf("started %v and exec'd %v; want sshd started, nothing exec'd", started, h.execs)
	}
	for _, secretish := range []string{"BERTH_SANDBOX_ID", "BERTH_API_KEY", "BERTH_GIT_TOKEN"} {
		if strings.Contains(startedEnv, secretish) {
			t.Errorf("the early sshd's environment has %s:\n%s", secretish, startedEnv)
		}
	}
	if _, err := os.Stat(claim); !os.IsNotExist(err) {
		t.Errorf("the used token's file is still there: %v", err)
	}
}
