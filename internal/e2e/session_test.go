package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
)

// sessionScript plays two tasks of one conversation. Task 1's prompt
// carries sessionMark; task 2's first answer requires it in what the CLI
// sends, so a task 2 that did not continue task 1's conversation is
// answered 400 and fails. Each task commits a file of its own.
const sessionScript = `{"turns": [
  {"command": "echo one > one.txt && git add one.txt && git commit -q -m 'task one'"},
  {"text": "The first task is done."},
  {"requires": ["SESSIONMARK"], "command": "echo two > two.txt && git add two.txt && git commit -q -m 'task two'"},
  {"text": "The second task is done."}
]}`

const sessionMark = "SESSIONMARK"

// TestSessionEndToEnd runs a session with the real CLIs: an agent sandbox
// created with --session runs its first task, pushes, and waits suspended
// (no machine running, its clock stopped); berth sandbox task gives it a
// second, which its CLI runs as the continuation of the first
// conversation (the scripted model refuses it otherwise) on the first
// task's checkout, and the host pushes on top of the first push. Both
// runs are the sandbox's, each with its own telemetry; terminate leaves
// nothing.
func TestSessionEndToEnd(t *testing.T) {
	runners := []string{"claude-code", "codex", "pi", "opencode", "gemini"}
	script := filepath.Join(t.TempDir(), "session.json")
	if err := os.WriteFile(script, []byte(sessionScript), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startAgentGatewayWith(t, strings.Replace(inferenceYAML, "script: tool", "script: "+script, 1), []string{"BERTH_CORE_HOUR_USD=0.05"}, runners...)
	bare := g.seedRepo("acme/app")
	ctx := context.Background()
	for _, r := range runners {
		t.Run(r, func(t *testing.T) {
			if !imageBuilt(g.root, agentImage(r)) {
				t.Skipf("%s is not built (images/build agent %s)", agentImage(r), r)
			}
			name := "talk-" + strings.ReplaceAll(r, "-", "")
			sb, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: name, Purpose: "agent", Repo: "acme/app",
				Task: sessionMark + ": write one.txt and commit it.", Runner: r, Session: true})
			if err != nil {
				t.Fatal(err)
			}
			if !sb.Session {
				t.Fatalf("created %+v: not a session", sb)
			}
			first := g.waitState(g.operator, sb.ID, "suspended", 4*time.Minute)
			log, _ := g.berthErr("sandbox", "logs", "--raw", name)
			if first.Run == nil || first.Run.State != "succeeded" || first.Run.Seq != 1 || first.Run.Commit == "" {
				t.Fatalf("after task 1: %s (%s), run %+v; log:\n%s", first.State, first.Reason, first.Run, log)
			}
			c1 := first.Run.Commit
			if got := gitIn(t, bare, "rev-parse", "refs/heads/berth/"+name); got != c1 {
				t.Errorf("berth/%s is at %q after task 1, the run says %s", name, got, c1)
			}
			// Suspended between tasks: no machine runs, and its clock stands.
			if c, _ := g.objects(string(sb.ID)); strings.Contains(c, "running") {
				t.Errorf("a session waiting for its next task has a running machine: %s", c)
			}
			time.Sleep(2 * time.Second)
			if again, err := g.operator.Sandbox(ctx, string(sb.ID)); err != nil || again.RunningSeconds != first.RunningSeconds {
				t.Errorf("running time %d s while suspended, was %d s (%v)", again.RunningSeconds, first.RunningSeconds, err)
			}

			// The next task, through the CLI, followed to its end.
			out, err := g.berthErr("sandbox", "task", name, "--task", "Now write two.txt and commit it.", "--follow")
			if err != nil {
				log, _ := g.berthErr("sandbox", "logs", "--raw", name)
				t.Fatalf("berth sandbox task: %v\n%s\nlog:\n%s", err, out, log)
			}
			second := g.waitState(g.operator, sb.ID, "suspended", time.Minute)
			run := second.Run
			if run == nil || run.Seq != 2 || run.State != "succeeded" || run.Commit == "" || run.Commit == c1 {
				t.Fatalf("after task 2: %s (%s), run %+v", second.State, second.Reason, run)
			}
			// On top of the first task's work, on the same branch.
			if got := gitIn(t, bare, "rev-parse", "refs/heads/berth/"+name); got != run.Commit {
				t.Errorf("berth/%s is at %q after task 2, the run says %s", name, got, run.Commit)
			}
			if parent := gitIn(t, bare, "rev-parse", run.Commit+"^"); parent != c1 {
				t.Errorf("task 2's commit's parent is %s, want task 1's %s", parent, c1)
			}
			if files := gitIn(t, bare, "ls-tree", "-r", "--name-only", run.Commit); !strings.Contains(files, "one.txt") || !strings.Contains(files, "two.txt") {
				t.Errorf("task 2's commit holds %q, want one.txt and two.txt", files)
			}
			// Both runs are the sandbox's, each with its own telemetry.
			runs, err := g.operator.Runs(ctx, string(sb.ID))
			if err != nil || len(runs) != 2 {
				t.Fatalf("runs: %d %v", len(runs), err)
			}
			// The gateway metered each run's own calls: what its agent reported.
			for i, rr := range runs {
				if rr.Seq != i+1 || rr.State != "succeeded" || rr.Usage.Output == 0 || rr.EndedAt == nil {
					t.Errorf("run %d: %+v", i+1, rr)
				}
				// (OpenCode's stream leaves out the title call a new
				// conversation makes, as TestAgentRunEndToEnd says.)
				if m := rr.Metered; m == nil || m.Requests == 0 || m.Usage.Output < rr.Usage.Output || (r != "opencode" && m.Usage.Output != rr.Usage.Output) {
					t.Errorf("run %d: the gateway metered %+v, the agent reported %+v", i+1, m, rr.Usage)
				}
			}
			if !strings.HasPrefix(runs[0].Task, sessionMark) || runs[1].Task != "Now write two.txt and commit it." {
				t.Errorf("the runs' tasks are %q and %q", runs[0].Task, runs[1].Task)
			}
			if runs[1].StartedAt.Before(*runs[0].EndedAt) {
				t.Errorf("run 2 started at %s, before run 1 ended at %s", runs[1].StartedAt, runs[0].EndedAt)
			}
			// The session's cost: every run's calls and its machine time.
			if r := second.Run; r.TotalCostUSD == nil || r.MachineCostUSD == nil ||
				math.Abs(*r.TotalCostUSD-(runs[0].Metered.CostUSD+runs[1].Metered.CostUSD+*r.MachineCostUSD)) > 1e-5 {
				t.Errorf("the session's cost %v, machine %v; its runs were charged $%v and $%v",
					r.TotalCostUSD, r.MachineCostUSD, runs[0].Metered.CostUSD, runs[1].Metered.CostUSD)
			}
			if show := string(g.berth("sandbox", "show", name)); !strings.Contains(show, "every task's models'") || !strings.Contains(show, "task 2") {
				t.Errorf("berth sandbox show:\n%s", show)
			}
			list := string(g.berth("sandbox", "runs", name))
			if !strings.Contains(list, "berth/"+name+"@"+c1[:12]) || !strings.Contains(list, "berth/"+name+"@"+run.Commit[:12]) {
				t.Errorf("berth sandbox runs:\n%s", list)
			}
			// Each run's log is its own.
			log1 := string(g.berth("sandbox", "logs", "--run", "1", name))
			log2 := string(g.berth("sandbox", "logs", name))
			if !strings.Contains(log1, "first task is done") || !strings.Contains(log2, "second task is done") || strings.Contains(log2, "first task is done") {
				t.Errorf("run 1's transcript:\n%s\nrun 2's:\n%s", log1, log2)
			}
			// The next task was audited.
			if audit := string(g.berth("audit", "-o", "json")); !strings.Contains(audit, `"sandbox.task"`) {
				t.Errorf("no sandbox.task in the audit log")
			}
			// Ended, it leaves nothing: no machine, no checkout, no home.
			if _, err := g.operator.Terminate(ctx, string(sb.ID)); err != nil {
				t.Fatal(err)
			}
			if c, v := g.waitGone(string(sb.ID), 10*time.Second); c != "" || v != "" {
				t.Errorf("left behind: containers %q volumes %q", c, v)
			}
			for _, dir := range []string{string(sb.ID), string(sb.ID) + ".home"} {
				if _, err := os.Stat(filepath.Join(g.dataDir, "work", dir)); !os.IsNotExist(err) {
					t.Errorf("%s is still there: %v", dir, err)
				}
			}
		})
	}
}

