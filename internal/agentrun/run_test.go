package agentrun_test

import (
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/runner/runnertest"
	"berth.dev/berth/internal/sandbox"
)

// gitIn runs git in dir as the agent would, failing the test on error.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=agent", "GIT_AUTHOR_EMAIL=agent@example.com",
		"GIT_COMMITTER_NAME=agent", "GIT_COMMITTER_EMAIL=agent@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir,
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// seen is what the fake agent found in its container.
type seen struct {
	prompt string
	env    map[string]string
	args   []string
	work   string
}

func TestAgentRunPushesItsWorkAndReportsItsUsage(t *testing.T) {
	e := newEnv(t)
	got := make(chan seen, 1)
	e.drv.SetAgent(func(spec sandbox.Spec) ([]string, int) {
		b, err := os.ReadFile(filepath.Join(spec.Run.Work, ".berth-prompt.txt"))
		if err != nil {
			t.Errorf("the agent found no prompt file: %v", err)
		}
		got <- seen{prompt: string(b), env: spec.Env, args: spec.Run.Args, work: spec.Run.Work}
		if err := os.WriteFile(filepath.Join(spec.Run.Work, "hello.txt"), []byte("hello\n"), 0o644); err != nil {
			t.Error(err)
		}
		gitIn(t, spec.Run.Work, "add", "-A")
		gitIn(t, spec.Run.Work, "commit", "-q", "-m", "add a greeting")
		return runnertest.Stream(t, "claude-tool"), 0
	})
	e.run(t)
	sb := e.agentRun(t, "claude-code")
	if sb.Image != "localhost/berth-agent-claude-code:latest" {
		t.Errorf("image %q, want the claude-code runner's", sb.Image)
	}
	end := e.waitState(t, sb.ID, sandbox.StateTerminated)
	if end.Reason != "its task finished" {
		t.Errorf("ended with reason %q", end.Reason)
	}

	s := <-got
	if s.prompt != "add a greeting" {
		t.Errorf("prompt file holds %q, want the task", s.prompt)
	}
	for k, want := range map[string]string{
		"BERTH_RUNNER": "claude-code", "BERTH_PROMPT_FILE": "/work/.berth-prompt.txt", "BERTH_MODEL": "claude-sonnet-4-5",
		"ANTHROPIC_API_KEY": s.env["BERTH_API_KEY"],
	} {
		if s.env[k] != want {
			t.Errorf("run env %s = %q, want %q", k, s.env[k], want)
		}
	}
	if s.env["BERTH_API_KEY"] == "" {
		t.Error("the run has no key of its own")
	}
	if strings.Join(s.args, " ") == "" || !strings.Contains(strings.Join(s.args, " "), "stream-json") {
		t.Errorf("claude-code args %q: want the stream-json contract", s.args)
	}

	run, err := e.runs.Of(t.Context(), end)
	if err != nil {
		t.Fatal(err)
	}
	if run.State != agentrun.RunSucceeded || run.ExitCode != 0 || run.Error != "" {
		t.Errorf("run %s exit %d error %q, want succeeded", run.State, run.ExitCode, run.Error)
	}
	want := runner.Usage{Input: 240, CacheRead: 60, CacheWrite: 10, Output: 34}
	if run.Telemetry.Usage != want {
		t.Errorf("usage %+v, want %+v (the stream's totals)", run.Telemetry.Usage, want)
	}
	if run.Telemetry.Cost != runner.CostNative || math.Abs(run.Telemetry.CostUSD-0.0012855) > 1e-9 {
		t.Errorf("cost %v (%s), want the CLI's own 0.0012855", run.Telemetry.CostUSD, run.Telemetry.Cost)
	}
	if run.Lines == 0 || run.Ignored != 0 {
		t.Errorf("read %d lines, %d not understood", run.Lines, run.Ignored)
	}

	// The work is on the sandbox's branch of the repository, and only there.
	bare, err := e.local.Path(forge.Repo{Path: "acme/app"})
	if err != nil {
		t.Fatal(err)
	}
	if run.Branch != "berth/fix" || run.Commit == "" {
		t.Fatalf("run pushed %q at %q, want berth/fix", run.Branch, run.Commit)
	}
	if head := gitIn(t, bare, "rev-parse", "refs/heads/berth/fix"); head != run.Commit {
		t.Errorf("berth/fix is at %s, the run says %s", head, run.Commit)
	}
	if files := gitIn(t, bare, "ls-tree", "--name-only", "berth/fix"); files != "hello.txt" {
		t.Errorf("the pushed tree holds %q: want the agent's file and never the prompt", files)
	}
	if main := gitIn(t, bare, "rev-list", "--count", "main"); main != "1" {
		t.Errorf("main has %s commits: the run must push only its own branch", main)
	}
	if _, err := os.Stat(s.work); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the checkout %s is still there after the run: %v", s.work, err)
	}

	// Its log is kept, and readable by its owner only.
	f, _, err := e.runs.Log(t.Context(), e.alice, "fix")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, _, err := e.runs.Log(t.Context(), e.stranger, string(sb.ID)); !errors.Is(err, fault.NotFound) {
		t.Errorf("a stranger read the run log: err = %v, want fault.NotFound", err)
	}

	entries, _, err := e.st.ListAudit(t.Context(), audit.Filter{}, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	pushed := false
	for _, a := range entries {
		if a.Action == audit.GitPush && a.Sandbox == string(sb.ID) && a.Outcome == audit.OK && a.Detail == "refs/heads/berth/fix" {
			pushed = true
		}
	}
	if !pushed {
		t.Error("the run's push is not in the audit log")
	}
}

