package inference

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"berth.dev/berth/internal/fault"
)

// FuzzRewrite feeds the request rewriter arbitrary bodies of every
// dialect, models and system prompts. It never panics; a body ReadCall or
// rewrite refuses is refused as fault.Invalid; and a rewritten body is a JSON
// object, of bounded size, that reads back as the call the gateway
// admitted (the upstream's model, the same stream and output cap) whether
// its reader takes a key's first value or its last, with the system
// prompt first in the dialect's place and every other field as it came.
// The body is the caller's; the upstream's model name (the catalog's) and
// the system prompt (the settings') are text.
func FuzzRewrite(f *testing.F) {
	dialects := []Dialect{Anthropic, OpenAIChat, OpenAIResponses, Gemini}
	for _, s := range []struct {
		body             string
		upstream, system string
	}{
		{`{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, "m", ""},
		{`{"model":"m","system":"be brief","messages":[]}`, "claude-x", "Follow the rules."},
		{`{"model":"m","system":[{"type":"text","text":"a"}],"stream":true}`, "m", "S"},
		{`{"model":"m","system":null}`, "m", "S"},
		{`{"model":"m","system":3}`, "m", "S"},
		{`{"model":"m","messages":[{"role":"developer","content":"x"}],"stream":true}`, "u", "S"},
		{`{"model":"m","messages":"x"}`, "m", "S"},
		{`{"model":"m","stream":true,"stream_options":{"include_usage":false}}`, "m", ""},
		{`{"model":"m","instructions":"old","max_output_tokens":5}`, "m", "new"},
		{`{"contents":[],"systemInstruction":{"parts":[{"text":"a"}]},"generationConfig":{"maxOutputTokens":9}}`, "", "S"},
		{`{"contents":[],"system_instruction":{"parts":"x"}}`, "", "S"},
		{`{"model":"cheap","model":"dear"}`, "dear", ""},
		{`{"model":"m","max_tokens":1,"max_tokens":1000000}`, "m", ""},
		{`{"model":"m","stream":false,"stream":true}`, "m", ""},
		{`{"model":"m"}` + " \n", "m", "</script>\u2028&"},
		{`{"model":"\ud800","x":"\xff"}`, "\xff", "\x00"},
		{`[]`, "m", ""}, {`null`, "m", ""}, {``, "m", ""}, {`{"model":1}`, "m", ""},
	} {
		for i := range dialects {
			f.Add(uint8(i), []byte(s.body), s.upstream, s.system)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte, upstream, system string) {
		if !utf8.ValidString(upstream) || !utf8.ValidString(system) {
			return // the catalog's names and the settings' prompts are text, not any bytes
		}
		d := dialects[int(which)%len(dialects)]
		c, err := ReadCall(d, "gemini-model", false, body)
		if err != nil {
			if !errors.Is(err, fault.Invalid) {
				t.Fatalf("%s: ReadCall refused %q with %v, not fault.Invalid", d, body, err)
			}
			return
		}
		if upstream == "" {
			upstream = c.Model
		}
		out, err := c.rewrite(body, upstream, system)
		if err != nil {
			if !errors.Is(err, fault.Invalid) {
				t.Fatalf("%s: rewrite refused %q with %v, not fault.Invalid", d, body, err)
			}
			return
		}
		if max := 3*len(body) + 6*(len(system)+len(upstream)) + 256; len(out) > max {
			t.Fatalf("%s: a %d-byte body became %d bytes (at most %d)", d, len(body), len(out), max)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(out, &obj); err != nil || obj == nil {
			t.Fatalf("%s: %q became %q, not a JSON object: %v", d, body, out, err)
		}
		model := "gemini-model"
		if d != Gemini {
			model = upstream
		}
		again, err := ReadCall(d, model, false, out)
		if err != nil {
			t.Fatalf("%s: %q became %q, which ReadCall refuses: %v", d, body, out, err)
		}
		if again.Model != model || again.Stream != c.Stream || again.MaxOutput != c.MaxOutput {
			t.Fatalf("%s: %q became %q, read as model %q stream %v max %d; admitted %q %v %d",
				d, body, out, again.Model, again.Stream, again.MaxOutput, model, c.Stream, c.MaxOutput)
		}
		// A reader that keeps a key's first value sees the same call.
		for k, v := range firstValues(t, out) {
			if string(v) != string(obj[k]) {
				t.Fatalf("%s: %q became %q, whose first %q (%s) is not its last (%s)", d, body, out, k, v, obj[k])
			}
		}
		if system != "" {
			checkSystemFirst(t, d, obj, system)
		}
		var in map[string]json.RawMessage
		_ = json.Unmarshal(body, &in)
		for k, v := range in {
			switch k {
			case "model", "stream_options", "system", "messages", "instructions", "systemInstruction", "system_instruction":
				continue
			}
			if !sameJSON(v, obj[k]) {
				t.Fatalf("%s: field %q was %s, sent as %s", d, k, v, obj[k])
			}
		}
	})
}

// firstValues reads a JSON object's top-level fields keeping each key's
// first value, as some readers do.
func firstValues(t *testing.T, b []byte) map[string]json.RawMessage {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%q is no object", b)
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if k := tok.(string); out[k] == nil {
			out[k] = v
		}
	}
	return out
}

func sameJSON(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}

// checkSystemFirst checks that system comes first where the dialect
// carries a system prompt.
func checkSystemFirst(t *testing.T, d Dialect, obj map[string]json.RawMessage, system string) {
	t.Helper()
	var s string
	var list []map[string]any
	ok := false
	switch d {
	case Anthropic:
		if json.Unmarshal(obj["system"], &s) == nil {
			ok = strings.HasPrefix(s, system)
		} else if json.Unmarshal(obj["system"], &list) == nil && len(list) > 0 {
			ok = list[0]["type"] == "text" && list[0]["text"] == system
		}
	case OpenAIChat:
		if json.Unmarshal(obj["messages"], &list) == nil && len(list) > 0 {
			ok = (list[0]["role"] == "system" || list[0]["role"] == "developer") && list[0]["content"] == system
		}
	case OpenAIResponses:
		ok = json.Unmarshal(obj["instructions"], &s) == nil && strings.HasPrefix(s, system)
	case Gemini:
		var si struct {
			Parts []struct {
				Text *string `json:"text"`
			} `json:"parts"`
		}
		key := "systemInstruction"
		if obj[key] == nil {
			key = "system_instruction"
		}
		ok = json.Unmarshal(obj[key], &si) == nil && len(si.Parts) > 0 && si.Parts[0].Text != nil && *si.Parts[0].Text == system
	}
	if !ok {
		t.Fatalf("%s: the system prompt %q is not first in %v", d, system, obj)
	}
}
