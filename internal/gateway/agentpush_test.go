package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/runner/runnertest"
	"berth.dev/berth/internal/sandbox"
)

// midRunPush is what an agent that pushes mid-run does, with what its
// container holds (its key and BERTH_REPO): clone through the gateway,
// commit, and git push berth/<name>. It returns what git said.
func midRunPush(t *testing.T, spec sandbox.Spec) string {
	dir := t.TempDir()
	clone := exec.Command("git", "clone", "-q", withAuth(t, spec.Env["BERTH_REPO"], "sandbox", spec.Env["BERTH_API_KEY"]), "work")
	clone.Dir, clone.Env = dir, gitEnv(dir)
	if out, err := clone.CombinedOutput(); err != nil {
		t.Errorf("agent: clone through the gateway: %v\n%s", err, out)
		return ""
	}
	work := filepath.Join(dir, "work")
	var said strings.Builder
	for _, args := range [][]string{{"commit", "-q", "--allow-empty", "-m", "pushed mid-run"}, {"push", "origin", "HEAD:refs/heads/berth/" + spec.Sandbox.Name}} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = work, gitEnv(work)
		out, _ := cmd.CombinedOutput()
		said.Write(out)
	}
	return said.String()
}

// TestAgentRunKeyNeverPushes (issue 14, item 4): the key inside an agent
// run's container may clone its repository through the gateway but not
// push, not even berth/<name>: real git over HTTP gets a remote rejection
// that says the host pushes, the refusal is audited, and a run that then
// fails leaves no branch. A clean run's branch is the host's push of its
// checkout, never what the agent pushed.
func TestAgentRunKeyNeverPushes(t *testing.T) {
	for _, tt := range []struct {
		name string
		exit int
	}{{"failed run", 3}, {"clean run", 0}} {
		t.Run(tt.name, func(t *testing.T) {
			w := newRunWorld(t)
			said := make(chan string, 1)
			lines := runnertest.Stream(t, "claude-tool")
			w.drv.SetAgent(func(spec sandbox.Spec) ([]string, int) {
				said <- midRunPush(t, spec)
				if err := os.WriteFile(filepath.Join(spec.Run.Work, "hello.txt"), []byte("hello\n"), 0o644); err != nil {
					t.Error(err)
				}
				for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "the checkout's work"}} {
					cmd := exec.Command("git", args...)
					cmd.Dir, cmd.Env = spec.Run.Work, gitEnv(spec.Run.Work)
					if out, err := cmd.CombinedOutput(); err != nil {
						t.Errorf("agent: git %v: %v\n%s", args, err, out)
					}
				}
				return lines, tt.exit
			})
			sb := w.createAgent(t, "fix")
			if out := <-said; !strings.Contains(out, "[remote rejected]") || !strings.Contains(out, sandbox.AgentPushRefused) {
				t.Errorf("the agent's push mid-run: git said\n%s\nwant a remote rejection saying %q", out, sandbox.AgentPushRefused)
			}
			end := w.waitEnded(t, sb.ID)
			at := w.branch(t, "fix")
			switch {
			case tt.exit != 0 && (end.State != "failed" || at != ""):
				t.Errorf("failed run: sandbox %s, berth/fix at %q; want failed and no branch", end.State, at)
			case tt.exit == 0 && (end.Run == nil || end.Run.Commit == "" || at != end.Run.Commit):
				t.Errorf("clean run: berth/fix at %q, run %+v; want the host's push of its checkout", at, end.Run)
			}
			events, _, err := w.st.ListAudit(t.Context(), audit.Filter{Sandbox: sb.ID}, paging.Request{})
			if err != nil {
				t.Fatal(err)
			}
			refused := 0
			for _, e := range events {
				if e.Action == audit.GitPush && e.Outcome == audit.Refused && strings.Contains(e.Detail, sandbox.AgentPushRefused) {
					refused++
				}
			}
			if refused != 1 {
				t.Errorf("%d refused pushes of the run's key in the audit log, want 1: %+v", refused, events)
			}
		})
	}
}

