package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/store"
)

// inferenceYAML serves the scripted model server's tool scenario inside
// the gateway: one shell call that writes f.txt and commits it, then a
// closing text.
const inferenceYAML = `providers:
  - name: scripted
    kind: scripted
    script: tool
models:
  - id: scripted
    provider: scripted
    price: {input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}
`

// agentImage is the image of a runner that `make images` builds.
func agentImage(r string) string { return "localhost/berth-agent-" + r + ":latest" }

// startAgentGateway is a gateway that runs agents: the scripted model
// server as its inference, claude-code and pi images, and an allowlist
// network of its own (a bridge and subnet no other test uses), removed
// when the test ends.
func startAgentGateway(t *testing.T, inferenceFile string, runners ...string) *gateway {
	t.Helper()
	return startAgentGatewayWith(t, inferenceFile, nil, runners...)
}

// startAgentGatewayWith is startAgentGateway with env added to the
// gateway's environment.
func startAgentGatewayWith(t *testing.T, inferenceFile string, env []string, runners ...string) *gateway {
	t.Helper()
	root := podmanRoot(t)
	if os.Geteuid() != 0 {
		t.Skip("the allowlist network needs root (iptables)")
	}
	var images []string
	for _, r := range runners {
		if !imageBuilt(root, agentImage(r)) {
			continue // its subtest skips
		}
		images = append(images, r+"="+agentImage(r))
	}
	if len(images) == 0 {
		t.Skipf("no agent image is built (make images builds %s)", agentImage(runners[0]))
	}
	dir := t.TempDir()
	inference := filepath.Join(dir, "inference.yaml")
	if err := os.WriteFile(inference, []byte(inferenceFile), 0o644); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	n, _ := rand.Int(rand.Reader, big.NewInt(100))
	network := "berth-e2e-" + hex.EncodeToString(b)
	g := startGateway(t, append([]string{
		"BERTH_INFERENCE_FILE=" + inference,
		"BERTH_RUNNER_IMAGES=" + strings.Join(images, ","),
		"BERTH_SANDBOX_PODMAN_AGENT_NETWORK=" + network,
	}, env...)...)
	g.berth("admin", "agent-network", "--bridge", "bte"+hex.EncodeToString(b), "--subnet", fmt.Sprintf("10.89.%d.0/24", 100+n.Int64()))
	t.Cleanup(func() {
		if _, err := g.berthErr("admin", "agent-network", "--remove", "--bridge", "bte"+hex.EncodeToString(b)); err != nil {
			t.Errorf("remove the allowlist network: %v", err)
		}
	})
	return g
}

// imageBuilt reports whether the podman root holds image.
func imageBuilt(root, image string) bool {
	return podmanOn(root, "image", "exists", image).Run() == nil
}

