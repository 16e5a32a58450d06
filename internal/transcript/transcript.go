// Package transcript turns an agent run's log (SPEC S13.4: the runner's
// NDJSON on stdout, stderr lines prefixed "stderr: ") into events a person
// reads: the assistant's text, each tool call with a one-line summary of
// its arguments, its result (trimmed, saying how much was cut), errors,
// and the run's totals at the end. The totals are the runner package's
// Telemetry, read from the same lines by the runner's own ParseLine: this
// package adds what telemetry leaves out, it does not count twice.
//
// The log is the agent's output, so untrusted: every line and every text
// is bounded, a transcript stops after MaxEvents events or MaxText bytes of
// text, and Text renders no terminal control characters.
package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"berth.dev/berth/internal/runner"
)

// Kind is what an event is.
type Kind string

const (
	// KindText is the assistant's text.
	KindText Kind = "text"
	// KindToolCall is a tool the agent called: Tool and Summary.
	KindToolCall Kind = "tool_call"
	// KindToolResult is what a tool answered: Text, trimmed (Cut says by
	// how much), Failed when the tool reported an error.
	KindToolResult Kind = "tool_result"
	// KindError is an error the agent reported.
	KindError Kind = "error"
	// KindStderr is a line of the agent's standard error.
	KindStderr Kind = "stderr"
	// KindNote is a line that is not the runner's JSON (berth's own notes,
	// a kelos image's markers, a CLI's plain text), shown as it is.
	KindNote Kind = "note"
	// KindTotals is the run's totals, always the last event.
	KindTotals Kind = "totals"
)

// Event is one thing a person reads in a transcript.
type Event struct {
	Kind Kind `json:"kind"`
	// Text is the assistant's text, a tool's result, an error's message,
	// a stderr or note line.
	Text string `json:"text,omitempty"`
	// Tool is the tool called (tool_call, and tool_result when the stream
	// names it); ID the call's id when the stream gives one.
	Tool string `json:"tool,omitempty"`
	ID   string `json:"id,omitempty"`
	// Summary is a tool call's arguments on one line.
	Summary string `json:"summary,omitempty"`
	// Cut counts the bytes of Text left out, and CutLines its lines.
	Cut      int `json:"cut_bytes,omitempty"`
	CutLines int `json:"cut_lines,omitempty"`
	// Failed marks a tool result that is an error.
	Failed bool `json:"failed,omitempty"`
	// Totals are the run's, on the totals event.
	Totals *Totals `json:"totals,omitempty"`
}

// Totals is what the stream says of the whole run.
type Totals struct {
	Usage runner.Usage `json:"usage"`
	// CostUSD is the CLI's own cost, nil when the stream gives none (Codex,
	// Gemini): the gateway's price of the run is the run's record's.
	CostUSD *float64 `json:"cost_usd,omitempty"`
	Model   string   `json:"model,omitempty"`
	Turns   int      `json:"turns,omitempty"`
	// Error is why the run failed, as the stream says; "" when it did not.
	Error string `json:"error,omitempty"`
	// Lines counts the log's lines, Skipped those over MaxLine.
	Lines   int `json:"lines"`
	Skipped int `json:"skipped,omitempty"`
	// Truncated says the transcript stopped before the log did (MaxEvents
	// or MaxText); the totals still count every line.
	Truncated bool `json:"truncated,omitempty"`
}

// Bounds on what a transcript takes from a log.
const (
	// MaxLine: a longer line is skipped (and counted), not decoded.
	MaxLine = 1 << 20
	// MaxEvents and MaxText end a transcript (the totals still come).
	MaxEvents = 10000
	MaxText   = 4 << 20
	// ResultBytes and ResultLines trim a tool's result.
	ResultBytes = 1200
	ResultLines = 8
	// SummaryBytes bounds a tool call's summary.
	SummaryBytes = 160
	// maxIDs bounds the calls remembered to name their results.
	maxIDs = 1000
)

