package inference

import (
	"bytes"
	"encoding/json"
	"strings"

	"berth.dev/berth/internal/fault"
)

// Call is what the gateway reads of one model request.
type Call struct {
	Dialect Dialect
	// Model is the model asked for, as the gateway names it.
	Model string
	// Stream: the answer comes as server-sent events.
	Stream bool
	// MaxOutput is the request's own cap on output tokens; 0 when it names
	// none.
	MaxOutput int
	// CountOnly: a token count (Anthropic's count_tokens), which no vendor
	// charges for.
	CountOnly bool

	body map[string]json.RawMessage
	size int
	// choices is how many answers the request asks for (Chat's n,
	// Gemini's candidateCount), each up to MaxOutput; at least 1.
	choices int
	// tools counts the tools the request declares, builtin those the
	// vendor runs or describes itself (Anthropic's typed tools,
	// Responses' web_search, Gemini's googleSearch): their prompts are
	// the vendor's, not in the body.
	tools, builtin int
	// cacheWrite: the request marks content for the prompt cache
	// (Anthropic's cache_control), which is charged above the input rate.
	cacheWrite bool
}

// ReadCall reads a request body of dialect d. Gemini names the model and
// whether it streams in the path, so model and stream are given for it;
// the other dialects carry them in the body and ignore the arguments.
func ReadCall(d Dialect, model string, stream bool, body []byte) (Call, error) {
	c := Call{Dialect: d, Model: model, Stream: stream, size: len(body), choices: 1}
	if err := json.Unmarshal(body, &c.body); err != nil || c.body == nil {
		return Call{}, fault.Errorf(fault.Invalid, "the body is not a JSON object")
	}
	str := func(key string) string {
		var s string
		_ = json.Unmarshal(c.body[key], &s)
		return s
	}
	num := func(obj map[string]json.RawMessage, keys ...string) int {
		for _, k := range keys {
			var n int
			if json.Unmarshal(obj[k], &n) == nil && n > 0 {
				return n
			}
		}
		return 0
	}
	switch d {
	case Anthropic, OpenAIChat, OpenAIResponses:
		c.Model = str("model")
		_ = json.Unmarshal(c.body["stream"], &c.Stream)
	case Gemini:
	default:
		return Call{}, fault.Errorf(fault.Invalid, "dialect %q is not served", d)
	}
	tools := c.body["tools"]
	switch d {
	case Anthropic:
		c.MaxOutput = num(c.body, "max_tokens")
		c.cacheWrite = bytes.Contains(body, []byte(`"cache_control"`))
	case OpenAIChat:
		c.MaxOutput = num(c.body, "max_completion_tokens", "max_tokens")
		c.choices = max(num(c.body, "n"), 1)
		if tools == nil {
			tools = c.body["functions"] // the older name of the same
		}
	case OpenAIResponses:
		c.MaxOutput = num(c.body, "max_output_tokens")
	case Gemini:
		var gc map[string]json.RawMessage
		if g := c.body["generationConfig"]; g != nil {
			_ = json.Unmarshal(g, &gc)
		} else if g := c.body["generation_config"]; g != nil {
			_ = json.Unmarshal(g, &gc)
		}
		c.MaxOutput = num(gc, "maxOutputTokens", "max_output_tokens")
		c.choices = max(num(gc, "candidateCount", "candidate_count"), 1)
	}
	c.tools, c.builtin = countTools(d, tools)
	if c.Model == "" {
		return Call{}, fault.Errorf(fault.Invalid, "the request names no model")
	}
	return c, nil
}

// countTools counts the tools a request declares, and of them those the
// vendor runs or describes itself: a typed tool other than a function
// (Anthropic's bash_…, computer_…; Responses' web_search, file_search), or
// a Gemini tool that declares no functions (googleSearch, codeExecution).
func countTools(d Dialect, raw json.RawMessage) (n, builtin int) {
	var tools []map[string]json.RawMessage
	if json.Unmarshal(raw, &tools) != nil {
		return 0, 0
	}
	for _, t := range tools {
		if d == Gemini {
			if t["functionDeclarations"] == nil && t["function_declarations"] == nil {
				builtin++
			}
			continue
		}
		var kind string
		_ = json.Unmarshal(t["type"], &kind)
		if kind != "" && kind != "function" && kind != "custom" {
			builtin++
		}
	}
	return len(tools), builtin
}

// Size is the body's length in bytes.
func (c Call) Size() int { return c.size }