// TestAgentRunEndToEnd runs the real agent CLIs in their images on the
// allowlist network, against the scripted model server through the
// gateway (each in its own vendor's dialect: Anthropic Messages, OpenAI
// Chat Completions and Responses, Gemini): the scripted tool call edits a
// file and commits, the host pushes berth/<name>, the run's tokens are the
// model server's, the gateway metered the same, and nothing of the run is
// left behind. claude-code and pi are built by make images; codex,
// opencode and gemini run when their images are built (images/build agent
// codex opencode gemini).
func TestAgentRunEndToEnd(t *testing.T) {
	runners := []string{"claude-code", "pi", "codex", "opencode", "gemini"}
	g := startAgentGateway(t, inferenceYAML, runners...)
	bare := g.seedRepo("acme/app")
	ctx := context.Background()
	for _, r := range runners {
		t.Run(r, func(t *testing.T) {
			if !imageBuilt(g.root, agentImage(r)) {
				t.Skipf("%s is not built (images/build agent %s)", agentImage(r), r)
			}
			name := "fix-" + strings.ReplaceAll(r, "-", "")
			began := time.Now()
			sb, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: name, Purpose: "agent", Repo: "acme/app",
				Task: "Write f.txt and commit it.", Runner: r})
			if err != nil {
				t.Fatal(err)
			}
			if sb.Image != agentImage(r) {
				t.Errorf("image %s, want the runner's %s", sb.Image, agentImage(r))
			}
			end := g.waitSandbox(g.operator, sb.ID, 4*time.Minute, func(sb api.Sandbox, late bool) bool {
				if late {
					t.Fatalf("sandbox %s is still %s", sb.Name, sb.State)
				}
				return sb.State == "terminated" || sb.State == "failed"
			})
			t.Logf("%s: %s in %s", r, end.State, time.Since(began).Round(time.Millisecond))
			log, _ := g.berthErr("sandbox", "logs", "--raw", name)
			if end.State != "terminated" || end.Run == nil || end.Run.State != "succeeded" {
				t.Fatalf("sandbox %s (%s), run %+v; log:\n%s", end.State, end.Reason, end.Run, log)
			}
			run := end.Run
			// The work landed on the sandbox's branch, and only there.
			if run.Branch != "berth/"+name || run.Commit == "" {
				t.Fatalf("run pushed %q at %q", run.Branch, run.Commit)
			}
			if got := gitIn(t, bare, "rev-parse", "refs/heads/berth/"+name); got != run.Commit {
				t.Errorf("berth/%s is at %q, the run says %s", name, got, run.Commit)
			}
			if got := gitIn(t, bare, "show", run.Commit+":f.txt"); got != "hi" {
				t.Errorf("f.txt in the pushed commit holds %q", got)
			}
			if files := gitIn(t, bare, "ls-tree", "-r", "--name-only", run.Commit); strings.Contains(files, ".berth-prompt.txt") {
				t.Errorf("the prompt file was committed: %s", files)
			}
			// The tokens are the scripted model server's, as the agent
			// reported them and as the gateway metered them.
			want := api.Tokens{Input: 240, CacheRead: 60, Output: 34}
			switch r {
			case "claude-code":
				want.CacheWrite = 10
			case "codex":
				want.Reasoning = 6
			}
			if run.Usage != want {
				t.Errorf("the agent reported %+v, want the model server's %+v", run.Usage, want)
			}
			// The gateway metered every call: the model server answers each
			// with the same usage, so the whole is calls × one call's. It
			// equals what the agent reported, except for OpenCode, whose
			// stream leaves out the title it asks the small model for: the
			// run says so.
			m := run.Metered
			if m == nil || m.Requests < 2 {
				t.Fatalf("the gateway metered %+v, want at least 2 requests", m)
			}
			n := int64(m.Requests)
			perCall := api.Tokens{Input: 120 * n, CacheRead: 30 * n, Output: 17 * n}
			if r == "claude-code" {
				perCall.CacheWrite = 5 * n
			}
			if m.Usage.Input != perCall.Input || m.Usage.CacheRead != perCall.CacheRead || m.Usage.CacheWrite != perCall.CacheWrite || m.Usage.Output != perCall.Output {
				t.Errorf("the gateway metered %+v over %d requests, want %+v", m.Usage, n, perCall)
			}
			// Every call named the sandbox's session (X-Berth-Session,
			// through each CLI's own way of adding a header), so each is
			// recorded under it, not only under the sandbox's key.
			if s := g.sessionUsage(sb.ID); s.Requests != m.Requests {
				t.Errorf("%d of the %d requests were recorded under session %s", s.Requests, m.Requests, sb.ID)
			}
			// OpenCode's title call is found among the calls and named; any
			// other difference is in cost alone, and explained.
			checkDifference(t, r, n, run.Difference)
			if run.CostUSD == nil || *run.CostUSD <= 0 {
				t.Errorf("cost %v (%s), want a figure", run.CostUSD, run.CostSource)
			}
			// Nothing of the run is left: no container, no checkout, no
			// prompt file.
			if c, v := g.waitGone(string(sb.ID), 10*time.Second); c != "" || v != "" {
				t.Errorf("left behind: containers %q volumes %q", c, v)
			}
			work := filepath.Join(g.dataDir, "work", string(sb.ID))
			if _, err := os.Stat(work); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the checkout %s is still there: %v", work, err)
			}
			if prompts := findPrompts(t, g.dataDir); len(prompts) > 0 {
				t.Errorf("prompt files left: %v", prompts)
			}
			// The log holds what the agent printed, and show says it.
			if !strings.Contains(string(log), `"type"`) {
				t.Errorf("the run log holds no stream:\n%s", log)
			}
			show := string(g.berth("sandbox", "show", name))
			for _, s := range []string{"succeeded", "berth/" + name + "@" + run.Commit[:7], "240 in, 34 out", "metered:"} {
				if !strings.Contains(show, s) {
					t.Errorf("sandbox show lacks %q:\n%s", s, show)
				}
			}
		})
	}
}

