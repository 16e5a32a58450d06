package modelserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// responsesRequest is what the server reads of a Responses request.
type responsesRequest struct {
	Model  string          `json:"model"`
	Stream bool            `json:"stream"`
	Input  json.RawMessage `json:"input"` // a string, or a list of items
	Tools  []responsesTool `json:"tools"`
}

// responsesTool is a tool of a Responses request: a function, or (Codex's
// MCP servers) a namespace of functions.
type responsesTool struct {
	Type       string          `json:"type"`
	Name       string          `json:"name"`
	Parameters json.RawMessage `json:"parameters"`
	Tools      []responsesTool `json:"tools"` // a namespace's
}

// conversation counts the *_call_output items (Codex replays the whole
// history in input, store:false) and the model's finished answers, reads
// the user's texts (input as one string is one) and lists the function
// tools. A finished answer is an assistant message with text that no tool
// call (a *_call item: function_call, custom_tool_call, local_shell_call…)
// follows before anyone else's item: a turn's text and its call come as a
// message item and then a function_call item.
func (q responsesRequest) conversation() conversation {
	c := conversation{model: q.Model, stream: q.Stream}
	var items []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	var one string
	switch {
	case json.Unmarshal(q.Input, &one) == nil:
		c.userTexts = []string{one}
	case json.Unmarshal(q.Input, &items) == nil:
		var answers finished
		for _, it := range items {
			message := it.Type == "" || it.Type == "message"
			switch {
			case strings.HasSuffix(it.Type, "_call_output"):
				c.toolResults++
				answers.other()
			case strings.HasSuffix(it.Type, "_call"):
				answers.model(false, true)
			case it.Type == "reasoning":
				answers.model(false, false)
			case message && it.Role == "assistant":
				answers.model(hasText(contentTexts(it.Content, "output_text")), false)
			case message && it.Role == "user":
				c.userTexts = append(c.userTexts, contentTexts(it.Content, "input_text")...)
				answers.other()
			default:
				answers.other()
			}
		}
		c.answers = answers.count()
	}
	for _, t := range q.Tools {
		switch t.Type {
		case "function":
			c.tools = append(c.tools, tool{name: t.Name, schema: t.Parameters})
		case "namespace":
			// Called as namespace and name; known here as
			// <namespace>__<name>, as the CLI lists it to the model.
			for _, f := range t.Tools {
				if f.Type == "function" {
					c.tools = append(c.tools, tool{name: t.Name + "__" + f.Name, schema: f.Parameters, namespace: t.Name, local: f.Name})
				}
			}
		}
	}
	return c
}

// openAIResponses serves POST …/responses, streaming or not.
func (s *Server) openAIResponses(w http.ResponseWriter, r *http.Request, rec *Request) {
	rec.Dialect = OpenAIResponses
	var q responsesRequest
	if err := decode(r, &q); err != nil {
		s.openAIFail(w, rec, &Failure{Status: http.StatusBadRequest, Message: err.Error()})
		return
	}
	rep := s.answer(q.conversation(), rec)
	if rep.fail != nil {
		s.openAIFail(w, rec, rep.fail)
		return
	}
	rec.Status = http.StatusOK
	u := s.usage
	n := s.seq.Add(1)
	items := []obj{}
	if rep.text != "" {
		items = append(items, obj{"id": fmt.Sprintf("msg_mock%04d", n), "type": "message", "status": "completed",
			"role": "assistant", "content": []obj{outputText(rep.text)}})
	}
	if rep.call != nil {
		fc := obj{"id": "fc_" + rep.call.id, "type": "function_call", "status": "completed",
			"call_id": "call_" + rep.call.id, "name": rep.call.name, "arguments": rep.call.argsJSON()}
		if rep.call.namespace != "" {
			fc["namespace"], fc["name"] = rep.call.namespace, rep.call.local
		}
		items = append(items, fc)
	}
	resp := func(status string, output []obj, usage any) obj {
		return obj{"id": fmt.Sprintf("resp_mock%04d", n), "object": "response", "created_at": time.Now().Unix(),
			"status": status, "model": q.Model, "output": output, "usage": usage}
	}
	usage := obj{"input_tokens": u.prompt(), "input_tokens_details": obj{"cached_tokens": u.CacheRead},
		"output_tokens": u.Output, "output_tokens_details": obj{"reasoning_tokens": u.Reasoning},
		"total_tokens": u.prompt() + u.Output}
	if !q.Stream {
		writeJSON(w, http.StatusOK, resp("completed", items, usage))
		return
	}
	st := s.startStream(w, r)
	seq := 0
	event := func(typ string, fields obj) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		st.event(typ, fields)
	}
	event("response.created", obj{"response": resp("in_progress", []obj{}, nil)})
	event("response.in_progress", obj{"response": resp("in_progress", []obj{}, nil)})
	for i, it := range items {
		id := it["id"]
		at := obj{"output_index": i, "item_id": id}
		with := func(more obj) obj {
			for k, v := range at {
				more[k] = v
			}
			return more
		}
		if it["type"] == "message" {
			event("response.output_item.added", obj{"output_index": i, "item": obj{"id": id, "type": "message",
				"status": "in_progress", "role": "assistant", "content": []obj{}}})
			event("response.content_part.added", with(obj{"content_index": 0, "part": outputText("")}))
			event("response.output_text.delta", with(obj{"content_index": 0, "delta": rep.text}))
			event("response.output_text.done", with(obj{"content_index": 0, "text": rep.text}))
			event("response.content_part.done", with(obj{"content_index": 0, "part": outputText(rep.text)}))
		} else {
			added := obj{}
			for k, v := range it {
				added[k] = v
			}
			added["status"], added["arguments"] = "in_progress", ""
			event("response.output_item.added", obj{"output_index": i, "item": added})
			event("response.function_call_arguments.delta", with(obj{"delta": rep.call.argsJSON()}))
			event("response.function_call_arguments.done", with(obj{"arguments": rep.call.argsJSON()}))
		}
		event("response.output_item.done", obj{"output_index": i, "item": it})
	}
	event("response.completed", obj{"response": resp("completed", items, usage)})
}

// outputText is a Responses output_text content part.
func outputText(text string) obj {
	return obj{"type": "output_text", "text": text, "annotations": []any{}}
}
