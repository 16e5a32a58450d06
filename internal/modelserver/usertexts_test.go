package modelserver_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/modelserver"
)

// TestUserTextsAreDigests: every dialect reports the texts of its user
// turns, in order, as digests, whether a turn's content is a string or a
// list of parts, and leaves out the system prompt, the assistant's text,
// tool calls and tool results; a long multi-line prompt is reported whole.
func TestUserTextsAreDigests(t *testing.T) {
	long := strings.Repeat("fix the \"greeting\" in $HOME\n", 40000) + "done"
	text := func(s string) map[string]any { return map[string]any{"type": "text", "text": s} }
	for _, tt := range []struct {
		dialect, path string
		body          map[string]any
	}{
		{"anthropic", "/v1/messages", map[string]any{"model": "m", "system": "be brief", "messages": []any{
			map[string]any{"role": "user", "content": []any{text("<reminder>"), text(long)}},
			map[string]any{"role": "assistant", "content": []any{text("on it"),
				map[string]any{"type": "tool_use", "id": "toolu_a", "name": "Bash", "input": map[string]any{}}}},
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "tool_result", "tool_use_id": "toolu_a", "content": "ok"}, text("and then")}},
		}}},
		{"chat", "/v1/chat/completions", map[string]any{"model": "m", "messages": []any{
			map[string]any{"role": "system", "content": "be brief"},
			map[string]any{"role": "user", "content": "<reminder>"},
			map[string]any{"role": "user", "content": []any{text(long)}},
			map[string]any{"role": "assistant", "content": "on it"},
			map[string]any{"role": "tool", "tool_call_id": "c", "content": "ok"},
			map[string]any{"role": "user", "content": "and then"},
		}}},
		{"responses", "/v1/responses", map[string]any{"model": "m", "instructions": "be brief", "input": []any{
			map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "be brief"}}},
			map[string]any{"type": "message", "role": "user", "content": []any{
				map[string]any{"type": "input_text", "text": "<reminder>"}, map[string]any{"type": "input_text", "text": long}}},
			map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": "on it"}}},
			map[string]any{"type": "function_call_output", "call_id": "c", "output": "ok"},
			map[string]any{"role": "user", "content": "and then"},
		}}},
		{"gemini", "/v1beta/models/m:generateContent", map[string]any{
			"systemInstruction": map[string]any{"parts": []any{map[string]any{"text": "be brief"}}},
			"contents": []any{
				map[string]any{"role": "user", "parts": []any{map[string]any{"text": "<reminder>"}, map[string]any{"text": long}}},
				map[string]any{"role": "model", "parts": []any{map[string]any{"text": "on it"}}},
				map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"name": "x"}}}},
				map[string]any{"parts": []any{map[string]any{"text": "and then"}}},
			}}},
	} {
		t.Run(tt.dialect, func(t *testing.T) {
			srv, url := start(t, scenario(t, modelserver.ScenarioText))
			resp := post(t, url+tt.path, tt.body)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			reqs := srv.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests recorded", len(reqs))
			}
			want := []modelserver.Text{modelserver.TextOf("<reminder>"), modelserver.TextOf(long), modelserver.TextOf("and then")}
			if diff := cmp.Diff(want, reqs[0].UserTexts); diff != "" {
				t.Errorf("UserTexts (-want +got):\n%s", diff)
			}
		})
	}
}
