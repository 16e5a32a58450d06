package modelserver_test

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/modelserver"
)

// execCommand is Codex's shell tool.
var execCommand = map[string]any{"type": "function", "name": "exec_command", "strict": false,
	"parameters": map[string]any{"type": "object", "properties": map[string]any{
		"cmd": map[string]any{"type": "string"}, "workdir": map[string]any{"type": "string"}},
		"required": []string{"cmd"}}}

// responsesBody is a Responses request as Codex sends it: store false, the
// whole history replayed in input, results as function_call_output items.
func responsesBody(stream bool, results int) map[string]any {
	input := []any{map[string]any{"type": "message", "role": "user",
		"content": []any{map[string]any{"type": "input_text", "text": "Create f.txt containing hi and commit it"}}}}
	for range results {
		input = append(input,
			map[string]any{"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{}"},
			map[string]any{"type": "function_call_output", "call_id": "call_1", "output": "ok"})
	}
	return map[string]any{"model": "gpt-5.5", "stream": stream, "store": false, "input": input,
		"tools": []any{map[string]any{"type": "custom", "name": "apply_patch"}, execCommand}}
}

var wantResponsesUsage = map[string]any{"input_tokens": 150.0, "input_tokens_details": map[string]any{"cached_tokens": 30.0},
	"output_tokens": 17.0, "output_tokens_details": map[string]any{"reasoning_tokens": 3.0}, "total_tokens": 167.0}

// responsesEvent is the part of a Responses event the tests read.
type responsesEvent struct {
	Type     string         `json:"type"`
	Sequence int            `json:"sequence_number"`
	Item     map[string]any `json:"item"`
	Delta    string         `json:"delta"`
	Response struct {
		Status string           `json:"status"`
		Model  string           `json:"model"`
		Output []map[string]any `json:"output"`
		Usage  map[string]any   `json:"usage"`
	} `json:"response"`
}

// readResponses checks names, types and sequence numbers agree and returns
// the events.
func readResponses(t *testing.T, resp *http.Response) []responsesEvent {
	t.Helper()
	var out []responsesEvent
	for i, e := range readEvents(t, resp) {
		var ev responsesEvent
		e.decode(t, &ev)
		if ev.Type != e.name || ev.Sequence != i {
			t.Errorf("event %d: name %q type %q sequence_number %d", i, e.name, ev.Type, ev.Sequence)
		}
		out = append(out, ev)
	}
	return out
}

func TestResponsesStream(t *testing.T) {
	srv, url := start(t, scenario(t, modelserver.ScenarioTool))
	text := []string{"response.output_item.added", "response.content_part.added", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done"}
	call := []string{"response.output_item.added", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done"}
	head := []string{"response.created", "response.in_progress"}

	t.Run("tool call", func(t *testing.T) {
		events := readResponses(t, post(t, url+"/v1/responses", responsesBody(true, 0), "Authorization", "Bearer sk-mock"))
		var got []string
		var args string
		for _, e := range events {
			got = append(got, e.Type)
			if e.Type == "response.function_call_arguments.delta" {
				args += e.Delta
			}
		}
		want := append(append(append(head, text...), call...), "response.completed")
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("events (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]any{"cmd": modelserver.ToolCommand}, mustJSON(t, args)); diff != "" {
			t.Errorf("streamed arguments (-want +got):\n%s", diff)
		}
		done := events[len(events)-2].Item
		if done["type"] != "function_call" || done["name"] != "exec_command" || done["call_id"] == "" || done["arguments"] != args {
			t.Errorf("output_item.done item %v, want the whole exec_command call", done)
		}
		last := events[len(events)-1].Response
		if last.Status != "completed" || last.Model != "gpt-5.5" || len(last.Output) != 2 {
			t.Errorf("completed response %+v, want gpt-5.5 with two output items", last)
		}
		if diff := cmp.Diff(wantResponsesUsage, last.Usage); diff != "" {
			t.Errorf("usage (-want +got):\n%s", diff)
		}
	})

	t.Run("after the tool result", func(t *testing.T) {
		events := readResponses(t, post(t, url+"/v1/responses", responsesBody(true, 1)))
		var got []string
		for _, e := range events {
			got = append(got, e.Type)
		}
		if diff := cmp.Diff(append(append(head, text...), "response.completed"), got); diff != "" {
			t.Fatalf("events (-want +got):\n%s", diff)
		}
		msg := events[len(events)-2].Item
		want := map[string]any{"type": "output_text", "text": modelserver.DoneText, "annotations": []any{}}
		if content, _ := msg["content"].([]any); len(content) != 1 || !cmp.Equal(want, content[0]) {
			t.Errorf("message item %v, want one output_text %q", msg, modelserver.DoneText)
		}
		if diff := cmp.Diff(wantResponsesUsage, events[len(events)-1].Response.Usage); diff != "" {
			t.Errorf("usage (-want +got):\n%s", diff)
		}
	})

	if reqs := srv.Requests(); len(reqs) != 2 || reqs[0].Turn != 0 || reqs[1].Turn != 1 || reqs[1].ToolResults != 1 {
		t.Errorf("Requests() = %+v, want turns 0 and 1", reqs)
	}
}

func TestResponsesNotStreaming(t *testing.T) {
	_, url := start(t, scenario(t, modelserver.ScenarioText))
	var got struct {
		Object string           `json:"object"`
		Status string           `json:"status"`
		Output []map[string]any `json:"output"`
		Usage  map[string]any   `json:"usage"`
	}
	decodeJSON(t, post(t, url+"/responses", responsesBody(false, 0)), http.StatusOK, &got)
	if got.Object != "response" || got.Status != "completed" || len(got.Output) != 1 || got.Output[0]["type"] != "message" {
		t.Errorf("got %+v, want a completed response with one message", got)
	}
	if diff := cmp.Diff(wantResponsesUsage, got.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}

func TestResponsesError(t *testing.T) {
	_, url := start(t, modelserver.Script{Turns: []modelserver.Turn{{Error: &modelserver.Failure{Status: 503, Message: "down"}}}})
	var got map[string]any
	decodeJSON(t, post(t, url+"/v1/responses", responsesBody(true, 0)), http.StatusServiceUnavailable, &got)
	want := map[string]any{"error": map[string]any{"message": "down", "type": "server_error", "param": nil, "code": nil}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("error body (-want +got):\n%s", diff)
	}
}

// TestResponsesNamespacedTool: Codex offers an MCP server's tools as a
// namespace; a turn naming the tool calls it by namespace and name, as
// Codex requires.
func TestResponsesNamespacedTool(t *testing.T) {
	_, url := start(t, modelserver.Script{Turns: []modelserver.Turn{{Tool: "probe", Input: map[string]any{"word": "hi"}}, {Text: "done"}}})
	body := responsesBody(false, 0)
	body["tools"] = append(body["tools"].([]any), map[string]any{"type": "namespace", "name": "mcp__berth_probe",
		"tools": []any{map[string]any{"type": "function", "name": "probe", "parameters": map[string]any{"type": "object"}}}})
	var got struct {
		Output []map[string]any `json:"output"`
	}
	decodeJSON(t, post(t, url+"/v1/responses", body), http.StatusOK, &got)
	if len(got.Output) != 1 || got.Output[0]["type"] != "function_call" || got.Output[0]["namespace"] != "mcp__berth_probe" ||
		got.Output[0]["name"] != "probe" || got.Output[0]["arguments"] != `{"word":"hi"}` {
		t.Errorf("output = %v, want a call of probe in namespace mcp__berth_probe", got.Output)
	}
}
