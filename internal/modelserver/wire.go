package modelserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// decode reads the request body as JSON into v, unknown fields allowed:
// the CLIs send far more than the server reads.
func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return fmt.Errorf("modelserver: read request: %w", err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("modelserver: decode request: %w", err)
	}
	return nil
}

// writeJSON answers with one JSON document.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // a client gone mid-answer is no error of ours
}

// stream writes server-sent events, each flushed as soon as it is written
// so the CLI sees it at once. Nothing is ever compressed: the Go server
// compresses only when a handler asks it to.
type stream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error // the first write error; later events are dropped
}

// startStream answers 200 with an event stream; the body goes out chunked
// because no length is set.
func startStream(w http.ResponseWriter) *stream {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &stream{w: w, rc: http.NewResponseController(w)}
}

// event writes one event: "event: name" (omitted when name is empty) and
// "data: " with v as JSON.
func (s *stream) event(name string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		s.fail(err)
		return
	}
	s.raw(name, string(data))
}

// raw writes one event whose data is given as is.
func (s *stream) raw(name, data string) {
	if s.err != nil {
		return
	}
	if name != "" {
		data = "event: " + name + "\ndata: " + data + "\n\n"
	} else {
		data = "data: " + data + "\n\n"
	}
	if _, err := io.WriteString(s.w, data); err != nil {
		s.fail(err)
		return
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.fail(err)
	}
}

func (s *stream) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// openAIError is OpenAI's error body; OpenAI-compatible clients (and the
// server's own 404 and 405) use it.
func openAIError(message string, status int) any {
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	return map[string]any{"error": map[string]any{
		"message": message, "type": typ, "param": nil, "code": nil,
	}}
}
