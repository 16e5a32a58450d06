package modelserver_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/modelserver"
)

// A session's history in no dialect: the user's prompts, the model's
// replies (text, a shell call, or both) and the calls' results, in order.
type (
	prompt string
	said   struct{ text, command string }
	result string
)

// sessionScript plays two tasks; preface, when not empty, is said
// before each call (as in the tool scenario), so the model's replies
// with a call also hold text.
func sessionScript(preface string) modelserver.Script {
	return modelserver.Script{Turns: []modelserver.Turn{
		{Text: preface, Command: "c1"},
		{Text: "first done"},
		{Text: preface, Command: "c2"},
		{Text: "second done"},
	}}
}

// sessionDialect renders a history as one CLI sends it and reads what the
// server answered.
type sessionDialect struct {
	name, path string
	body       func(history []any) map[string]any
	read       func(t *testing.T, resp *http.Response) said
}

// TestResumedSession: a CLI that resumes a finished conversation with a
// new prompt gets the turn after the previous task's answer, in every
// dialect; a fresh conversation plays as before, and a retry of the same
// request gets the same turn.
func TestResumedSession(t *testing.T) {
	for _, preface := range []string{"", "I'll run it."} {
		c1, c2 := said{preface, "c1"}, said{preface, "c2"}
		task1 := []any{prompt("Create f.txt"), c1, result("ok 1"), said{"first done", ""}}
		task2 := []any{prompt("Now commit it"), c2, result("ok 2"), said{"second done", ""}}
		steps := []struct {
			name             string
			history          []any
			want             said
			results, answers int
			turn             int
		}{
			{"fresh", task1[:1], c1, 0, 0, 0},
			{"after c1", task1[:3], said{"first done", ""}, 1, 0, 1},
			{"resumed", append(task1[:4:4], task2[0]), c2, 1, 1, 2},
			{"resumed, retried", append(task1[:4:4], task2[0]), c2, 1, 1, 2},
			{"after c2", append(task1[:4:4], task2[:3]...), said{"second done", ""}, 2, 1, 3},
			{"resumed past the end", append(append(task1[:4:4], task2...), prompt("And push it")), said{"second done", ""}, 2, 2, 3},
		}
		for _, d := range sessionDialects() {
			t.Run(fmt.Sprintf("%s/preface=%q", d.name, preface), func(t *testing.T) {
				srv, url := start(t, sessionScript(preface))
				for _, st := range steps {
					if got := d.read(t, post(t, url+d.path, d.body(st.history))); got != st.want {
						t.Errorf("%s: said %+v, want %+v", st.name, got, st.want)
					}
				}
				// What each request was answered with, and why.
				type decision struct{ ToolResults, Answers, Turn int }
				var got, want []decision
				for _, r := range srv.Requests() {
					got = append(got, decision{r.ToolResults, r.Answers, r.Turn})
				}
				for _, st := range steps {
					want = append(want, decision{st.results, st.answers, st.turn})
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("recorded decisions (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func sessionDialects() []sessionDialect {
	return []sessionDialect{
		{"anthropic", "/v1/messages?beta=true", claudeSession, func(t *testing.T, resp *http.Response) said {
			var out said
			for _, b := range readAnthropic(t, resp).blocks {
				switch b["type"] {
				case "text":
					out.text = b["text"].(string)
				case "tool_use":
					out.command, _ = b["input"].(map[string]any)["command"].(string)
				}
			}
			return out
		}},
		{"chat", "/v1/chat/completions", piSession, func(t *testing.T, resp *http.Response) said {
			got := readChat(t, resp)
			out := said{text: got.content}
			if got.args != "" {
				out.command, _ = mustJSON(t, got.args)["command"].(string)
			}
			return out
		}},
		{"responses", "/v1/responses", codexSession, func(t *testing.T, resp *http.Response) said {
			events := readResponses(t, resp)
			var out said
			for _, it := range events[len(events)-1].Response.Output {
				switch it["type"] {
				case "message":
					out.text, _ = it["content"].([]any)[0].(map[string]any)["text"].(string)
				case "function_call":
					out.command, _ = mustJSON(t, it["arguments"].(string))["cmd"].(string)
				}
			}
			return out
		}},
		{"gemini", "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", geminiSession, func(t *testing.T, resp *http.Response) said {
			events := readEvents(t, resp)
			if len(events) != 1 {
				t.Fatalf("%d events, want 1", len(events))
			}
			var got geminiResponse
			events[0].decode(t, &got)
			var out said
			for _, p := range got.parts(t) {
				if text, ok := p["text"].(string); ok {
					out.text = text
				}
				if call, ok := p["functionCall"].(map[string]any); ok {
					out.command, _ = call["args"].(map[string]any)["command"].(string)
				}
			}
			return out
		}},
	}
}

// claudeSession is a Messages request as Claude Code sends a resumed
// session: the prompt after a system reminder, each reply one assistant
// message (text block, then tool_use), results as tool_result blocks.
func claudeSession(history []any) map[string]any {
	text := func(s string) map[string]any { return map[string]any{"type": "text", "text": s} }
	var msgs []any
	calls := 0
	for _, h := range history {
		switch h := h.(type) {
		case prompt:
			msgs = append(msgs, map[string]any{"role": "user", "content": []any{
				text("<system-reminder>\nAs you answer the user's questions, you can use the following context.\n</system-reminder>"), text(string(h))}})
		case said:
			var blocks []any
			if h.text != "" {
				blocks = append(blocks, text(h.text))
			}
			if h.command != "" {
				calls++
				blocks = append(blocks, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", calls), "name": "Bash",
					"input": map[string]any{"command": h.command, "description": h.command}})
			}
			msgs = append(msgs, map[string]any{"role": "assistant", "content": blocks})
		case result:
			msgs = append(msgs, map[string]any{"role": "user", "content": []any{map[string]any{
				"type": "tool_result", "tool_use_id": fmt.Sprintf("toolu_%d", calls), "content": string(h), "is_error": false}}})
		}
	}
	return map[string]any{"model": "claude-sonnet-4-5", "stream": true, "max_tokens": 32000, "messages": msgs,
		"system": []any{text("You are Claude Code.")}, "thinking": map[string]any{"type": "disabled"},
		"tools": []any{
			map[string]any{"name": "Read", "input_schema": map[string]any{"type": "object"}},
			map[string]any{"name": "Bash", "input_schema": bashSchema},
		}}
}

// piSession is a Chat Completions request as Pi sends a resumed session
// (OpenCode's differs only in sending the prompt as a plain string): a
// system prompt, the prompt as a text part, a reply as one assistant
// message with its text as a plain string (null when there is none) and
// its call in tool_calls, results as role "tool" messages.
func piSession(history []any) map[string]any {
	msgs := []any{map[string]any{"role": "system", "content": "You are a coding agent."}}
	calls := 0
	for _, h := range history {
		switch h := h.(type) {
		case prompt:
			msgs = append(msgs, map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": string(h)}}})
		case said:
			m := map[string]any{"role": "assistant", "content": nil}
			if h.text != "" {
				m["content"] = h.text
			}
			if h.command != "" {
				calls++
				m["tool_calls"] = []any{map[string]any{"id": fmt.Sprintf("call_%d", calls), "type": "function",
					"function": map[string]any{"name": "bash", "arguments": fmt.Sprintf(`{"command":%q}`, h.command)}}}
			}
			msgs = append(msgs, m)
		case result:
			msgs = append(msgs, map[string]any{"role": "tool", "content": string(h), "tool_call_id": fmt.Sprintf("call_%d", calls)})
		}
	}
	return map[string]any{"model": "mock-model", "stream": true, "messages": msgs,
		"stream_options": map[string]any{"include_usage": true},
		"tools":          []any{map[string]any{"type": "function", "function": fn("bash", bashSchema)}}}
}

// codexSession is a Responses request as Codex sends a resumed session:
// store false, the whole history in input after its developer and
// context messages, a reply as a message item then a function_call item
// (as the server sent them), results as function_call_output items.
func codexSession(history []any) map[string]any {
	message := func(role, kind, text string) map[string]any {
		return map[string]any{"type": "message", "role": role, "content": []any{map[string]any{"type": kind, "text": text}}}
	}
	input := []any{
		message("developer", "input_text", "You are Codex, a coding agent based on GPT-5."),
		message("developer", "input_text", "<skills_instructions>\n## Skills\n</skills_instructions>"),
		message("user", "input_text", "<environment_context>\n  <cwd>/work</cwd>\n  <shell>bash</shell>\n</environment_context>"),
	}
	calls := 0
	for _, h := range history {
		switch h := h.(type) {
		case prompt:
			input = append(input, message("user", "input_text", string(h)))
		case said:
			if h.text != "" {
				m := message("assistant", "output_text", h.text)
				m["content"].([]any)[0].(map[string]any)["annotations"] = []any{}
				m["id"], m["status"] = fmt.Sprintf("msg_mock%04d", 2*calls+2), "completed"
				input = append(input, m)
			}
			if h.command != "" {
				calls++
				input = append(input, map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_mock%d", calls), "status": "completed",
					"name": "exec_command", "arguments": fmt.Sprintf(`{"cmd":%q}`, h.command), "call_id": fmt.Sprintf("call_mock%d", calls)})
			}
		case result:
			input = append(input, map[string]any{"type": "function_call_output", "call_id": fmt.Sprintf("call_mock%d", calls), "output": string(h)})
		}
	}
	return map[string]any{"model": "gpt-5.5", "stream": true, "store": false, "input": input,
		"tool_choice": "auto", "parallel_tool_calls": false, "include": []any{"reasoning.encrypted_content"},
		"tools": []any{map[string]any{"type": "custom", "name": "apply_patch"}, execCommand}}
}

// geminiSession is a streamGenerateContent request as Gemini CLI 0.61.0
// sends a resumed session: its session context beside the first prompt,
// a reply as one model content (text part, then functionCall part),
// results as user functionResponse parts under the call's id. What came
// before the latest prompt was loaded from the session file, and there,
// as seen on a real resume, each result is repeated and the call has no
// thoughtSignature.
func geminiSession(history []any) map[string]any {
	latest := 0
	for i, h := range history {
		if _, ok := h.(prompt); ok {
			latest = i
		}
	}
	var contents []any
	calls := 0
	id := func() string { return fmt.Sprintf("run_shell_command_1796434608340_%d", calls) }
	for i, h := range history {
		switch h := h.(type) {
		case prompt:
			parts := []any{map[string]any{"text": string(h)}}
			if i == 0 {
				parts = append([]any{map[string]any{"text": "<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n</session_context>"}}, parts...)
			}
			contents = append(contents, map[string]any{"role": "user", "parts": parts})
		case said:
			var parts []any
			if h.text != "" {
				parts = append(parts, map[string]any{"text": h.text})
			}
			if h.command != "" {
				calls++
				call := map[string]any{"functionCall": map[string]any{"id": id(), "name": "run_shell_command",
					"args": map[string]any{"command": h.command, "description": h.command}}}
				if i > latest {
					call["thoughtSignature"] = "skip_thought_signature_validator"
				}
				parts = append(parts, call)
			}
			contents = append(contents, map[string]any{"role": "model", "parts": parts})
		case result:
			part := map[string]any{"functionResponse": map[string]any{"id": id(), "name": "run_shell_command",
				"response": map[string]any{"output": string(h)}}}
			parts := []any{part}
			if i < latest {
				parts = append(parts, part)
			}
			contents = append(contents, map[string]any{"role": "user", "parts": parts})
		}
	}
	return map[string]any{"contents": contents,
		"systemInstruction": map[string]any{"role": "user", "parts": []any{map[string]any{"text": "You are Gemini CLI."}}},
		"tools": []any{map[string]any{"functionDeclarations": []any{
			map[string]any{"name": "read_file", "parametersJsonSchema": map[string]any{"type": "object"}},
			map[string]any{"name": "run_shell_command", "parametersJsonSchema": bashSchema},
		}}}}
}

// TestFinishedAnswers: what counts as the model's finished answer, as
// the dialects' edge cases have it. A reply is counted whole, so one
// kept as a message per block is one reply; in the Responses input a
// message item followed by a call item before anyone else's item is no
// answer.
func TestFinishedAnswers(t *testing.T) {
	text := func(s string) map[string]any { return map[string]any{"type": "text", "text": s} }
	user := func(s string) map[string]any { return map[string]any{"role": "user", "content": s} }
	item := func(typ string, fields ...string) map[string]any {
		it := map[string]any{"type": typ}
		for i := 0; i+1 < len(fields); i += 2 {
			it[fields[i]] = fields[i+1]
		}
		return it
	}
	assistant := func(s string) map[string]any {
		return map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": s}}}
	}
	userItem := func(s string) map[string]any {
		return map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": s}}}
	}
	tests := []struct {
		name, path  string
		body        map[string]any
		wantAnswers int
	}{
		{"anthropic: text and tool_use kept as two messages", "/v1/messages", map[string]any{"model": "m", "messages": []any{
			user("go"),
			map[string]any{"role": "assistant", "content": []any{text("I'll run it.")}},
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": map[string]any{}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}}},
		}}, 0},
		{"anthropic: an answer as a string, then thinking alone", "/v1/messages", map[string]any{"model": "m", "messages": []any{
			user("go"), map[string]any{"role": "assistant", "content": "done"},
			user("again"), map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "thinking", "thinking": "hm"}}},
			user("and?"),
		}}, 1},
		{"chat: empty content is no answer", "/v1/chat/completions", map[string]any{"model": "m", "messages": []any{
			user("go"), map[string]any{"role": "assistant", "content": ""}, user("again"),
			map[string]any{"role": "assistant", "content": []any{text("done")}}, user("and?"),
		}}, 1},
		{"gemini: thought alone is no answer", "/v1beta/models/m:generateContent", map[string]any{"contents": []any{
			map[string]any{"role": "user", "parts": []any{map[string]any{"text": "go"}}},
			map[string]any{"role": "model", "parts": []any{map[string]any{"text": "hm", "thought": true}}},
			map[string]any{"role": "user", "parts": []any{map[string]any{"text": "again"}}},
			map[string]any{"role": "model", "parts": []any{map[string]any{"text": "done", "thoughtSignature": "c2ln"}}},
			map[string]any{"role": "user", "parts": []any{map[string]any{"text": "and?"}}},
		}}, 1},
		{"responses: message, reasoning, then a call", "/v1/responses", map[string]any{"model": "m", "input": []any{
			userItem("go"), assistant("I'll run it."), item("reasoning", "id", "rs_1"),
			item("function_call", "name", "exec_command", "arguments", "{}", "call_id", "c1"),
			item("function_call_output", "call_id", "c1", "output", "ok"),
		}}, 0},
		{"responses: message, then a custom_tool_call", "/v1/responses", map[string]any{"model": "m", "input": []any{
			userItem("go"), assistant("I'll patch it."), item("custom_tool_call", "name", "apply_patch", "input", "*** Begin Patch", "call_id", "c1"),
			item("custom_tool_call_output", "call_id", "c1", "output", "ok"),
		}}, 0},
		{"responses: the answer after a result, at the end", "/v1/responses", map[string]any{"model": "m", "input": []any{
			userItem("go"), item("function_call", "name", "exec_command", "arguments", "{}", "call_id", "c1"),
			item("function_call_output", "call_id", "c1", "output", "ok"), assistant("done"),
		}}, 1},
		{"responses: answers before a developer message and a user's", "/v1/responses", map[string]any{"model": "m", "input": []any{
			userItem("go"), assistant("done"), item("message", "role", "developer", "content", "be brief"),
			userItem("again"), map[string]any{"role": "assistant", "content": "done again"}, userItem("and?"),
		}}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, url := start(t, sessionScript(""))
			resp := post(t, url+tt.path, tt.body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			reqs := srv.Requests()
			if len(reqs) != 1 || reqs[0].Answers != tt.wantAnswers || reqs[0].Turn != reqs[0].ToolResults+tt.wantAnswers {
				t.Errorf("recorded %+v, want %d answers and the turn after them", reqs, tt.wantAnswers)
			}
		})
	}
}

// TestRequiredWords: a turn that requires a word answers only a
// conversation whose user turns hold it (a continued one), and answers
// any other 400 naming the word, in every dialect.
func TestRequiredWords(t *testing.T) {
	script := sessionScript("")
	script.Turns[2].Requires = []string{"MARK"}
	if err := script.Validate(); err != nil {
		t.Fatal(err)
	}
	continued := func(first string) []any {
		return []any{prompt(first), said{"", "c1"}, result("ok 1"), said{"first done", ""}, prompt("Now commit it")}
	}
	for _, d := range sessionDialects() {
		t.Run(d.name, func(t *testing.T) {
			_, url := start(t, script)
			if got := d.read(t, post(t, url+d.path, d.body(continued("MARK: create f.txt")))); got.command != "c2" {
				t.Errorf("a continued conversation holding MARK was answered %+v, want c2", got)
			}
			resp := post(t, url+d.path, d.body(continued("create f.txt")))
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "requires MARK") {
				t.Errorf("a conversation without MARK: %d %s; want 400 naming MARK", resp.StatusCode, body)
			}
		})
	}
	bad := modelserver.Script{Turns: []modelserver.Turn{{Text: "x", Requires: []string{""}}}}
	if err := bad.Validate(); err == nil {
		t.Error("a turn requiring an empty word was accepted")
	}
}
