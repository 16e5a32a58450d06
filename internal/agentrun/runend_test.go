package agentrun_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/runner/runnertest"
	"berth.dev/berth/internal/sandbox"
)

// TestInMachineWorkOnlyAfterACleanRun: an in-machine run's bundle becomes
// its branch only when the gateway concludes the run clean; a failed run,
// one whose stream reported an error, a reviewer's and a terminated one
// leave no branch, and a bundle that is not this repository's work fails
// the run saying why.
func TestInMachineWorkOnlyAfterACleanRun(t *testing.T) {
	tests := []struct {
		name      string
		runner    string
		role      string
		stream    string // what the machine streamed first
		terminate bool
		bundle    []byte // nil: a good one
		exit      int
		wantState agentrun.RunState
		wantErr   string
	}{
		{name: "agent failed", runner: "claude-code", exit: 3, wantState: agentrun.RunFailed, wantErr: "the agent exited 3"},
		{name: "error in the stream", runner: "pi", stream: "pi-error", wantState: agentrun.RunFailed, wantErr: "the agent reported an error"},
		{name: "reviewer", runner: "claude-code", role: "reviewer", wantState: agentrun.RunSucceeded},
		{name: "terminated", runner: "claude-code", terminate: true, wantState: agentrun.RunFailed, wantErr: "the sandbox ended (terminated) before the run did: terminated by alice"},
		{name: "malformed bundle", runner: "claude-code", bundle: []byte("# v2 git bundle\nnonsense\n"), wantState: agentrun.RunFailed, wantErr: "push: the run's bundle is not one of this repository's work"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			svc, runs := inMachine(t, e)
			ctx := t.Context()
			sb, err := svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: "fix", Purpose: "agent", Repo: "acme/app", Task: "t", Runner: tt.runner, Role: tt.role})
			if err != nil {
				t.Fatal(err)
			}
			e.waitState(t, sb.ID, sandbox.StateRunning)
			key := e.sandboxKey(sb, e.alice)
			if tt.stream != "" {
				var body strings.Builder
				for _, l := range runnertest.Stream(t, tt.stream) {
					body.WriteString("o " + l + "\n")
				}
				if err := runs.Output(ctx, key, strings.NewReader(body.String())); err != nil {
					t.Fatal(err)
				}
			}
			bundle, commit := bundleAs(t, e, "hello.txt")
			if tt.bundle != nil {
				bundle = tt.bundle
			}
			if tt.terminate {
				if _, err := svc.Terminate(ctx, e.alice, "fix"); err != nil {
					t.Fatal(err)
				}
				if _, _, err := runs.Exit(ctx, key, agentrun.Report{Commit: commit, Bundle: bundle}); !errors.Is(err, fault.Conflict) {
					t.Errorf("a terminated run's report: %v, want a conflict", err)
				}
			} else if _, _, err := runs.Exit(ctx, key, agentrun.Report{ExitCode: tt.exit, Commit: commit, Bundle: bundle}); err != nil {
				t.Fatal(err)
			}
			run, err := runs.Of(ctx, sb)
			if err != nil {
				t.Fatal(err)
			}
			if run.State != tt.wantState || !strings.HasPrefix(run.Error, tt.wantErr) {
				t.Errorf("run %s %q, want %s %q", run.State, run.Error, tt.wantState, tt.wantErr)
			}
			if at := branchOf(t, e, "fix"); at != "" {
				t.Errorf("berth/fix is at %s: the bundle was landed", at)
			}
		})
	}
}

