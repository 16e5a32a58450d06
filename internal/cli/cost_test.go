package cli_test

import (
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/golden"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/runner"
)

// TestSandboxShowExplainsTheCost: `berth sandbox show` of a finished run
// shows the gateway's metered cost and the agent's own side by side, and
// where they differ, how and why: OpenCode's title call, which the gateway
// metered and OpenCode does not count; Claude Code's list prices against a
// deployment that charges less. The agents print the real CLIs' captured
// streams; the gateway's records are the scripted model server's usage at
// the deployment's prices. The cost rows are compared with golden files.
func TestSandboxShowExplainsTheCost(t *testing.T) {
	sonnet := runner.Price{Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75}
	cheaper := runner.Price{Input: 2, Output: 10, CacheRead: 0.20, CacheWrite: 2.50}
	record := func(n int, u runner.Usage, p runner.Price) []inference.Record {
		var rs []inference.Record
		for range n {
			usd, _ := runner.Prices{"claude-sonnet-4-5": p}.Cost("claude-sonnet-4-5", u)
			rs = append(rs, inference.Record{Provider: "scripted", Model: "claude-sonnet-4-5", Dialect: inference.OpenAIChat,
				Status: 200, Usage: u, CostUSD: usd, Metered: true})
		}
		return rs
	}
	for _, tt := range []struct {
		name, runner, stream string
		price                runner.Price
		calls                []inference.Record
	}{
		{"opencode-title-call", "opencode", "opencode-tool", sonnet, record(3, runner.Usage{Input: 120, CacheRead: 30, Output: 17}, sonnet)},
		{"claude-price-table", "claude-code", "claude-tool", cheaper, record(2, runner.Usage{Input: 120, CacheRead: 30, CacheWrite: 5, Output: 17}, cheaper)},
		{"claude-agrees", "claude-code", "claude-tool", sonnet, record(2, runner.Usage{Input: 120, CacheRead: 30, CacheWrite: 5, Output: 17}, sonnet)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := newAgentGateway(t, func(s *agentSetup) {
				s.runner, s.stream, s.metered, s.calls = tt.runner, tt.stream, true, tt.calls
				s.prices = runner.Prices{"claude-sonnet-4-5": tt.price}
			})
			g.release()
			c := client.New(g.url, g.key, nil)
			sb, err := c.CreateSandbox(t.Context(), api.CreateSandbox{Name: "fix", Purpose: "agent", Repo: "acme/app", Task: "add a greeting", Runner: tt.runner})
			if err != nil {
				t.Fatal(err)
			}
			waitRun(t, c, sb.ID)
			code, out, errs := g.berth(t, "sandbox", "show", "fix")
			if code != 0 {
				t.Fatalf("show exited %d: %s", code, errs)
			}
			var rows strings.Builder
			for line := range strings.Lines(out) {
				for _, k := range []string{"tokens:", "cost:", "metered:", "difference:", "because:"} {
					if strings.HasPrefix(line, k) {
						rows.WriteString(line)
					}
				}
			}
			golden.Check(t, "show-"+tt.name, []byte(rows.String()))
		})
	}
}

// waitRun polls a sandbox until its run is over.
func waitRun(t *testing.T, c *client.Client, id string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		sb, err := c.Sandbox(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if sb.Run != nil && sb.Run.State != "running" && sb.State != "running" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s is still %s", sb.Name, sb.State)
		}
	}
}
