package agentrun

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"berth.dev/berth/internal/runner"
)

// Difference is how a finished run's own figures (what its agent
// reported) differ from what the gateway metered of its model calls, and
// where that comes from as far as berth can tell.
type Difference struct {
	// Tokens says the token counts differ. They are compared exactly:
	// both sides count the same usage fields of the same answers, so any
	// difference is real. Reasoning is left out: not every CLI reports it
	// apart.
	Tokens bool
	// Cost says the costs differ by more than rounding (see costsAgree).
	// An agent whose cost is unknown is not compared.
	Cost bool
	// Summary words both sides' figures.
	Summary string
	// Causes say where the difference comes from; none when berth cannot
	// tell.
	Causes []Cause
}

// Cause is one known source of a run's difference.
type Cause struct {
	Kind CauseKind
	// Message explains it.
	Message string
	// Requests, Usage and CostUSD are the metered calls it is about (the
	// kinds about calls); zero for a price table.
	Requests int
	Usage    runner.Usage
	CostUSD  float64
}

// CauseKind names a source of difference.
type CauseKind string

// The sources of difference berth recognises.
const (
	// CauseUncountedCalls: some of the calls the gateway metered are not
	// in the agent's totals, which equal the other calls' exactly: calls
	// the CLI makes but does not count (OpenCode's title call).
	CauseUncountedCalls CauseKind = "uncounted_calls"
	// CauseUnmeteredCalls: answers that said no usage (streams cut
	// short), for which the gateway counted no tokens and charged the
	// worst case.
	CauseUnmeteredCalls CauseKind = "unmetered_calls"
	// CausePriceTable: the same tokens priced at other rates: the CLI's
	// own price table, or the model berth priced the run as, against the
	// deployment's catalog, which the gateway charges.
	CausePriceTable CauseKind = "price_table"
	// CauseUnreported: the agent's output said no tokens at all.
	CauseUnreported CauseKind = "unreported"
)

// The tolerance of a cost comparison (see costsAgree).
const (
	costToleranceUSD      = 1e-6
	costToleranceRelative = 1e-4
)

// costsAgree says two costs of one run are equal but for rounding: within
// a millionth of a dollar, or a hundredth of a percent of the larger.
// Tokens are compared exactly, so this absorbs only arithmetic: each side
// multiplies whole token counts by prices per million in floating point,
// summed over the calls in its own order, and a CLI may round the figure
// it prints. A real difference is larger: price tables differ in their
// second or third significant digit (a percent and more), and a call left
// out shows in the tokens. A millionth of a dollar is below what any view
// of a run shows ($0.0001).
func costsAgree(a, b float64) bool {
	d := math.Abs(a - b)
	return d <= costToleranceUSD || d <= costToleranceRelative*math.Max(math.Abs(a), math.Abs(b))
}

// sameTokens compares the four billed counts exactly.
func sameTokens(a, b runner.Usage) bool {
	return a.Input == b.Input && a.CacheRead == b.CacheRead && a.CacheWrite == b.CacheWrite && a.Output == b.Output
}

// comparison is what a run's difference is worked out from.
type comparison struct {
	runner  string
	agent   runner.Telemetry
	metered Metered
	// calls are the metered calls one by one; nil when not read.
	calls []MeteredCall
	// prices are the deployment's (the catalog's over the vendors' list
	// prices), list the vendors' list prices berth knows.
	prices, list runner.Prices
}

// needsCalls says whether the calls one by one may explain the
// difference: the gateway metered more tokens than the agent counts.
func (c comparison) needsCalls() bool {
	d, ok := minus(c.metered.Usage, c.agent.Usage)
	return ok && d != (runner.Usage{}) && !sameTokens(c.agent.Usage, runner.Usage{})
}

