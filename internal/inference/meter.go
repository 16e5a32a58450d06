package inference

import (
	"bytes"
	"encoding/json"

	"berth.dev/berth/internal/runner"
)

// Meter reads an upstream's answer as it passes through the gateway and
// counts its tokens from the answer's own usage fields: Anthropic's
// message_start and message_delta, the final usage chunk of a Chat
// Completions stream (the gateway asks for it), Responses'
// response.completed, and Gemini's usageMetadata. Tokens are normalised
// as runner.Usage counts them: Input without the cache, Output with the
// reasoning.
//
// Write never fails and never holds the answer back: the proxy writes
// each piece to the client and to the Meter. An event stream is read line
// by line (only a partial line is kept); a JSON answer is kept up to
// maxJSON to be read at the end.
type Meter struct {
	dialect Dialect
	sse     bool
	line    []byte // the partial line of an event stream
	body    []byte // a JSON answer
	over    bool   // a line or body was too long to keep
	u       usage
}

// maxJSON caps what a Meter keeps of one line or one JSON answer.
const maxJSON = 32 << 20

// NewMeter returns a Meter for an answer of dialect d whose Content-Type
// is contentType.
func NewMeter(d Dialect, contentType string) *Meter {
	return &Meter{dialect: d, sse: bytes.HasPrefix(bytes.TrimSpace([]byte(contentType)), []byte("text/event-stream"))}
}

// Stream reports whether the answer is an event stream.
func (m *Meter) Stream() bool { return m.sse }

// Write reads one more piece of the answer.
func (m *Meter) Write(p []byte) (int, error) {
	n := len(p)
	if !m.sse {
		if len(m.body)+len(p) > maxJSON {
			m.over = true
			return n, nil
		}
		m.body = append(m.body, p...)
		return n, nil
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			m.keep(p)
			break
		}
		m.keep(p[:i])
		m.event(m.line)
		m.line, m.over = m.line[:0], false
		p = p[i+1:]
	}
	return n, nil
}

func (m *Meter) keep(p []byte) {
	if m.over || len(m.line)+len(p) > maxJSON {
		m.over = true
		return
	}
	m.line = append(m.line, p...)
}

// event reads one line of an event stream: only data lines that carry
// usage are decoded.
func (m *Meter) event(line []byte) {
	data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:"))
	if !ok || m.over {
		return
	}
	if !bytes.Contains(data, []byte(`"usage`)) && !bytes.Contains(data, []byte(`"input_tokens"`)) {
		return
	}
	m.read(bytes.TrimSpace(data))
}

// Usage returns the tokens counted, and whether the answer said any.
func (m *Meter) Usage() (runner.Usage, bool) {
	if !m.sse && len(m.body) > 0 && !m.over {
		body := bytes.TrimSpace(m.body)
		if len(body) > 0 && body[0] == '[' {
			// Gemini's streamGenerateContent without alt=sse: a JSON list.
			var items []json.RawMessage
			if json.Unmarshal(body, &items) == nil {
				for _, it := range items {
					m.read(it)
				}
			}
		} else {
			m.read(body)
		}
		m.body = nil
	}
	return m.u.normalise(), m.u.seen
}

// usage is what the answer said, before normalisation.
type usage struct {
	seen                                            bool
	input, cacheRead, cacheWrite, output, reasoning int64
	// inputHasCache: input counts the cache reads (OpenAI, Gemini).
	inputHasCache bool
	// reasoningExtra: reasoning comes on top of output (Gemini's thoughts).
	reasoningExtra bool
}

func (u usage) normalise() runner.Usage {
	out := runner.Usage{
		Input: max(u.input, 0), CacheRead: max(u.cacheRead, 0), CacheWrite: max(u.cacheWrite, 0),
		Output: max(u.output, 0), Reasoning: max(u.reasoning, 0),
	}
	if u.inputHasCache {
		out.Input = max(out.Input-out.CacheRead, 0)
	}
	if u.reasoningExtra {
		out.Output += out.Reasoning
	}
	return out
}

