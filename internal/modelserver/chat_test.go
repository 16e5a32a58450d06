package modelserver_test

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/modelserver"
)

// chatBody is a Chat Completions request as Pi and OpenCode send it.
func chatBody(stream bool, results int, tools ...map[string]any) map[string]any {
	msgs := []any{
		map[string]any{"role": "system", "content": "You are a coding agent."},
		map[string]any{"role": "user", "content": "Create f.txt containing hi and commit it"},
	}
	for range results {
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
				"id": "call_1", "type": "function", "function": map[string]any{"name": "bash", "arguments": "{}"}}}},
			map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "ok"})
	}
	var offered []any
	for _, t := range tools {
		offered = append(offered, map[string]any{"type": "function", "function": t})
	}
	return map[string]any{"model": "mock-model", "stream": stream, "messages": msgs, "tools": offered,
		"stream_options": map[string]any{"include_usage": true}}
}

// fn is a function tool named name with the given argument schema.
func fn(name string, schema map[string]any) map[string]any {
	return map[string]any{"name": name, "parameters": schema}
}

// chatChunk is the part of a chunk the tests read.
type chatChunk struct {
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Role      string `json:"role"`
			Content   string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage map[string]any `json:"usage"`
}

// chatStream is what a client assembles from a stream.
type chatStream struct {
	content, callID, callName, args, finish string
	usage                                   map[string]any
	chunks                                  int
}

func readChat(t *testing.T, resp *http.Response) chatStream {
	t.Helper()
	events := readEvents(t, resp)
	if len(events) < 3 || events[len(events)-1].data != "[DONE]" {
		t.Fatalf("stream %v, want chunks ending in [DONE]", events)
	}
	var out chatStream
	for i, e := range events[:len(events)-1] {
		if e.name != "" {
			t.Errorf("event %d has a name %q; Chat streams are data only", i, e.name)
		}
		var c chatChunk
		e.decode(t, &c)
		out.chunks++
		if c.Object != "chat.completion.chunk" || c.Model != "mock-model" {
			t.Errorf("chunk %d: object %q model %q", i, c.Object, c.Model)
		}
		if c.Usage != nil {
			if len(c.Choices) != 0 || i != len(events)-2 {
				t.Errorf("usage in chunk %d of %d with %d choices; want it last, with none", i, len(events)-1, len(c.Choices))
			}
			out.usage = c.Usage
		}
		for _, ch := range c.Choices {
			out.content += ch.Delta.Content
			for _, tc := range ch.Delta.ToolCalls {
				if tc.ID != "" {
					out.callID, out.callName = tc.ID, tc.Function.Name
				}
				out.args += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				out.finish = *ch.FinishReason
			}
		}
	}
	return out
}

var wantChatUsage = map[string]any{"prompt_tokens": 150.0, "completion_tokens": 17.0, "total_tokens": 167.0,
	"prompt_tokens_details": map[string]any{"cached_tokens": 30.0}}

