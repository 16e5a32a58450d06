package kelos

import (
	"math"
	"strconv"
	"strings"
)

// The markers around a run's outputs and the banners around its setup
// command (seeds/003, "Output Capture" and §7), each alone on its line.
const (
	OutputsStart = "---KELOS_OUTPUTS_START---"
	OutputsEnd   = "---KELOS_OUTPUTS_END---"
	SetupStart   = "---KELOS_SETUP_COMMAND_START---"
	SetupDone    = "---KELOS_SETUP_COMMAND_DONE---"
	SetupFailed  = "---KELOS_SETUP_COMMAND_FAILED---"
)

// Limits on what a run's outputs may put on its record.
const (
	maxOutputs    = 256
	maxOutputLine = 4 << 10
)

// Setup is how far a run's setup command got, as its banners tell.
type Setup uint8

// The setup command's progress.
const (
	// SetupNone: no banner; there was no setup command, or the image
	// prints no banners.
	SetupNone Setup = iota
	// SetupStarted: it started and never said how it ended.
	SetupStarted
	// SetupOK: it finished, and the agent ran after it.
	SetupOK
	// SetupError: it failed, and the agent never ran.
	SetupError
)

// Capture reads a run's log, line by line, for what the interface puts in
// it: the output blocks (between OutputsStart and OutputsEnd: "key: value"
// lines, which become results, and other lines, kept only as outputs) and
// the setup banners. It watches stdout and stderr apart, since the two are
// interleaved in the log. A block still open at the end of the log is
// dropped, and later blocks add to earlier ones (a later key wins). The
// zero value is ready.
type Capture struct {
	open    [2]bool
	pending [2][]string
	outputs []string
	results map[string]string
	setup   Setup
}

// Line reads one line of stdout (or stderr) and reports whether it was
// the interface's (a marker, a banner, or a line of an output block)
// rather than the agent's own stream, which the runner reads.
func (c *Capture) Line(stdout bool, b []byte) bool {
	s := 0
	if !stdout {
		s = 1
	}
	line := strings.TrimRight(string(b), " \t\r")
	switch strings.TrimSpace(line) {
	case OutputsStart:
		c.open[s], c.pending[s] = true, c.pending[s][:0]
		return true
	case OutputsEnd:
		if c.open[s] {
			c.commit(c.pending[s])
			c.open[s], c.pending[s] = false, c.pending[s][:0]
		}
		return true
	case SetupStart:
		if c.setup == SetupNone {
			c.setup = SetupStarted
		}
		return true
	case SetupDone:
		if c.setup != SetupError {
			c.setup = SetupOK
		}
		return true
	case SetupFailed:
		c.setup = SetupError
		return true
	}
	if !c.open[s] {
		return false
	}
	if strings.TrimSpace(line) != "" && len(c.pending[s]) < maxOutputs {
		c.pending[s] = append(c.pending[s], clip(line, maxOutputLine))
	}
	return true
}

// commit adds a closed block's lines to the outputs and its "key: value"
// lines to the results.
func (c *Capture) commit(lines []string) {
	for _, l := range lines {
		if len(c.outputs) == maxOutputs {
			return
		}
		c.outputs = append(c.outputs, l)
		k, v, ok := strings.Cut(l, ": ")
		if k = strings.TrimSpace(k); !ok || k == "" {
			continue
		}
		if c.results == nil {
			c.results = map[string]string{}
		}
		c.results[k] = strings.TrimSpace(v)
	}
}

// Outputs are the lines of the closed output blocks, in order.
func (c *Capture) Outputs() []string { return c.outputs }

// Results are the "key: value" lines of the closed output blocks; nil
// when there are none.
func (c *Capture) Results() map[string]string { return c.results }

// Setup is how far the setup command got.
func (c *Capture) Setup() Setup { return c.setup }

// Totals are the token counts and cost a run's results report.
type Totals struct {
	InputTokens, OutputTokens int64
	// Tokens says whether either count was reported.
	Tokens  bool
	CostUSD float64
	// Cost says whether a cost was reported.
	Cost bool
}

// TotalsOf reads input-tokens, output-tokens and cost-usd from results;
// a value that is not a number is taken as not reported.
func TotalsOf(results map[string]string) Totals {
	var t Totals
	if n, err := strconv.ParseInt(results["input-tokens"], 10, 64); err == nil && n >= 0 {
		t.InputTokens, t.Tokens = n, true
	}
	if n, err := strconv.ParseInt(results["output-tokens"], 10, 64); err == nil && n >= 0 {
		t.OutputTokens, t.Tokens = n, true
	}
	if f, err := strconv.ParseFloat(results["cost-usd"], 64); err == nil && f >= 0 && !math.IsInf(f, 1) {
		t.CostUSD, t.Cost = f, true
	}
	return t
}

// clip cuts s to at most n bytes, dropping a rune the cut would break.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
