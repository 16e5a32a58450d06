package agentrun_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/runner/runnertest"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/sandbox/sandboxtest"
)

func (e *env) kelosRun(t *testing.T, env map[string]string) sandbox.Sandbox {
	t.Helper()
	sb, err := e.svc.Create(t.Context(), e.alice, sandbox.CreateRequest{Name: "fix", Class: "kelos", Purpose: "agent", Repo: "acme/app",
		Branch: "main", Task: "add a greeting, \"quoted\" and $HOME unexpanded", Runner: "claude-code", Env: env})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// markerBlock is what a Kelos image prints after its agent's stream.
func markerBlock(lines ...string) []string {
	return append(append([]string{kelos.OutputsStart}, lines...), kelos.OutputsEnd)
}

func TestKelosRunRunsTheImageOnItsOwnTerms(t *testing.T) {
	e := newEnv(t)
	e.w.KelosClass(t)
	got := make(chan sandbox.Spec, 1)
	e.drv.SetAgent(func(spec sandbox.Spec) ([]string, int) {
		got <- spec
		fi, err := os.Stat(spec.Run.Work)
		if err != nil {
			t.Error(err)
		} else if st := fi.Sys().(*syscall.Stat_t); st.Uid != kelos.UID || st.Gid != kelos.UID {
			t.Errorf("the checkout is owned by %d:%d, want the interface's %d", st.Uid, st.Gid, kelos.UID)
		}
		// The image's own file of the prompt file's name is its work: the
		// host wrote none and deletes none.
		for name, body := range map[string]string{"hello.txt": "hello\n", ".berth-prompt.txt": "the image's own\n"} {
			if err := os.WriteFile(filepath.Join(spec.Run.Work, name), []byte(body), 0o644); err != nil {
				t.Error(err)
			}
		}
		gitIn(t, spec.Run.Work, "add", "-A")
		gitIn(t, spec.Run.Work, "commit", "-q", "-m", "add a greeting")
		out := []string{fake.Stderr(kelos.SetupStart), fake.Stderr("installing"), fake.Stderr(kelos.SetupDone)}
		out = append(out, runnertest.Stream(t, "claude-tool")...)
		return append(out, markerBlock("branch: kelos-fix", "commit: abc123", "input-tokens: 9999", "output-tokens: 9999",
			"cost-usd: 9.99", "pr: https://forge.example/acme/app/pull/7", "nothing to add")...), 0
	})
	e.run(t)
	sb := e.kelosRun(t, map[string]string{"KELOS_MODEL": "gpt-evil", "KELOS_SESSION_SETUP_ONLY": "1", "TEAM": "blue"})
	if sb.Image != sandboxtest.KelosImage || sb.Contract != sandbox.ContractKelos {
		t.Errorf("image %q contract %q, want the kelos class's own image and contract", sb.Image, sb.Contract)
	}
	end := e.waitState(t, sb.ID, sandbox.StateTerminated)

	spec := <-got
	if spec.Run.Contract != sandbox.ContractKelos {
		t.Errorf("run contract %q, want kelos", spec.Run.Contract)
	}
	if !slices.Equal(spec.Run.Args, []string{"add a greeting, \"quoted\" and $HOME unexpanded"}) {
		t.Errorf("the image's arguments are %q, want the task alone as $1", spec.Run.Args)
	}
	key := spec.Env["BERTH_API_KEY"]
	for k, want := range map[string]string{
		"KELOS_AGENT_TYPE": "claude-code", "KELOS_MODEL": "claude-sonnet-4-5", "KELOS_BASE_BRANCH": "main",
		"KELOS_SETUP_COMMAND": `["sh","-c","make deps"]`, "ANTHROPIC_API_KEY": key, "HOME": kelos.Home,
		"ANTHROPIC_BASE_URL": "http://gateway.test:8080", "TEAM": "blue",
		"KELOS_SESSION_SETUP_ONLY": "", "BERTH_PROMPT_FILE": "", "BERTH_RUNNER_FILES": "",
	} {
		if spec.Env[k] != want {
			t.Errorf("run env %s = %q, want %q", k, spec.Env[k], want)
		}
	}
	if key == "" {
		t.Error("the run has no key of its own")
	}

	run, err := e.runs.Of(t.Context(), end)
	if err != nil {
		t.Fatal(err)
	}
	if run.State != agentrun.RunSucceeded || run.Error != "" {
		t.Fatalf("run %s (%q), want succeeded", run.State, run.Error)
	}
	wantResults := map[string]string{"branch": "kelos-fix", "commit": "abc123", "input-tokens": "9999", "output-tokens": "9999",
		"cost-usd": "9.99", "pr": "https://forge.example/acme/app/pull/7"}
	if diff := cmp.Diff(wantResults, run.Results); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if len(run.Outputs) != 7 || run.Outputs[6] != "nothing to add" {
		t.Errorf("outputs %q, want the block's seven lines, the one without a key too", run.Outputs)
	}
	// The stream reported usage and cost: the markers' figures do not
	// replace them, and marker lines are not the agent's stream.
	if want := (runner.Usage{Input: 240, CacheRead: 60, CacheWrite: 10, Output: 34}); run.Telemetry.Usage != want {
		t.Errorf("usage %+v, want the stream's %+v", run.Telemetry.Usage, want)
	}
	if run.Telemetry.Cost != runner.CostNative || math.Abs(run.Telemetry.CostUSD-0.0012855) > 1e-9 {
		t.Errorf("cost %v (%s), want the stream's 0.0012855", run.Telemetry.CostUSD, run.Telemetry.Cost)
	}
	if run.Lines != len(runnertest.Stream(t, "claude-tool")) || run.Ignored != 0 {
		t.Errorf("read %d lines, %d not understood; want the stream's alone", run.Lines, run.Ignored)
	}

	bare, _ := e.local.Path(forge.Repo{Path: "acme/app"})
	if run.Branch != "berth/fix" || run.Commit == "" {
		t.Fatalf("run pushed %q at %q, want berth/fix", run.Branch, run.Commit)
	}
	if files := gitIn(t, bare, "ls-tree", "--name-only", "berth/fix"); files != ".berth-prompt.txt\nhello.txt" {
		t.Errorf("the pushed tree holds %q: want the image's files, its own .berth-prompt.txt too", files)
	}
}

func TestKelosRunTotalsFromTheMarkers(t *testing.T) {
	e := newEnv(t)
	e.w.KelosClass(t)
	e.drv.SetAgent(func(sandbox.Spec) ([]string, int) {
		return append([]string{"plain text, not the stream"}, markerBlock("input-tokens: 1200", "output-tokens: 80", "cost-usd: 0.042")...), 0
	})
	e.run(t)
	sb := e.kelosRun(t, nil)
	end := e.waitState(t, sb.ID, sandbox.StateTerminated)
	run, err := e.runs.Of(t.Context(), end)
	if err != nil {
		t.Fatal(err)
	}
	if want := (runner.Usage{Input: 1200, Output: 80}); run.Telemetry.Usage != want {
		t.Errorf("usage %+v, want the markers' %+v", run.Telemetry.Usage, want)
	}
	if run.Telemetry.Cost != runner.CostNative || run.Telemetry.CostUSD != 0.042 {
		t.Errorf("cost %v (%s), want the markers' 0.042, native", run.Telemetry.CostUSD, run.Telemetry.Cost)
	}
	if run.Lines != 1 || run.Ignored != 1 {
		t.Errorf("read %d lines, %d not understood; want the one plain line", run.Lines, run.Ignored)
	}
}

func TestKelosSetupFailures(t *testing.T) {
	for _, tt := range []struct {
		name string
		out  []string
		exit int
		want string
	}{
		{name: "failed banner", out: []string{fake.Stderr(kelos.SetupStart), fake.Stderr("make: *** no rule"), fake.Stderr(kelos.SetupFailed)}, exit: 2,
			want: "the setup command (KELOS_SETUP_COMMAND) failed, so the agent did not run (exit 2)"},
		{name: "failed banner with exit 0", out: []string{fake.Stderr(kelos.SetupFailed)}, exit: 0,
			want: "the setup command (KELOS_SETUP_COMMAND) failed, so the agent did not run"},
		{name: "killed during setup", out: []string{fake.Stderr(kelos.SetupStart)}, exit: 137,
			want: "the setup command (KELOS_SETUP_COMMAND) did not finish (exit 137), so the agent did not run"},
		{name: "the agent failed after setup", out: []string{fake.Stderr(kelos.SetupStart), fake.Stderr(kelos.SetupDone)}, exit: 1,
			want: "the agent exited 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.w.KelosClass(t)
			e.drv.SetAgent(func(sandbox.Spec) ([]string, int) { return tt.out, tt.exit })
			e.run(t)
			sb := e.kelosRun(t, nil)
			end := e.waitState(t, sb.ID, sandbox.StateFailed)
			run, err := e.runs.Of(t.Context(), end)
			if err != nil {
				t.Fatal(err)
			}
			if run.State != agentrun.RunFailed || run.Error != tt.want || end.Reason != tt.want {
				t.Errorf("run %s %q, sandbox failed with %q; want %q", run.State, run.Error, end.Reason, tt.want)
			}
		})
	}
}

