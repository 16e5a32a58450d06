package agentrun_test

import (
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/runner/runnertest"
	"berth.dev/berth/internal/sandbox"
)

// Usage the scripted model server reports on every call, as each dialect
// counts it (shared/testdata/agent-streams/README.md): Anthropic's has a
// cache write, OpenAI's has none.
var (
	anthropicCall = runner.Usage{Input: 120, CacheRead: 30, CacheWrite: 5, Output: 17}
	openAICall    = runner.Usage{Input: 120, CacheRead: 30, Output: 17}
)

// sonnet is the vendor's list price of claude-sonnet-4-5, which Claude
// Code priced the captured streams at.
var sonnet = runner.Price{Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75}

// TestRunExplainsItsDifferenceFromTheGateway runs an agent on the fake
// driver that prints a real CLI's stream (Claude Code's, OpenCode's) while
// the gateway's records of its model calls land in the real store, as the
// gateway writes them. Read back, the run carries both costs; where the
// agent's figures differ from the gateway's it says so, in tokens or in
// cost, and says why when berth can tell: OpenCode's uncounted title call,
// found among the calls by its tokens; Claude Code's own price table
// against the deployment's; answers that said no usage. Figures that agree
// are not flagged.
func TestRunExplainsItsDifferenceFromTheGateway(t *testing.T) {
	for _, tt := range []struct {
		name, runner, stream string
		price                runner.Price         // the deployment's price of claude-sonnet-4-5
		calls                []inference.Record   // what the gateway metered (usage and whether it said any)
		fails                bool                 // the run fails (its stream says an error)
		tokens, cost         bool                 // which differ
		causes               []agentrun.CauseKind // in order
		says                 []string
	}{
		{name: "agree", runner: "claude-code", stream: "claude-tool", price: sonnet,
			calls: []inference.Record{{Usage: anthropicCall, Metered: true}, {Usage: anthropicCall, Metered: true}}},
		{name: "opencode's title call", runner: "opencode", stream: "opencode-tool", price: sonnet,
			calls:  []inference.Record{{Usage: openAICall, Metered: true}, {Usage: openAICall, Metered: true}, {Usage: openAICall, Metered: true}},
			tokens: true, cost: true, causes: []agentrun.CauseKind{agentrun.CauseUncountedCalls},
			says: []string{"1 model call of the 3 the gateway metered (120 in, 17 out, 30 cache read, 0 cache write on claude-sonnet-4-5, $0.000624) is not in the agent's totals, which are exactly the other 2's",
				"OpenCode does not count the call that titles its session",
				"the agent reported 240 in, 34 out, 60 cache read, 0 cache write and $0.001248 (native); the gateway metered 360 in, 51 out, 90 cache read, 0 cache write and $0.001872 over 3 model calls"}},
		{name: "claude's own price table", runner: "claude-code", stream: "claude-tool",
			price: runner.Price{Input: 2, Output: 10, CacheRead: 0.2, CacheWrite: 2.5},
			calls: []inference.Record{{Usage: anthropicCall, Metered: true}, {Usage: anthropicCall, Metered: true}},
			cost:  true, causes: []agentrun.CauseKind{agentrun.CausePriceTable},
			says: []string{"the agent's $0.001286 is the CLI's own (its cost basis: list), at the vendor's list price for claude-sonnet-4-5 ($3 input, $15 output, $0.30 cache read, $3.75 cache write per million tokens)",
				"the gateway charged this deployment's price for claude-sonnet-4-5 ($2 input, $10 output, $0.20 cache read, $2.50 cache write per million tokens): $0.000857",
				"They differ in input ($3 against $2 per million), output ($15 against $10 per million), cache reads ($0.30 against $0.20 per million), cache writes ($3.75 against $2.50 per million)"}},
		{name: "a cache rate alone", runner: "claude-code", stream: "claude-tool",
			price: runner.Price{Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3},
			calls: []inference.Record{{Usage: anthropicCall, Metered: true}, {Usage: anthropicCall, Metered: true}},
			cost:  true, causes: []agentrun.CauseKind{agentrun.CausePriceTable},
			says: []string{"They differ in cache writes ($3.75 against $3 per million)"}},
		{name: "an answer without usage", runner: "claude-code", stream: "claude-tool", price: sonnet,
			calls:  []inference.Record{{Usage: anthropicCall, Metered: true}, {CostUSD: 0.05}},
			tokens: true, cost: true, causes: []agentrun.CauseKind{agentrun.CauseUnmeteredCalls},
			says: []string{"1 of the 2 model calls the gateway metered said no usage (a stream cut short): it counted no tokens for it and charged its worst case, $0.05"}},
		{name: "nothing reported", runner: "opencode", stream: "opencode-error", price: sonnet, fails: true,
			calls:  []inference.Record{{Usage: openAICall, Metered: true}},
			tokens: true, causes: []agentrun.CauseKind{agentrun.CauseUnreported},
			says: []string{"the agent reported no tokens at all"}},
		{name: "unexplained", runner: "claude-code", stream: "claude-tool", price: sonnet,
			calls:  []inference.Record{{Usage: anthropicCall, Metered: true}, {Usage: runner.Usage{Input: 900, CacheRead: 30, CacheWrite: 5, Output: 17}, Metered: true}},
			tokens: true, cost: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(_ *sandbox.Config, c *agentrun.Config) { c.Prices = runner.Prices{"claude-sonnet-4-5": tt.price} })
			e.ropts = append(e.ropts, agentrun.WithSessionMeter(e.st))
			e.svc, e.runs = e.services(e.st, e.drv, e.w.Log)
			e.drv.SetAgent(func(spec sandbox.Spec) ([]string, int) {
				sb := spec.Sandbox
				for _, r := range tt.calls {
					r.At, r.Org, r.Project, r.User, r.Key, r.Sandbox, r.Session = e.clock.Now(), sb.Org, sb.Project, sb.Owner, sb.KeyID, string(sb.ID), string(sb.ID)
					r.Provider, r.Model, r.Dialect, r.Status = "scripted", "claude-sonnet-4-5", inference.Anthropic, 200
					if r.Metered {
						r.CostUSD, _ = runner.Prices{r.Model: tt.price}.Cost(r.Model, r.Usage)
					}
					if err := e.st.RecordInference(t.Context(), r); err != nil {
						t.Error(err)
					}
				}
				return runnertest.Stream(t, tt.stream), 0
			})
			e.run(t)
			sb := e.agentRun(t, tt.runner)
			ends := sandbox.StateTerminated
			if tt.fails {
				ends = sandbox.StateFailed
			}
			end := e.waitState(t, sb.ID, ends)
			run, err := e.runs.Of(t.Context(), end)
			if err != nil {
				t.Fatal(err)
			}
			if run.Metered == nil || run.Metered.Requests != len(tt.calls) {
				t.Fatalf("metered %+v, want the gateway's %d calls", run.Metered, len(tt.calls))
			}
			if reported := run.Telemetry.Cost == runner.CostNative && run.Telemetry.CostUSD > 0; reported == (tt.causes != nil && tt.causes[0] == agentrun.CauseUnreported) {
				t.Fatalf("the agent's cost %v (%s)", run.Telemetry.CostUSD, run.Telemetry.Cost)
			}
			d := run.Difference
			if (d != nil) != (tt.tokens || tt.cost) {
				t.Fatalf("difference %+v, want tokens %v cost %v", d, tt.tokens, tt.cost)
			}
			if d == nil {
				return
			}
			var kinds []agentrun.CauseKind
			var text strings.Builder
			text.WriteString(d.Summary + "\n")
			for _, c := range d.Causes {
				kinds = append(kinds, c.Kind)
				text.WriteString(c.Message + "\n")
			}
			t.Logf("difference:\n%s", &text)
			if d.Tokens != tt.tokens || d.Cost != tt.cost || !slices.Equal(kinds, tt.causes) {
				t.Errorf("difference in tokens %v, cost %v, causes %v; want %v, %v, %v\n%s", d.Tokens, d.Cost, kinds, tt.tokens, tt.cost, tt.causes, &text)
			}
			for _, s := range tt.says {
				if !strings.Contains(text.String(), s) {
					t.Errorf("the difference does not say %q:\n%s", s, &text)
				}
			}
		})
	}
}
