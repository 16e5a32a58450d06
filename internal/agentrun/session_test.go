package agentrun_test

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/runner/runnertest"
	"berth.dev/berth/internal/sandbox"
)

// TestSessionTakesItsNextTask: a session's first run pushes and the
// session waits suspended, its key revoked; its next task starts it again
// with a fresh key on the same checkout and home, its CLI told to
// continue, and the host pushes on top of the first push. Who may give a
// task, and when, is checked first.
func TestSessionTakesItsNextTask(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var runs []seen
	homes := map[string]bool{}
	e.drv.SetAgent(func(spec sandbox.Spec) ([]string, int) {
		b, _ := os.ReadFile(filepath.Join(spec.Run.Work, ".berth-prompt.txt"))
		mu.Lock()
		n := len(runs) + 1
		runs = append(runs, seen{prompt: string(b), env: spec.Env, args: spec.Run.Args, work: spec.Run.Work})
		homes[spec.Run.Home] = true
		mu.Unlock()
		file := filepath.Join(spec.Run.Work, "task"+string(rune('0'+n))+".txt")
		if err := os.WriteFile(file, []byte("done\n"), 0o644); err != nil {
			t.Error(err)
		}
		gitIn(t, spec.Run.Work, "add", "-A")
		gitIn(t, spec.Run.Work, "commit", "-q", "-m", "task")
		return runnertest.Stream(t, "claude-tool"), 0
	})
	// saw is what the machines saw so far: the agent runs on the
	// sandbox service's goroutines, and so does the later "once".
	saw := func() ([]seen, map[string]bool) {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(runs), maps.Clone(homes)
	}
	e.run(t)
	ctx := t.Context()
	sb, err := e.svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: "talk", Purpose: "agent", Repo: "acme/app", Branch: "main",
		Task: "first", Runner: "claude-code", Session: true})
	if err != nil {
		t.Fatal(err)
	}
	first := e.waitState(t, sb.ID, sandbox.StateSuspended)
	if first.KeyID != "" || !strings.Contains(first.Reason, "task 1 finished") {
		t.Errorf("after task 1: key %q, reason %q", first.KeyID, first.Reason)
	}
	run1, err := e.runs.Of(ctx, first)
	if err != nil || run1.Seq != 1 || run1.State != agentrun.RunSucceeded || run1.Commit == "" {
		t.Fatalf("run 1: %+v %v", run1, err)
	}
	got, _ := saw()
	if _, err := e.accounts.Authenticate(ctx, got[0].env["BERTH_API_KEY"]); err == nil {
		t.Error("task 1's key still works while the session waits")
	}

	// Refused: a stranger does not see it; an administrator may not act
	// inside it; a sandbox's key gives no task; a task over its bound.
	for _, c := range []struct {
		who  string
		err  error
		task string
	}{
		{"stranger", fault.NotFound, "x"}, {"bob", fault.NotFound, "x"}, {"admin", fault.Forbidden, "x"},
		{"alice", fault.Invalid, strings.Repeat("x", sandbox.MaxTask+1)},
	} {
		p := map[string]account.Principal{"stranger": e.stranger, "bob": e.bob, "admin": e.admin, "alice": e.alice}[c.who]
		_, err := e.svc.NextTask(ctx, p, "talk", c.task)
		if !errors.Is(err, c.err) {
			t.Errorf("%s: %v, want %v", c.who, err, c.err)
		}
	}

	if _, err := e.svc.Resume(ctx, e.alice, "talk"); !errors.Is(err, fault.Conflict) || !strings.Contains(err.Error(), "berth sandbox task talk") {
		t.Errorf("resume of a session: %v, want a conflict pointing at berth sandbox task", err)
	}
	if _, err := e.svc.NextTask(ctx, e.alice, "talk", "second"); err != nil {
		t.Fatal(err)
	}
	second := e.waitState(t, sb.ID, sandbox.StateSuspended)
	run2, err := e.runs.Of(ctx, second)
	if err != nil || run2.Seq != 2 || run2.Task != "second" || run2.State != agentrun.RunSucceeded || run2.Onto != run1.Commit {
		t.Fatalf("run 2: %+v %v", run2, err)
	}
	bare, _ := e.local.Path(forge.Repo{Path: "acme/app"})
	if got := gitIn(t, bare, "rev-parse", run2.Commit+"^"); got != run1.Commit {
		t.Errorf("run 2's commit's parent %s, want run 1's %s", got, run1.Commit)
	}
	got, gotHomes := saw()
	if len(got) != 2 || got[1].prompt != "second" || got[1].work != got[0].work || len(gotHomes) != 1 || gotHomes[""] {
		t.Fatalf("the machines saw %+v, homes %v", got, gotHomes)
	}
	if !slices.Contains(got[1].args, "--continue") || slices.Contains(got[0].args, "--continue") {
		t.Errorf("args: task 1 %q, task 2 %q; want --continue on task 2 only", got[0].args, got[1].args)
	}
	if got[1].env["BERTH_API_KEY"] == got[0].env["BERTH_API_KEY"] {
		t.Error("task 2 ran with task 1's key")
	}
	all, _, err := e.runs.Runs(ctx, e.alice, "talk")
	if err != nil || len(all) != 2 || all[0].Task != "first" || all[1].Task != "second" {
		t.Fatalf("runs: %+v %v", all, err)
	}

	// Not a session, or not waiting: a conflict.
	if _, err := e.svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: "once", Purpose: "agent", Repo: "acme/app", Branch: "main",
		Task: "once", Runner: "claude-code"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.NextTask(ctx, e.alice, "once", "more"); !errors.Is(err, fault.Conflict) {
		t.Errorf("a task for an agent sandbox that is no session: %v, want a conflict", err)
	}
	if _, err := e.svc.Terminate(ctx, e.alice, "talk"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.NextTask(ctx, e.alice, "talk", "more"); !errors.Is(err, fault.Conflict) {
		t.Errorf("a task for an ended session: %v, want a conflict", err)
	}
	for dir := range gotHomes {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("the session's home %s outlived it: %v", dir, err)
		}
	}
	if _, err := os.Stat(got[0].work); !os.IsNotExist(err) {
		t.Errorf("the session's checkout outlived it: %v", err)
	}
	// An engineer sandbox is no session.
	if _, err := e.svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: "dev", Session: true,
		SSHKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx0aXRoZXNzaGtleWZvcnRoZXRlc3RzMDAwMDAw alice"}}); !errors.Is(err, fault.Invalid) || !strings.Contains(err.Error(), "session") {
		t.Errorf("an engineer session: %v, want refused", err)
	}
}