// rewrite returns the body to send upstream: the upstream's name for the
// model, the system prompt prepended in the dialect's own way, and (for a
// streamed Chat Completion) the final usage chunk asked for, so the
// gateway can meter it. An unchanged request is sent as it came.
func (c Call) rewrite(original []byte, upstream, system string) ([]byte, error) {
	changed := false
	set := func(key string, v any) error {
		b, err := marshalJSON(v)
		if err != nil {
			return err
		}
		c.body[key] = b
		changed = true
		return nil
	}
	if upstream != c.Model && c.Dialect != Gemini {
		if err := set("model", upstream); err != nil {
			return nil, err
		}
	}
	if c.Dialect == OpenAIChat && c.Stream {
		var opts map[string]json.RawMessage
		_ = json.Unmarshal(c.body["stream_options"], &opts)
		if string(opts["include_usage"]) != "true" {
			if opts == nil {
				opts = map[string]json.RawMessage{}
			}
			opts["include_usage"] = json.RawMessage("true")
			if err := set("stream_options", opts); err != nil {
				return nil, err
			}
		}
	}
	if system != "" {
		key, v, err := c.withSystem(system)
		if err != nil {
			return nil, err
		}
		if key != "" {
			if err := set(key, v); err != nil {
				return nil, err
			}
		}
	}
	// Sent as it came only when it names each field once: the gateway
	// read a field given twice by its last value, as Go does, and a
	// vendor reading the first would run (and bill) another call than the
	// one admitted. Encoded again, each field is there once.
	if !changed && topLevelKeys(original) == len(c.body) {
		return original, nil
	}
	return marshalJSON(c.body)
}

// topLevelKeys counts the keys of the JSON object b at its top level,
// repeats included; b is an object json.Unmarshal took.
func topLevelKeys(b []byte) int {
	n, depth := 0, 0
	inString, escaped, wantKey := false, false, false
	for _, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
			if depth == 1 && wantKey {
				n++
				wantKey = false
			}
		case '{', '[':
			depth++
			wantKey = depth == 1
		case '}', ']':
			depth--
		case ',':
			wantKey = depth == 1
		}
	}
	return n
}

// withSystem returns the field that carries the system prompt in the
// dialect, with system put before whatever the request had there:
// Anthropic's system (a string, or a list of text blocks), a system
// message at the head of Chat's messages (developer when the request
// speaks to the model as its developer), Responses' instructions, and
// Gemini's systemInstruction parts.
func (c Call) withSystem(system string) (string, any, error) {
	raw := func(key string) json.RawMessage {
		v := c.body[key]
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return nil
		}
		return v
	}
	switch c.Dialect {
	case Anthropic:
		old := raw("system")
		var s string
		if old == nil {
			return "system", system, nil
		}
		if json.Unmarshal(old, &s) == nil {
			return "system", system + "\n\n" + s, nil
		}
		var blocks []json.RawMessage
		if err := json.Unmarshal(old, &blocks); err != nil {
			return "", nil, fault.Errorf(fault.Invalid, "system is neither a string nor a list of blocks")
		}
		head, _ := marshalJSON(map[string]string{"type": "text", "text": system})
		return "system", append([]json.RawMessage{head}, blocks...), nil
	case OpenAIChat:
		var msgs []json.RawMessage
		if err := json.Unmarshal(raw("messages"), &msgs); err != nil {
			return "", nil, fault.Errorf(fault.Invalid, "messages is not a list")
		}
		role := "system"
		for _, m := range msgs {
			var r struct {
				Role string `json:"role"`
			}
			if json.Unmarshal(m, &r) == nil && r.Role == "developer" {
				role = "developer"
				break
			}
		}
		head, _ := marshalJSON(map[string]string{"role": role, "content": system})
		return "messages", append([]json.RawMessage{head}, msgs...), nil
	case OpenAIResponses:
		var s string
		if old := raw("instructions"); old != nil && json.Unmarshal(old, &s) == nil && s != "" {
			return "instructions", system + "\n\n" + s, nil
		}
		return "instructions", system, nil
	case Gemini:
		key := "systemInstruction"
		if raw(key) == nil && raw("system_instruction") != nil {
			key = "system_instruction"
		}
		var si map[string]json.RawMessage
		if old := raw(key); old != nil {
			if err := json.Unmarshal(old, &si); err != nil {
				return "", nil, fault.Errorf(fault.Invalid, "%s is not an object", key)
			}
		}
		if si == nil {
			si = map[string]json.RawMessage{}
		}
		var parts []json.RawMessage
		if p := si["parts"]; p != nil {
			if err := json.Unmarshal(p, &parts); err != nil {
				return "", nil, fault.Errorf(fault.Invalid, "%s.parts is not a list", key)
			}
		}
		head, _ := marshalJSON(map[string]string{"text": system})
		b, _ := marshalJSON(append([]json.RawMessage{head}, parts...))
		si["parts"] = b
		return key, si, nil
	}
	return "", nil, nil
}

// marshalJSON encodes v without escaping HTML characters, so prompts
// reach the upstream as they were written.
func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// ParseGeminiPath reads "MODEL:generateContent",
// "MODEL:streamGenerateContent" or "MODEL:countTokens".
func ParseGeminiPath(segment string) (model string, stream, count bool, err error) {
	model, method, ok := strings.Cut(segment, ":")
	if !ok || model == "" {
		return "", false, false, fault.Errorf(fault.Invalid, "want /v1beta/models/MODEL:generateContent, not %q", segment)
	}
	switch method {
	case "generateContent":
	case "streamGenerateContent":
		stream = true
	case "countTokens":
		count = true
	default:
		return "", false, false, fault.Errorf(fault.Invalid, "method %q is not generateContent, streamGenerateContent or countTokens", method)
	}
	return model, stream, count, nil
}
