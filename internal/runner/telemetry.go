package runner

import (
	"fmt"
	"math"
)

// Telemetry is what one run's stdout says about it, accumulated line by
// line (SPEC S13.4): usage events add tokens, step events add the CLI's
// native cost, metadata names the model and the session, and a terminal
// result with totals overwrites what was added before it.
//
// The zero value is ready. Set Model to the model the run was given before
// the first line: Codex and OpenCode never name one, and a stream that does
// replaces it. Call Settle when the stream ends to fix the cost.
type Telemetry struct {
	// Usage is the run's tokens, normalised (see Usage).
	Usage Usage `json:"usage"`
	// CostUSD is the run's cost in US dollars; meaningful only when Cost is
	// not CostUnknown.
	CostUSD float64 `json:"cost_usd"`
	// Cost says where CostUSD comes from.
	Cost CostSource `json:"cost"`
	// PriceBasis is what the CLI says it priced its own cost at, when it
	// says: Claude Code's costBasis, "list" for its list prices or
	// "unknown" for a model it does not know (it guesses).
	PriceBasis string `json:"price_basis,omitempty"`
	// Model is the model that ran: the one the stream names, else the one
	// set before parsing.
	Model string `json:"model,omitempty"`
	// SessionID is the CLI's own session id, when it prints one.
	SessionID string `json:"session_id,omitempty"`
	// Error is why the run failed, as the stream says; empty when it did
	// not. Pi exits 0 on a model error and Claude calls a failed result
	// "success": this field, not the exit code, is what tells.
	Error string `json:"error,omitempty"`
	// Turns counts model calls (agent turns) as the CLI reports them; 0
	// when the CLI does not say (Codex, Gemini).
	Turns int `json:"turns"`

	reported   bool    // some usage event or result was seen
	native     float64 // the CLI's own cost, as accumulated
	nativeSeen bool
}

// Usage counts a run's tokens the same way for every CLI. CLIs disagree on
// whether input includes cached tokens (Codex and Gemini include them;
// Claude, Pi and OpenCode do not) and whether output includes reasoning;
// report.usage is the one place that reconciles them.
type Usage struct {
	// Input is input tokens neither read from nor written to a cache.
	Input int64 `json:"input"`
	// CacheRead is input tokens read from a prompt cache.
	CacheRead int64 `json:"cache_read"`
	// CacheWrite is input tokens written to a prompt cache.
	CacheWrite int64 `json:"cache_write"`
	// Output is output tokens, reasoning included.
	Output int64 `json:"output"`
	// Reasoning is the part of Output spent reasoning, when the CLI says.
	Reasoning int64 `json:"reasoning"`
}

// CostSource says where a run's cost comes from.
type CostSource uint8

const (
	// CostUnknown: the CLI reported none and the model has no price. Not
	// zero: unknown.
	CostUnknown CostSource = iota
	// CostNative: the CLI's own figure (Claude, Pi, OpenCode).
	CostNative
	// CostComputed: tokens times the price table (Codex, Gemini).
	CostComputed
)

func (c CostSource) String() string {
	switch c {
	case CostUnknown:
		return "unknown"
	case CostNative:
		return "native"
	case CostComputed:
		return "computed"
	}
	return fmt.Sprintf("CostSource(%d)", uint8(c))
}

// MarshalText writes the source's name, for JSON.
func (c CostSource) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads a source's name, so a stored Telemetry reads back.
func (c *CostSource) UnmarshalText(b []byte) error {
	for _, s := range []CostSource{CostUnknown, CostNative, CostComputed} {
		if string(b) == s.String() {
			*c = s
			return nil
		}
	}
	return fmt.Errorf("%q is not a cost source", b)
}

// Settle fixes the run's cost once its stream has ended. The CLI's own
// figure wins, except a native cost of exactly zero beside billed tokens:
// that is a CLI without prices (Pi and OpenCode default them to 0), not a
// free run. Otherwise, with tokens reported and the model in prices, the
// cost is computed; else it is unknown. Settle may be called again after
// more lines.
func (t *Telemetry) Settle(prices Prices) {
	if t.nativeSeen && (t.native != 0 || t.Usage.billed() == 0) {
		t.CostUSD, t.Cost = t.native, CostNative
		return
	}
	if t.reported {
		if usd, ok := prices.Cost(t.Model, t.Usage); ok {
			t.CostUSD, t.Cost = usd, CostComputed
			return
		}
	}
	t.CostUSD, t.Cost = 0, CostUnknown
}

// FillUsage takes token totals reported beside the CLI's stream (the
// output markers of a Kelos image, SPEC S13.6) when the stream itself
// reported none: the stream, when it speaks, is the better witness.
func (t *Telemetry) FillUsage(u Usage) {
	if t.reported {
		return
	}
	t.Usage = report{input: u.Input, cacheRead: u.CacheRead, cacheWrite: u.CacheWrite,
		output: u.Output, reasoning: u.Reasoning, outputHasReasoning: true}.usage()
	t.reported = true
}

