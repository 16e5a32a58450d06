package inference_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/inference"
)

const reservationFile = `
providers:
  - {name: s, kind: scripted}
models:
  - {id: m, provider: s, max_tokens: 8000, context_window: 100000, price: {input: 1, output: 2, cache_read: 0.1, cache_write: 1.25}}
  - {id: tiny, provider: s, max_tokens: 10, context_window: 50, price: {input: 1, output: 2}}
`

// TestReservationIsWhatTheRequestCanCost: a request holds against its
// budget what it can really cost, in each dialect: a token a byte of its
// body at the input rate (the cache-write rate only when it marks content
// for the cache) plus the vendors' tool prompts, never past the model's
// context window; and its own output cap (each dialect's field, times the
// answers it asks for) at the output rate, never past the model's
// maximum, which is also what a request naming no cap holds.
func TestReservationIsWhatTheRequestCanCost(t *testing.T) {
	e := newEnvOf(t, reservationFile)
	budget := 1000.0
	e.set(t, "default", inference.Settings{BudgetUSD: &budget})
	const hi = `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name    string
		d       inference.Dialect
		model   string
		body    string
		extraIn int     // tokens beyond the body's bytes
		rate    float64 // $/M of the input
		out     int
	}{
		{"anthropic max_tokens", inference.Anthropic, "m", `{"model":"m","max_tokens":100,` + hi + `}`, 0, 1, 100},
		{"anthropic cache_control", inference.Anthropic, "m",
			`{"model":"m","max_tokens":100,"system":[{"type":"text","text":"S","cache_control":{"type":"ephemeral"}}],` + hi + `}`, 0, 1.25, 100},
		{"anthropic tools", inference.Anthropic, "m",
			`{"model":"m","max_tokens":100,"tools":[{"name":"f","input_schema":{"type":"object"}}],` + hi + `}`, 512, 1, 100},
		{"anthropic built-in tool", inference.Anthropic, "m",
			`{"model":"m","max_tokens":100,"tools":[{"type":"bash_20250124","name":"bash"},{"name":"f","input_schema":{}}],` + hi + `}`, 512 + 1024, 1, 100},
		{"anthropic over the model's maximum", inference.Anthropic, "m", `{"model":"m","max_tokens":50000,` + hi + `}`, 0, 1, 8000},
		{"chat max_completion_tokens first", inference.OpenAIChat, "m", `{"model":"m","max_completion_tokens":100,"max_tokens":50,` + hi + `}`, 0, 1, 100},
		{"chat max_tokens, n answers", inference.OpenAIChat, "m", `{"model":"m","max_tokens":100,"n":3,` + hi + `}`, 0, 1, 300},
		{"chat without a cap", inference.OpenAIChat, "m", `{"model":"m",` + hi + `}`, 0, 1, 8000},
		{"chat functions", inference.OpenAIChat, "m", `{"model":"m","max_tokens":100,"functions":[{"name":"f"}],` + hi + `}`, 512, 1, 100},
		{"responses max_output_tokens, web search", inference.OpenAIResponses, "m",
			`{"model":"m","max_output_tokens":100,"input":"hi","tools":[{"type":"web_search"},{"type":"function","name":"f"}]}`, 512 + 1024, 1, 100},
		{"gemini maxOutputTokens, candidates", inference.Gemini, "m",
			`{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":100,"candidateCount":2}}`, 0, 1, 200},
		{"gemini snake case, functions", inference.Gemini, "m",
			`{"contents":[],"generation_config":{"max_output_tokens":100},"tools":[{"function_declarations":[{"name":"f"}]}]}`, 512, 1, 100},
		{"gemini search", inference.Gemini, "m",
			`{"contents":[],"generationConfig":{"maxOutputTokens":100},"tools":[{"googleSearch":{}}]}`, 512 + 1024, 1, 100},
		{"past the context window", inference.Anthropic, "tiny", `{"model":"tiny","max_tokens":5,` + hi + `,"pad":"` + strings.Repeat("x", 100) + `"}`, -1, 1, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			call, err := inference.ReadCall(c.d, c.model, false, []byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			tk, err := e.svc.Admit(t.Context(), e.user, call, []byte(c.body), "")
			if err != nil {
				t.Fatal(err)
			}
			defer e.svc.Settle(t.Context(), tk, 500, nil)
			in := len(c.body) + c.extraIn
			if c.extraIn < 0 {
				in = 50 // tiny's context window
			}
			want := (float64(in)*c.rate + float64(c.out)*2) / 1e6
			st, err := e.svc.Settings(t.Context(), e.admin, "", "default")
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(st.ReservedUSD-want) > 1e-12 {
				t.Errorf("reserved $%.9f, want $%.9f (%d input tokens at $%v/M, %d output at $2/M)", st.ReservedUSD, want, in, c.rate, c.out)
			}
		})
	}
	// The system prompt added counts in the input, a token a byte.
	e.set(t, "default", inference.Settings{BudgetUSD: &budget, SystemPrompt: "Be brief."})
	body := `{"model":"m","max_tokens":100,` + hi + `}`
	call, _ := inference.ReadCall(inference.Anthropic, "", false, []byte(body))
	tk, err := e.svc.Admit(t.Context(), e.user, call, []byte(body), "")
	if err != nil {
		t.Fatal(err)
	}
	defer e.svc.Settle(t.Context(), tk, 500, nil)
	st, _ := e.svc.Settings(t.Context(), e.admin, "", "default")
	if want := (float64(len(body)+len("Be brief."))*1 + 100*2) / 1e6; math.Abs(st.ReservedUSD-want) > 1e-12 {
		t.Errorf("with a system prompt: reserved $%.9f, want $%.9f", st.ReservedUSD, want)
	}
}

// TestRefusalPrintsTheBudgetExactly: a budget of a few cents is printed
// as it was set, not rounded to the cent.
func TestRefusalPrintsTheBudgetExactly(t *testing.T) {
	e := newEnvOf(t, reservationFile)
	budget := 0.0028
	e.set(t, "default", inference.Settings{BudgetUSD: &budget})
	body := `{"model":"m","max_tokens":8000,"messages":[]}`
	call, _ := inference.ReadCall(inference.Anthropic, "", false, []byte(body))
	_, err := e.svc.Admit(t.Context(), e.user, call, []byte(body), "")
	if !errors.Is(err, fault.Budget) {
		t.Fatalf("admit over the budget: %v, want %v", err, fault.Budget)
	}
	worst := (float64(len(body)) + 8000*2) / 1e6
	for _, want := range []string{"budget of $0.0028 a month", "$0.00 spent", "$0.0028 left", "may cost up to $0.016045"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q (the worst case is $%v)", err, want, worst)
		}
	}
}