// difference works out how the two sides differ; nil when they agree.
func (c comparison) difference() *Difference {
	a, m := c.agent, c.metered
	agentCost := a.Cost != runner.CostUnknown
	d := &Difference{Tokens: !sameTokens(a.Usage, m.Usage), Cost: agentCost && !costsAgree(a.CostUSD, m.CostUSD)}
	if !d.Tokens && !d.Cost {
		return nil
	}
	d.Summary = c.summary()
	// rest is the gateway's side with each explained part set aside.
	rest := m
	if m.Unmetered > 0 {
		d.Causes = append(d.Causes, Cause{Kind: CauseUnmeteredCalls, Requests: m.Unmetered, CostUSD: m.UnmeteredCostUSD,
			Message: fmt.Sprintf("%d of the %s the gateway metered said no usage (a stream cut short): it counted no tokens for %s and charged %s worst case, %s",
				m.Unmetered, nCalls(m.Requests), pick(m.Unmetered, "it", "them"), pick(m.Unmetered, "its", "their"), usd(m.UnmeteredCostUSD))})
		rest.CostUSD -= m.UnmeteredCostUSD
		rest.Requests -= m.Unmetered
	}
	switch {
	case d.Tokens && sameTokens(a.Usage, runner.Usage{}):
		d.Causes = append(d.Causes, Cause{Kind: CauseUnreported,
			Message: "the agent reported no tokens at all: its output said no usage (or the run ended before its CLI printed any)"})
	case d.Tokens:
		if x, ok := c.uncounted(); ok {
			d.Causes = append(d.Causes, x)
			rest.Usage, rest.CostUSD, rest.Requests = a.Usage, rest.CostUSD-x.CostUSD, rest.Requests-x.Requests
		}
	}
	if agentCost && sameTokens(a.Usage, rest.Usage) && !costsAgree(a.CostUSD, rest.CostUSD) {
		d.Causes = append(d.Causes, c.priceTable(rest))
	}
	return d
}

// summary words both sides.
func (c comparison) summary() string {
	a, m := c.agent, c.metered
	agent := "the agent reported " + words(a.Usage)
	if a.Cost != runner.CostUnknown {
		agent += " and " + usd(a.CostUSD) + " (" + a.Cost.String() + ")"
	}
	return fmt.Sprintf("%s; the gateway metered %s and %s over %s", agent, words(m.Usage), usd(m.CostUSD), nCalls(m.Requests))
}

// uncounted finds the metered calls the agent's totals leave out: a set of
// them whose tokens are exactly what the gateway metered beyond the
// agent's count. When the CLI says how many calls it made, a set of the
// rest's size is looked for first.
func (c comparison) uncounted() (Cause, bool) {
	want, ok := minus(c.metered.Usage, c.agent.Usage)
	if !ok || c.calls == nil {
		return Cause{}, false
	}
	var billed []MeteredCall
	for _, call := range c.calls {
		if call.Metered && call.Usage.Input|call.Usage.CacheRead|call.Usage.CacheWrite|call.Usage.Output != 0 {
			billed = append(billed, call)
		}
	}
	var picked []MeteredCall
	found := false
	if n := len(billed) - c.agent.Turns; c.agent.Turns > 0 && n > 0 {
		picked, found = subsetSum(billed, want, n)
	}
	if !found {
		picked, found = subsetSum(billed, want, 0)
	}
	if !found {
		return Cause{}, false
	}
	x := Cause{Kind: CauseUncountedCalls, Requests: len(picked)}
	var models []string
	for _, call := range picked {
		x.Usage = add(x.Usage, call.Usage)
		x.CostUSD += call.CostUSD
		if !slices.Contains(models, call.Model) {
			models = append(models, call.Model)
		}
	}
	what := pick(len(picked), "a call the agent made but does not count", "calls the agent made but does not count")
	if r, err := runner.Get(c.runner); err == nil {
		if u, ok := r.(runner.Uncounted); ok {
			what = u.Uncounted()
		}
	}
	x.Message = fmt.Sprintf("%s of the %d the gateway metered (%s on %s, %s) %s not in the agent's totals, which are exactly the other %d's: %s",
		nCalls(len(picked)), c.metered.Requests, words(x.Usage), strings.Join(models, ", "), usd(x.CostUSD),
		pick(len(picked), "is", "are"), c.metered.Requests-len(picked), what)
	return x, true
}

// subsetSumSteps bounds the search for the uncounted calls.
const subsetSumSteps = 100000