// TestInMachineBundleOverHTTP: an in-machine run's exit report over real
// HTTP. Its bundle lands only after a clean run; a failed run's or a
// malformed one leaves no branch (the run says why); one over the limit,
// or a report too large to read, is refused naming bundle and the limit;
// a terminated run's key reports nothing.
func TestInMachineBundleOverHTTP(t *testing.T) {
	w := newRunWorld(t, func(d *fake.Driver) sandbox.Driver { return fake.NewInMachine(d) })
	ctx := t.Context()
	report := func(key string, body []byte) (int, string) {
		t.Helper()
		return w.call(t, "POST", api.RunExitPath, key, bytes.NewReader(body))
	}
	start := func(name string) (string, []byte, string) {
		t.Helper()
		sb, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: name, Purpose: "agent", Repo: "acme/app", Branch: "main", Task: "t", Runner: "claude-code"})
		if err != nil {
			t.Fatal(err)
		}
		env := machineEnv(t, w.drv, sb.ID)
		dir := t.TempDir()
		run(t, dir, "git", "clone", "-q", "--depth", "1", withAuth(t, env["BERTH_REPO"], "sandbox", env["BERTH_API_KEY"]), "work")
		work := filepath.Join(dir, "work")
		base := run(t, work, "git", "rev-parse", "HEAD")
		run(t, work, "git", "commit", "-q", "--allow-empty", "-m", name)
		run(t, work, "git", "bundle", "create", "-q", filepath.Join(dir, "b"), "HEAD", "^"+base)
		b, err := os.ReadFile(filepath.Join(dir, "b"))
		if err != nil {
			t.Fatal(err)
		}
		return env["BERTH_API_KEY"], b, run(t, work, "git", "rev-parse", "HEAD")
	}
	exitReport := func(rep api.RunExit) []byte {
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	key, bundle, commit := start("failed")
	if code, out := report(key, exitReport(api.RunExit{ExitCode: 1, Commit: commit, Bundle: bundle})); code != http.StatusOK || !strings.Contains(out, `"state": "failed"`) {
		t.Errorf("a failed run's report: %d %s", code, out)
	}
	if at := w.branch(t, "failed"); at != "" {
		t.Errorf("a failed run's bundle landed: berth/failed at %s", at)
	}

	key, _, commit = start("malformed")
	code, out := report(key, exitReport(api.RunExit{Commit: commit, Bundle: []byte("# v2 git bundle\n" + commit + " HEAD\n\nnot a pack")}))
	if code != http.StatusOK || !strings.Contains(out, "push: the run's bundle") || w.branch(t, "malformed") != "" {
		t.Errorf("a malformed bundle: %d %s, berth/malformed at %q; want the run failed saying why, no branch", code, out, w.branch(t, "malformed"))
	}

	key, _, commit = start("oversized")
	code, out = report(key, exitReport(api.RunExit{Commit: commit, Bundle: make([]byte, agentrun.MaxBundle+1)}))
	if code != http.StatusBadRequest || !strings.Contains(out, `"field": "bundle"`) || !strings.Contains(out, "64 MiB") {
		t.Errorf("a bundle over the limit: %d %s; want 400 naming bundle and the limit", code, out)
	}
	code, out = report(key, bytes.Repeat([]byte("x"), agentrun.MaxBundle/3*4+2<<20))
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(out, `"field": "body"`) || !strings.Contains(out, fmt.Sprintf("larger than %d bytes", agentrun.MaxBundle/3*4+1<<20)) {
		t.Errorf("a report too large to read: %d %s; want 413 naming the body and the limit (the gateway's one body rule)", code, out)
	}

	key, bundle, commit = start("ended")
	if _, err := w.owner.Terminate(ctx, "ended"); err != nil {
		t.Fatal(err)
	}
	if code, out := report(key, exitReport(api.RunExit{Commit: commit, Bundle: bundle})); code/100 == 2 {
		t.Errorf("a terminated run's report: %d %s, want refused", code, out)
	}
	if at := w.branch(t, "ended"); at != "" {
		t.Errorf("a terminated run's bundle landed: berth/ended at %s", at)
	}

	key, bundle, commit = start("clean")
	if code, out := report(key, exitReport(api.RunExit{Commit: commit, Bundle: bundle})); code != http.StatusOK || w.branch(t, "clean") != commit {
		t.Errorf("a clean run's report: %d %s, berth/clean at %q; want the bundle's %s", code, out, w.branch(t, "clean"), commit)
	}
}