// TestKelosSessionEndToEnd runs a Kelos-shaped image in Session mode (its
// entrypoint the interface's, the real Claude Code on its PATH): at every
// start of the session's machine the entrypoint runs with
// KELOS_SESSION_SETUP_ONLY=1 and no prompt, prepares and exits 0, and
// berth runs the CLI itself with the task; the provider's state
// (CLAUDE_CONFIG_DIR) is on the session's volume, so after a gateway
// restart the second task continues the first's conversation (the
// scripted model refuses it otherwise) and pushes on top.
func TestKelosSessionEndToEnd(t *testing.T) {
	script := filepath.Join(t.TempDir(), "session.json")
	if err := os.WriteFile(script, []byte(sessionScript), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startAgentGateway(t, strings.Replace(inferenceYAML, "script: tool", "script: "+script, 1), "claude-code")
	if !imageBuilt(g.root, agentImage("claude-code")) {
		t.Skip("the claude-code image is not built")
	}
	tag := "localhost/berth-e2e-kelos-session-" + strings.ToLower(rand.Text()[:8]) + ":latest"
	dir := filepath.Join("testdata", "kelos-session")
	if out, err := podmanOn(g.root, "build", "--pull=never", "--network", "none", "--quiet", "--tag", tag,
		"--file", filepath.Join(dir, "Containerfile"), dir).CombinedOutput(); err != nil {
		t.Fatalf("podman build: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = podmanOn(g.root, "rmi", "--force", tag).Run() })
	g.kelosClassOf(tag, "kelos", "")
	bare := g.seedRepo("acme/app")
	ctx := context.Background()
	sb, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: "kelos-talk", Class: "kelos", Purpose: "agent", Repo: "acme/app",
		Task: sessionMark + ": write one.txt and commit it.", Session: true})
	if err != nil {
		t.Fatal(err)
	}
	first := g.waitState(g.operator, sb.ID, "suspended", 4*time.Minute)
	log1 := string(g.berth("sandbox", "logs", "--raw", "--run", "1", sb.Name))
	if first.Run == nil || first.Run.State != "succeeded" || first.Run.Commit == "" {
		t.Fatalf("task 1: %s (%s) %+v\n%s", first.State, first.Reason, first.Run, log1)
	}
	// The setup-only run, seen: its banner, its exit 0, and no agent of
	// the entrypoint's.
	for _, s := range []string{"kelos-test: session setup for claude-code, 0 arguments", "berth: kelos session setup exited 0"} {
		if !strings.Contains(log1, s) {
			t.Errorf("task 1's log lacks %q:\n%s", s, log1)
		}
	}
	if strings.Contains(log1, "started by the entrypoint") {
		t.Errorf("the entrypoint started the agent at a session's setup:\n%s", log1)
	}

	// The gateway restarts between the tasks; the session's volume stays.
	g.stop()
	g.start()
	if _, err := g.berthErr("sandbox", "task", sb.Name, "--task", "Now write two.txt and commit it.", "--follow"); err != nil {
		log, _ := g.berthErr("sandbox", "logs", "--raw", sb.Name)
		t.Fatalf("task 2: %v\n%s", err, log)
	}
	second := g.waitState(g.operator, sb.ID, "suspended", time.Minute)
	if second.Run == nil || second.Run.Seq != 2 || second.Run.State != "succeeded" || second.Run.Commit == "" {
		t.Fatalf("task 2: %+v", second.Run)
	}
	if parent := gitIn(t, bare, "rev-parse", second.Run.Commit+"^"); parent != first.Run.Commit {
		t.Errorf("task 2's commit's parent is %s, want task 1's %s", parent, first.Run.Commit)
	}
	log2 := string(g.berth("sandbox", "logs", "--raw", sb.Name))
	if !strings.Contains(log2, "berth: kelos session setup exited 0") || strings.Contains(log2, "started by the entrypoint") {
		t.Errorf("task 2's log:\n%s", log2)
	}
	// One setup at each start, kept with the provider's state.
	setups, err := os.ReadFile(filepath.Join(g.dataDir, "work", string(sb.ID)+".home", ".claude", "kelos-setups"))
	if err != nil || strings.Count(string(setups), "\n") != 2 {
		t.Errorf("the setups the session's volume kept: %q %v; want two", setups, err)
	}
	if _, err := g.operator.Terminate(ctx, string(sb.ID)); err != nil {
		t.Fatal(err)
	}
}

// forkScript plays a session, its forks and their reviewer: task 1
// commits one.txt; the forks' task requires sessionMark in the
// conversation (a fork that did not continue the source's is answered
// 400 and fails) and commits a file naming the sandbox it ran in. A
// reviewer's first turn, in a checkout with the attempts, names try-2
// best once each attempt's change is the attempt's alone (the source's
// one.txt left out) and try-2's is its own.
const forkScript = `{"turns": [
  {"command": "if [ -d .berth-attempts ]; then [ \"$(grep -c '^diff --git' .berth-attempts/try-1.diff)\" = 1 ] && grep -qx '+try-2' .berth-attempts/try-2.diff && printf '%s' '{\"verdict\": \"approve\", \"best\": \"try-2\", \"summary\": \"try-2 names itself\"}' > .berth-review-verdict.json; else echo one > one.txt && git add one.txt && git commit -q -m 'task one'; fi"},
  {"text": "The first task is done."},
  {"requires": ["SESSIONMARK"], "command": "echo \"$BERTH_SANDBOX_NAME\" > attempt.txt && git add attempt.txt && git commit -q -m attempt"},
  {"text": "The attempt is done."}
]}`

// TestSessionForkEndToEnd forks a session with the real Claude Code CLI
// (best of N): after its first task, berth sandbox fork gives two forks
// one task; each fork's CLI continues the source's conversation (the
// scripted model refuses it otherwise) on a copy of its checkout, and the
// host pushes each fork's own branch on top of the source's work. The
// forks' work differs, the source's branch stays, and terminating all
// leaves no checkout.
func TestSessionForkEndToEnd(t *testing.T) {
	script := filepath.Join(t.TempDir(), "fork.json")
	if err := os.WriteFile(script, []byte(forkScript), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startAgentGateway(t, strings.Replace(inferenceYAML, "script: tool", "script: "+script, 1), "claude-code")
	if !imageBuilt(g.root, agentImage("claude-code")) {
		t.Skip("the claude-code image is not built")
	}
	bare := g.seedRepo("acme/app")
	ctx := context.Background()
	sb, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: "origin", Purpose: "agent", Repo: "acme/app",
		Task: sessionMark + ": write one.txt and commit it.", Runner: "claude-code", Session: true})
	if err != nil {
		t.Fatal(err)
	}
	first := g.waitState(g.operator, sb.ID, "suspended", 4*time.Minute)
	if first.Run == nil || first.Run.State != "succeeded" || first.Run.Commit == "" {
		log, _ := g.berthErr("sandbox", "logs", "--raw", "origin")
		t.Fatalf("task 1: %s (%s) %+v\n%s", first.State, first.Reason, first.Run, log)
	}
	c1 := first.Run.Commit

	// The forks, and once their tasks are over a reviewer of theirs.
	out, err := g.berthErr("sandbox", "fork", "origin", "try", "--count", "2", "--task", "Try it your way: write attempt.txt and commit it.",
		"--review", "Which attempt is best?", "-o", "json")
	if err != nil {
		t.Fatalf("berth sandbox fork: %v\n%s", err, out)
	}
	var made []api.Sandbox
	if err := json.Unmarshal([]byte(out), &made); err != nil || len(made) != 3 {
		t.Fatalf("berth sandbox fork -o json: %v\n%s", err, out)
	}
	forks, review := made[:2], made[2]
	if r := review.Run; review.Name != "try-review" || r == nil || r.Review == nil || r.Review.Best != "try-2" || r.Review.Outcome != "approved" ||
		len(review.Compare) != 2 {
		t.Errorf("the forks' reviewer: %+v, run %+v", review, review.Run)
	}
	attempts := map[string]string{}
	for _, f := range forks {
		if f.ForkedFrom != string(sb.ID) || !f.Session {
			t.Errorf("fork %s: forked from %q, session %v", f.Name, f.ForkedFrom, f.Session)
		}
		done := g.waitState(g.operator, f.ID, "suspended", 4*time.Minute)
		run := done.Run
		if run == nil || run.State != "succeeded" || run.Seq != 1 || run.Commit == "" {
			log, _ := g.berthErr("sandbox", "logs", "--raw", f.Name)
			t.Fatalf("fork %s: %s (%s) %+v\n%s", f.Name, done.State, done.Reason, run, log)
		}
		if at := gitIn(t, bare, "rev-parse", "refs/heads/berth/"+f.Name); at != run.Commit {
			t.Errorf("berth/%s is at %q, the run says %s", f.Name, at, run.Commit)
		}
		if parent := gitIn(t, bare, "rev-parse", run.Commit+"^"); parent != c1 {
			t.Errorf("fork %s's commit's parent is %s, want the source's %s", f.Name, parent, c1)
		}
		attempts[f.Name] = gitIn(t, bare, "show", run.Commit+":attempt.txt")
		if files := gitIn(t, bare, "ls-tree", "-r", "--name-only", run.Commit); !strings.Contains(files, "one.txt") {
			t.Errorf("fork %s's commit holds %q, without the source's one.txt", f.Name, files)
		}
		if show := string(g.berth("sandbox", "show", f.Name)); !strings.Contains(show, "forked from") || !strings.Contains(show, string(sb.ID)) {
			t.Errorf("berth sandbox show %s:\n%s", f.Name, show)
		}
	}
	// Each attempt is its own fork's.
	if attempts["try-1"] != "try-1" || attempts["try-2"] != "try-2" {
		t.Errorf("the forks' attempts: %q", attempts)
	}
	// The source waits as it was, its branch where its task left it.
	if again, err := g.operator.Sandbox(ctx, string(sb.ID)); err != nil || again.State != "suspended" || again.Run.Seq != 1 {
		t.Errorf("the source after its forks: %+v %v", again, err)
	}
	if at := gitIn(t, bare, "rev-parse", "refs/heads/berth/origin"); at != c1 {
		t.Errorf("berth/origin moved to %s", at)
	}
	if audit := string(g.berth("audit", "-o", "json")); !strings.Contains(audit, "forked into try-1, try-2") {
		t.Errorf("no sandbox.fork of the source in the audit log")
	}

	// A reviewer compares the attempts and names the best.
	out, err = g.berthErr("sandbox", "create", "judge", "--purpose", "agent", "--role", "reviewer", "--repo", "acme/app", "--branch", "berth/origin",
		"--runner", "claude-code", "--compare", "try-1,try-2", "--task", "Which attempt is best?", "--no-wait", "-o", "json")
	if err != nil {
		t.Fatalf("berth sandbox create judge: %v\n%s", err, out)
	}
	var judge api.Sandbox
	if err := json.Unmarshal([]byte(out), &judge); err != nil || len(judge.Compare) != 2 {
		t.Fatalf("the reviewer: %v\n%s", err, out)
	}
	judged := g.waitState(g.operator, judge.ID, "terminated", 4*time.Minute)
	if r := judged.Run; r == nil || r.Review == nil || r.Review.Outcome != "approved" || r.Review.Best != "try-2" {
		log, _ := g.berthErr("sandbox", "logs", "--raw", "judge")
		t.Fatalf("the reviewer's run: %s (%s) %+v\n%s", judged.State, judged.Reason, judged.Run, log)
	}
	if show := string(g.berth("sandbox", "show", "judge")); !regexp.MustCompile(`(?m)^review best: +try-2$`).MatchString(show) {
		t.Errorf("berth sandbox show judge:\n%s", show)
	}
	for _, id := range []string{string(sb.ID), string(forks[0].ID), string(forks[1].ID), string(review.ID), string(judge.ID)} {
		if _, err := g.operator.Terminate(ctx, id); err != nil {
			t.Fatal(err)
		}
		if c, v := g.waitGone(id, 10*time.Second); c != "" || v != "" {
			t.Errorf("left behind: containers %q volumes %q", c, v)
		}
		for _, dir := range []string{id, id + ".home"} {
			if _, err := os.Stat(filepath.Join(g.dataDir, "work", dir)); !os.IsNotExist(err) {
				t.Errorf("%s is still there: %v", dir, err)
			}
		}
	}
}
