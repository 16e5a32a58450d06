package modelserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// chatRequest is what the server reads of a Chat Completions request.
type chatRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role      string            `json:"role"`
		Content   json.RawMessage   `json:"content"` // a string, or a list of parts
		ToolCalls []json.RawMessage `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

// conversation counts the role "tool" messages and the assistant's
// finished answers (text and no tool_calls), reads the user's texts and
// lists the tools.
func (q chatRequest) conversation() conversation {
	c := conversation{model: q.Model, stream: q.Stream}
	var answers finished
	for _, m := range q.Messages {
		switch m.Role {
		case "tool":
			c.toolResults++
		case "user":
			c.userTexts = append(c.userTexts, contentTexts(m.Content, "text")...)
		}
		if m.Role == "assistant" {
			answers.model(hasText(contentTexts(m.Content, "text")), len(m.ToolCalls) > 0)
		} else {
			answers.other()
		}
	}
	c.answers = answers.count()
	for _, t := range q.Tools {
		if t.Type == "function" {
			c.tools = append(c.tools, tool{name: t.Function.Name, schema: t.Function.Parameters})
		}
	}
	return c
}

// openAIChat serves POST …/chat/completions, streaming or not.
func (s *Server) openAIChat(w http.ResponseWriter, r *http.Request, rec *Request) {
	rec.Dialect = OpenAIChat
	var q chatRequest
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
	usage := obj{"prompt_tokens": u.prompt(), "completion_tokens": u.Output, "total_tokens": u.prompt() + u.Output,
		"prompt_tokens_details": obj{"cached_tokens": u.CacheRead}}
	id := fmt.Sprintf("chatcmpl-mock%04d", s.seq.Add(1))
	created := time.Now().Unix()
	finish := "stop"
	if rep.call != nil {
		finish = "tool_calls"
	}
	if !q.Stream {
		msg := obj{"role": "assistant", "content": nil}
		if rep.text != "" {
			msg["content"] = rep.text
		}
		if rep.call != nil {
			msg["tool_calls"] = []obj{{"id": "call_" + rep.call.id, "type": "function",
				"function": obj{"name": rep.call.name, "arguments": rep.call.argsJSON()}}}
		}
		writeJSON(w, http.StatusOK, obj{"id": id, "object": "chat.completion", "created": created, "model": q.Model,
			"choices": []obj{{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	st := s.startStream(w, r)
	chunk := func(delta obj, finish any) {
		st.event("", obj{"id": id, "object": "chat.completion.chunk", "created": created, "model": q.Model,
			"choices": []obj{{"index": 0, "delta": delta, "finish_reason": finish}}})
	}
	chunk(obj{"role": "assistant", "content": ""}, nil)
	if rep.text != "" {
		chunk(obj{"content": rep.text}, nil)
	}
	if rep.call != nil {
		chunk(obj{"tool_calls": []obj{{"index": 0, "id": "call_" + rep.call.id, "type": "function",
			"function": obj{"name": rep.call.name, "arguments": ""}}}}, nil)
		chunk(obj{"tool_calls": []obj{{"index": 0, "function": obj{"arguments": rep.call.argsJSON()}}}}, nil)
	}
	chunk(obj{}, finish)
	// Usage comes last in a chunk of its own with no choices, as OpenAI
	// sends it for stream_options.include_usage (both Pi and OpenCode ask).
	st.event("", obj{"id": id, "object": "chat.completion.chunk", "created": created, "model": q.Model,
		"choices": []obj{}, "usage": usage})
	st.raw("", "[DONE]")
}

// openAIFail answers with OpenAI's error body.
func (s *Server) openAIFail(w http.ResponseWriter, rec *Request, f *Failure) {
	rec.Status = f.Status
	writeJSON(w, f.Status, openAIError(f.Message, f.Status))
}
