package agentrun

import (
	"testing"

	"berth.dev/berth/internal/runner"
)

// TestCostsAgreeWithinRounding: a millionth of a dollar or a hundredth of
// a percent of the larger is rounding; a price table's difference (a
// percent or more) or a call's worth is not.
func TestCostsAgreeWithinRounding(t *testing.T) {
	for _, tt := range []struct {
		a, b  float64
		agree bool
	}{
		{0.0012855000000000002, 0.0012855, true}, // Claude Code's float sum
		{0.0012855, 0.0012862, true},             // under a millionth of a dollar
		{0.0012855, 0.0012870, false},            // a cache write rate apart on 10 tokens
		{12.3456, 12.3466, true},                 // a hundredth of a percent of a larger run
		{12.3456, 12.36, false},                  // 0.12%
		{0.001872, 0.001248, false},              // OpenCode's title call
		{0, 0, true},
		{0, 0.000002, false},
	} {
		if got := costsAgree(tt.a, tt.b); got != tt.agree {
			t.Errorf("costsAgree(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.agree)
		}
	}
}

// TestUncountedCallsAreFoundByTheirTokens: the calls the agent's totals
// leave out are a set of metered calls whose tokens are exactly the
// difference; the CLI's own count of its calls picks the set's size when
// calls are alike, and a difference no set makes is not explained.
func TestUncountedCallsAreFoundByTheirTokens(t *testing.T) {
	title := runner.Usage{Input: 400, CacheRead: 0, Output: 12}
	step := runner.Usage{Input: 120, CacheRead: 30, Output: 17}
	call := func(u runner.Usage, usd float64) MeteredCall {
		return MeteredCall{Model: "m", Status: 200, Usage: u, CostUSD: usd, Metered: true}
	}
	many := []MeteredCall{call(title, 0.01)}
	for range 500 {
		many = append(many, call(step, 0.002))
	}
	for _, tt := range []struct {
		name     string
		calls    []MeteredCall
		agent    runner.Usage
		turns    int
		found    bool
		requests int
		cost     float64
	}{
		{"a title call among steps", []MeteredCall{call(title, 0.01), call(step, 0.002), call(step, 0.002)}, times(step, 2), 2, true, 1, 0.01},
		{"without a count of calls", []MeteredCall{call(title, 0.01), call(step, 0.002), call(step, 0.002)}, times(step, 2), 0, true, 1, 0.01},
		{"one of many alike", many, add(title, times(step, 499)), 500, true, 1, 0.002},
		{"the title among many", many, times(step, 500), 500, true, 1, 0.01},
		{"failed calls count nothing", []MeteredCall{{Model: "m", Status: 400, Metered: true}, call(step, 0.002), call(step, 0.002)}, step, 1, true, 1, 0.002},
		{"no set makes the difference", []MeteredCall{call(step, 0.002), call(step, 0.002)}, runner.Usage{Input: 200, CacheRead: 60, Output: 34}, 2, false, 0, 0},
		{"the agent counts more", []MeteredCall{call(step, 0.002)}, times(step, 2), 2, false, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := Metered{Requests: len(tt.calls)}
			for _, c := range tt.calls {
				m.Usage, m.CostUSD = add(m.Usage, c.Usage), m.CostUSD+c.CostUSD
			}
			c := comparison{runner: "opencode", agent: runner.Telemetry{Usage: tt.agent, Turns: tt.turns}, metered: m, calls: tt.calls}
			x, ok := c.uncounted()
			if ok != tt.found || x.Requests != tt.requests || !costsAgree(x.CostUSD, tt.cost) {
				t.Fatalf("found %v: %d calls at $%v; want %v: %d at $%v (%s)", ok, x.Requests, x.CostUSD, tt.found, tt.requests, tt.cost, x.Message)
			}
			if ok && add(x.Usage, tt.agent) != m.Usage {
				t.Errorf("the uncounted calls' tokens %+v and the agent's %+v do not make the gateway's %+v", x.Usage, tt.agent, m.Usage)
			}
		})
	}
}