// subsetSum finds calls whose tokens add up to want exactly, n of them
// (0: any number). Calls alike (same model, same tokens) are taken as
// groups, so a run of many identical calls costs little, and every
// partial sum beyond want in any count is cut off.
func subsetSum(calls []MeteredCall, want runner.Usage, n int) ([]MeteredCall, bool) {
	type group struct{ calls []MeteredCall }
	var groups []group
	for _, call := range calls {
		i := slices.IndexFunc(groups, func(g group) bool {
			return g.calls[0].Model == call.Model && sameTokens(g.calls[0].Usage, call.Usage)
		})
		if i < 0 {
			groups = append(groups, group{})
			i = len(groups) - 1
		}
		groups[i].calls = append(groups[i].calls, call)
	}
	steps := 0
	var picked []MeteredCall
	var search func(i int, left runner.Usage) bool
	search = func(i int, left runner.Usage) bool {
		if steps++; steps > subsetSumSteps {
			return false
		}
		if left == (runner.Usage{}) {
			return n == 0 || len(picked) == n
		}
		if i == len(groups) || n > 0 && len(picked) >= n {
			return false
		}
		u := groups[i].calls[0].Usage
		u.Reasoning = 0
		// Most first: the uncounted calls are usually alike.
		most := len(groups[i].calls)
		for k := most; k >= 0; k-- {
			rest, ok := minus(left, times(u, k))
			if !ok {
				continue
			}
			picked = append(picked, groups[i].calls[:k]...)
			if search(i+1, rest) {
				return true
			}
			picked = picked[:len(picked)-k]
		}
		return false
	}
	want.Reasoning = 0
	if !search(0, want) {
		return nil, false
	}
	return picked, true
}

// priceTable explains a cost difference on the same tokens: the agent
// priced them at other rates than the gateway charges. rest is the
// gateway's side with what other causes explain set aside.
func (c comparison) priceTable(rest Metered) Cause {
	a := c.agent
	var b strings.Builder
	fmt.Fprintf(&b, "the same tokens, priced differently: the agent's %s is ", usd(a.CostUSD))
	agentPrice, table, agentPriced := c.agentPrice()
	switch {
	case a.Cost == runner.CostComputed:
		fmt.Fprintf(&b, "berth's pricing of them as %s when the run ended (the CLI reports no cost)", a.Model)
		if agentPriced {
			fmt.Fprintf(&b, ", at %s", rates(agentPrice))
		}
	case agentPriced && table == listTable:
		fmt.Fprintf(&b, "the CLI's own%s, at the vendor's list price for %s (%s)", basis(a), a.Model, rates(agentPrice))
	case agentPriced:
		fmt.Fprintf(&b, "the CLI's own%s, at this deployment's price for %s (%s), which berth gave it", basis(a), a.Model, rates(agentPrice))
	case a.PriceBasis == "unknown":
		fmt.Fprintf(&b, "the CLI's own guess: it does not know the model %s (its cost basis: unknown)", a.Model)
	default:
		fmt.Fprintf(&b, "the CLI's own%s, from a price table berth does not know", basis(a))
	}
	models := rest.Models
	gatewayPrice, gatewayPriced := runner.Price{}, false
	if len(models) == 1 {
		gatewayPrice, gatewayPriced = c.prices[models[0]]
	}
	switch {
	case gatewayPriced:
		fmt.Fprintf(&b, "; the gateway charged this deployment's price for %s (%s): %s", models[0], rates(gatewayPrice), usd(rest.CostUSD))
	default:
		fmt.Fprintf(&b, "; the gateway charged this deployment's prices for %s: %s", strings.Join(models, ", "), usd(rest.CostUSD))
	}
	if agentPriced && gatewayPriced {
		if differ := differingRates(agentPrice, gatewayPrice); len(differ) > 0 {
			fmt.Fprintf(&b, ". They differ in %s", strings.Join(differ, ", "))
		} else {
			b.WriteString(". The rates are the same today: the deployment's price changed after the calls were charged")
		}
	}
	return Cause{Kind: CausePriceTable, Message: b.String()}
}

// basis is what a CLI says of its own pricing, as a parenthesis.
func basis(t runner.Telemetry) string {
	if t.PriceBasis == "" {
		return ""
	}
	return " (its cost basis: " + t.PriceBasis + ")"
}