func TestAgentRunFailures(t *testing.T) {
	for _, tt := range []struct {
		name, runner, stream string
		exit                 int
		commit               bool
		wantErr              string
	}{
		{name: "non-zero exit", runner: "claude-code", stream: "claude-error", exit: 1, commit: true, wantErr: "the agent exited 1"},
		{name: "pi error with exit 0", runner: "pi", stream: "pi-error", exit: 0, commit: true, wantErr: "the agent reported an error"},
		{name: "killed", runner: "pi", stream: "pi-text", exit: 137, wantErr: "the agent exited 137"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.drv.SetAgent(func(spec sandbox.Spec) ([]string, int) {
				if tt.commit {
					if err := os.WriteFile(filepath.Join(spec.Run.Work, "half.txt"), []byte("half done\n"), 0o644); err != nil {
						t.Error(err)
					}
					gitIn(t, spec.Run.Work, "add", "-A")
					gitIn(t, spec.Run.Work, "commit", "-q", "-m", "half")
				}
				return runnertest.Stream(t, tt.stream), tt.exit
			})
			e.run(t)
			sb := e.agentRun(t, tt.runner)
			end := e.waitState(t, sb.ID, sandbox.StateFailed)
			run, err := e.runs.Of(t.Context(), end)
			if err != nil {
				t.Fatal(err)
			}
			if run.State != agentrun.RunFailed || !strings.HasPrefix(run.Error, tt.wantErr) || run.ExitCode != tt.exit {
				t.Errorf("run %s exit %d error %q, want failed, exit %d, %q", run.State, run.ExitCode, run.Error, tt.exit, tt.wantErr)
			}
			if !strings.HasPrefix(end.Reason, tt.wantErr) {
				t.Errorf("sandbox failed with reason %q, want %q", end.Reason, tt.wantErr)
			}
			bare, _ := e.local.Path(forge.Repo{Path: "acme/app"})
			cmd := exec.Command("git", "--git-dir", bare, "rev-parse", "--verify", "--quiet", "refs/heads/berth/fix")
			if out, err := cmd.Output(); err == nil {
				t.Errorf("a failed run pushed berth/fix at %s", out)
			}
			if run.Branch != "" || run.Commit != "" {
				t.Errorf("a failed run reports branch %q commit %q", run.Branch, run.Commit)
			}
		})
	}
}

// Sandbox names repeat (another owner's "fix", a later one's): a run
// whose branch berth/<name> is already in the repository does not start,
// says why, and leaves that branch where it was.
func TestAgentRunNeverMovesAnothersBranch(t *testing.T) {
	e := newEnv(t)
	ran := false
	e.drv.SetAgent(func(sandbox.Spec) ([]string, int) { ran = true; return runnertest.Stream(t, "pi-text"), 0 })
	e.run(t)
	bare, err := e.local.Path(forge.Repo{Path: "acme/app"})
	if err != nil {
		t.Fatal(err)
	}
	main := gitIn(t, bare, "rev-parse", "refs/heads/main")
	gitIn(t, bare, "update-ref", "refs/heads/berth/fix", main) // bob's fix, say
	sb := e.agentRun(t, "pi")
	end := e.waitState(t, sb.ID, sandbox.StateFailed)
	if !strings.Contains(end.Reason, "already has a branch berth/fix") || !strings.Contains(end.Reason, "name this sandbox differently") {
		t.Errorf("failed with reason %q, want the taken branch named and what to do", end.Reason)
	}
	if ran {
		t.Error("the agent ran though its branch was another's")
	}
	if got := gitIn(t, bare, "rev-parse", "refs/heads/berth/fix"); got != main {
		t.Errorf("berth/fix moved to %s", got)
	}
}

