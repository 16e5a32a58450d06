package modelserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
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
	w    http.ResponseWriter
	rc   *http.ResponseController
	ctx  context.Context // the request's: a client gone ends the pace's waits
	pace Pace
	sent int   // events written
	err  error // the first write error; later events are dropped
}

// startStream answers 200 with an event stream; the body goes out chunked
// because no length is set.
func (s *Server) startStream(w http.ResponseWriter, r *http.Request) *stream {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &stream{w: w, rc: http.NewResponseController(w), ctx: r.Context(), pace: s.pace}
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
	if err := s.wait(); err != nil {
		s.fail(err)
		return
	}
	s.sent++
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

// wait holds the next event back as the pace says.
func (s *stream) wait() error {
	d := s.pace.Every
	if s.sent == 0 {
		d = s.pace.First
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
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
