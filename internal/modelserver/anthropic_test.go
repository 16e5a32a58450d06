package modelserver_test

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/modelserver"
)

// anthropicBody is a Messages request as Claude Code sends it: the shell
// tool offered, and results (if any) as user tool_result blocks.
func anthropicBody(stream bool, results int) map[string]any {
	msgs := []any{map[string]any{"role": "user", "content": "Create f.txt containing hi and commit it"}}
	for i := range results {
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": []any{map[string]any{
				"type": "tool_use", "id": "toolu_" + string(rune('a'+i)), "name": "Bash", "input": map[string]any{}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{
				"type": "tool_result", "tool_use_id": "toolu_" + string(rune('a'+i)), "content": "ok"}}})
	}
	return map[string]any{
		"model": "claude-sonnet-4-5", "stream": stream, "max_tokens": 32000, "messages": msgs,
		"tools": []any{
			map[string]any{"name": "Read", "input_schema": map[string]any{"type": "object"}},
			map[string]any{"name": "Bash", "input_schema": bashSchema},
		},
	}
}

// anthropicStream is the parts of a Messages stream the tests check.
type anthropicStream struct {
	names  []string
	start  map[string]any // message_start's usage
	delta  map[string]any // message_delta's usage
	stop   string
	blocks []map[string]any // content_block_start blocks, with text and input filled in from deltas
}

func readAnthropic(t *testing.T, resp *http.Response) anthropicStream {
	t.Helper()
	var out anthropicStream
	for _, e := range readEvents(t, resp) {
		out.names = append(out.names, e.name)
		var ev struct {
			Type    string `json:"type"`
			Message struct {
				Usage map[string]any `json:"usage"`
			} `json:"message"`
			ContentBlock map[string]any `json:"content_block"`
			Delta        struct {
				Type        string `json:"type"`
				Text        string `json:"text"`
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			} `json:"delta"`
			Usage map[string]any `json:"usage"`
		}
		e.decode(t, &ev)
		if ev.Type != e.name {
			t.Errorf("event %q carries type %q", e.name, ev.Type)
		}
		switch ev.Type {
		case "message_start":
			out.start = ev.Message.Usage
		case "content_block_start":
			out.blocks = append(out.blocks, ev.ContentBlock)
		case "content_block_delta":
			b := out.blocks[len(out.blocks)-1]
			switch ev.Delta.Type {
			case "text_delta":
				b["text"] = b["text"].(string) + ev.Delta.Text
			case "input_json_delta":
				b["input"] = mustJSON(t, ev.Delta.PartialJSON)
			}
		case "message_delta":
			out.delta, out.stop = ev.Usage, ev.Delta.StopReason
		}
	}
	return out
}

