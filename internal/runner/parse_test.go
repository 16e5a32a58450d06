package runner_test

import (
	"testing"

	"berth.dev/berth/internal/runner"
)

// TestParseSequences covers what the captured streams do not: the order
// rules (totals overwrite, later messages decide failure), and shapes only
// documented or only seen in other versions.
func TestParseSequences(t *testing.T) {
	tests := []struct {
		name   string
		runner string
		lines  []string
		want   runner.Telemetry
	}{
		{
			name: "claude: per-block assistant usage is never summed; the result overwrites", runner: "claude-code",
			lines: []string{
				`{"type":"assistant","message":{"model":"claude-sonnet-4-5","usage":{"input_tokens":999,"output_tokens":1}},"session_id":"s1"}`,
				`{"type":"result","subtype":"success","is_error":false,"num_turns":3,"session_id":"s1","usage":{"input_tokens":10,"output_tokens":7,"output_tokens_details":{"thinking_tokens":4}}}`,
			},
			want: runner.Telemetry{Usage: runner.Usage{Input: 10, Output: 7, Reasoning: 4}, SessionID: "s1", Turns: 3},
		},
		{
			name: "claude: an API error line fails the run until a result says otherwise", runner: "claude-code",
			lines: []string{
				`{"type":"assistant","is_api_error_message":true,"message":{"model":"<synthetic>","content":[{"type":"text","text":"API Error: 529 overloaded"}]}}`,
			},
			want: runner.Telemetry{Error: "API Error: 529 overloaded"},
		},
		{
			name: "claude: an error subtype without text names itself", runner: "claude-code",
			lines: []string{`{"type":"result","subtype":"error_max_turns","is_error":true,"num_turns":10}`},
			want:  runner.Telemetry{Error: "error_max_turns", Turns: 10},
		},
		{
			name: "claude: a wrong-shaped field makes the line invalid, not half-read", runner: "claude-code",
			lines: []string{`{"type":"result","session_id":"s","usage":{"input_tokens":"many"}}`},
			want:  runner.Telemetry{},
		},
		{
			name: "cursor: a failed result", runner: "cursor",
			lines: []string{
				`{"type":"system","subtype":"init","session_id":"c1","model":"GPT-5"}`,
				`{"type":"result","subtype":"success","is_error":true,"result":"quota exceeded","session_id":"c1"}`,
			},
			want: runner.Telemetry{Model: "GPT-5", SessionID: "c1", Error: "quota exceeded"},
		},
		{
			name: "codex: a turn that completes after an error supersedes it; turns add up", runner: "codex",
			lines: []string{
				`{"type":"error","message":"stream disconnected; retrying"}`,
				`{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":10,"reasoning_output_tokens":2}}`,
				`{"type":"turn.completed","usage":{"input_tokens":50,"cached_input_tokens":0,"output_tokens":5}}`,
			},
			want: runner.Telemetry{Usage: runner.Usage{Input: 110, CacheRead: 40, Output: 15, Reasoning: 2}},
		},
		{
			name: "codex: an error item is not a failure", runner: "codex",
			lines: []string{`{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata for x not found"}}`},
			want:  runner.Telemetry{},
		},
		{
			name: "opencode: reasoning is counted on top of output", runner: "opencode",
			lines: []string{`{"type":"step_finish","sessionID":"o1","part":{"tokens":{"input":5,"output":7,"reasoning":3,"cache":{"read":1,"write":2}},"cost":0.25}}`},
			want: runner.Telemetry{Usage: runner.Usage{Input: 5, CacheRead: 1, CacheWrite: 2, Output: 10, Reasoning: 3},
				CostUSD: 0.25, Cost: runner.CostNative, SessionID: "o1", Turns: 1},
		},
		{
			name: "opencode: an error without data names its kind", runner: "opencode",
			lines: []string{`{"type":"error","sessionID":"o1","error":{"name":"ProviderAuthError","data":{"providerID":"berth"}}}`},
			want:  runner.Telemetry{SessionID: "o1", Error: "ProviderAuthError"},
		},
		{
			name: "pi: a retry that succeeds clears the failure; user messages are not usage", runner: "pi",
			lines: []string{
				`{"type":"message_end","message":{"role":"user","usage":{"input":1000}}}`,
				`{"type":"message_end","message":{"role":"assistant","model":"m","stopReason":"error","errorMessage":"429","usage":{"input":0,"cost":{"total":0}}}}`,
				`{"type":"auto_retry_start","attempt":1}`,
				`{"type":"message_end","message":{"role":"assistant","model":"m","stopReason":"stop","usage":{"input":3,"output":2,"cacheRead":1,"cost":{"total":0.5}}}}`,
			},
			want: runner.Telemetry{Usage: runner.Usage{Input: 3, CacheRead: 1, Output: 2}, CostUSD: 0.5, Cost: runner.CostNative, Model: "m", Turns: 2},
		},
		{
			name: "gemini: a result without stats still fails the run", runner: "gemini",
			lines: []string{`{"type":"result","status":"error","error":{"type":"unknown","message":"quota"}}`},
			want:  runner.Telemetry{Error: "quota"},
		},
		{
			name: "negative counts become zero", runner: "codex",
			lines: []string{`{"type":"turn.completed","usage":{"input_tokens":-5,"cached_input_tokens":10,"output_tokens":-1}}`},
			want:  runner.Telemetry{Usage: runner.Usage{CacheRead: 10}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := runner.Get(tt.runner)
			if err != nil {
				t.Fatal(err)
			}
			var got runner.Telemetry
			for _, l := range tt.lines {
				r.ParseLine(&got, []byte(l))
			}
			// Compare what a host sees, not the accumulators behind it.
			got2 := runner.Telemetry{Usage: got.Usage, CostUSD: got.CostUSD, Cost: got.Cost, Model: got.Model,
				SessionID: got.SessionID, Error: got.Error, Turns: got.Turns}
			if got2 != tt.want {
				t.Errorf("after %d lines:\n got %+v\nwant %+v", len(tt.lines), got2, tt.want)
			}
		})
	}
}