// The price tables an agent's cost may come from.
const (
	listTable       = "list"
	deploymentTable = "deployment"
)

// agentPrice is the price that reproduces the agent's cost of its tokens,
// and its table: the vendor's list price for its model, else the
// deployment's (what berth computes with, and gives the CLIs that price
// their own calls); false when neither does.
func (c comparison) agentPrice() (runner.Price, string, bool) {
	a := c.agent
	tables := []struct {
		name   string
		prices runner.Prices
	}{{listTable, c.list}, {deploymentTable, c.prices}}
	if a.Cost == runner.CostComputed {
		tables = tables[1:]
	}
	for _, t := range tables {
		if usd, ok := t.prices.Cost(a.Model, a.Usage); ok && costsAgree(usd, a.CostUSD) {
			return t.prices[a.Model], t.name, true
		}
	}
	return runner.Price{}, "", false
}

// differingRates names the rates two prices disagree on.
func differingRates(a, b runner.Price) []string {
	var out []string
	for _, r := range []struct {
		name string
		a, b float64
	}{{"input", a.Input, b.Input}, {"output", a.Output, b.Output}, {"cache reads", a.CacheRead, b.CacheRead}, {"cache writes", a.CacheWrite, b.CacheWrite}} {
		if r.a != r.b {
			out = append(out, fmt.Sprintf("%s (%s against %s per million)", r.name, perMillion(r.a), perMillion(r.b)))
		}
	}
	return out
}

// rates words a price: "$3 input, $15 output, $0.30 cache read, $3.75
// cache write per million tokens".
func rates(p runner.Price) string {
	return fmt.Sprintf("%s input, %s output, %s cache read, %s cache write per million tokens",
		perMillion(p.Input), perMillion(p.Output), perMillion(p.CacheRead), perMillion(p.CacheWrite))
}

// perMillion prints a rate: whole dollars bare, cents to two places or
// more ($3, $0.30, $0.125).
func perMillion(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if i := strings.IndexByte(s, '.'); i >= 0 && len(s)-i == 2 {
		s += "0"
	}
	return "$" + s
}

// usd prints an amount precisely enough to tell two costs of a run apart:
// cents from a dollar up, else six places (at least four).
func usd(v float64) string {
	if math.Abs(v) >= 1 {
		return "$" + strconv.FormatFloat(v, 'f', 2, 64)
	}
	s := strconv.FormatFloat(v, 'f', 6, 64)
	for strings.HasSuffix(s, "0") && len(s)-strings.IndexByte(s, '.') > 5 {
		s = s[:len(s)-1]
	}
	return "$" + s
}

// words words token counts.
func words(u runner.Usage) string {
	return fmt.Sprintf("%d in, %d out, %d cache read, %d cache write", u.Input, u.Output, u.CacheRead, u.CacheWrite)
}

// nCalls words a number of model calls.
func nCalls(n int) string { return strconv.Itoa(n) + pick(n, " model call", " model calls") }

// pick is the singular or the plural for n.
func pick(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// add sums two counts of tokens.
func add(a, b runner.Usage) runner.Usage {
	return runner.Usage{Input: a.Input + b.Input, CacheRead: a.CacheRead + b.CacheRead, CacheWrite: a.CacheWrite + b.CacheWrite,
		Output: a.Output + b.Output, Reasoning: a.Reasoning + b.Reasoning}
}

// minus is a−b in the four billed counts; false when b exceeds a in any.
func minus(a, b runner.Usage) (runner.Usage, bool) {
	d := runner.Usage{Input: a.Input - b.Input, CacheRead: a.CacheRead - b.CacheRead, CacheWrite: a.CacheWrite - b.CacheWrite, Output: a.Output - b.Output}
	return d, d.Input >= 0 && d.CacheRead >= 0 && d.CacheWrite >= 0 && d.Output >= 0
}

// times is u's billed counts k times over.
func times(u runner.Usage, k int) runner.Usage {
	n := int64(k)
	return runner.Usage{Input: u.Input * n, CacheRead: u.CacheRead * n, CacheWrite: u.CacheWrite * n, Output: u.Output * n}
}
