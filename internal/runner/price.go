package runner

import "math"

// Price is a model's list price in US dollars per million tokens.
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read"`
	CacheWrite float64 `json:"cache_write"`
}

// Prices maps a model's name to its price.
type Prices map[string]Price

// Cost prices usage at model's rates: input, cache reads and cache writes
// each at their own rate, output (reasoning included) at the output rate.
// A model missing from p has no cost: ok is false, never a zero.
func (p Prices) Cost(model string, u Usage) (usd float64, ok bool) {
	pr, ok := p[model]
	if !ok {
		return 0, false
	}
	perMillion := float64(u.Input)*pr.Input +
		float64(u.CacheRead)*pr.CacheRead +
		float64(u.CacheWrite)*pr.CacheWrite +
		float64(u.Output)*pr.Output
	return dollars(perMillion / 1e6), !math.IsInf(perMillion, 0)
}

// ListPrices returns a small table of vendors' list prices (USD per million
// tokens, standard tier, prompts under 200k tokens), for the CLIs that
// report no cost (Codex, Gemini) and as the reference Claude's own figures
// are checked against. A deployment with its own prices passes its own
// table to Settle; models missing here stay at CostUnknown.
func ListPrices() Prices {
	return Prices{
		// Anthropic: cache writes at 1.25× input (5-minute cache), reads at 0.1×.
		"claude-sonnet-4-5": {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
		"claude-sonnet-4":   {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
		"claude-haiku-4-5":  {Input: 1, Output: 5, CacheRead: 0.10, CacheWrite: 1.25},
		"claude-opus-4-1":   {Input: 15, Output: 75, CacheRead: 1.50, CacheWrite: 18.75},
		// OpenAI: cached input at 0.1×; no separate cache-write charge.
		"gpt-5":      {Input: 1.25, Output: 10, CacheRead: 0.125},
		"gpt-5-mini": {Input: 0.25, Output: 2, CacheRead: 0.025},
		// Google: the ≤200k-token tier.
		"gemini-2.5-pro": {Input: 1.25, Output: 10, CacheRead: 0.31},
	}
}