// stderrPrefix marks a stderr line in a run's log; logCut is berth's note
// where a log stops (agentrun keeps at most so much of it).
const (
	stderrPrefix = "stderr: "
	logCut       = "berth: the run log stops here"
)

// Reader reads one run's log, line by line. The zero value is not ready:
// make one with New.
type Reader struct {
	runner  string
	tel     runner.Telemetry
	parse   func(*Reader, []byte) []Event
	tools   map[string]string // call id → tool name
	events  int
	text    int
	stopped bool
	lines   int
	skipped int
	lastErr string
	pending strings.Builder // text sent in deltas (Gemini's), until something else comes
}

// New reads the log of a run of the named runner. An unknown runner's
// lines are notes, and its totals only count lines.
func New(runnerName string) *Reader {
	r := &Reader{runner: runnerName, tools: map[string]string{}}
	r.parse = parsers[runnerName]
	return r
}

// Read reads a whole log from r, calling fn with each event as its line
// comes (a followed log's as the run writes it), the totals last. It
// returns what stopped it: r's error, or fn's first.
func Read(r io.Reader, runnerName string, fn func(Event) error) error {
	t := New(runnerName)
	var failed error
	each := func(evs []Event) {
		for _, e := range evs {
			if failed == nil {
				failed = fn(e)
			}
		}
	}
	err := runner.ReadLines(r, true, func(line []byte) { each(t.Line(line)) })
	if err != nil {
		return err
	}
	each(t.End())
	return failed
}

// Line reads one line of the log (without its newline) and returns the
// events it makes, none once the transcript has stopped.
func (r *Reader) Line(line []byte) []Event {
	r.lines++
	if len(line) > MaxLine {
		r.skipped++
		return r.emit([]Event{{Kind: KindNote, Text: fmt.Sprintf("(a line of %d bytes, over the %d MiB a transcript reads, is left out)", len(line), MaxLine>>20)}})
	}
	var evs []Event
	switch {
	case bytes.HasPrefix(line, []byte(stderrPrefix)):
		evs = []Event{{Kind: KindStderr, Text: string(line[len(stderrPrefix):])}}
	case bytes.HasPrefix(line, []byte(logCut)):
		evs = []Event{{Kind: KindNote, Text: string(line)}}
	default:
		if rn, err := runner.Get(r.runner); err == nil {
			rn.ParseLine(&r.tel, line)
		}
		if r.parse != nil && isObject(line) {
			evs = r.parse(r, line)
		} else if t := strings.TrimSpace(string(line)); t != "" {
			evs = []Event{{Kind: KindNote, Text: t}}
		}
	}
	if len(evs) > 0 {
		evs = append(r.flush(), evs...)
	}
	return r.emit(evs)
}

// End returns the events left and the totals, the last event.
func (r *Reader) End() []Event {
	evs := r.emit(r.flush())
	tel := r.tel
	tel.Settle(nil) // the stream's own cost only
	failure := errorMessage(tel.Error)
	if failure != "" {
		evs = append(evs, r.emit([]Event{{Kind: KindError, Text: failure}})...) // unless said already
	}
	t := &Totals{Usage: tel.Usage, Model: tel.Model, Turns: tel.Turns, Error: clean(failure, ResultBytes), Lines: r.lines, Skipped: r.skipped, Truncated: r.stopped}
	if tel.Cost == runner.CostNative {
		usd := tel.CostUSD
		t.CostUSD = &usd
	}
	return append(evs, Event{Kind: KindTotals, Totals: t})
}

// delta holds a piece of text that comes in deltas, until another event
// or the end.
func (r *Reader) delta(s string) {
	if room := MaxText - r.pending.Len(); room > 0 {
		r.pending.WriteString(clip(s, room))
	}
}

// flush ends the text sent in deltas.
func (r *Reader) flush() []Event {
	if r.pending.Len() == 0 {
		return nil
	}
	s := r.pending.String()
	r.pending.Reset()
	return []Event{{Kind: KindText, Text: s}}
}

