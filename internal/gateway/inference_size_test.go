package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"berth.dev/berth/internal/inference"
)

// TestModelBodyOverTheLimit sends every model route a body one byte over
// the 32 MiB limit, with and without a length ahead: each answers 413 in
// its vendor's own shape (Anthropic's request_too_large, OpenAI's and
// Gemini's error objects with 413) naming the limit, sends nothing
// upstream and records nothing.
func TestModelBodyOverTheLimit(t *testing.T) {
	m := newModelWorld(t)
	sb, key := m.agentKey(t, "large", "")
	big := bytes.Repeat([]byte("a"), 32<<20+1)
	routes := []struct {
		dialect inference.Dialect
		path    string
		kind    string // the error's type (Anthropic, OpenAI) or status (Gemini)
	}{
		{inference.Anthropic, "/v1/messages", "request_too_large"},
		{inference.Anthropic, "/v1/messages/count_tokens", "request_too_large"},
		{inference.OpenAIChat, "/v1/chat/completions", "too_large"},
		{inference.OpenAIResponses, "/v1/responses", "too_large"},
		{inference.Gemini, "/v1beta/models/" + geminiModel + ":generateContent", "INVALID_ARGUMENT"},
		{inference.Gemini, "/v1beta/models/" + geminiModel + ":streamGenerateContent?alt=sse", "INVALID_ARGUMENT"},
		{inference.Gemini, "/v1beta/models/" + geminiModel + ":countTokens", "INVALID_ARGUMENT"},
	}
	for _, rt := range routes {
		for _, chunked := range []bool{false, true} {
			name := rt.path
			if chunked {
				name += " (chunked)"
			}
			t.Run(name, func(t *testing.T) {
				var body io.Reader = bytes.NewReader(big)
				if chunked {
					body = io.MultiReader(body) // no length known ahead: chunked
				}
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, m.url+rt.path, body)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Berth-Session", sb)
				switch rt.dialect {
				case inference.Anthropic:
					req.Header.Set("X-Api-Key", key)
				case inference.Gemini:
					req.Header.Set("X-Goog-Api-Key", key)
				default:
					req.Header.Set("Authorization", "Bearer "+key)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				got := answer(t, resp)
				resp.Body.Close()
				msg, kind := errorBody(t, rt.dialect, got)
				if resp.StatusCode != http.StatusRequestEntityTooLarge || kind != rt.kind || !strings.Contains(msg, "32 MiB") {
					t.Errorf("%d %s %q; want 413 %s naming the 32 MiB limit", resp.StatusCode, kind, msg, rt.kind)
				}
				var shape map[string]any
				if err := json.Unmarshal([]byte(got), &shape); err != nil {
					t.Fatal(err)
				}
				e, _ := shape["error"].(map[string]any)
				switch rt.dialect {
				case inference.Gemini:
					if code, _ := e["code"].(float64); code != 413 {
						t.Errorf("Gemini's error code %v, want 413: %s", e["code"], got)
					}
				case inference.OpenAIChat, inference.OpenAIResponses:
					if _, ok := e["param"]; !ok || e["code"] != rt.kind {
						t.Errorf("OpenAI's error object lacks param or code: %s", got)
					}
				}
			})
		}
	}
	for kind, v := range m.vendors {
		v.mu.Lock()
		n := len(v.got)
		v.mu.Unlock()
		if n != 0 {
			t.Errorf("%s received %d requests", kind, n)
		}
	}
	if u, err := m.inference.Usage(t.Context(), sb); err != nil || u.Requests != 0 {
		t.Errorf("session %+v, %v; want nothing recorded", u, err)
	}
}
