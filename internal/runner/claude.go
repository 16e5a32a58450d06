package runner

import (
	"encoding/json"
	"slices"
	"strings"
)

// claudeCode runs Anthropic's Claude Code (`claude`), which speaks
// Anthropic Messages to ANTHROPIC_BASE_URL.
type claudeCode struct{}

func (claudeCode) Name() string   { return "claude-code" }
func (claudeCode) Binary() string { return "claude" }

// ContainerArgs: print mode with stream-json (which requires --verbose),
// and no permission prompts: nobody is there to answer them, and the
// sandbox is the boundary. -p is here, not in the image, so the entrypoint
// hardcodes nothing (SPEC S13.3).
func (claudeCode) ContainerArgs(o Options) ([]string, error) {
	if err := checkOptions(o); err != nil {
		return nil, err
	}
	args := []string{"-p", "--dangerously-skip-permissions", "--verbose", "--output-format", "stream-json", "--model", o.Model}
	if o.Effort != "" {
		args = append(args, "--effort", o.Effort)
	}
	if o.Resume {
		// The newest conversation whose transcript is under
		// ~/.claude/projects/<the working directory>; the prompt on stdin
		// is its next user turn, and the session keeps its id.
		args = append(args, "--continue")
	}
	return args, nil
}

// APIs: Claude Code speaks Anthropic Messages only.
func (claudeCode) APIs() []API { return []API{APIAnthropic} }

// Credentials: Claude Code sends ANTHROPIC_API_KEY as x-api-key; here it
// carries the sandbox's gateway key.
func (claudeCode) Credentials() []string { return []string{"ANTHROPIC_API_KEY"} }