// anthropicUsage is Anthropic's usage object.
type anthropicUsage struct {
	Input      *int64 `json:"input_tokens"`
	Output     *int64 `json:"output_tokens"`
	CacheWrite *int64 `json:"cache_creation_input_tokens"`
	CacheRead  *int64 `json:"cache_read_input_tokens"`
}

// openAIUsage is Chat Completions' and Responses' usage object.
type openAIUsage struct {
	Prompt     *int64 `json:"prompt_tokens"`
	Completion *int64 `json:"completion_tokens"`
	Input      *int64 `json:"input_tokens"`
	Output     *int64 `json:"output_tokens"`
	PromptD    *struct {
		Cached int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	InputD *struct {
		Cached int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	CompletionD *struct {
		Reasoning int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	OutputD *struct {
		Reasoning int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

// geminiUsage is Gemini's usageMetadata.
type geminiUsage struct {
	Prompt     int64 `json:"promptTokenCount"`
	Candidates int64 `json:"candidatesTokenCount"`
	Cached     int64 `json:"cachedContentTokenCount"`
	Thoughts   int64 `json:"thoughtsTokenCount"`
}

// read takes the usage out of one JSON document of the answer. Later
// figures replace earlier ones: every dialect's usage is cumulative.
func (m *Meter) read(doc []byte) {
	switch m.dialect {
	case Anthropic:
		var v struct {
			Message *struct {
				Usage *anthropicUsage `json:"usage"`
			} `json:"message"`
			Usage *anthropicUsage `json:"usage"`
		}
		if json.Unmarshal(doc, &v) != nil {
			return
		}
		if v.Message != nil && v.Message.Usage != nil {
			m.anthropic(v.Message.Usage)
		}
		if v.Usage != nil {
			m.anthropic(v.Usage)
		}
	case OpenAIChat, OpenAIResponses:
		var v struct {
			Usage    *openAIUsage `json:"usage"`
			Response *struct {
				Usage *openAIUsage `json:"usage"`
			} `json:"response"`
		}
		if json.Unmarshal(doc, &v) != nil {
			return
		}
		if v.Usage != nil {
			m.openAI(v.Usage)
		}
		if v.Response != nil && v.Response.Usage != nil {
			m.openAI(v.Response.Usage)
		}
	case Gemini:
		var v struct {
			Usage *geminiUsage `json:"usageMetadata"`
		}
		if json.Unmarshal(doc, &v) != nil || v.Usage == nil {
			return
		}
		g := v.Usage
		m.u = usage{seen: true, input: g.Prompt, cacheRead: g.Cached, output: g.Candidates, reasoning: g.Thoughts,
			inputHasCache: true, reasoningExtra: true}
	}
}

// anthropic takes a usage object: message_start's whole one, then
// message_delta's, which carries the final output and, from some
// versions of the API on, the input figures again.
func (m *Meter) anthropic(a *anthropicUsage) {
	m.u.seen = true
	if a.Input != nil {
		m.u.input = *a.Input
	}
	if a.Output != nil {
		m.u.output = *a.Output
	}
	if a.CacheWrite != nil {
		m.u.cacheWrite = *a.CacheWrite
	}
	if a.CacheRead != nil {
		m.u.cacheRead = *a.CacheRead
	}
}

func (m *Meter) openAI(o *openAIUsage) {
	u := usage{seen: true, inputHasCache: true}
	switch {
	case o.Prompt != nil || o.Completion != nil:
		u.input, u.output = deref(o.Prompt), deref(o.Completion)
		if o.PromptD != nil {
			u.cacheRead = o.PromptD.Cached
		}
		if o.CompletionD != nil {
			u.reasoning = o.CompletionD.Reasoning
		}
	case o.Input != nil || o.Output != nil:
		u.input, u.output = deref(o.Input), deref(o.Output)
		if o.InputD != nil {
			u.cacheRead = o.InputD.Cached
		}
		if o.OutputD != nil {
			u.reasoning = o.OutputD.Reasoning
		}
	default:
		return // "usage": null, or an empty object
	}
	m.u = u
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
