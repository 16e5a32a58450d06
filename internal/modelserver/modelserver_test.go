package modelserver_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/modelserver"
)

// Each event goes out in a chunk of its own, flushed at once, so the CLI
// sees it while the rest is still being written.
func TestFlushesEachEvent(t *testing.T) {
	_, url := start(t, scenario(t, modelserver.ScenarioTool))
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"Bash","input_schema":{}}]}`
	fmt.Fprintf(conn, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	br := bufio.NewReader(conn)
	for { // skip the status line and headers
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "\r\n" {
			break
		}
	}
	var chunks []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("read chunk size: %v", err)
		}
		size, err := strconv.ParseInt(strings.TrimSpace(line), 16, 64)
		if err != nil {
			t.Fatalf("chunk size %q: %v", line, err)
		}
		if size == 0 {
			break
		}
		buf := make([]byte, size+2) // the chunk and its CRLF
		if _, err := io.ReadFull(br, buf); err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, string(buf[:size]))
	}
	if len(chunks) != 10 {
		t.Errorf("got %d chunks, want the 10 events of a text and a tool block", len(chunks))
	}
	for i, c := range chunks {
		if !strings.HasPrefix(c, "event: ") || strings.Count(c, "\n\n") != 1 || !strings.HasSuffix(c, "\n\n") {
			t.Errorf("chunk %d is not exactly one event: %q", i, c)
		}
	}
}

func TestRecordsCredentialsByHeaderOnly(t *testing.T) {
	srv, url := start(t, scenario(t, modelserver.ScenarioText))
	const secret = "sk-very-secret"
	post(t, url+"/v1/messages", anthropicBody(false, 0), "x-api-key", secret, "X-Berth-Session", "sbx_7")
	post(t, url+"/v1/chat/completions", chatBody(false, 0), "Authorization", "Bearer "+secret)
	post(t, url+"/v1beta/models/m:generateContent?key="+secret, geminiBody(0))
	post(t, url+"/v1/responses", responsesBody(false, 0))
	var got []string
	for _, r := range srv.Requests() {
		got = append(got, r.Credential)
		if strings.Contains(fmt.Sprintf("%#v", r), secret) {
			t.Errorf("recorded request %+v holds the key", r)
		}
	}
	if diff := cmp.Diff([]string{"X-Api-Key", "Authorization", "key", ""}, got); diff != "" {
		t.Errorf("credentials (-want +got):\n%s", diff)
	}
	if s := srv.Requests()[0].Session; s != "sbx_7" {
		t.Errorf("Session = %q, want sbx_7", s)
	}
}

func TestUnknownRequests(t *testing.T) {
	srv, url := start(t, scenario(t, modelserver.ScenarioText))
	resp := post(t, url+"/v1/embeddings", map[string]any{"model": "m"})
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST /v1/embeddings = %d, want 404", resp.StatusCode)
	}
	get, err := http.Get(url + "/v1/messages")
	if err != nil {
		t.Fatal(err)
	}
	get.Body.Close()
	if get.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/messages = %d, want 405", get.StatusCode)
	}
	var bad map[string]any
	decodeJSON(t, post(t, url+"/v1/messages", "not an object"), http.StatusBadRequest, &bad)
	want := []modelserver.Request{
		{Method: "POST", Path: "/v1/embeddings", Turn: -1, Status: 404},
		{Method: "GET", Path: "/v1/messages", Turn: -1, Status: 405},
		{Method: "POST", Path: "/v1/messages", Dialect: modelserver.Anthropic, Turn: -1, Status: 400},
	}
	if diff := cmp.Diff(want, srv.Requests()); diff != "" {
		t.Errorf("Requests() (-want +got):\n%s", diff)
	}
}

func TestEmptyScriptFails(t *testing.T) {
	_, url := start(t, modelserver.Script{})
	var got map[string]any
	decodeJSON(t, post(t, url+"/v1/chat/completions", chatBody(true, 0)), http.StatusInternalServerError, &got)
}

func TestWithUsage(t *testing.T) {
	u := modelserver.Usage{Input: 1000, CacheRead: 200, CacheWrite: 7, Output: 50, Reasoning: 9}
	_, url := start(t, scenario(t, modelserver.ScenarioText), modelserver.WithUsage(u))
	got := readChat(t, post(t, url+"/v1/chat/completions", chatBody(true, 0)))
	want := map[string]any{"prompt_tokens": 1200.0, "completion_tokens": 50.0, "total_tokens": 1250.0,
		"prompt_tokens_details": map[string]any{"cached_tokens": 200.0}}
	if diff := cmp.Diff(want, got.usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}

// Requests made at once are all answered and recorded; run with -race.
func TestConcurrentRequests(t *testing.T) {
	srv, url := start(t, scenario(t, modelserver.ScenarioTool))
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],` +
		`"tools":[{"type":"function","function":{"name":"bash","parameters":{}}}]}`
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if err == nil && (resp.StatusCode != 200 || !strings.Contains(string(got), `"name":"bash"`)) {
				err = fmt.Errorf("status %d, body %s; want a bash call", resp.StatusCode, got)
			}
			errs <- err
		})
		wg.Go(func() { _ = srv.Requests() })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := len(srv.Requests()); n != 8 {
		t.Errorf("recorded %d requests, want 8", n)
	}
}

func TestServeStopsWithContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := modelserver.New(scenario(t, modelserver.ScenarioText))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	got := readChat(t, post(t, "http://"+ln.Addr().String()+"/v1/chat/completions", chatBody(true, 0)))
	if got.content != modelserver.HelloText {
		t.Errorf("content %q, want %q", got.content, modelserver.HelloText)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve = %v, want nil after the context ends", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after the context ended")
	}
}