// Env points Claude Code at the gateway (no /v1: it appends /v1/messages
// itself) and turns off what it would otherwise fetch or send: without
// these it looks up the vendor's API host, a second or two each run.
func (claudeCode) Env(g Gateway) ([]EnvVar, error) {
	base, err := g.baseURL()
	if err != nil {
		return nil, err
	}
	return []EnvVar{
		{"ANTHROPIC_BASE_URL", base},
		{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"},
		{"DISABLE_AUTOUPDATER", "1"},
		{"DISABLE_ERROR_REPORTING", "1"},
		{"DISABLE_TELEMETRY", "1"},
		// MCP servers' tools in the request's tools, not deferred behind
		// a tool search, and there from the first call: the servers are
		// waited for (up to MCP_TIMEOUT) rather than joined later.
		{"ENABLE_TOOL_SEARCH", "false"},
		{"MCP_CONNECTION_NONBLOCKING", "false"},
		{"MCP_TIMEOUT", "30000"},
	}, nil
}

// Files: none; print mode needs no settings, and the session header comes
// through ANTHROPIC_CUSTOM_HEADERS, which the gateway hands every agent
// sandbox (SPEC S15).
func (claudeCode) Files(g Gateway, o Options) ([]File, error) { return noFiles(g, o) }

// ParseLine reads Claude Code's stream-json.
func (claudeCode) ParseLine(t *Telemetry, line []byte) Outcome {
	return parseStreamJSON(t, line, claudeType)
}

// claudeType is Claude Code's vocabulary; stream_event lines come with
// --include-partial-messages.
func claudeType(typ string) bool {
	switch typ {
	case "system", "assistant", "user", "result", "stream_event":
		return true
	}
	return false
}

// streamLine is a line of Claude Code's stream-json, which Cursor's CLI
// mirrors. Only the fields telemetry needs are decoded; the rest are
// skipped, whatever their order (it changed between versions).
type streamLine struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`
	// system/init
	Model string `json:"model"`
	// assistant: a line per content block, whose usage is the stale
	// message_start snapshot and must never be summed. A failed API call
	// comes as a synthetic assistant message.
	Message    *struct{ Content json.RawMessage } `json:"message"`
	IsAPIError bool                               `json:"is_api_error_message"`
	// result: the run's totals.
	IsError    bool                       `json:"is_error"`
	Result     json.RawMessage            `json:"result"`
	Errors     json.RawMessage            `json:"errors"`
	CostUSD    *float64                   `json:"total_cost_usd"`
	NumTurns   int                        `json:"num_turns"`
	Usage      *streamUsage               `json:"usage"`
	ModelUsage map[string]json.RawMessage `json:"modelUsage"`
}

type streamUsage struct {
	InputTokens         int64 `json:"input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	CacheReadTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationTokens int64 `json:"cache_creation_input_tokens"`
	OutputDetails       *struct {
		ThinkingTokens int64 `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

// parseStreamJSON reads one stream-json line into t; known says which line
// types the dialect has, beyond which a line is Unknown.
// Only the result line carries totals; it overwrites everything, the
// failure state included (a retried API error that then succeeded is not a
// failure). A failed result still says subtype "success": is_error is what
// tells.
func parseStreamJSON(t *Telemetry, line []byte, known func(string) bool) Outcome {
	var l streamLine
	if o := decode(line, &l); o != Parsed {
		return o
	}
	if !known(l.Type) {
		return Unknown
	}
	t.setSession(l.SessionID)
	switch l.Type {
	case "system":
		if l.Subtype == "init" {
			t.setModel(l.Model)
		}
	case "assistant":
		if l.IsAPIError {
			t.fail(firstText(l.Message))
		}
	case "result":
		if l.Usage != nil {
			r := report{
				input:              l.Usage.InputTokens,
				cacheRead:          l.Usage.CacheReadTokens,
				cacheWrite:         l.Usage.CacheCreationTokens,
				output:             l.Usage.OutputTokens,
				outputHasReasoning: true,
			}
			if d := l.Usage.OutputDetails; d != nil {
				r.reasoning = d.ThinkingTokens
			}
			t.totalUsage(r)
		}
		if l.CostUSD != nil {
			t.setCost(*l.CostUSD)
		}
		if l.NumTurns > 0 {
			t.Turns = l.NumTurns
		}
		if t.Model == "" && len(l.ModelUsage) == 1 {
			for m := range l.ModelUsage {
				t.setModel(m)
			}
		}
		if b := priceBasis(l.ModelUsage); b != "" {
			t.PriceBasis = b
		}
		t.Error = ""
		if l.IsError || strings.HasPrefix(l.Subtype, "error") {
			t.fail(resultMessage(l))
		}
	}
	return Parsed
}

// priceBasis is what a result's per-model usage says its costs were
// priced at (costBasis), the models' bases joined when they differ; ""
// when none says.
func priceBasis(models map[string]json.RawMessage) string {
	var bases []string
	for _, raw := range models {
		var u struct {
			CostBasis string `json:"costBasis"`
		}
		if json.Unmarshal(raw, &u) == nil && u.CostBasis != "" && !slices.Contains(bases, u.CostBasis) {
			bases = append(bases, clip(u.CostBasis, maxName))
		}
	}
	slices.Sort(bases)
	return strings.Join(bases, ", ")
}

// firstText is the text of a message's first text block, if any.
func firstText(m *struct{ Content json.RawMessage }) string {
	if m == nil {
		return ""
	}
	var blocks []struct{ Type, Text string }
	if json.Unmarshal(m.Content, &blocks) != nil {
		return ""
	}
	for _, b := range blocks {
		if b.Type == "text" && b.Text != "" {
			return b.Text
		}
	}
	return ""
}

// resultMessage says why a result failed: its text, else its errors, else
// its subtype. The fields are decoded here, leniently, so an odd shape
// costs the message, never the line's totals.
func resultMessage(l streamLine) string {
	var s string
	if json.Unmarshal(l.Result, &s) == nil && s != "" {
		return s
	}
	var errs []string
	if json.Unmarshal(l.Errors, &errs) == nil && len(errs) > 0 {
		return strings.Join(errs, "; ")
	}
	if l.Subtype != "" && l.Subtype != "success" {
		return l.Subtype
	}
	return ""
}
