package runner_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/golden"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/runner/runnertest"
)

// streamWant is a row of the expected-totals table in
// testdata/streams/README.md, plus what the run was given.
type streamWant struct {
	runner string
	// given is the model the host passed; the stream may name another.
	given string
	usage runner.Usage
	// cost is the README's figure in USD; nil where it says the CLI
	// reports none (Settle then computes it, or leaves it unknown).
	cost      *float64
	model     string
	failed    bool
	synthetic bool
}

func usd(v float64) *float64 { return &v }

// streamWants is the README's table, row for row. The error runs are "all
// zero", cost 0.
func streamWants() map[string]streamWant {
	text := runner.Usage{Input: 120, CacheRead: 30, Output: 17}
	tool := runner.Usage{Input: 240, CacheRead: 60, Output: 34}
	anthropicText := runner.Usage{Input: 120, CacheRead: 30, CacheWrite: 5, Output: 17}
	anthropicTool := runner.Usage{Input: 240, CacheRead: 60, CacheWrite: 10, Output: 34}
	codexText, codexTool := text, tool
	codexText.Reasoning, codexTool.Reasoning = 3, 6
	const sonnet, mock, gpt, gem = "claude-sonnet-4-5", "mock-model", "gpt-5.5", "gemini-2.5-pro"
	return map[string]streamWant{
		"claude-text":             {runner: "claude-code", given: sonnet, usage: anthropicText, cost: usd(0.00064275), model: sonnet},
		"claude-tool":             {runner: "claude-code", given: sonnet, usage: anthropicTool, cost: usd(0.0012855), model: sonnet},
		"claude-error":            {runner: "claude-code", given: sonnet, cost: usd(0), model: sonnet, failed: true},
		"pi-text":                 {runner: "pi", given: mock, usage: text, cost: usd(0.000624), model: mock},
		"pi-tool":                 {runner: "pi", given: mock, usage: tool, cost: usd(0.001248), model: mock},
		"pi-tool-anthropic":       {runner: "pi", given: mock, usage: anthropicTool, cost: usd(0.0012855), model: mock},
		"pi-error":                {runner: "pi", given: mock, cost: usd(0), model: mock, failed: true},
		"opencode-text":           {runner: "opencode", given: mock, usage: text, cost: usd(0.000624), model: mock},
		"opencode-tool":           {runner: "opencode", given: mock, usage: tool, cost: usd(0.001248), model: mock},
		"opencode-tool-anthropic": {runner: "opencode", given: mock, usage: anthropicTool, cost: usd(0.0012855), model: mock},
		"opencode-error":          {runner: "opencode", given: mock, cost: usd(0), model: mock, failed: true},
		"codex-text":              {runner: "codex", given: gpt, usage: codexText, model: gpt},
		"codex-tool":              {runner: "codex", given: gpt, usage: codexTool, model: gpt},
		"codex-error":             {runner: "codex", given: gpt, cost: usd(0), model: gpt, failed: true},
		"gemini-text":             {runner: "gemini", given: gem, usage: text, model: gem},
		"gemini-tool":             {runner: "gemini", given: gem, usage: tool, model: gem},
		"gemini-error":            {runner: "gemini", given: gem, cost: usd(0), model: gem, failed: true},
		// Synthetic, from Cursor's documentation: no usage, no cost.
		"cursor-tool": {runner: "cursor", given: "sonnet-4.5", model: "Claude 4 Sonnet", synthetic: true},
	}
}

// streamFiles lists the captured streams and the synthetic ones.
func streamFiles(t testing.TB) []string {
	captured, err := filepath.Glob("testdata/streams/*.jsonl")
	if err != nil || len(captured) == 0 {
		t.Fatalf("no captured streams in testdata/streams: %v", err)
	}
	synthetic, _ := filepath.Glob("testdata/cursor/*.jsonl")
	return append(captured, synthetic...)
}

func streamName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), ".jsonl")
}

// readLines splits a stream as the host does: one line per newline, up to
// a megabyte each.
func readLines(t testing.TB, path string) [][]byte {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, bytes.Clone(sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return lines
}

// TestStreams parses every captured stream with its runner, compares the
// result with a golden file and checks it against the README's table.
func TestStreams(t *testing.T) {
	wants := streamWants()
	seen := map[string]bool{}
	for _, path := range streamFiles(t) {
		name := streamName(path)
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			w, ok := wants[name]
			if !ok {
				t.Fatalf("%s has no row in the expected-totals table: add one", path)
			}
			r, err := runner.Get(w.runner)
			if err != nil {
				t.Fatal(err)
			}
			tel := runner.Telemetry{Model: w.given}
			counts := map[string]int{}
			for i, line := range readLines(t, path) {
				out := r.ParseLine(&tel, line)
				counts[out.String()]++
				if out.Ignored() {
					t.Errorf("line %d: %v, want every captured line in %s's vocabulary: %.120s", i+1, out, w.runner, line)
				}
			}
			tel.Settle(runner.ListPrices())
			checkStream(t, w, tel)

			got, err := json.MarshalIndent(struct {
				Lines     map[string]int   `json:"lines"`
				Telemetry runner.Telemetry `json:"telemetry"`
			}{counts, tel}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "telemetry/"+name, append(got, '\n'))
		})
	}
	for name := range wants {
		if !seen[name] {
			t.Errorf("the table expects %s, but there is no such stream", name)
		}
	}
}

func checkStream(t *testing.T, w streamWant, tel runner.Telemetry) {
	t.Helper()
	if err := runnertest.Check(tel); err != nil {
		t.Error(err)
	}
	if tel.Usage != w.usage {
		t.Errorf("usage = %+v, want %+v", tel.Usage, w.usage)
	}
	switch {
	case w.cost != nil:
		if math.Abs(tel.CostUSD-*w.cost) > 1e-9 {
			t.Errorf("cost = %v USD (%v), want %v", tel.CostUSD, tel.Cost, *w.cost)
		}
		if *w.cost != 0 && tel.Cost != runner.CostNative {
			t.Errorf("cost source = %v, want native: the CLI reported it", tel.Cost)
		}
	case tel.Cost == runner.CostNative:
		t.Errorf("cost source = native, but this CLI reports no cost")
	case tel.Cost == runner.CostComputed:
		want, ok := runner.ListPrices().Cost(tel.Model, tel.Usage)
		if !ok || math.Abs(tel.CostUSD-want) > 1e-12 {
			t.Errorf("computed cost = %v, want %v from the price table", tel.CostUSD, want)
		}
	}
	if tel.Model != w.model {
		t.Errorf("model = %q, want %q", tel.Model, w.model)
	}
	if tel.SessionID == "" {
		t.Error("no session id")
	}
	if failed := tel.Error != ""; failed != w.failed {
		t.Errorf("error = %q; want failed = %v", tel.Error, w.failed)
	}
}
