package cli_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/golden"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/usage"
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

// TestRunCostInOneNumber (issue 23): with machine time priced
// (BERTH_CORE_HOUR_USD), a run's answer and `show` give its cost in one
// number: the gateway's metered model cost and its machine time, by its
// cores, at the price; without a price neither is there.
func TestRunCostInOneNumber(t *testing.T) {
	sonnet := runner.Price{Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75}
	u := runner.Usage{Input: 120, CacheRead: 30, CacheWrite: 5, Output: 17}
	usd, _ := runner.Prices{"claude-sonnet-4-5": sonnet}.Cost("claude-sonnet-4-5", u)
	for _, price := range []usage.CoreHour{0, 3600} { // $1 a core-second, so that a short run's machine shows
		t.Run(fmt.Sprint(price), func(t *testing.T) {
			g := newAgentGateway(t, func(s *agentSetup) {
				s.metered, s.coreHour = true, price
				s.calls = []inference.Record{{Provider: "scripted", Model: "claude-sonnet-4-5", Dialect: inference.OpenAIChat, Status: 200, Usage: u, CostUSD: usd, Metered: true}}
				s.prices = runner.Prices{"claude-sonnet-4-5": sonnet}
			})
			g.release()
			c := client.New(g.url, g.key, nil)
			created, err := c.CreateSandbox(t.Context(), api.CreateSandbox{Name: "fix", Purpose: "agent", Repo: "acme/app", Task: "add a greeting", Runner: "claude-code"})
			if err != nil {
				t.Fatal(err)
			}
			waitRun(t, c, created.ID)
			sb, err := c.Sandbox(t.Context(), created.ID)
			if err != nil {
				t.Fatal(err)
			}
			r := sb.Run
			_, out, _ := g.berth(t, "sandbox", "show", "fix")
			if !price.Priced() {
				if r.MachineCostUSD != nil || r.TotalCostUSD != nil || strings.Contains(out, "cost in all") {
					t.Errorf("unpriced machine time: machine %v, total %v\n%s", r.MachineCostUSD, r.TotalCostUSD, out)
				}
				return
			}
			cores, _ := quantity.ParseCPU(sb.CPU)
			machine := price.Cost(float64(sb.RunningSeconds) * cores.Cores())
			if r.MachineCostUSD == nil || r.TotalCostUSD == nil || r.Metered == nil {
				t.Fatalf("run %+v: want its machine's cost and the whole", r)
			}
			// The run's seconds are read at its answer; the show's a moment later.
			if *r.MachineCostUSD < machine-1e-9 || *r.MachineCostUSD > machine+float64(price)/3600*cores.Cores()+1e-9 ||
				math.Abs(*r.TotalCostUSD-(*r.MachineCostUSD+r.Metered.CostUSD)) > 1e-6 {
				t.Errorf("machine %v (at %d s of %s cores: %v), total %v, metered %v", *r.MachineCostUSD, sb.RunningSeconds, sb.CPU, machine, *r.TotalCostUSD, r.Metered.CostUSD)
			}
			wantLines(t, "show", out, `^cost in all: +\$[0-9.]+: the models' and \$[0-9.]+ for the machine$`)
		})
	}
}
