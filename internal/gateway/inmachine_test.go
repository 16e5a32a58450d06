package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/runner/runnertest"
	"berth.dev/berth/internal/sandbox"
)

// TestInMachineRunThroughTheGateway: on a driver whose agent runs happen in
// their machines (Kubernetes), the test plays the machine with nothing but
// what its spec holds (its key and the clone URL) and the gateway's routes:
// git clones through the gateway, asks for the task, streams the output,
// and reports its exit with its work as a git bundle; its key pushes
// nothing, not even its own branch. The run ends as a followed one does:
// its log, its telemetry, its branch (the gateway's landing of the
// bundle), terminated.
func TestInMachineRunThroughTheGateway(t *testing.T) {
	w := newRunWorld(t, func(d *fake.Driver) sandbox.Driver { return fake.NewInMachine(d) })
	ctx := t.Context()
	sb, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "fix", Purpose: "agent", Repo: "acme/app", Branch: "main", Task: "add a greeting", Runner: "claude-code"})
	if err != nil {
		t.Fatal(err)
	}
	env := machineEnv(t, w.drv, sb.ID)
	key, repo := env["BERTH_API_KEY"], env["BERTH_REPO"]
	if key == "" || repo == "" || env["BERTH_RUN_REPORT"] != "gateway" {
		t.Fatalf("machine env: key %v, BERTH_REPO %q, BERTH_RUN_REPORT %q", key != "", repo, env["BERTH_RUN_REPORT"])
	}
	call := func(method, path, bearer, body string) (int, string) {
		t.Helper()
		return w.call(t, method, path, bearer, strings.NewReader(body))
	}

	if code, _ := call("GET", api.RunTaskPath, w.ownerKey, ""); code != http.StatusForbidden {
		t.Errorf("task with the owner's key: %d, want 403", code)
	}
	if code, task := call("GET", api.RunTaskPath, key, ""); code != http.StatusOK || task != "add a greeting" {
		t.Fatalf("task: %d %q", code, task)
	}

	dir := t.TempDir()
	run(t, dir, "git", "clone", "-q", "--depth", "1", "--branch", "main", withAuth(t, repo, "sandbox", key), "work")
	work := filepath.Join(dir, "work")
	base := run(t, work, "git", "rev-parse", "HEAD")
	if err := os.WriteFile(filepath.Join(work, "hello.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, work, "git", "add", "-A")
	run(t, work, "git", "commit", "-q", "-m", "add a greeting")
	for _, ref := range []string{"HEAD:refs/heads/main", "HEAD:refs/heads/berth/fix"} {
		if out := refuse(t, work, "push", "-q", "origin", ref); !strings.Contains(out, "[remote rejected]") || !strings.Contains(out, sandbox.AgentPushRefused) {
			t.Errorf("push %s with the run's key: %s; want a remote rejection saying the host pushes", ref, out)
		}
	}
	if at := w.branch(t, "fix"); at != "" {
		t.Fatalf("the run's key pushed berth/fix at %s", at)
	}
	commit := run(t, work, "git", "rev-parse", "HEAD")
	run(t, work, "git", "bundle", "create", "-q", filepath.Join(dir, "work.bundle"), "HEAD", "^"+base)
	bundle, err := os.ReadFile(filepath.Join(dir, "work.bundle"))
	if err != nil {
		t.Fatal(err)
	}

	// The output as berth-init streams it, in one request as it comes.
	stream := runnertest.Stream(t, "claude-tool")
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, "POST", w.url+api.RunOutputPath, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	go func() {
		for _, l := range stream {
			_, _ = io.WriteString(pw, "o "+l+"\n")
		}
		_, _ = io.WriteString(pw, "e a line on stderr\n")
		pw.Close()
	}()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("output: %d", resp.StatusCode)
	}
	if code, _ := call("POST", api.RunOutputPath, w.ownerKey, "o {}\n"); code != http.StatusForbidden {
		t.Errorf("output with the owner's key: %d, want 403", code)
	}

	body, _ := json.Marshal(api.RunExit{ExitCode: 0, Commit: commit, Bundle: bundle})
	code, out := call("POST", api.RunExitPath, key, string(body))
	if code != http.StatusOK {
		t.Fatalf("exit: %d %s", code, out)
	}
	var got api.Run
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.State != "succeeded" || got.Branch != "berth/fix" || got.Commit != commit || got.Lines != len(stream) || got.Usage.Output == 0 {
		t.Errorf("run: %s %q on %s@%s, %d lines, %+v; want succeeded on berth/fix@%s, %d lines, tokens",
			got.State, got.Error, got.Branch, got.Commit, got.Lines, got.Usage, commit, len(stream))
	}
	if at := w.branch(t, "fix"); at != commit {
		t.Errorf("berth/fix is at %q, want the bundle's %s", at, commit)
	}
	if code, out := call("POST", api.RunExitPath, key, string(body)); code != http.StatusUnauthorized && code != http.StatusConflict {
		t.Errorf("a second report: %d %s, want refused", code, out)
	}
	final, err := w.owner.Sandbox(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if final.State != "terminated" {
		t.Errorf("sandbox after the report: %s (%s)", final.State, final.Reason)
	}
	rc, err := w.owner.RunLog(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	logText := string(b)
	if !strings.Contains(logText, "stderr: a line on stderr") || strings.Count(logText, "\n") != len(stream)+1 {
		t.Errorf("run log: %d lines, want the %d of the stream and its stderr line", strings.Count(logText, "\n"), len(stream)+1)
	}
	if code, _ := call("GET", api.RunTaskPath, key, ""); code != http.StatusUnauthorized && code != http.StatusConflict {
		t.Errorf("task after the run: %d, want the ended sandbox's key refused", code)
	}
}

// call makes one request of the gateway with bearer as the key and
// returns the answer's status and body.
func (w *runWorld) call(t *testing.T, method, path, bearer string, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, w.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestReviewerPushesNothing: a reviewer's key may clone its repository
// through the gateway but not push, not even its own branch: its work is
// its verdict (on podman it has no remote at all).
func TestReviewerPushesNothing(t *testing.T) {
	w := newRunWorld(t, func(d *fake.Driver) sandbox.Driver { return fake.NewInMachine(d) })
	sb, err := w.owner.CreateSandbox(t.Context(), api.CreateSandbox{Name: "rev", Purpose: "agent", Repo: "acme/app", Branch: "main",
		Task: "review it", Runner: "claude-code", Role: "reviewer"})
	if err != nil {
		t.Fatal(err)
	}
	env := machineEnv(t, w.drv, sb.ID)
	if env["BERTH_RUN_PUSH"] != "no" {
		t.Errorf("BERTH_RUN_PUSH=%q, want no", env["BERTH_RUN_PUSH"])
	}
	dir := t.TempDir()
	run(t, dir, "git", "clone", "-q", "--depth", "1", withAuth(t, env["BERTH_REPO"], "sandbox", env["BERTH_API_KEY"]), "work")
	work := filepath.Join(dir, "work")
	run(t, work, "git", "commit", "-q", "--allow-empty", "-m", "a reviewer's commit")
	if out := refuse(t, work, "push", "-q", "origin", "HEAD:refs/heads/berth/rev"); !strings.Contains(out, "reviewer pushes nothing") {
		t.Errorf("a reviewer's push: %s; want refused by the ref policy", out)
	}
}