func TestChatStream(t *testing.T) {
	srv, url := start(t, scenario(t, modelserver.ScenarioTool))

	got := readChat(t, post(t, url+"/v1/chat/completions", chatBody(true, 0, fn("read", nil), fn("bash", bashSchema)),
		"Authorization", "Bearer sk-mock", "X-Berth-Session", "sbx_1"))
	if got.content != modelserver.ToolPreface || got.callName != "bash" || got.callID == "" || got.finish != "tool_calls" {
		t.Errorf("got %+v, want the preface, a bash call with an id, finish tool_calls", got)
	}
	if diff := cmp.Diff(wantArgs, mustJSON(t, got.args)); diff != "" {
		t.Errorf("arguments (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantChatUsage, got.usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}

	got = readChat(t, post(t, url+"/v1/chat/completions", chatBody(true, 1, fn("bash", bashSchema))))
	if got.content != modelserver.DoneText || got.callName != "" || got.finish != "stop" {
		t.Errorf("after the tool result got %+v, want %q and finish stop", got, modelserver.DoneText)
	}
	if diff := cmp.Diff(wantChatUsage, got.usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}

	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].Session != "sbx_1" || reqs[0].Credential != "Authorization" || reqs[1].ToolResults != 1 {
		t.Errorf("Requests() = %+v, want the session and credential header of call 1 and a tool result in call 2", reqs)
	}
}

// A call with no shell tool (OpenCode's title call) gets text, even at a
// tool turn.
func TestChatNoShellTool(t *testing.T) {
	_, url := start(t, modelserver.Script{Turns: []modelserver.Turn{{Command: "true"}}})
	got := readChat(t, post(t, url+"/chat/completions", chatBody(true, 0, fn("read", nil))))
	if got.callName != "" || got.content == "" || got.finish != "stop" {
		t.Errorf("got %+v, want text and no call", got)
	}
}

func TestChatNotStreaming(t *testing.T) {
	_, url := start(t, scenario(t, modelserver.ScenarioTool))
	var got struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Role      string  `json:"role"`
				Content   *string `json:"content"`
				ToolCalls []struct {
					Function struct{ Name, Arguments string } `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage map[string]any `json:"usage"`
	}
	decodeJSON(t, post(t, url+"/v1/chat/completions", chatBody(false, 0, fn("bash", bashSchema))), http.StatusOK, &got)
	if got.Object != "chat.completion" || len(got.Choices) != 1 {
		t.Fatalf("got %+v, want one chat.completion choice", got)
	}
	c := got.Choices[0]
	if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].Function.Name != "bash" {
		t.Errorf("choice %+v, want one bash call", c)
	}
	if diff := cmp.Diff(wantChatUsage, got.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}

func TestChatError(t *testing.T) {
	_, url := start(t, scenario(t, modelserver.ScenarioError))
	var got map[string]any
	decodeJSON(t, post(t, url+"/v1/chat/completions", chatBody(true, 0, fn("bash", bashSchema))), http.StatusBadRequest, &got)
	want := map[string]any{"error": map[string]any{
		"message": modelserver.FailureMessage, "type": "invalid_request_error", "param": nil, "code": nil}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("error body (-want +got):\n%s", diff)
	}
}

// The shell call's arguments follow the offered tool's schema.
func TestShellArguments(t *testing.T) {
	str := map[string]any{"type": "string"}
	tests := []struct {
		name string
		tool map[string]any
		want map[string]any
	}{
		{"Pi's bash", fn("bash", map[string]any{"properties": map[string]any{"command": str}}),
			map[string]any{"command": "ls"}},
		{"Claude Code's Bash", fn("Bash", bashSchema),
			map[string]any{"command": "ls", "description": "ls"}},
		{"Codex's exec_command", fn("exec_command", map[string]any{"properties": map[string]any{"cmd": str, "workdir": str}, "required": []string{"cmd"}}),
			map[string]any{"cmd": "ls"}},
		{"an argv shell", fn("shell", map[string]any{"properties": map[string]any{"command": map[string]any{"type": "array", "items": str}}}),
			map[string]any{"command": []any{"bash", "-lc", "ls"}}},
		{"required flags", fn("run_shell_command", map[string]any{"properties": map[string]any{
			"command": str, "is_background": map[string]any{"type": "boolean"}, "dir_path": str},
			"required": []string{"command", "is_background"}}),
			map[string]any{"command": "ls", "is_background": false}},
		{"no schema", fn("bash", nil), map[string]any{"command": "ls"}},
	}
	_, url := start(t, modelserver.Script{Turns: []modelserver.Turn{{Command: "ls"}}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := readChat(t, post(t, url+"/v1/chat/completions", chatBody(true, 0, fn("read", nil), tt.tool)))
			if got.callName != tt.tool["name"] {
				t.Fatalf("called %q, want %q", got.callName, tt.tool["name"])
			}
			if diff := cmp.Diff(tt.want, mustJSON(t, got.args)); diff != "" {
				t.Errorf("arguments (-want +got):\n%s", diff)
			}
		})
	}
}
