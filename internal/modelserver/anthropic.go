package modelserver

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// obj is a JSON object as the server writes it.
type obj = map[string]any

// anthropicRequest is what the server reads of a Messages request.
type anthropicRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"` // a string, or a list of blocks
	} `json:"messages"`
	Tools []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
}

// conversation counts the user's tool_result blocks and the assistant's
// finished answers (text and no tool_use), reads the user's texts and
// lists the tools.
func (q anthropicRequest) conversation() conversation {
	c := conversation{model: q.Model, stream: q.Stream}
	var answers finished
	for _, m := range q.Messages {
		if m.Role == "user" {
			c.userTexts = append(c.userTexts, contentTexts(m.Content, "text")...)
		}
		var blocks []struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(m.Content, &blocks) // plain string content has none
		call := false
		for _, b := range blocks {
			switch b.Type {
			case "tool_result":
				c.toolResults++
			case "tool_use":
				call = true
			}
		}
		if m.Role == "assistant" {
			answers.model(hasText(contentTexts(m.Content, "text")), call)
		} else {
			answers.other()
		}
	}
	c.answers = answers.count()
	for _, t := range q.Tools {
		c.tools = append(c.tools, tool{name: t.Name, schema: t.InputSchema})
	}
	return c
}

// anthropic serves POST …/v1/messages, streaming or not.
func (s *Server) anthropic(w http.ResponseWriter, r *http.Request, rec *Request) {
	rec.Dialect = Anthropic
	var q anthropicRequest
	if err := decode(r, &q); err != nil {
		s.anthropicError(w, rec, &Failure{Status: http.StatusBadRequest, Message: err.Error()})
		return
	}
	rep := s.answer(q.conversation(), rec)
	if rep.fail != nil {
		s.anthropicError(w, rec, rep.fail)
		return
	}
	rec.Status = http.StatusOK
	id := fmt.Sprintf("msg_mock%04d", s.seq.Add(1))
	u := s.usage
	content := []obj{}
	if rep.text != "" {
		content = append(content, obj{"type": "text", "text": rep.text})
	}
	stop := "end_turn"
	if rep.call != nil {
		stop = "tool_use"
		content = append(content, obj{"type": "tool_use", "id": "toolu_" + rep.call.id, "name": rep.call.name, "input": rep.call.args})
	}
	usage := func(output int) obj {
		return obj{"input_tokens": u.Input, "output_tokens": output,
			"cache_creation_input_tokens": u.CacheWrite, "cache_read_input_tokens": u.CacheRead}
	}
	if !q.Stream {
		writeJSON(w, http.StatusOK, obj{"id": id, "type": "message", "role": "assistant", "model": q.Model,
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage(u.Output)})
		return
	}
	st := s.startStream(w, r)
	// message_start carries the prompt's usage and a placeholder output of
	// 1, as Anthropic's does; message_delta carries the real output.
	st.event("message_start", obj{"type": "message_start", "message": obj{
		"id": id, "type": "message", "role": "assistant", "model": q.Model, "content": []obj{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usage(1)}})
	st.event("ping", obj{"type": "ping"})
	for i, block := range content {
		var start, delta obj
		if block["type"] == "text" {
			start = obj{"type": "text", "text": ""}
			delta = obj{"type": "text_delta", "text": block["text"]}
		} else {
			start = obj{"type": "tool_use", "id": block["id"], "name": block["name"], "input": obj{}}
			delta = obj{"type": "input_json_delta", "partial_json": rep.call.argsJSON()}
		}
		st.event("content_block_start", obj{"type": "content_block_start", "index": i, "content_block": start})
		st.event("content_block_delta", obj{"type": "content_block_delta", "index": i, "delta": delta})
		st.event("content_block_stop", obj{"type": "content_block_stop", "index": i})
	}
	st.event("message_delta", obj{"type": "message_delta",
		"delta": obj{"stop_reason": stop, "stop_sequence": nil}, "usage": obj{"output_tokens": u.Output}})
	st.event("message_stop", obj{"type": "message_stop"})
}

// anthropicCountTokens serves POST …/v1/messages/count_tokens: the whole
// prompt, cache reads and writes included. No CLI was seen calling it.
func (s *Server) anthropicCountTokens(w http.ResponseWriter, r *http.Request, rec *Request) {
	rec.Dialect = Anthropic
	var q anthropicRequest
	if err := decode(r, &q); err != nil {
		s.anthropicError(w, rec, &Failure{Status: http.StatusBadRequest, Message: err.Error()})
		return
	}
	rec.Model = q.Model
	rec.Status = http.StatusOK
	writeJSON(w, rec.Status, obj{"input_tokens": s.usage.prompt() + s.usage.CacheWrite})
}

// anthropicError answers with Anthropic's error body.
func (s *Server) anthropicError(w http.ResponseWriter, rec *Request, f *Failure) {
	rec.Status = f.Status
	writeJSON(w, f.Status, obj{"type": "error", "error": obj{"type": anthropicErrorType(f.Status), "message": f.Message}})
}

// anthropicErrorType is the error type Anthropic sends with status.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}
