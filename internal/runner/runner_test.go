package runner_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"berth.dev/berth/internal/golden"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/runner/runnertest"
)

// TestContract runs every runner in the table through runnertest.
func TestContract(t *testing.T) {
	for _, name := range runner.Names() {
		t.Run(name, func(t *testing.T) {
			r, err := runner.Get(name)
			if err != nil {
				t.Fatal(err)
			}
			runnertest.Run(t, r)
		})
	}
}

func TestGet(t *testing.T) {
	for _, name := range runner.Names() {
		r, err := runner.Get(name)
		if err != nil || r.Name() != name {
			t.Errorf("Get(%q) = %v, %v; want the runner of that name", name, r, err)
		}
	}
	for _, name := range []string{"", "claude", "Claude-Code", "aider", " pi"} {
		if r, err := runner.Get(name); !errors.Is(err, runner.ErrUnknown) {
			t.Errorf("Get(%q) = %v, %v; want ErrUnknown", name, r, err)
		}
	}
}

// TestVendorDirect: only cursor bypasses the gateway, and says so.
func TestVendorDirect(t *testing.T) {
	for _, name := range runner.Names() {
		r, _ := runner.Get(name)
		_, direct := r.(runner.VendorDirect)
		if direct != (name == "cursor") {
			t.Errorf("%s: VendorDirect = %v, want %v", name, direct, name == "cursor")
		}
	}
}

// sampleGateway is a gateway as the goldens render against it: chat models
// with and without prices, each from a provider of its own API (Anthropic,
// OpenAI, Gemini), a router listed first to show it moves last.
func sampleGateway() runner.Gateway {
	return runner.Gateway{
		BaseURL: "http://host.containers.internal:8080/",
		Models: []runner.Model{
			{ID: "auto", Name: "Auto (routed)", Router: true, APIs: []runner.API{runner.APIAnthropic}},
			{ID: "claude-sonnet-4-5", Name: "Claude Sonnet 4.5", Reasoning: true, ContextWindow: 200000, MaxTokens: 64000,
				Price: &runner.Price{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}, APIs: []runner.API{runner.APIAnthropic}},
			{ID: "gpt-5", Reasoning: true, ContextWindow: 400000, MaxTokens: 128000, Price: &runner.Price{Input: 1.25, Output: 10, CacheRead: 0.125},
				APIs: []runner.API{runner.APIOpenAIChat, runner.APIOpenAIResponses}},
			{ID: "gemini-2.5-pro", APIs: []runner.API{runner.APIGemini}},
		},
	}
}

// sampleModel is the model each runner's goldens run.
func sampleModel(name string) string {
	switch name {
	case "codex":
		return "gpt-5"
	case "gemini":
		return "gemini-2.5-pro"
	case "cursor":
		return "sonnet-4.5"
	}
	return "claude-sonnet-4-5"
}

// TestCommandGolden renders each runner's command line, credentials and
// environment: the host's side of SPEC S13, reviewed as a file.
func TestCommandGolden(t *testing.T) {
	for _, name := range runner.Names() {
		t.Run(name, func(t *testing.T) {
			r, _ := runner.Get(name)
			var b strings.Builder
			section := func(title string, items ...string) {
				fmt.Fprintln(&b, title)
				for _, it := range items {
					fmt.Fprintf(&b, "\t%s\n", it)
				}
			}
			o := runner.Options{Model: sampleModel(name)}
			args, err := r.ContainerArgs(o)
			if err != nil {
				t.Fatal(err)
			}
			o.Effort = "high"
			withEffort, err := r.ContainerArgs(o)
			if err != nil {
				t.Fatal(err)
			}
			env, err := r.Env(sampleGateway())
			if err != nil {
				t.Fatal(err)
			}
			var vars []string
			for _, v := range env {
				vars = append(vars, v.Name+"="+v.Value)
			}
			section("binary", r.Binary())
			section(fmt.Sprintf("args (model %s)", o.Model), args...)
			section("args (effort high)", withEffort...)
			section("credentials", r.Credentials()...)
			section("env", vars...)
			golden.Check(t, "args/"+name, []byte(b.String()))
		})
	}
}

// TestFilesGolden renders each runner's config files (SPEC S14).
func TestFilesGolden(t *testing.T) {
	for _, name := range runner.Names() {
		t.Run(name, func(t *testing.T) {
			r, _ := runner.Get(name)
			files, err := r.Files(sampleGateway(), runner.Options{Model: sampleModel(name), Effort: "high"})
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			if len(files) == 0 {
				b.WriteString("(no files)\n")
			}
			for _, f := range files {
				fmt.Fprintf(&b, "== ~/%s ==\n%s", f.Path, f.Content)
			}
			golden.Check(t, "files/"+name, []byte(b.String()))
		})
	}
}

