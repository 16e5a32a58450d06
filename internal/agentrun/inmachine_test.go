package agentrun_test

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/runner/runnertest"
	"berth.dev/berth/internal/sandbox"
)

// inMachine is the run tests' deployment on a driver whose runs happen in
// their machines (Kubernetes): the test plays the machine, with the
// sandbox's own key, through the service calls the gateway's run routes
// make.
func inMachine(t *testing.T, e *env) (*sandbox.Service, *agentrun.Service) {
	t.Helper()
	e.svc, e.runs = e.services(e.st, fake.NewInMachine(e.drv), e.w.Log)
	e.run(t)
	return e.svc, e.runs
}

// sandboxKey is the principal of sb's own key.
func (e *env) sandboxKey(sb sandbox.Sandbox, owner account.Principal) account.Principal {
	return account.Principal{User: owner.User, Sandbox: string(sb.ID), KeyID: sb.KeyID}
}

// bundleAs makes what a machine sends with its exit report: a shallow
// clone of acme/app, a commit of file on it, and the bundle of that
// commit. It returns the bundle and the commit.
func bundleAs(t *testing.T, e *env, file string) ([]byte, string) {
	t.Helper()
	src, err := e.local.Path(forge.Repo{Host: "gateway.test:8080", Path: "acme/app"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gitIn(t, dir, "clone", "-q", "--depth", "1", "file://"+src, ".")
	base := gitIn(t, dir, "rev-parse", "HEAD")
	if err := os.WriteFile(filepath.Join(dir, file), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-q", "-m", "add "+file)
	gitIn(t, dir, "bundle", "create", "-q", filepath.Join(dir, ".git", "work.bundle"), "HEAD", "^"+base)
	b, err := os.ReadFile(filepath.Join(dir, ".git", "work.bundle"))
	if err != nil {
		t.Fatal(err)
	}
	return b, gitIn(t, dir, "rev-parse", "HEAD")
}

// branchOf is where berth/<name> of acme/app is; "" when absent.
func branchOf(t *testing.T, e *env, name string) string {
	t.Helper()
	src, err := e.local.Path(forge.Repo{Path: "acme/app"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "--git-dir", src, "rev-parse", "--verify", "--quiet", "refs/heads/berth/"+name).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// TestInMachineRun: on a driver whose agent runs happen in their machines,
// the machine is started with no host checkout and no task in its
// environment, asks for the task, streams its output (telemetry and log as
// a followed run's), and its exit report concludes the run: the bundle it
// sent becomes its branch, and the sandbox terminates.
func TestInMachineRun(t *testing.T) {
	e := newEnv(t)
	_, runs := inMachine(t, e)
	ctx := t.Context()
	sb := e.agentRun(t, "claude-code")
	e.waitState(t, sb.ID, sandbox.StateRunning)

	run := e.drv.RunSpec(sb.ID)
	if run == nil || !run.InMachine || run.Work != "" || !strings.Contains(strings.Join(run.Args, " "), "stream-json") {
		t.Fatalf("run spec %+v: want in-machine, no host checkout, claude-code's arguments", run)
	}
	env := e.drv.Env(sb.ID)
	if env["BERTH_RUN_REPORT"] != "gateway" || !strings.HasSuffix(env["BERTH_REPO"], "/git/acme/app.git") {
		t.Errorf("machine env: BERTH_RUN_REPORT=%q BERTH_REPO=%q; want gateway and the gateway's clone URL", env["BERTH_RUN_REPORT"], env["BERTH_REPO"])
	}
	for k, v := range env {
		if strings.Contains(v, "add a greeting") {
			t.Errorf("the task is in the machine's spec (%s): it must be asked for", k)
		}
	}

	key := e.sandboxKey(sb, e.alice)
	if _, err := runs.Task(ctx, e.alice); !errors.Is(err, fault.Forbidden) {
		t.Errorf("task for a person's key: %v, want forbidden", err)
	}
	task, err := runs.Task(ctx, key)
	if err != nil || task != "add a greeting" {
		t.Fatalf("task = %q, %v", task, err)
	}

	// A first stream that breaks, then the whole output again.
	stream := runnertest.Stream(t, "claude-tool")
	var body strings.Builder
	for _, l := range stream {
		body.WriteString("o " + l + "\n")
	}
	body.WriteString("e thinking hard\n")
	if err := runs.Output(ctx, key, strings.NewReader("o "+stream[0]+"\n")); err != nil {
		t.Fatal(err)
	}
	if err := runs.Output(ctx, key, strings.NewReader(body.String())); err != nil {
		t.Fatal(err)
	}
	mid, err := runs.Of(ctx, sb)
	if err != nil {
		t.Fatal(err)
	}
	if mid.State != agentrun.RunRunning || mid.Lines != len(stream) || mid.Telemetry.Usage.Output == 0 {
		t.Errorf("run after the output: %s, %d lines, %+v; want running, %d lines, tokens", mid.State, mid.Lines, mid.Telemetry.Usage, len(stream))
	}
	f, _, err := runs.Log(ctx, e.alice, "fix")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	log := string(b)
	if n := strings.Count(log, "\n"); n != len(stream)+1 || !strings.HasSuffix(log, "stderr: thinking hard\n") {
		t.Errorf("run log has %d lines (want %d, the output once) ending %q", n, len(stream)+1, log[max(0, len(log)-40):])
	}

	// The machine's key fetches but never pushes: its work comes with
	// its report.
	_, _, rules, err := e.w.Repos.Access(ctx, key, "acme/app")
	if err != nil || rules.ReadOnly != sandbox.AgentPushRefused {
		t.Errorf("git access of the run's key: rules %+v, %v; want fetch only, saying the host pushes", rules, err)
	}
	bundle, commit := bundleAs(t, e, "hello.txt")
	gotSB, got, err := runs.Exit(ctx, key, agentrun.Report{ExitCode: 0, Commit: commit, Bundle: bundle})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != agentrun.RunSucceeded || got.Branch != "berth/fix" || got.Commit != commit || gotSB.ID != sb.ID || !got.Exited || got.ExitCode != 0 {
		t.Errorf("run after the exit report: %s %q %s@%s, exited %v %d; want succeeded on berth/fix@%s, exited 0", got.State, got.Error, got.Branch, got.Commit, got.Exited, got.ExitCode, commit)
	}
	if at := branchOf(t, e, "fix"); at != commit {
		t.Errorf("berth/fix is at %q, want the bundle's %s", at, commit)
	}
	end := e.waitState(t, sb.ID, sandbox.StateTerminated)
	if end.Reason != "its task finished" {
		t.Errorf("ended: %q", end.Reason)
	}
	if _, _, err := runs.Exit(ctx, key, agentrun.Report{}); err == nil {
		t.Error("a second exit report was taken")
	}
}

// TestInMachineRunReportsChecked: a reported commit that is not its
// bundle's fails the run; a machine that stops without a report fails
// its sandbox at the next sweep, its run with it.
func TestInMachineRunReportsChecked(t *testing.T) {
	e := newEnv(t)
	svc, runs := inMachine(t, e)
	ctx := t.Context()

	sb := e.agentRun(t, "claude-code")
	e.waitState(t, sb.ID, sandbox.StateRunning)
	bundle, commit := bundleAs(t, e, "hello.txt")
	_, got, err := runs.Exit(ctx, e.sandboxKey(sb, e.alice), agentrun.Report{ExitCode: 0, Commit: strings.Repeat("a", 40), Bundle: bundle})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != agentrun.RunFailed || !strings.Contains(got.Error, "its bundle holds "+commit) || branchOf(t, e, "fix") != "" {
		t.Errorf("run with a commit that is not its bundle's: %s %q, berth/fix at %q; want failed, saying so, no branch", got.State, got.Error, branchOf(t, e, "fix"))
	}
	e.waitState(t, sb.ID, sandbox.StateFailed)

	quiet, err := svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: "quiet", Purpose: "agent", Repo: "acme/app", Task: "t", Runner: "claude-code"})
	if err != nil {
		t.Fatal(err)
	}
	e.waitState(t, quiet.ID, sandbox.StateRunning)
	e.drv.Exit(quiet.ID, 0)
	if _, err := svc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	end := e.waitState(t, quiet.ID, sandbox.StateFailed)
	if !strings.Contains(end.Reason, "without reporting") {
		t.Errorf("silent machine: reason %q", end.Reason)
	}
	if run, _ := runs.Of(ctx, end); run.State != agentrun.RunFailed {
		t.Errorf("its run: %s, want failed", run.State)
	}
}

// TestInMachineReviewerRun: a reviewer's machine is told to push nothing,
// and the verdict it sends with its exit report is judged from the
// gateway's own copy: an approval approves; a verdict the machine could
// not take (a link, say) is held with its reason.
func TestInMachineReviewerRun(t *testing.T) {
	e := newEnv(t)
	svc, runs := inMachine(t, e)
	ctx := t.Context()
	review := func(name string, rep agentrun.Report) agentrun.Run {
		t.Helper()
		sb, err := svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: name, Purpose: "agent", Repo: "acme/app", Task: "review it", Runner: "claude-code", Role: "reviewer"})
		if err != nil {
			t.Fatal(err)
		}
		e.waitState(t, sb.ID, sandbox.StateRunning)
		if got := e.drv.Env(sb.ID)["BERTH_RUN_PUSH"]; got != "no" {
			t.Errorf("BERTH_RUN_PUSH=%q in a reviewer's machine, want no", got)
		}
		_, run, err := runs.Exit(ctx, e.sandboxKey(sb, e.alice), rep)
		if err != nil {
			t.Fatal(err)
		}
		e.waitState(t, sb.ID, sandbox.StateTerminated)
		return run
	}
	approved := review("rev-1", agentrun.Report{Verdict: []byte(`{"verdict": "approve", "summary": "looks right"}`), VerdictFile: ".berth-review-verdict.json"})
	if approved.State != agentrun.RunSucceeded || approved.Review.Outcome != "approved" || approved.Review.Summary != "looks right" || approved.Review.SHA256 == "" {
		t.Errorf("reviewer run with an approval: %s, review %+v", approved.State, approved.Review)
	}
	held := review("rev-2", agentrun.Report{VerdictFile: ".berth-review-verdict.json", VerdictError: ".berth-review-verdict.json: a symbolic link is not followed"})
	if held.Review.Outcome != "held" || !strings.Contains(held.Review.Reason, "symbolic link") {
		t.Errorf("reviewer run whose verdict the machine refused: review %+v, want held with the machine's reason", held.Review)
	}
}

// TestRunLogAcrossReplicas: with the run logs in the shared database, the
// replica that read a machine's stream and any other answer its log alike.
func TestRunLogAcrossReplicas(t *testing.T) {
	e := newEnv(t)
	e.rcfg.Logs = e.st.RunLogs()
	_, a := inMachine(t, e)
	_, b := e.services(e.st, fake.NewInMachine(e.drv), e.w.Log)
	ctx := t.Context()
	sb := e.agentRun(t, "claude-code")
	e.waitState(t, sb.ID, sandbox.StateRunning)
	if err := a.Output(ctx, e.sandboxKey(sb, e.alice), strings.NewReader("o {\"type\":\"system\"}\ne working\n")); err != nil {
		t.Fatal(err)
	}
	r, _, err := b.Log(ctx, e.alice, "fix")
	if err != nil {
		t.Fatalf("the other replica's run log: %v", err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	if string(got) != "{\"type\":\"system\"}\nstderr: working\n" {
		t.Errorf("run log read on the other replica: %q", got)
	}
}
