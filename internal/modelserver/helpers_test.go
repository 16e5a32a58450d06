package modelserver_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"berth.dev/berth/internal/modelserver"
)

// start serves a model server for the test on loopback.
func start(t *testing.T, script modelserver.Script, opts ...modelserver.Option) (*modelserver.Server, string) {
	t.Helper()
	s := modelserver.New(script, opts...)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts.URL
}

// scenario is a ready script, or the test fails.
func scenario(t *testing.T, name string) modelserver.Script {
	t.Helper()
	s, err := modelserver.Scenario(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// post sends body as JSON with the headers given as name, value pairs.
// It asks for gzip itself so the transport hands back the body as sent.
func post(t *testing.T, url string, body any, headers ...string) *http.Response {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept-Encoding", "gzip")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// decodeJSON reads a JSON answer with the wanted status into v.
func decodeJSON(t *testing.T, resp *http.Response, status int, v any) {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d; body %s", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
}

// event is one server-sent event.
type event struct {
	name string // empty when the event had no "event:" line
	data string
}

// decode unmarshals the event's data into v.
func (e event) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(e.data), v); err != nil {
		t.Fatalf("event %q: decode %s: %v", e.name, e.data, err)
	}
}

// readEvents checks the answer is an uncompressed, chunked event stream
// and returns its events.
func readEvents(t *testing.T, resp *http.Response) []event {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, want 200; body %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q, want text/event-stream", ct)
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "" {
		t.Errorf("Content-Encoding %q, want none", ce)
	}
	if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" || resp.ContentLength != -1 {
		t.Errorf("Transfer-Encoding %v, Content-Length %d; want chunked with no length", resp.TransferEncoding, resp.ContentLength)
	}
	var events []event
	var cur event
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" {
				events = append(events, cur)
			}
			cur = event{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data += strings.TrimPrefix(line, "data: ")
		default:
			t.Errorf("unexpected stream line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur.data != "" {
		t.Errorf("stream ends inside an event: %+v", cur)
	}
	return events
}

// names lists the events' names.
func names(events []event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.name)
	}
	return out
}

// mustJSON unmarshals s, or the test fails.
func mustJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}

// bashSchema is the shell tool schema of Claude Code, Pi and OpenCode:
// a command and a description.
var bashSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"command":     map[string]any{"type": "string"},
		"description": map[string]any{"type": "string"},
	},
	"required": []string{"command"},
}

// wantArgs are the shell arguments the tool scenario asks for with bashSchema.
var wantArgs = map[string]any{"command": modelserver.ToolCommand, "description": modelserver.ToolDescription}
