package agentrun_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/sandbox"
)

// TestSessionForks: a session waiting between tasks forks into two
// sessions (best of N). Each fork's first run is told to continue the
// conversation, works on a copy of the source's checkout and home (the
// conversation the source's agent left there), and pushes its own branch
// on top of the source's work; the source is left as it was. Who may
// fork, and what, is checked too.
func TestSessionForks(t *testing.T) {
	e := newEnv(t)
	type saw struct {
		name, prompt, work, home, before string
		args                             []string
	}
	var mu sync.Mutex
	var runs []saw
	judged := map[string]string{} // what each reviewer found of the attempts
	e.drv.SetAgent(func(spec sandbox.Spec) ([]string, int) {
		b, _ := os.ReadFile(filepath.Join(spec.Run.Work, ".berth-prompt.txt"))
		if name := spec.Env["BERTH_SANDBOX_NAME"]; strings.HasPrefix(name, "judge") {
			// A reviewer: it reads the attempts and names one best.
			found := string(b)
			for _, a := range []string{"try-1", "try-2"} {
				d, err := os.ReadFile(filepath.Join(spec.Run.Work, agentrun.AttemptsDir, a+".diff"))
				found += "\n=== " + a + "\n" + string(d) + fmt.Sprint(err)
			}
			best := map[string]string{"judge": "try-2", "judge-bad": "nobody"}[name]
			verdict := `{"verdict": "approve", "summary": "the second is tidier", "best": "` + best + `"}`
			if err := os.WriteFile(filepath.Join(spec.Run.Work, ".berth-review-verdict.json"), []byte(verdict), 0o644); err != nil {
				t.Error(err)
			}
			mu.Lock()
			judged[name] = found
			mu.Unlock()
			return nil, 0
		}
		// The agent's own state: a conversation file in its home, which
		// a continued conversation finds and adds to.
		var before []byte
		if spec.Run.Home != "" { // a session's
			conv := filepath.Join(spec.Run.Home, "conversation")
			before, _ = os.ReadFile(conv)
			if err := os.WriteFile(conv, append(before, b...), 0o600); err != nil {
				t.Error(err)
			}
		}
		name := spec.Env["BERTH_SANDBOX_NAME"]
		if name == "broken" {
			return nil, 1 // an attempt that failed: no work pushed
		}
		mu.Lock()
		runs = append(runs, saw{name: name, prompt: string(b), work: spec.Run.Work, home: spec.Run.Home, before: string(before), args: spec.Run.Args})
		mu.Unlock()
		if err := os.WriteFile(filepath.Join(spec.Run.Work, name+".txt"), []byte(string(b)+"\n"), 0o644); err != nil {
			t.Error(err)
		}
		gitIn(t, spec.Run.Work, "add", "-A")
		gitIn(t, spec.Run.Work, "commit", "-q", "-m", "work of "+name)
		return nil, 0
	})
	seenBy := func(name string) []saw {
		mu.Lock()
		defer mu.Unlock()
		var out []saw
		for _, r := range runs {
			if r.name == name {
				out = append(out, r)
			}
		}
		return out
	}
	e.run(t)
	ctx := t.Context()
	src, err := e.svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: "talk", Purpose: "agent", Repo: "acme/app", Branch: "main",
		Task: "first", Runner: "claude-code", Session: true})
	if err != nil {
		t.Fatal(err)
	}
	e.waitState(t, src.ID, sandbox.StateSuspended)
	run1, err := e.runs.Of(ctx, src)
	if err != nil || run1.Commit == "" {
		t.Fatalf("the source's run: %+v %v", run1, err)
	}
	bare, _ := e.local.Path(forge.Repo{Path: "acme/app"})
	fork := func(p account.Principal, req sandbox.ForkRequest) error {
		_, err := e.svc.Fork(ctx, p, "talk", req)
		return err
	}
	for _, c := range []struct {
		name string
		p    account.Principal
		req  sandbox.ForkRequest
		want error
		says string
	}{
		{"no task", e.alice, sandbox.ForkRequest{Name: "x"}, fault.Invalid, "task"},
		{"a task over its bound", e.alice, sandbox.ForkRequest{Name: "x", Task: strings.Repeat("x", sandbox.MaxTask+1)}, fault.Invalid, "task"},
		{"an administrator", e.admin, sandbox.ForkRequest{Name: "x", Task: "t"}, fault.Forbidden, "only the owner"},
		{"another member", e.bob, sandbox.ForkRequest{Name: "x", Task: "t"}, fault.NotFound, ""},
	} {
		if err := fork(c.p, c.req); !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want %v saying %q", c.name, err, c.want, c.says)
		}
	}

	forks, err := e.svc.Fork(ctx, e.alice, "talk", sandbox.ForkRequest{Name: "try", Count: 2, Task: "second"})
	if err != nil {
		t.Fatal(err)
	}
	if len(forks) != 2 || forks[0].Name != "try-1" || forks[1].Name != "try-2" {
		t.Fatalf("forks %+v", forks)
	}
	source := seenBy("talk")[0]
	for _, f := range forks {
		if f.ForkedFrom != src.ID || !f.Session || f.Task != "second" || f.Runner != "claude-code" || f.Purpose != sandbox.PurposeAgent {
			t.Errorf("fork %s: from %q, session %v, task %q, runner %q, %s", f.Name, f.ForkedFrom, f.Session, f.Task, f.Runner, f.Purpose)
		}
		got := e.waitState(t, f.ID, sandbox.StateSuspended)
		run, err := e.runs.Of(ctx, got)
		if err != nil || run.Seq != 1 || run.Task != "second" || run.State != agentrun.RunSucceeded || run.Commit == "" {
			t.Fatalf("fork %s's run: %+v %v (%s)", f.Name, run, err, got.Reason)
		}
		// Its own branch, on top of the source's work.
		if at := gitIn(t, bare, "rev-parse", "refs/heads/berth/"+f.Name); at != run.Commit {
			t.Errorf("berth/%s is at %s, its run says %s", f.Name, at, run.Commit)
		}
		if parent := gitIn(t, bare, "rev-parse", run.Commit+"^"); parent != run1.Commit {
			t.Errorf("fork %s's commit's parent is %s, want the source's %s", f.Name, parent, run1.Commit)
		}
		files := gitIn(t, bare, "ls-tree", "-r", "--name-only", run.Commit)
		if !strings.Contains(files, "talk.txt") || !strings.Contains(files, f.Name+".txt") {
			t.Errorf("fork %s's commit holds %q", f.Name, files)
		}
		// Its machine went on from the source's conversation, on copies.
		s := seenBy(f.Name)
		if len(s) != 1 {
			t.Fatalf("fork %s ran %d times", f.Name, len(s))
		}
		if s[0].prompt != "second" || s[0].before != "first" || !slices.Contains(s[0].args, "--continue") {
			t.Errorf("fork %s's machine: prompt %q, conversation before %q, args %q; want second, first, --continue", f.Name, s[0].prompt, s[0].before, s[0].args)
		}
		if s[0].work == source.work || s[0].home == source.home || s[0].home == "" {
			t.Errorf("fork %s worked in %s (home %s), the source in %s (home %s)", f.Name, s[0].work, s[0].home, source.work, source.home)
		}
		if d := e.w.Details(t, f.ID, audit.SandboxFork); len(d) != 1 || !strings.Contains(d[0], "a fork of sandbox talk") {
			t.Errorf("fork %s's fork audit: %q", f.Name, d)
		}
	}
	// The source is as it was: waiting, its branch and its files its own.
	if got, _ := e.svc.Get(ctx, e.alice, "talk"); got.State != sandbox.StateSuspended {
		t.Errorf("the source after the fork: %s", got.State)
	}
	if at := gitIn(t, bare, "rev-parse", "refs/heads/berth/talk"); at != run1.Commit {
		t.Errorf("berth/talk moved to %s", at)
	}
	if _, err := os.Stat(filepath.Join(source.work, "try-1.txt")); !os.IsNotExist(err) {
		t.Errorf("a fork's file is in the source's checkout: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(source.home, "conversation")); string(b) != "first" {
		t.Errorf("the source's conversation is %q after the forks' runs", b)
	}
	if d := e.w.Details(t, src.ID, audit.SandboxFork); len(d) != 1 || !strings.Contains(d[0], "forked into try-1, try-2: its checkout and its agent's conversation copied") {
		t.Errorf("the source's fork audit: %q", d)
	}

	// A fork whose branch is taken makes none; a session whose task runs,
	// or an agent sandbox that is no session, is not forked.
	gitIn(t, bare, "branch", "berth/taken", run1.Commit)
	if err := fork(e.alice, sandbox.ForkRequest{Name: "taken", Task: "t"}); !errors.Is(err, fault.Conflict) || !strings.Contains(err.Error(), "berth/taken") {
		t.Errorf("a fork onto a taken branch: %v, want a conflict naming it", err)
	}
	if got, err := e.svc.Get(ctx, e.alice, "taken"); err == nil && got.Live() {
		t.Errorf("the refused fork lives: %s", got.State)
	}
	once, err := e.svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: "once", Purpose: "agent", Repo: "acme/app", Branch: "main", Task: "once", Runner: "claude-code"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Fork(ctx, e.alice, string(once.ID), sandbox.ForkRequest{Name: "x", Task: "t"}); !errors.Is(err, fault.Conflict) || !strings.Contains(err.Error(), "only as a session") {
		t.Errorf("a fork of an agent sandbox that is no session: %v", err)
	}

	broken, err := e.svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: "broken", Purpose: "agent", Repo: "acme/app", Branch: "main", Task: "fail", Runner: "claude-code"})
	if err != nil {
		t.Fatal(err)
	}
	e.waitState(t, broken.ID, sandbox.StateFailed)
	// A reviewer compares the forks' attempts (best of N): each one's
	// change, against the source's work, is in its checkout, its prompt
	// names them, and its verdict's best is kept.
	for _, c := range []struct {
		name string
		req  sandbox.CreateRequest
		says string
	}{
		{"one attempt", sandbox.CreateRequest{Role: "reviewer", Compare: []string{"try-1"}}, "a reviewer compares 2 to 8"},
		{"an author", sandbox.CreateRequest{Compare: []string{"try-1", "try-2"}}, "only a reviewer compares"},
		{"a reviewer", sandbox.CreateRequest{Role: "reviewer", Compare: []string{"try-1", "talk", "judge"}}, `no sandbox "judge"`},
		{"twice", sandbox.CreateRequest{Role: "reviewer", Compare: []string{"try-1", "try-1"}}, "named twice"},
		{"no work", sandbox.CreateRequest{Role: "reviewer", Compare: []string{"try-1", "broken"}}, "broken pushed no work (its run failed)"},
	} {
		req := c.req
		req.Name, req.Purpose, req.Repo, req.Branch, req.Task, req.Runner = "judge", "agent", "acme/app", "berth/talk", "judge", "claude-code"
		if _, err := e.svc.Create(ctx, e.alice, req); !errors.Is(err, fault.Invalid) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("a reviewer comparing %s: %v, want invalid saying %q", c.name, err, c.says)
		}
	}
	for _, name := range []string{"judge", "judge-bad"} {
		judge, err := e.svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: name, Purpose: "agent", Role: "reviewer", Repo: "acme/app", Branch: "berth/talk",
			Task: "Which is best?", Runner: "claude-code", Compare: []string{"try-1", string(forks[1].ID)}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(judge.Compare, []sandbox.ID{forks[0].ID, forks[1].ID}) {
			t.Errorf("%s compares %q", name, judge.Compare)
		}
		done := e.waitState(t, judge.ID, sandbox.StateTerminated)
		run, err := e.runs.Of(ctx, done)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		found := judged[name]
		mu.Unlock()
		if name == "judge" {
			if run.Review.Outcome != "approved" || run.Review.Best != "try-2" {
				t.Errorf("the review: %+v, want approved, try-2 best", run.Review)
			}
			for _, want := range []string{"Which is best?", "compare 2 attempts", ".berth-attempts/try-1.diff: berth/try-1 at ", `"best" set to the name of the best attempt (one of try-1, try-2)`,
				"=== try-1\n", "+++ b/try-1.txt", "=== try-2\n", "+++ b/try-2.txt"} {
				if !strings.Contains(found, want) {
					t.Errorf("the reviewer found no %q in:\n%s", want, found)
				}
			}
			// Against the source's work, which both share: not in either.
			if strings.Contains(found, "talk.txt") {
				t.Errorf("the attempts hold the source's own work:\n%s", found)
			}
		} else if run.Review.Outcome != "held" || run.Review.Best != "" || !strings.Contains(run.Review.Reason, `names "nobody" best, which is none of the attempts compared (try-1, try-2)`) {
			t.Errorf("a verdict naming no attempt: %+v, want held, saying so", run.Review)
		}
	}

	// A fork is a session of its own: it takes its next task; ended, it
	// leaves no checkout or home.
	if _, err := e.svc.NextTask(ctx, e.alice, "try-1", "third"); err != nil {
		t.Fatal(err)
	}
	third := e.waitState(t, forks[0].ID, sandbox.StateSuspended)
	if run, err := e.runs.Of(ctx, third); err != nil || run.Seq != 2 || run.State != agentrun.RunSucceeded {
		t.Errorf("try-1's next task: %+v %v", run, err)
	}
	try1 := seenBy("try-1")
	for _, f := range forks {
		if _, err := e.svc.Terminate(ctx, e.alice, string(f.ID)); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range forks {
		e.waitState(t, f.ID, sandbox.StateTerminated)
	}
	for _, dir := range []string{try1[0].work, try1[0].home} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s outlived its fork: %v", dir, err)
		}
	}
	if _, err := os.Stat(filepath.Join(source.work, ".git")); err != nil {
		t.Errorf("the source's checkout went with its forks: %v", err)
	}
}