// TestPiModelsOrder: SPEC S14's order, chat models then routers, the run's
// model added when the gateway's list lacks it.
func TestPiModelsOrder(t *testing.T) {
	r, _ := runner.Get("pi")
	files, err := r.Files(sampleGateway(), runner.Options{Model: "unlisted-model"})
	if err != nil {
		t.Fatal(err)
	}
	models := string(files[0].Content)
	order := []string{`"claude-sonnet-4-5"`, `"gpt-5"`, `"gemini-2.5-pro"`, `"unlisted-model"`, `"auto"`}
	last := -1
	for _, id := range order {
		i := strings.Index(models, `"id": `+id)
		if i < last {
			t.Fatalf("models.json lists %s out of order (want %v):\n%s", id, order, models)
		}
		last = i
	}
	if !strings.Contains(models, `"apiKey": "BERTH_API_KEY"`) {
		t.Errorf("models.json does not name the key's variable BERTH_API_KEY:\n%s", models)
	}
	if settings := string(files[1].Content); !strings.Contains(settings, `"defaultProvider": "berth"`) {
		t.Errorf("settings.json does not pin the provider:\n%s", settings)
	}
}

// TestConfigEscaping: a model name that is legal in argv but special in
// JSON or TOML cannot break out of a config file.
func TestConfigEscaping(t *testing.T) {
	const model = `evil"model\]`
	for _, name := range []string{"codex", "opencode", "pi"} {
		r, _ := runner.Get(name)
		g := sampleGateway()
		g.Models = append(g.Models, runner.Model{ID: model})
		files, err := r.Files(g, runner.Options{Model: model})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, f := range files {
			if strings.Contains(string(f.Content), model) {
				t.Errorf("%s: %s holds the model name unescaped:\n%s", name, f.Path, f.Content)
			}
		}
	}
	r, _ := runner.Get("pi")
	g := sampleGateway()
	g.Models = append(g.Models, runner.Model{ID: "two words"})
	if _, err := r.Files(g, runner.Options{Model: "m"}); err == nil {
		t.Error("pi: a gateway model named with a space rendered, want an error")
	}
}

// TestPrices: the list prices reproduce the costs Claude Code itself
// reported in the captured streams (claude-sonnet-4-5), and an unpriced
// model has no cost rather than a zero one.
func TestPrices(t *testing.T) {
	p := runner.ListPrices()
	for _, tt := range []struct {
		u    runner.Usage
		want float64
	}{
		{runner.Usage{Input: 120, CacheRead: 30, CacheWrite: 5, Output: 17}, 0.00064275},
		{runner.Usage{Input: 240, CacheRead: 60, CacheWrite: 10, Output: 34}, 0.0012855},
		{runner.Usage{}, 0},
	} {
		got, ok := p.Cost("claude-sonnet-4-5", tt.u)
		if !ok || math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("Cost(claude-sonnet-4-5, %+v) = %v, %v; want %v", tt.u, got, ok, tt.want)
		}
	}
	if got, ok := p.Cost("no-such-model", runner.Usage{Input: 1}); ok {
		t.Errorf("Cost(no-such-model) = %v, true; want unknown", got)
	}
}