// TestParseDoesNotRetainLine: the host reuses its read buffer.
func TestParseDoesNotRetainLine(t *testing.T) {
	r, _ := runner.Get("gemini")
	line := []byte(`{"type":"init","session_id":"abc","model":"gemini-2.5-pro"}`)
	var tel runner.Telemetry
	r.ParseLine(&tel, line)
	for i := range line {
		line[i] = 'x'
	}
	if tel.SessionID != "abc" || tel.Model != "gemini-2.5-pro" {
		t.Errorf("telemetry changed with the buffer: %+v", tel)
	}
}

// TestLongStringsClipped: a runaway field cannot bloat the run's record.
func TestLongStringsClipped(t *testing.T) {
	r, _ := runner.Get("codex")
	long := make([]byte, 100000)
	for i := range long {
		long[i] = 'e'
	}
	var tel runner.Telemetry
	r.ParseLine(&tel, []byte(`{"type":"error","message":"`+string(long)+`"}`))
	if len(tel.Error) > 4096 || len(tel.Error) == 0 {
		t.Errorf("error kept %d bytes, want it clipped", len(tel.Error))
	}
}

// TestFill: totals from beside the stream (a Kelos image's markers) fill
// only what the stream left empty, and their cost is native.
func TestFill(t *testing.T) {
	claude, err := runner.Get("claude-code")
	if err != nil {
		t.Fatal(err)
	}
	result := []byte(`{"type":"result","subtype":"success","is_error":false,"num_turns":1,"session_id":"s","total_cost_usd":0.5,"usage":{"input_tokens":10,"output_tokens":7}}`)
	tests := []struct {
		name      string
		lines     [][]byte
		usage     runner.Usage
		cost      float64
		wantUsage runner.Usage
		wantCost  float64
		source    runner.CostSource
	}{
		{name: "an empty stream takes both", usage: runner.Usage{Input: 100, Output: 20}, cost: 0.25,
			wantUsage: runner.Usage{Input: 100, Output: 20}, wantCost: 0.25, source: runner.CostNative},
		{name: "a stream that reported keeps its own", lines: [][]byte{result}, usage: runner.Usage{Input: 100, Output: 20}, cost: 0.25,
			wantUsage: runner.Usage{Input: 10, Output: 7}, wantCost: 0.5, source: runner.CostNative},
		{name: "negative counts are none", usage: runner.Usage{Input: -5, Output: 3}, cost: 0.1,
			wantUsage: runner.Usage{Output: 3}, wantCost: 0.1, source: runner.CostNative},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tel := runner.Telemetry{Model: "claude-sonnet-4-5"}
			for _, l := range tt.lines {
				claude.ParseLine(&tel, l)
			}
			tel.FillUsage(tt.usage)
			tel.FillCost(tt.cost)
			tel.Settle(runner.ListPrices())
			if tel.Usage != tt.wantUsage || tel.CostUSD != tt.wantCost || tel.Cost != tt.source {
				t.Errorf("after Fill: usage %+v, cost %v (%s); want %+v, %v (%s)", tel.Usage, tel.CostUSD, tel.Cost, tt.wantUsage, tt.wantCost, tt.source)
			}
		})
	}
	t.Run("tokens without a cost are priced", func(t *testing.T) {
		tel := runner.Telemetry{Model: "claude-sonnet-4-5"}
		tel.FillUsage(runner.Usage{Input: 1000, Output: 100})
		tel.Settle(runner.ListPrices())
		if tel.Cost != runner.CostComputed || tel.CostUSD <= 0 {
			t.Errorf("cost %v (%s), want computed from the price table", tel.CostUSD, tel.Cost)
		}
	})
}