// emit bounds and cleans what a line made, and stops the transcript at its
// limits.
func (r *Reader) emit(evs []Event) []Event {
	out := evs[:0]
	for _, e := range evs {
		if r.stopped {
			break
		}
		e = bound(e)
		if e.Kind == KindText && strings.TrimSpace(e.Text) == "" {
			continue
		}
		if e.Kind == KindError {
			if e.Text == r.lastErr {
				continue // said already (Codex's error, then its turn.failed)
			}
			r.lastErr = e.Text
		}
		r.events++
		r.text += len(e.Text) + len(e.Summary)
		if r.events > MaxEvents || r.text > MaxText {
			r.stopped = true
			out = append(out, Event{Kind: KindNote, Text: fmt.Sprintf("(the transcript stops here, at %d events or %d MiB of text; the totals count every line: --raw shows the whole log)", MaxEvents, MaxText>>20)})
			break
		}
		out = append(out, e)
	}
	return out
}

// bound trims an event's fields to their limits and cleans them of
// control characters.
func bound(e Event) Event {
	e.Tool = oneLine(e.Tool, 80)
	e.ID = oneLine(e.ID, 80)
	e.Summary = oneLine(e.Summary, SummaryBytes)
	switch e.Kind {
	case KindToolResult:
		e.Text, e.Cut, e.CutLines = trim(e.Text, ResultBytes, ResultLines)
	case KindText:
		e.Text = clean(strings.TrimSpace(e.Text), MaxText)
	default:
		e.Text = clean(strings.TrimRight(e.Text, "\r\n"), ResultBytes*4)
	}
	return e
}

// trim keeps the first lines and bytes of a tool's result and says how
// much it left out: bytes, and lines (one cut short counts as cut).
func trim(s string, maxBytes, maxLines int) (kept string, cutBytes, cutLines int) {
	s = strings.TrimRight(s, "\n")
	keep := s
	if n := nthIndex(keep, '\n', maxLines); n >= 0 {
		keep = keep[:n]
	}
	keep = clip(keep, maxBytes)
	if len(keep) == len(s) {
		return clean(s, maxBytes), 0, 0
	}
	whole := strings.Count(keep, "\n")
	if s[len(keep)] == '\n' {
		whole++
	}
	return clean(keep, maxBytes), len(s) - len(keep), strings.Count(s, "\n") + 1 - whole
}

func nthIndex(s string, c byte, n int) int {
	at := -1
	for range n {
		i := strings.IndexByte(s[at+1:], c)
		if i < 0 {
			return -1
		}
		at += i + 1
	}
	return at
}

// oneLine is s on one line, cut to n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return clip(s, n-len("…")) + "…"
	}
	return clean(s, n)
}

// clean replaces control characters other than newline and tab (a
// terminal's escapes among them) and invalid UTF-8, and cuts s to n bytes.
func clean(s string, n int) string {
	s = clip(s, n)
	ok := utf8.ValidString(s)
	for _, c := range s {
		if c != '\n' && c != '\t' && (unicode.IsControl(c) || c == '\u2028' || c == '\u2029') {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	var b strings.Builder
	for _, c := range strings.ToValidUTF8(s, "\uFFFD") {
		if c != '\n' && c != '\t' && (unicode.IsControl(c) || c == '\u2028' || c == '\u2029') {
			b.WriteRune('\uFFFD')
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func isObject(line []byte) bool {
	line = bytes.TrimSpace(line)
	return len(line) > 0 && line[0] == '{'
}

// decode reads a line leniently: a line that is not the shape expected
// makes no event.
func decode(line []byte, v any) bool { return json.Unmarshal(line, v) == nil }

// call records a tool call's name by its id, for its result.
func (r *Reader) call(id, tool string) {
	if id != "" && len(r.tools) < maxIDs {
		r.tools[id] = tool
	}
}

// named is the tool a result's call id named.
func (r *Reader) named(id string) string { return r.tools[id] }