func TestAnthropicStream(t *testing.T) {
	srv, url := start(t, scenario(t, modelserver.ScenarioTool))
	blockEvents := []string{"content_block_start", "content_block_delta", "content_block_stop"}
	wantUsage := func(output float64) map[string]any {
		return map[string]any{"input_tokens": 120.0, "output_tokens": output,
			"cache_creation_input_tokens": 5.0, "cache_read_input_tokens": 30.0}
	}

	t.Run("tool call", func(t *testing.T) {
		got := readAnthropic(t, post(t, url+"/v1/messages?beta=true", anthropicBody(true, 0), "x-api-key", "sk-ant-mock"))
		wantNames := append(append(append([]string{"message_start", "ping"}, blockEvents...), blockEvents...), "message_delta", "message_stop")
		if diff := cmp.Diff(wantNames, got.names); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(wantUsage(1), got.start); diff != "" {
			t.Errorf("message_start usage (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]any{"output_tokens": 17.0}, got.delta); diff != "" {
			t.Errorf("message_delta usage (-want +got):\n%s", diff)
		}
		if got.stop != "tool_use" {
			t.Errorf("stop_reason %q, want tool_use", got.stop)
		}
		if len(got.blocks) != 2 {
			t.Fatalf("blocks %v, want text and tool_use", got.blocks)
		}
		if b := got.blocks[0]; b["type"] != "text" || b["text"] != modelserver.ToolPreface {
			t.Errorf("block 0 = %v, want text %q", b, modelserver.ToolPreface)
		}
		call := got.blocks[1]
		if call["type"] != "tool_use" || call["name"] != "Bash" || len(call["id"].(string)) < len("toolu_x") {
			t.Errorf("block 1 = %v, want a tool_use of Bash with an id", call)
		}
		if diff := cmp.Diff(wantArgs, call["input"]); diff != "" {
			t.Errorf("tool input (-want +got):\n%s", diff)
		}
	})

	t.Run("after the tool result", func(t *testing.T) {
		got := readAnthropic(t, post(t, url+"/v1/messages", anthropicBody(true, 1)))
		wantNames := append(append([]string{"message_start", "ping"}, blockEvents...), "message_delta", "message_stop")
		if diff := cmp.Diff(wantNames, got.names); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		want := []map[string]any{{"type": "text", "text": modelserver.DoneText}}
		if diff := cmp.Diff(want, got.blocks); diff != "" {
			t.Errorf("blocks (-want +got):\n%s", diff)
		}
		if got.stop != "end_turn" {
			t.Errorf("stop_reason %q, want end_turn", got.stop)
		}
	})

	reqs := srv.Requests()
	prompt := []modelserver.Text{modelserver.TextOf("Create f.txt containing hi and commit it")}
	want := []modelserver.Request{
		{Method: "POST", Path: "/v1/messages", Dialect: modelserver.Anthropic, Model: "claude-sonnet-4-5", Stream: true,
			Turn: 0, UserTexts: prompt, Credential: "X-Api-Key", Status: 200},
		{Method: "POST", Path: "/v1/messages", Dialect: modelserver.Anthropic, Model: "claude-sonnet-4-5", Stream: true,
			ToolResults: 1, Turn: 1, UserTexts: prompt, Status: 200},
	}
	if diff := cmp.Diff(want, reqs); diff != "" {
		t.Errorf("Requests() (-want +got):\n%s", diff)
	}
}

func TestAnthropicNotStreaming(t *testing.T) {
	_, url := start(t, scenario(t, modelserver.ScenarioTool))
	var got struct {
		Type       string           `json:"type"`
		Role       string           `json:"role"`
		Model      string           `json:"model"`
		Content    []map[string]any `json:"content"`
		StopReason string           `json:"stop_reason"`
		Usage      map[string]any   `json:"usage"`
	}
	decodeJSON(t, post(t, url+"/v1/messages", anthropicBody(false, 0)), http.StatusOK, &got)
	if got.Type != "message" || got.Role != "assistant" || got.Model != "claude-sonnet-4-5" || got.StopReason != "tool_use" {
		t.Errorf("message = %+v, want an assistant message of claude-sonnet-4-5 stopping for tool_use", got)
	}
	if len(got.Content) != 2 || got.Content[1]["name"] != "Bash" || !cmp.Equal(got.Content[1]["input"], wantArgs) {
		t.Errorf("content = %v, want text then a Bash call with %v", got.Content, wantArgs)
	}
	want := map[string]any{"input_tokens": 120.0, "output_tokens": 17.0, "cache_creation_input_tokens": 5.0, "cache_read_input_tokens": 30.0}
	if diff := cmp.Diff(want, got.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}

func TestAnthropicError(t *testing.T) {
	srv, url := start(t, scenario(t, modelserver.ScenarioError))
	for _, stream := range []bool{true, false} {
		var got map[string]any
		decodeJSON(t, post(t, url+"/v1/messages", anthropicBody(stream, 0)), http.StatusBadRequest, &got)
		want := map[string]any{"type": "error", "error": map[string]any{
			"type": "invalid_request_error", "message": modelserver.FailureMessage}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("stream=%v: error body (-want +got):\n%s", stream, diff)
		}
	}
	for _, r := range srv.Requests() {
		if r.Status != http.StatusBadRequest || r.Turn != 0 {
			t.Errorf("recorded %+v, want status 400 at turn 0", r)
		}
	}
}

func TestAnthropicExtras(t *testing.T) {
	srv, url := start(t, scenario(t, modelserver.ScenarioText))
	var count map[string]any
	decodeJSON(t, post(t, url+"/v1/messages/count_tokens", anthropicBody(false, 0)), http.StatusOK, &count)
	if diff := cmp.Diff(map[string]any{"input_tokens": 155.0}, count); diff != "" {
		t.Errorf("count_tokens (-want +got):\n%s", diff)
	}
	resp, err := http.Head(url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD / = %d, want 200", resp.StatusCode)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[1].Method != "HEAD" || reqs[1].Status != 200 {
		t.Errorf("Requests() = %+v, want count_tokens then HEAD", reqs)
	}
}

// TestNamedToolTurn: a turn naming a tool calls the first tool offered
// whose name ends in it (an MCP server's, as the CLI prefixes it), with
// the turn's input; a request offering none gets a sentence instead.
func TestNamedToolTurn(t *testing.T) {
	script := modelserver.Script{Turns: []modelserver.Turn{{Tool: "probe", Input: map[string]any{"word": "hi"}}, {Text: "done"}}}
	_, url := start(t, script)
	body := anthropicBody(false, 0)
	body["tools"] = append(body["tools"].([]any), map[string]any{"name": "mcp__berth_probe__probe", "input_schema": map[string]any{"type": "object"}})
	var got struct {
		Content    []map[string]any `json:"content"`
		StopReason string           `json:"stop_reason"`
	}
	decodeJSON(t, post(t, url+"/v1/messages", body), http.StatusOK, &got)
	if got.StopReason != "tool_use" || len(got.Content) != 1 || got.Content[0]["name"] != "mcp__berth_probe__probe" ||
		!cmp.Equal(got.Content[0]["input"], map[string]any{"word": "hi"}) {
		t.Errorf("content = %v (%s), want a call of mcp__berth_probe__probe with its input", got.Content, got.StopReason)
	}
	decodeJSON(t, post(t, url+"/v1/messages", anthropicBody(false, 0)), http.StatusOK, &got)
	if got.StopReason == "tool_use" || len(got.Content) != 1 || got.Content[0]["text"] != "mock: no tool named *probe offered" {
		t.Errorf("without the tool: %v", got.Content)
	}
}
