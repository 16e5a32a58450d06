package modelserver_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"berth.dev/berth/internal/modelserver"
)

// TestAsVendor: a server standing in for one vendor serves that vendor's
// API alone, at its paths, to its key in its header, and refuses the rest
// as the vendor does, in the vendor's error shape.
func TestAsVendor(t *testing.T) {
	const key = "sk-vendor-test"
	var (
		messages = map[string]any{"model": "m", "max_tokens": 64, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
		chat     = map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
		input    = map[string]any{"model": "m", "input": "hi"}
		contents = map[string]any{"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "hi"}}}}}
	)
	anthropic := []string{"X-Api-Key", key, "Anthropic-Version", "2023-06-01"}
	bearer := []string{"Authorization", "Bearer " + key}
	google := []string{"X-Goog-Api-Key", key}
	for _, tt := range []struct {
		name    string
		vendor  modelserver.Vendor
		path    string
		body    any
		headers []string
		status  int
		shape   string // a word of the error body: the vendor's shape
	}{
		{"anthropic messages", modelserver.VendorAnthropic, "/v1/messages", messages, anthropic, 200, ""},
		{"anthropic count", modelserver.VendorAnthropic, "/v1/messages/count_tokens", chat, anthropic, 200, ""},
		{"anthropic asked for chat", modelserver.VendorAnthropic, "/v1/chat/completions", chat, anthropic, 404, `"not_found_error"`},
		{"anthropic asked for gemini", modelserver.VendorAnthropic, "/v1beta/models/m:generateContent", contents, anthropic, 404, `"not_found_error"`},
		{"anthropic under another prefix", modelserver.VendorAnthropic, "/x/v1/messages", messages, anthropic, 404, `"not_found_error"`},
		{"anthropic bearer key", modelserver.VendorAnthropic, "/v1/messages", messages, append(bearer, "Anthropic-Version", "2023-06-01"), 401, `"authentication_error"`},
		{"anthropic wrong key", modelserver.VendorAnthropic, "/v1/messages", messages, []string{"X-Api-Key", "nope", "Anthropic-Version", "2023-06-01"}, 401, `"authentication_error"`},
		{"anthropic no version", modelserver.VendorAnthropic, "/v1/messages", messages, []string{"X-Api-Key", key}, 400, `"invalid_request_error"`},
		{"anthropic no max_tokens", modelserver.VendorAnthropic, "/v1/messages", chat, anthropic, 400, "max_tokens"},
		{"openai chat", modelserver.VendorOpenAI, "/v1/chat/completions", chat, bearer, 200, ""},
		{"openai responses", modelserver.VendorOpenAI, "/v1/responses", input, bearer, 200, ""},
		{"openai asked for messages", modelserver.VendorOpenAI, "/v1/messages", messages, bearer, 404, `"invalid_request_error"`},
		{"openai x-api-key", modelserver.VendorOpenAI, "/v1/responses", input, []string{"X-Api-Key", key}, 401, `"error"`},
		{"openai responses without input", modelserver.VendorOpenAI, "/v1/responses", chat, bearer, 400, "input"},
		{"gemini stream", modelserver.VendorGemini, "/v1beta/models/m:streamGenerateContent", contents, google, 200, ""},
		{"gemini generate", modelserver.VendorGemini, "/v1beta/models/m:generateContent", contents, google, 200, ""},
		{"gemini asked for responses", modelserver.VendorGemini, "/v1/responses", input, google, 404, `"status"`},
		{"gemini bearer", modelserver.VendorGemini, "/v1beta/models/m:generateContent", contents, bearer, 401, `"UNAUTHENTICATED"`},
		{"gemini without contents", modelserver.VendorGemini, "/v1beta/models/m:generateContent", chat, google, 400, "contents"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, url := start(t, scenario(t, modelserver.ScenarioText), modelserver.AsVendor(tt.vendor, key))
			resp := post(t, url+tt.path, tt.body, tt.headers...)
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, b)
			}
			if tt.status != 200 {
				if !json.Valid(b) || !strings.Contains(string(b), tt.shape) {
					t.Errorf("error body %s: want %s's shape, with %s", b, tt.vendor, tt.shape)
				}
			}
		})
	}
	// Without AsVendor the server serves every dialect at any prefix.
	_, url := start(t, scenario(t, modelserver.ScenarioText))
	if resp := post(t, url+"/x/v1/messages", messages); resp.StatusCode != http.StatusOK {
		t.Errorf("a server for every vendor answered %d to /x/v1/messages", resp.StatusCode)
	}
}