func TestKelosCreateRefuses(t *testing.T) {
	e := newEnv(t)
	e.w.KelosClass(t)
	for _, tt := range []struct {
		name  string
		req   sandbox.CreateRequest
		field string
	}{
		{"no runner", sandbox.CreateRequest{Name: "k1", Class: "kelos", Purpose: "agent", Repo: "acme/app", Task: "t"}, "runner"},
		{"a task too long for an argument", sandbox.CreateRequest{Name: "k2", Class: "kelos", Purpose: "agent", Repo: "acme/app",
			Task: strings.Repeat("x", kelos.MaxPrompt+1), Runner: "claude-code"}, "task"},
		{"a task with a NUL byte", sandbox.CreateRequest{Name: "k3", Class: "kelos", Purpose: "agent", Repo: "acme/app",
			Task: "a\x00b", Runner: "claude-code"}, "task"},
		{"a runner that bypasses the gateway", sandbox.CreateRequest{Name: "k4", Class: "kelos", Purpose: "agent", Repo: "acme/app",
			Task: "t", Runner: "cursor"}, "runner"},
	} {
		_, err := e.svc.Create(t.Context(), e.alice, tt.req)
		var inv *fault.Error
		if !errors.As(err, &inv) || inv.Field != tt.field {
			t.Errorf("%s: err = %v, want invalid %s", tt.name, err, tt.field)
		}
	}
	// A kelos image needs no entry in BERTH_RUNNER_IMAGES: codex has none here.
	if _, err := e.svc.Create(t.Context(), e.alice, sandbox.CreateRequest{Name: "k5", Class: "kelos", Purpose: "agent", Repo: "acme/app",
		Task: "t", Runner: "codex"}); err != nil {
		t.Errorf("a kelos run of codex: %v, want its class's image", err)
	}
}

