package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/modelserver"
)

// pushCommand is what an agent that pushes its own work runs from its
// shell tool: commit, then git push its branch to the gateway's git
// endpoint with the key its container holds (the only credential it
// has), printing what git said into its tool's result, the run's log.
const pushCommand = `echo hi > f.txt && git add f.txt && git commit -q -m 'add f.txt' && ` +
	`url=$(printf %s "$BERTH_BASE_URL" | sed "s#://#://agent:$BERTH_API_KEY@#")/git/acme/app.git && ` +
	`git push "$url" "HEAD:refs/heads/berth/$BERTH_SANDBOX_NAME" 2>&1; echo "git push exited $?"`

// agentPushRefused is how the gateway words its refusal (sandbox.AgentPushRefused).
const agentPushRefused = "the host pushes an agent's work after a clean exit"

// pushingScript writes a model server script whose first turn pushes
// mid-run, followed by turns, and returns the inference file serving it.
func pushingScript(t *testing.T, turns ...modelserver.Turn) string {
	t.Helper()
	s := modelserver.Script{Turns: append([]modelserver.Turn{{Text: "I'll push my work myself.", Command: pushCommand, Description: "Push my branch"}}, turns...)}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "push.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return strings.Replace(inferenceYAML, "script: tool", "script: "+path, 1)
}

// runLogHas waits until the run log of name holds every one of want.
func (g *gateway) runLogHas(t *testing.T, name string, within time.Duration, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		out, _ := g.berthErr("sandbox", "logs", "--raw", name)
		log := string(out)
		all := true
		for _, w := range want {
			all = all && strings.Contains(log, w)
		}
		if all {
			return log
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run log of %s lacks %q after %s:\n%s", name, want, within, log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestAgentPushMidRunIsRejected (issue 14, item 4): Claude Code, driven by
// the scripted model, pushes its branch through the gateway from its Bash
// tool in the middle of its run, with the key its container holds. git
// gets a remote rejection saying the host pushes, and when the run then
// fails (the model's next answer is an error), or is terminated while the
// agent works on, no berth/<name> is left in the repository. The
// terminated run has no exit code: it says who ended it.
func TestAgentPushMidRunIsRejected(t *testing.T) {
	inference := pushingScript(t,
		// The task says whether this agent lingers: the prompt file is
		// its stdin, and still in /work while it runs.
		modelserver.Turn{Text: "Working on.", Command: "grep -q linger /work/.berth-prompt.txt && sleep 600; echo worked", Description: "Work on"},
		modelserver.Turn{Error: &modelserver.Failure{Status: 400, Message: "mock: scripted failure after the push"}},
	)
	g := startAgentGateway(t, inference, "claude-code")
	if !imageBuilt(g.root, agentImage("claude-code")) {
		t.Skip("claude-code's image is not built")
	}
	bare := g.seedRepo("acme/app")
	ctx := context.Background()
	me, err := g.operator.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	create := func(name, task string) api.Sandbox {
		t.Helper()
		sb, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: name, Purpose: "agent", Repo: "acme/app", Task: task, Runner: "claude-code"})
		if err != nil {
			t.Fatal(err)
		}
		return sb
	}
	fails := create("pushy-fails", "Push your branch yourself, then stop.")
	stays := create("pushy-stays", "Push your branch yourself, then linger.")

	end := g.waitSandbox(g.operator, fails.ID, 4*time.Minute, func(sb api.Sandbox, late bool) bool {
		if late {
			t.Fatalf("sandbox %s is still %s", sb.Name, sb.State)
		}
		return sb.EndedAt != nil
	})
	log := g.runLogHas(t, "pushy-fails", 10*time.Second, "[remote rejected]", agentPushRefused)
	if end.State != "failed" || end.Run == nil || end.Run.State != "failed" || !strings.Contains(end.Run.Error, "scripted failure") {
		t.Errorf("sandbox %s (%s), run %+v; want failed on the model's error\nlog:\n%s", end.State, end.Reason, end.Run, log)
	}
	if at := gitIn(t, bare, "rev-parse", "--verify", "--quiet", "refs/heads/berth/pushy-fails"); at != "" {
		t.Errorf("a failed run left berth/pushy-fails at %s", at)
	}

	g.runLogHas(t, "pushy-stays", 4*time.Minute, "[remote rejected]", "sleep 600")
	if _, err := g.operator.Terminate(ctx, stays.ID); err != nil {
		t.Fatal(err)
	}
	end = g.waitSandbox(g.operator, stays.ID, time.Minute, func(sb api.Sandbox, late bool) bool {
		if late {
			t.Fatalf("sandbox %s is still %s", sb.Name, sb.State)
		}
		return sb.EndedAt != nil && sb.Run != nil && sb.Run.State != "running"
	})
	if r := end.Run; end.State != "terminated" || r.ExitCode != nil || r.Ended != "terminated" || r.EndedBy != me.User.Name {
		t.Errorf("terminated run: sandbox %s, run %s, exit code %v, ended %q by %q; want terminated, no exit code, ended by %s",
			end.State, r.State, r.ExitCode, r.Ended, r.EndedBy, me.User.Name)
	}
	if at := gitIn(t, bare, "rev-parse", "--verify", "--quiet", "refs/heads/berth/pushy-stays"); at != "" {
		t.Errorf("a terminated run left berth/pushy-stays at %s", at)
	}
	show := string(g.berth("sandbox", "show", "pushy-stays"))
	if !strings.Contains(show, "terminated by "+me.User.Name) || strings.Contains(show, "exit code:") {
		t.Errorf("sandbox show of the terminated run:\n%s\nwant who ended it and no exit code", show)
	}
}