// FillCost takes a cost reported beside the CLI's stream when the stream
// gave none of the CLI's own. It counts as native: the image's figure,
// not a price-table product.
func (t *Telemetry) FillCost(usd float64) {
	if !t.nativeSeen {
		t.setCost(usd)
	}
}

// billed is every token a price applies to.
func (u Usage) billed() int64 {
	return sat(sat(u.Input, u.CacheRead), sat(u.CacheWrite, u.Output))
}

// report is one statement of token counts as a CLI makes it, before
// normalisation.
type report struct {
	input, cacheRead, cacheWrite, output, reasoning int64
	// inputHasCache: input counts the cached tokens too (Codex, Gemini).
	inputHasCache bool
	// outputHasReasoning: output counts the reasoning tokens too (Claude,
	// Codex); else reasoning comes on top (OpenCode).
	outputHasReasoning bool
}

// usage is the one place cached and reasoning tokens are normalised.
// Negative counts from a confused CLI become zero.
func (r report) usage() Usage {
	u := Usage{
		Input:      max(r.input, 0),
		CacheRead:  max(r.cacheRead, 0),
		CacheWrite: max(r.cacheWrite, 0),
		Output:     max(r.output, 0),
		Reasoning:  max(r.reasoning, 0),
	}
	if r.inputHasCache {
		u.Input = max(u.Input-u.CacheRead-u.CacheWrite, 0)
	}
	if !r.outputHasReasoning {
		u.Output = sat(u.Output, u.Reasoning)
	}
	return u
}

func (u Usage) plus(v Usage) Usage {
	return Usage{
		Input:      sat(u.Input, v.Input),
		CacheRead:  sat(u.CacheRead, v.CacheRead),
		CacheWrite: sat(u.CacheWrite, v.CacheWrite),
		Output:     sat(u.Output, v.Output),
		Reasoning:  sat(u.Reasoning, v.Reasoning),
	}
}

// Plus is u and v together: a session's runs' usage summed.
func (u Usage) Plus(v Usage) Usage { return u.plus(v) }

// Since is u less earlier, each count at least zero: the totals a CLI
// reported for a continued conversation (ThreadTotals) less what its
// earlier runs reported.
func (u Usage) Since(earlier Usage) Usage {
	less := func(a, b int64) int64 { return max(a-b, 0) }
	return Usage{
		Input:      less(u.Input, earlier.Input),
		CacheRead:  less(u.CacheRead, earlier.CacheRead),
		CacheWrite: less(u.CacheWrite, earlier.CacheWrite),
		Output:     less(u.Output, earlier.Output),
		Reasoning:  less(u.Reasoning, earlier.Reasoning),
	}
}

// ThreadTotals is the capability of a CLI whose run totals, when it
// continues an earlier conversation (Options.Resume), count that whole
// conversation, every earlier run's calls too (Codex's turn.completed
// covers its thread): a session's later run is its totals Since the
// earlier runs'.
type ThreadTotals interface{ ThreadTotals() }

// sat adds two non-negative counts, saturating instead of wrapping.
func sat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// addUsage accumulates a usage event.
func (t *Telemetry) addUsage(r report) {
	t.Usage = t.Usage.plus(r.usage())
	t.reported = true
}

// totalUsage overwrites the accumulation with a terminal result's totals.
func (t *Telemetry) totalUsage(r report) {
	t.Usage = r.usage()
	t.reported = true
}

// addCost accumulates a step's native cost.
func (t *Telemetry) addCost(usd float64) {
	t.setCost(t.native + dollars(usd))
}

// setCost overwrites the native cost with a terminal result's total.
func (t *Telemetry) setCost(usd float64) {
	t.native, t.nativeSeen = dollars(usd), true
	t.CostUSD, t.Cost = t.native, CostNative
}

// dollars keeps a reported cost finite and non-negative.
func dollars(usd float64) float64 {
	if math.IsNaN(usd) || usd < 0 {
		return 0
	}
	return min(usd, math.MaxFloat64)
}

// Limits on strings taken from a stream, so a runaway line cannot bloat
// the run's record.
const (
	maxName  = 256
	maxError = 2048
)

func (t *Telemetry) setModel(m string) {
	if m != "" {
		t.Model = clip(m, maxName)
	}
}

func (t *Telemetry) setSession(id string) {
	if id != "" {
		t.SessionID = clip(id, maxName)
	}
}

// fail records why the run failed; a later failure replaces an earlier one.
func (t *Telemetry) fail(msg string) {
	if msg == "" {
		msg = "the agent reported an error"
	}
	t.Error = clip(msg, maxError)
}

// clip cuts s to at most n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