// TestKelosSessionRunsTheCLIItself: a kelos session's task runs under the
// session shell (the entrypoint prepares first), with the provider's
// state on the session's home and the task in the prompt file; a setup
// that fails fails the task, saying so, and the session waits for the
// next.
func TestKelosSessionRunsTheCLIItself(t *testing.T) {
	e := newEnv(t)
	e.w.KelosClass(t)
	got := make(chan sandbox.Spec, 1)
	e.drv.SetAgent(func(spec sandbox.Spec) ([]string, int) {
		got <- spec
		return []string{fake.Stderr("kelos: preparing"), fake.Stderr("berth: kelos session setup exited 3")}, 3
	})
	e.run(t)
	sb, err := e.svc.Create(t.Context(), e.alice, sandbox.CreateRequest{Name: "ks", Class: "kelos", Purpose: "agent", Repo: "acme/app",
		Branch: "main", Task: "the task", Runner: "claude-code", Session: true})
	if err != nil {
		t.Fatal(err)
	}
	spec := <-got
	end := e.waitState(t, sb.ID, sandbox.StateSuspended)
	r := spec.Run
	if !r.KelosSession || r.Home == "" || len(r.Args) < 4 || r.Args[0] != "-c" || r.Args[3] != "claude" || !strings.Contains(r.Args[1], kelos.SessionSetupOnly+"=1 "+kelos.Entrypoint) {
		t.Errorf("the session's run: %+v", r)
	}
	if spec.Env["CLAUDE_CONFIG_DIR"] != kelos.Home+"/.claude" || spec.Env["BERTH_PROMPT_FILE"] != kelos.WorkDir+"/.berth-prompt.txt" {
		t.Errorf("the session's environment: CLAUDE_CONFIG_DIR %q, BERTH_PROMPT_FILE %q", spec.Env["CLAUDE_CONFIG_DIR"], spec.Env["BERTH_PROMPT_FILE"])
	}
	run, err := e.runs.Of(t.Context(), end)
	if err != nil || run.State != agentrun.RunFailed || !strings.Contains(run.Error, "session setup") || !strings.Contains(run.Error, "exited 3") {
		t.Errorf("a failed setup's run: %+v %v", run, err)
	}
	if !strings.Contains(end.Reason, "task 1 failed") {
		t.Errorf("the session waits with reason %q", end.Reason)
	}
}