// findPrompts lists every prompt file under dir.
func findPrompts(t *testing.T, dir string) []string {
	var found []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && d.Name() == "podman" {
			return filepath.SkipDir
		}
		if d.Name() == ".berth-prompt.txt" {
			found = append(found, p)
		}
		return nil
	})
	return found
}

// TestAgentRunSurvivesAGatewayCrash kills the gateway with SIGKILL while
// Claude Code is in the middle of its tool call, starts it again, and
// expects the new gateway to follow the container from its start and
// finish the run as if nothing happened: branch pushed, tokens whole.
func TestAgentRunSurvivesAGatewayCrash(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "slow.json")
	if err := os.WriteFile(script, []byte(`{"turns": [
  {"text": "I'll run the command.", "command": "sleep 8 && echo hi > f.txt && git add f.txt && git commit -q -m slow", "description": "Write f.txt slowly"},
  {"text": "Done."}
]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startAgentGateway(t, strings.Replace(inferenceYAML, "script: tool", "script: "+script, 1), "claude-code")
	bare := g.seedRepo("acme/app")
	ctx := context.Background()
	sb, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: "slow", Purpose: "agent", Repo: "acme/app",
		Task: "Write f.txt and commit it.", Runner: "claude-code"})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the agent has asked for its tool call: it now sleeps.
	deadline := time.Now().Add(time.Minute)
	for {
		log, _ := g.berthErr("sandbox", "logs", "--raw", "slow")
		if strings.Contains(string(log), `"tool_use"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no tool call in the log after a minute:\n%s", log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	g.kill()
	g.start()
	end := g.waitEnded(sb.ID, 2*time.Minute)
	if end.State != "terminated" || end.Run == nil || end.Run.State != "succeeded" {
		log, _ := g.berthErr("sandbox", "logs", "--raw", "slow")
		t.Fatalf("sandbox %s (%s), run %+v; log:\n%s", end.State, end.Reason, end.Run, log)
	}
	if got := gitIn(t, bare, "rev-parse", "refs/heads/berth/slow"); got == "" || got != end.Run.Commit {
		t.Errorf("berth/slow is at %q, the run says %q", got, end.Run.Commit)
	}
	if want := (api.Tokens{Input: 240, CacheRead: 60, CacheWrite: 10, Output: 34}); end.Run.Usage != want {
		t.Errorf("after the restart the run reports %+v, want the whole run's %+v", end.Run.Usage, want)
	}
	if c, v := g.waitGone(string(sb.ID), 10*time.Second); c != "" || v != "" {
		t.Errorf("left behind: containers %q volumes %q", c, v)
	}
}

// TestAgentRunOverBudgetFailsSayingWhy: a project whose budget cannot pay
// for one call refuses the agent's first request (402 budget_exceeded);
// the CLI surfaces the refusal, the run fails with it as its reason, and
// nothing is pushed.
func TestAgentRunOverBudgetFailsSayingWhy(t *testing.T) {
	g := startAgentGateway(t, inferenceYAML, "claude-code")
	if !imageBuilt(g.root, agentImage("claude-code")) {
		t.Skip("claude-code's image is not built")
	}
	bare := g.seedRepo("acme/app")
	g.berth("project", "inference", "set", "default", "--budget", "0.000001")
	sb, err := g.operator.CreateSandbox(context.Background(), api.CreateSandbox{Name: "broke", Purpose: "agent", Repo: "acme/app",
		Task: "Write f.txt and commit it.", Runner: "claude-code"})
	if err != nil {
		t.Fatal(err)
	}
	end := g.waitSandbox(g.operator, sb.ID, 3*time.Minute, func(sb api.Sandbox, late bool) bool {
		if late {
			t.Fatalf("sandbox %s is still %s", sb.Name, sb.State)
		}
		return sb.State == "terminated" || sb.State == "failed"
	})
	if end.State != "failed" || end.Run == nil || end.Run.State != "failed" || !strings.Contains(end.Run.Error, "budget") {
		log, _ := g.berthErr("sandbox", "logs", "--raw", "broke")
		t.Fatalf("sandbox %s (%s), run %+v; want failed, saying the budget is spent; log:\n%s", end.State, end.Reason, end.Run, log)
	}
	t.Logf("the run failed: %s", end.Run.Error)
	if got := gitIn(t, bare, "rev-parse", "--verify", "--quiet", "refs/heads/berth/broke"); got != "" {
		t.Errorf("a failed run pushed berth/broke at %s", got)
	}
}

// TestAgentRunWithoutItsNetworkFailsClosed: when the allowlist network
// does not exist the run never starts: the sandbox fails saying so, no
// container is made, and the checkout is gone.
func TestAgentRunWithoutItsNetworkFailsClosed(t *testing.T) {
	root := podmanRoot(t)
	if !imageBuilt(root, agentImage("claude-code")) {
		t.Skip("claude-code's image is not built")
	}
	dir := t.TempDir()
	inference := filepath.Join(dir, "inference.yaml")
	if err := os.WriteFile(inference, []byte(inferenceYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, "BERTH_INFERENCE_FILE="+inference, "BERTH_RUNNER_IMAGES=claude-code="+agentImage("claude-code"),
		"BERTH_SANDBOX_PODMAN_AGENT_NETWORK=berth-e2e-never-made")
	g.seedRepo("acme/app")
	sb, err := g.operator.CreateSandbox(context.Background(), api.CreateSandbox{Name: "closed", Purpose: "agent", Repo: "acme/app",
		Task: "Write f.txt and commit it.", Runner: "claude-code"})
	if err != nil {
		t.Fatal(err)
	}
	end := g.waitState(g.operator, sb.ID, "failed", time.Minute)
	if !strings.Contains(end.Reason, "allowlist network berth-e2e-never-made does not exist") {
		t.Errorf("failed with %q, want the missing network named", end.Reason)
	}
	if c, v := g.objects(string(sb.ID)); c != "" || v != "" {
		t.Errorf("a run whose network is missing left containers %q volumes %q", c, v)
	}
	if _, err := os.Stat(filepath.Join(g.dataDir, "work", string(sb.ID))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("its checkout is still there: %v", err)
	}
}

// sessionUsage reads what the gateway recorded under a session, from its
// database.
func (g *gateway) sessionUsage(session string) inference.SessionUsage {
	g.t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(g.dataDir, "berth.db"))
	if err != nil {
		g.t.Fatal(err)
	}
	defer st.Close()
	u, err := st.SessionUsage(context.Background(), session)
	if err != nil {
		g.t.Fatal(err)
	}
	return u
}

// checkDifference holds a finished real run's difference from the
// gateway's figures to what berth knows of its CLI: OpenCode leaves its
// title call out of its totals, and nothing else; every other CLI's
// tokens agree with the gateway's, and a cost that does not is explained
// (Claude Code prices a model it does not know at a guess).
func checkDifference(t *testing.T, r string, requests int64, d *api.Difference) {
	t.Helper()
	if d != nil {
		t.Logf("%s: difference: %s", r, d.Summary)
		for _, c := range d.Causes {
			t.Logf("%s: because (%s): %s", r, c.Kind, c.Message)
		}
	}
	switch {
	case r == "opencode":
		if requests != 3 || d == nil || !d.Tokens || len(d.Causes) != 1 || d.Causes[0].Kind != "uncounted_calls" || d.Causes[0].Requests != 1 ||
			!strings.Contains(d.Causes[0].Message, "title") {
			t.Errorf("opencode: %d requests, difference %+v; want its title call metered, found and named", requests, d)
		}
	case d == nil:
	case d.Tokens || len(d.Causes) == 0:
		t.Errorf("%s: the tokens differ or the difference is not explained: %+v", r, d)
	}
}