// TestInMachineRunReportsOnce: the first report ends the run; a second
// one, and any output after it, is refused, so an agent that reports with
// the run's key ends its own run and lands its work once.
func TestInMachineRunReportsOnce(t *testing.T) {
	e := newEnv(t)
	_, runs := inMachine(t, e)
	ctx := t.Context()
	sb := e.agentRun(t, "claude-code")
	e.waitState(t, sb.ID, sandbox.StateRunning)
	key := e.sandboxKey(sb, e.alice)
	first, commit := bundleAs(t, e, "early.txt")
	if _, run, err := runs.Exit(ctx, key, agentrun.Report{Commit: commit, Bundle: first}); err != nil || run.Commit != commit {
		t.Fatalf("first report: %+v, %v", run, err)
	}
	second, other := bundleAs(t, e, "later.txt")
	if _, _, err := runs.Exit(ctx, key, agentrun.Report{Commit: other, Bundle: second}); err == nil {
		t.Error("a second report was taken")
	}
	if err := runs.Output(ctx, key, strings.NewReader("o {}\n")); err == nil {
		t.Error("output after the report was taken")
	}
	if at := branchOf(t, e, "fix"); at != commit {
		t.Errorf("berth/fix is at %q, want the first report's %s", at, commit)
	}
	events, _, err := e.st.ListAudit(ctx, audit.Filter{Sandbox: string(sb.ID)}, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	pushes := 0
	for _, ev := range events {
		if ev.Action == audit.GitPush && ev.Outcome == audit.OK && strings.Contains(ev.Detail, "refs/heads/berth/fix") {
			pushes++
		}
	}
	if pushes != 1 {
		t.Errorf("%d pushes of berth/fix in the audit log, want 1", pushes)
	}
}

// TestARunThatDidNotExitHasNoExitCode (issue 14, item 9): a run whose
// sandbox was ended under it records how it ended and by whom, not an
// exit code it never had; one that exited records its code.
func TestARunThatDidNotExitHasNoExitCode(t *testing.T) {
	tests := []struct {
		name       string
		end        func(t *testing.T, e *env)
		exited     bool
		exitCode   int
		ended      sandbox.State
		byAlice    bool
		wantReason string
	}{
		{name: "terminated by its owner", end: func(t *testing.T, e *env) {
			if _, err := e.svc.Terminate(t.Context(), e.alice, "fix"); err != nil {
				t.Fatal(err)
			}
		}, ended: sandbox.StateTerminated, byAlice: true, wantReason: "terminated by alice"},
		{name: "expired", end: func(t *testing.T, e *env) {
			e.clock.Advance(5 * time.Hour)
			if _, err := e.svc.Sweep(t.Context()); err != nil {
				t.Fatal(err)
			}
		}, ended: sandbox.StateTerminated, wantReason: "expired"},
		{name: "exited 0", exited: true},
		{name: "exited 3", exited: true, exitCode: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			started, release := make(chan struct{}), make(chan struct{})
			e.drv.SetAgent(func(sandbox.Spec) ([]string, int) {
				close(started)
				<-release
				return runnertest.Stream(t, "claude-text"), tt.exitCode
			})
			e.run(t)
			sb := e.agentRun(t, "claude-code")
			<-started
			if tt.end != nil {
				tt.end(t, e)
			}
			close(release)
			want := sandbox.StateTerminated
			if tt.exitCode != 0 {
				want = sandbox.StateFailed
			}
			end := e.waitState(t, sb.ID, want)
			var run agentrun.Run
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				var err error
				if run, err = e.runs.Of(t.Context(), end); err != nil {
					t.Fatal(err)
				}
				if run.State != agentrun.RunRunning || time.Now().After(deadline) {
					break
				}
			}
			if run.Exited != tt.exited || run.ExitCode != tt.exitCode || run.Ended != tt.ended {
				t.Errorf("run: exited %v (code %d), ended %q; want exited %v (code %d), ended %q", run.Exited, run.ExitCode, run.Ended, tt.exited, tt.exitCode, tt.ended)
			}
			wantBy, wantName := "", ""
			if tt.byAlice {
				wantBy, wantName = e.alice.User.ID, e.alice.User.Name
			}
			if run.EndedBy != wantBy || run.EndedByName != wantName {
				t.Errorf("ended by %q (%q), want %q (%q)", run.EndedBy, run.EndedByName, wantBy, wantName)
			}
			if !strings.Contains(run.Error, tt.wantReason) {
				t.Errorf("run error %q, want it to say %q", run.Error, tt.wantReason)
			}
		})
	}
}