// TestKelosRunInMachine: on a driver whose runs happen in their machines
// (Kubernetes), a kelos image's run is no longer refused. Its machine gets
// the interface's environment, berth-init's word that the image's own
// entrypoint runs (BERTH_RUN_CONTRACT=kelos) and no task anywhere in its
// spec, not even as an argument: berth-init fetches it and makes it $1.
// The output the machine streams is read as a followed run's log is
// (results, outputs, totals, the setup banners), and its exit report
// concludes the run with what it said: a clean run's bundle becomes its
// branch; a failed setup fails the run saying so, leaving no branch.
func TestKelosRunInMachine(t *testing.T) {
	e := newEnv(t)
	e.w.KelosClass(t)
	svc, runs := inMachine(t, e)
	ctx := t.Context()
	create := func(name string) (sandbox.Sandbox, account.Principal) {
		t.Helper()
		sb, err := svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: name, Class: "kelos", Purpose: "agent", Repo: "acme/app",
			Branch: "main", Task: "add a greeting, \"quoted\" and $HOME unexpanded", Runner: "claude-code"})
		if err != nil {
			t.Fatalf("a kelos run on an in-machine driver: %v", err)
		}
		e.waitState(t, sb.ID, sandbox.StateRunning)
		return sb, e.sandboxKey(sb, e.alice)
	}

	sb, key := create("fix")
	run := e.drv.RunSpec(sb.ID)
	if run == nil || !run.InMachine || run.Contract != sandbox.ContractKelos || run.Work != "" || len(run.Args) != 0 {
		t.Fatalf("run spec %+v: want in-machine, kelos, no host checkout and no arguments (no task)", run)
	}
	env := e.drv.Env(sb.ID)
	for k, want := range map[string]string{
		"BERTH_RUN_REPORT": "gateway", "BERTH_RUN_CONTRACT": "kelos", "KELOS_AGENT_TYPE": "claude-code", "KELOS_BASE_BRANCH": "main",
		"KELOS_SETUP_COMMAND": `["sh","-c","make deps"]`, "HOME": kelos.Home, "ANTHROPIC_API_KEY": env["BERTH_API_KEY"],
		"BERTH_PROMPT_FILE": "", "BERTH_RUNNER_FILES": "",
	} {
		if env[k] != want {
			t.Errorf("machine env %s = %q, want %q", k, env[k], want)
		}
	}
	for k, v := range env {
		if strings.Contains(v, "add a greeting") {
			t.Errorf("the task is in the machine's spec (%s): it must be asked for", k)
		}
	}
	if task, err := runs.Task(ctx, key); err != nil || task != "add a greeting, \"quoted\" and $HOME unexpanded" {
		t.Fatalf("task = %q, %v", task, err)
	}

	stream := runnertest.Stream(t, "claude-tool")
	var body strings.Builder
	for _, l := range []string{kelos.SetupStart, "installing", kelos.SetupDone} {
		body.WriteString("e " + l + "\n")
	}
	for _, l := range append(stream, markerBlock("branch: kelos-fix", "input-tokens: 9999", "pr: https://forge.example/acme/app/pull/7", "nothing to add")...) {
		body.WriteString("o " + l + "\n")
	}
	if err := runs.Output(ctx, key, strings.NewReader(body.String())); err != nil {
		t.Fatal(err)
	}
	bundle, commit := bundleAs(t, e, "hello.txt")
	_, got, err := runs.Exit(ctx, key, agentrun.Report{ExitCode: 0, Commit: commit, Bundle: bundle})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != agentrun.RunSucceeded || got.Branch != "berth/fix" || got.Commit != commit || branchOf(t, e, "fix") != commit {
		t.Errorf("run %s (%q) on %s@%s, berth/fix at %q; want succeeded, the bundle's %s landed", got.State, got.Error, got.Branch, got.Commit, branchOf(t, e, "fix"), commit)
	}
	wantResults := map[string]string{"branch": "kelos-fix", "input-tokens": "9999", "pr": "https://forge.example/acme/app/pull/7"}
	if diff := cmp.Diff(wantResults, got.Results); diff != "" {
		t.Errorf("results read from the machine's stream (-want +got):\n%s", diff)
	}
	if len(got.Outputs) != 4 || got.Outputs[3] != "nothing to add" || got.Setup != kelos.SetupOK {
		t.Errorf("outputs %q, setup %d; want the block's four lines and the setup done", got.Outputs, got.Setup)
	}
	if want := (runner.Usage{Input: 240, CacheRead: 60, CacheWrite: 10, Output: 34}); got.Telemetry.Usage != want || got.Lines != len(stream) {
		t.Errorf("usage %+v over %d lines, want the stream's %+v over its %d (the markers are not the agent's stream)", got.Telemetry.Usage, got.Lines, want, len(stream))
	}
	e.waitState(t, sb.ID, sandbox.StateTerminated)

	failed, key := create("setup-fails")
	out := "e " + kelos.SetupStart + "\ne make: *** no rule\ne " + kelos.SetupFailed + "\n"
	if err := runs.Output(ctx, key, strings.NewReader(out)); err != nil {
		t.Fatal(err)
	}
	_, got, err = runs.Exit(ctx, key, agentrun.Report{ExitCode: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := "the setup command (KELOS_SETUP_COMMAND) failed, so the agent did not run (exit 1)"
	end := e.waitState(t, failed.ID, sandbox.StateFailed)
	if got.State != agentrun.RunFailed || got.Error != want || end.Reason != want || got.Setup != kelos.SetupError {
		t.Errorf("run %s %q, sandbox failed with %q; want %q", got.State, got.Error, end.Reason, want)
	}
	if at := branchOf(t, e, "setup-fails"); at != "" {
		t.Errorf("a failed run left berth/setup-fails at %s", at)
	}
}

// learning records the learning ends it is told of.
type learning struct {
	mu    sync.Mutex
	ended []string // sandbox id: why
}

func (l *learning) EndLearning(_ context.Context, sb sandbox.Sandbox, why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = append(l.ended, string(sb.ID)+": "+why)
}

// TestKelosSetupEndsLearning (issue 22): a kelos image's setup end
// banner ends its sandbox's learning (egress learn), once, and only a
// learning sandbox's.
func TestKelosSetupEndsLearning(t *testing.T) {
	for _, learn := range []bool{true, false} {
		t.Run(fmt.Sprint("learn=", learn), func(t *testing.T) {
			e := newEnv(t)
			spec := class.Spec{Name: "kelos", Image: sandboxtest.KelosImage, Isolation: "standard",
				Purposes: []string{"agent"}, Contract: "kelos", SetupCommand: []string{"sh", "-c", "make deps"}}
			if learn {
				spec.Egress = class.Egress{"learn"}
			}
			c, err := class.Parse(spec)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.w.Store.PutClasses(t.Context(), e.w.Acme.ID, []class.Class{c}); err != nil {
				t.Fatal(err)
			}
			l := &learning{}
			e.runs.SetLearning(l)
			e.drv.SetAgent(func(sandbox.Spec) ([]string, int) {
				return []string{fake.Stderr(kelos.SetupStart), "npm install output", fake.Stderr(kelos.SetupDone),
					fake.Stderr(kelos.SetupStart), fake.Stderr(kelos.SetupDone)}, 0
			})
			e.run(t)
			sb := e.kelosRun(t, nil)
			e.waitState(t, sb.ID, sandbox.StateTerminated)
			l.mu.Lock()
			defer l.mu.Unlock()
			want := []string(nil)
			if learn {
				want = []string{string(sb.ID) + ": its setup command ended"}
			}
			if !slices.Equal(l.ended, want) {
				t.Errorf("learning ended: %q, want %q", l.ended, want)
			}
		})
	}
}
