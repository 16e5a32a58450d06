package modelserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// geminiRequest is what the server reads of a generateContent request.
type geminiRequest struct {
	Contents []struct {
		Role  string `json:"role"`
		Parts []struct {
			Text             *string         `json:"text"`
			Thought          bool            `json:"thought"`
			FunctionCall     json.RawMessage `json:"functionCall"`
			FunctionResponse *struct {
				ID string `json:"id"`
			} `json:"functionResponse"`
		} `json:"parts"`
	} `json:"contents"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name                 string          `json:"name"`
			Parameters           json.RawMessage `json:"parameters"`
			ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
	} `json:"generationConfig"`
}

// conversation counts the functionResponse parts (once per id) and the
// model's finished answers (text, not thought, and no functionCall), reads
// the user's texts (a content without a role is the user's), lists the
// declared functions and notes a request for JSON (the router's call).
func (q geminiRequest) conversation(model string, stream bool) conversation {
	c := conversation{model: model, stream: stream}
	var answers finished
	results := map[string]bool{} // ids of the functionResponse parts counted
	for _, content := range q.Contents {
		text, call := false, false
		for _, p := range content.Parts {
			switch {
			case p.FunctionResponse != nil:
				// Gemini CLI 0.61.0 sends each result of a resumed
				// session's earlier tasks twice, under the call's id.
				if id := p.FunctionResponse.ID; id == "" || !results[id] {
					c.toolResults++
					results[id] = true
				}
			case len(p.FunctionCall) > 0:
				call = true
			case p.Text != nil && !p.Thought && (content.Role == "user" || content.Role == ""):
				c.userTexts = append(c.userTexts, *p.Text)
			case p.Text != nil && !p.Thought:
				text = text || *p.Text != ""
			}
		}
		if content.Role == "model" {
			answers.model(text, call)
		} else {
			answers.other()
		}
	}
	c.answers = answers.count()
	for _, t := range q.Tools {
		for _, f := range t.FunctionDeclarations {
			sc := f.ParametersJSONSchema
			if len(sc) == 0 {
				sc = f.Parameters
			}
			c.tools = append(c.tools, tool{name: f.Name, schema: sc})
		}
	}
	if g := q.GenerationConfig; g.ResponseMimeType == "application/json" {
		c.jsonSchema = g.ResponseJSONSchema
		if len(c.jsonSchema) == 0 {
			c.jsonSchema = g.ResponseSchema
		}
		if len(c.jsonSchema) == 0 {
			c.jsonSchema = json.RawMessage(`{}`)
		}
	}
	return c
}

// gemini serves POST …/models/{model}:streamGenerateContent (SSE with
// alt=sse, else a JSON array), :generateContent and :countTokens.
func (s *Server) gemini(w http.ResponseWriter, r *http.Request, rec *Request) {
	rec.Dialect = Gemini
	last := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	model, method, _ := strings.Cut(last, ":")
	var q geminiRequest
	if err := decode(r, &q); err != nil {
		s.geminiFail(w, rec, &Failure{Status: http.StatusBadRequest, Message: err.Error()})
		return
	}
	switch method {
	case "countTokens":
		rec.Model, rec.Status = model, http.StatusOK
		writeJSON(w, rec.Status, obj{"totalTokens": s.usage.prompt()})
		return
	case "streamGenerateContent", "generateContent":
	default:
		rec.Model = model
		s.geminiFail(w, rec, &Failure{Status: http.StatusNotFound, Message: "modelserver: no method " + method})
		return
	}
	stream := method == "streamGenerateContent"
	rep := s.answer(q.conversation(model, stream), rec)
	if rep.fail != nil {
		s.geminiFail(w, rec, rep.fail)
		return
	}
	rec.Status = http.StatusOK
	parts := []obj{}
	if rep.text != "" {
		parts = append(parts, obj{"text": rep.text})
	}
	if rep.call != nil {
		parts = append(parts, obj{"functionCall": obj{"name": rep.call.name, "args": rep.call.args}})
	}
	u := s.usage
	resp := obj{
		"candidates": []obj{{"content": obj{"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": obj{"promptTokenCount": u.prompt(), "candidatesTokenCount": u.Output,
			"cachedContentTokenCount": u.CacheRead, "totalTokenCount": u.prompt() + u.Output},
		"modelVersion": model,
		"responseId":   fmt.Sprintf("mock%04d", s.seq.Add(1)),
	}
	switch {
	case !stream:
		writeJSON(w, http.StatusOK, resp)
	case r.URL.Query().Get("alt") == "sse":
		s.startStream(w, r).event("", resp) // one event carries the whole answer
	default:
		writeJSON(w, http.StatusOK, []obj{resp}) // streaming without SSE is a JSON array
	}
}

// geminiFail answers with Gemini's error body.
func (s *Server) geminiFail(w http.ResponseWriter, rec *Request, f *Failure) {
	rec.Status = f.Status
	writeJSON(w, f.Status, obj{"error": obj{"code": f.Status, "message": f.Message, "status": geminiStatus(f.Status)}})
}

// geminiStatus is the canonical status Google's APIs send with status.
func geminiStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}