func TestAgentRunWithNothingToCommitSucceedsWithoutABranch(t *testing.T) {
	e := newEnv(t)
	e.drv.SetAgent(func(sandbox.Spec) ([]string, int) { return runnertest.Stream(t, "pi-text"), 0 })
	e.run(t)
	sb := e.agentRun(t, "pi")
	end := e.waitState(t, sb.ID, sandbox.StateTerminated)
	run, err := e.runs.Of(t.Context(), end)
	if err != nil {
		t.Fatal(err)
	}
	if run.State != agentrun.RunSucceeded || run.Branch != "" || run.Commit != "" {
		t.Errorf("run %s branch %q commit %q, want succeeded with nothing pushed", run.State, run.Branch, run.Commit)
	}
	if want := (runner.Usage{Input: 120, CacheRead: 30, Output: 17}); run.Telemetry.Usage != want {
		t.Errorf("usage %+v, want %+v", run.Telemetry.Usage, want)
	}
	if run.Telemetry.Cost != runner.CostNative || math.Abs(run.Telemetry.CostUSD-0.000624) > 1e-9 {
		t.Errorf("cost %v (%s), want pi's own 0.000624", run.Telemetry.CostUSD, run.Telemetry.Cost)
	}
}

func TestAgentRunRefusesARunnerWithoutAnImage(t *testing.T) {
	e := newEnv(t)
	e.run(t)
	for _, tt := range []struct {
		runner string
		want   error
	}{
		{"codex", fault.Unavailable}, // a runner, but no image here
		{"cursor", fault.Invalid},    // talks to its vendor itself
		{"vim", fault.Invalid},
	} {
		_, err := e.svc.Create(t.Context(), e.alice, sandbox.CreateRequest{Name: "r-" + tt.runner, Purpose: "agent", Repo: "acme/app", Task: "t", Runner: tt.runner})
		if !errors.Is(err, tt.want) {
			t.Errorf("runner %s: err = %v, want %v", tt.runner, err, tt.want)
		}
	}
	if n := e.drv.Starts(); n != 0 {
		t.Errorf("%d containers started for refused runs", n)
	}
}

// SPEC S13 via issue 5: the runner is the creator's choice, else the
// class's default, else the deployment's.
func TestAgentRunnerDefaultsFromTheClassThenTheDeployment(t *testing.T) {
	e := newEnv(t, withRunner("claude-code"))
	e.run(t)
	if _, err := e.classes.Apply(t.Context(), e.admin, "", strings.NewReader(`sandboxes:
  - name: pi-agents
    image: localhost/berth-sandbox:1
    isolation: standard
    purposes: [agent]
    runner: pi
`)); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, class, runner, want string }{
		{"class-default", "pi-agents", "", "pi"},
		{"creator-choice", "pi-agents", "claude-code", "claude-code"},
		{"deployment-default", "agent", "", "claude-code"},
	} {
		sb, err := e.svc.Create(t.Context(), e.alice, sandbox.CreateRequest{Name: tt.name, Class: tt.class, Purpose: "agent",
			Repo: "acme/app", Task: "t", Runner: tt.runner})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if sb.Runner != tt.want || sb.Image != "localhost/berth-agent-"+tt.want+":latest" {
			t.Errorf("%s: runner %q image %q, want %s and its image", tt.name, sb.Runner, sb.Image, tt.want)
		}
	}
}

func TestTerminatingARunRemovesItsCheckout(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	work := make(chan string, 1)
	e.drv.SetAgent(func(spec sandbox.Spec) ([]string, int) {
		work <- spec.Run.Work
		<-release
		return nil, 143
	})
	e.run(t)
	sb := e.agentRun(t, "claude-code")
	dir := <-work
	if _, err := e.svc.Terminate(t.Context(), e.alice, "fix"); err != nil {
		t.Fatal(err)
	}
	close(release)
	end := e.waitState(t, sb.ID, sandbox.StateTerminated)
	run, err := e.runs.Of(t.Context(), end)
	if err != nil {
		t.Fatal(err)
	}
	if run.State != agentrun.RunFailed || !strings.Contains(run.Error, "terminated") || run.EndedAt.IsZero() {
		t.Errorf("run of a terminated sandbox: %s, %q, ended %v", run.State, run.Error, run.EndedAt)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the checkout of a terminated run is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".berth-prompt.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the prompt of a terminated run is still there: %v", err)
	}
}
