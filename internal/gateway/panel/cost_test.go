package panel_test

import (
	"html"
	"strings"
	"testing"

	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
)

// TestRunPageShowsBothCosts: an agent sandbox's page shows the agent's own
// cost and the gateway's metered one, and where they differ, how and why:
// OpenCode, printing its real captured stream, left out the title call the
// gateway metered. A run whose figures agree shows no difference.
func TestRunPageShowsBothCosts(t *testing.T) {
	sonnet := runner.Price{Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75}
	w := newWorld(t, metered(runner.Prices{"claude-sonnet-4-5": sonnet}))
	meter := func(n int, u runner.Usage) func(sandbox.Spec) {
		return func(spec sandbox.Spec) {
			sb := spec.Sandbox
			usd, _ := runner.Prices{"claude-sonnet-4-5": sonnet}.Cost("claude-sonnet-4-5", u)
			for range n {
				if err := w.st.RecordInference(t.Context(), inference.Record{At: w.now(), Org: sb.Org, Project: sb.Project, User: sb.Owner,
					Key: sb.KeyID, Sandbox: string(sb.ID), Session: string(sb.ID), Provider: "scripted", Model: "claude-sonnet-4-5",
					Dialect: inference.OpenAIChat, Status: 200, Usage: u, CostUSD: usd, Metered: true}); err != nil {
					t.Error(err)
				}
			}
		}
	}
	b := w.browser(t)
	b.signIn(w.keys["alice"])

	title := w.agentRunOf(t, "alice", "title", "opencode", "opencode-tool", meter(3, runner.Usage{Input: 120, CacheRead: 30, Output: 17}))
	pg := b.get("/sandboxes/" + string(title.ID))
	body := html.UnescapeString(pg.body)
	for _, want := range []string{
		"<dt>Agent's cost</dt><dd>$0.0012 (native)</dd>",
		"<dt>Gateway's cost</dt><dd>$0.0019, what budgets are charged</dd>",
		"<dt>Metered</dt><dd>3 model calls through the gateway: 360 in, 51 out, 90 cache read, 0 cache write (claude-sonnet-4-5)</dd>",
		"<dt>Difference</dt><dd class=\"warn\">In tokens and cost: the agent reported 240 in, 34 out, 60 cache read, 0 cache write and $0.001248 (native); the gateway metered 360 in, 51 out, 90 cache read, 0 cache write and $0.001872 over 3 model calls.",
		"<li>1 model call of the 3 the gateway metered (120 in, 17 out, 30 cache read, 0 cache write on claude-sonnet-4-5, $0.000624) is not in the agent's totals, which are exactly the other 2's: OpenCode does not count the call that titles its session (made before its first step, without tools).</li>",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the run's page lacks %q:\n%s", want, body)
		}
	}

	agree := w.agentRunOf(t, "alice", "agree", "claude-code", "claude-tool", meter(2, runner.Usage{Input: 120, CacheRead: 30, CacheWrite: 5, Output: 17}))
	pg = b.get("/sandboxes/" + string(agree.ID))
	body = html.UnescapeString(pg.body)
	if !strings.Contains(body, "<dt>Agent's cost</dt><dd>$0.0013 (native, cost basis list)</dd>") || !strings.Contains(body, "<dt>Gateway's cost</dt><dd>$0.0013,") {
		t.Errorf("the agreeing run's page lacks both costs:\n%s", body)
	}
	if strings.Contains(body, "<dt>Difference</dt>") {
		t.Errorf("figures that agree are shown a difference:\n%s", body)
	}
}