// TestSettle covers where a run's cost comes from.
func TestSettle(t *testing.T) {
	claude, _ := runner.Get("claude-code")
	pi, _ := runner.Get("pi")
	codex, _ := runner.Get("codex")
	tests := []struct {
		name     string
		r        runner.Runner
		model    string
		lines    []string
		wantUSD  float64
		wantFrom runner.CostSource
	}{
		{"native wins", claude, "claude-sonnet-4-5",
			[]string{`{"type":"result","total_cost_usd":0.5,"usage":{"input_tokens":1000000}}`}, 0.5, runner.CostNative},
		{"native zero for no tokens", claude, "claude-sonnet-4-5",
			[]string{`{"type":"result","total_cost_usd":0,"usage":{"input_tokens":0}}`}, 0, runner.CostNative},
		{"native zero beside tokens is an unpriced CLI: computed", pi, "claude-sonnet-4-5",
			[]string{`{"type":"message_end","message":{"role":"assistant","model":"claude-sonnet-4-5","usage":{"input":1000000,"cost":{"total":0}}}}`}, 3, runner.CostComputed},
		{"native zero beside tokens, unpriced model: unknown", pi, "m",
			[]string{`{"type":"message_end","message":{"role":"assistant","model":"m","usage":{"input":10,"cost":{"total":0}}}}`}, 0, runner.CostUnknown},
		{"no cost reported: computed", codex, "gpt-5",
			[]string{`{"type":"turn.completed","usage":{"input_tokens":1000000,"cached_input_tokens":0,"output_tokens":100000}}`}, 2.25, runner.CostComputed},
		{"no cost, unknown model: unknown", codex, "gpt-5.5",
			[]string{`{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":1}}`}, 0, runner.CostUnknown},
		{"nothing reported: unknown", codex, "gpt-5", nil, 0, runner.CostUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tel := runner.Telemetry{Model: tt.model}
			for _, l := range tt.lines {
				if out := tt.r.ParseLine(&tel, []byte(l)); out != runner.Parsed {
					t.Fatalf("ParseLine(%s) = %v", l, out)
				}
			}
			tel.Settle(runner.ListPrices())
			tel.Settle(runner.ListPrices()) // idempotent
			if math.Abs(tel.CostUSD-tt.wantUSD) > 1e-12 || tel.Cost != tt.wantFrom {
				t.Errorf("after Settle: %v USD (%v), want %v USD (%v)", tel.CostUSD, tel.Cost, tt.wantUSD, tt.wantFrom)
			}
		})
	}
}

// TestSpeaks: each runner calls a model in the first of its own APIs the
// model's provider speaks, and none when they share none.
func TestSpeaks(t *testing.T) {
	var (
		anthropic = runner.Model{ID: "c", APIs: []runner.API{runner.APIAnthropic}}
		openai    = runner.Model{ID: "g", APIs: []runner.API{runner.APIOpenAIChat, runner.APIOpenAIResponses}}
		gemini    = runner.Model{ID: "m", APIs: []runner.API{runner.APIGemini}}
		scripted  = runner.Model{ID: "s", APIs: []runner.API{runner.APIAnthropic, runner.APIOpenAIChat, runner.APIOpenAIResponses, runner.APIGemini}}
	)
	for _, tt := range []struct {
		runner string
		model  runner.Model
		want   runner.API // "": none
	}{
		{"claude-code", anthropic, runner.APIAnthropic},
		{"claude-code", openai, ""},
		{"claude-code", gemini, ""},
		{"claude-code", scripted, runner.APIAnthropic},
		{"codex", openai, runner.APIOpenAIResponses},
		{"codex", anthropic, ""},
		{"codex", scripted, runner.APIOpenAIResponses},
		{"gemini", gemini, runner.APIGemini},
		{"gemini", openai, ""},
		{"opencode", openai, runner.APIOpenAIChat},
		{"opencode", anthropic, runner.APIAnthropic},
		{"opencode", gemini, runner.APIGemini},
		{"opencode", runner.Model{ID: "r", APIs: []runner.API{runner.APIOpenAIResponses}}, ""},
		{"pi", openai, runner.APIOpenAIChat},
		{"pi", anthropic, runner.APIAnthropic},
		{"pi", gemini, runner.APIGemini},
		{"pi", scripted, runner.APIOpenAIChat},
		{"cursor", scripted, ""},
		{"claude-code", runner.Model{ID: "unknown"}, ""},
	} {
		r, _ := runner.Get(tt.runner)
		got, ok := runner.Speaks(r, tt.model)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("Speaks(%s, %s %v) = %q, %v; want %q", tt.runner, tt.model.ID, tt.model.APIs, got, ok, tt.want)
		}
	}
}

// TestConfigsLeaveOutWhatTheCLICannotCall: pi and opencode list only the
// models served in an API they speak, and refuse a run on another.
func TestConfigsLeaveOutWhatTheCLICannotCall(t *testing.T) {
	g := sampleGateway()
	g.Models = append(g.Models, runner.Model{ID: "alien", APIs: []runner.API{"bedrock-converse"}})
	for _, name := range []string{"pi", "opencode"} {
		r, _ := runner.Get(name)
		files, err := r.Files(g, runner.Options{Model: "claude-sonnet-4-5"})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.Contains(string(files[0].Content), "alien") {
			t.Errorf("%s lists a model served in no API it speaks:\n%s", name, files[0].Content)
		}
		if _, err := r.Files(g, runner.Options{Model: "alien"}); err == nil || !strings.Contains(err.Error(), "none of which "+name+" speaks") {
			t.Errorf("%s: a run on a model it cannot call rendered (err %v), want it refused", name, err)
		}
	}
}
