package inference_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/modelserver"
	"berth.dev/berth/internal/runner"
)

// TestMeterReadsEveryDialect meters the scripted model server's real
// answers, each fed to the Meter in pieces of every size from one byte
// up, and compares with the usage the server reports, normalised.
func TestMeterReadsEveryDialect(t *testing.T) {
	srv := httptest.NewServer(modelserver.New(modelserver.Script{Turns: []modelserver.Turn{{Text: "hi", Command: "echo hi"}}}).Handler())
	defer srv.Close()
	bash := `[{"name":"bash","description":"run","input_schema":{"type":"object","properties":{"command":{"type":"string"}}}}]`
	cases := []struct {
		d          inference.Dialect
		path, body string
		want       runner.Usage
	}{
		{inference.Anthropic, "/v1/messages", `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"x"}],"tools":` + bash + `,"stream":%s}`,
			runner.Usage{Input: 120, CacheRead: 30, CacheWrite: 5, Output: 17}},
		{inference.OpenAIChat, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":%s}`,
			runner.Usage{Input: 120, CacheRead: 30, Output: 17}},
		{inference.OpenAIResponses, "/v1/responses", `{"model":"m","input":"x","stream":%s}`,
			runner.Usage{Input: 120, CacheRead: 30, Output: 17, Reasoning: 3}},
		{inference.Gemini, "/v1beta/models/m:%s", `{"contents":[{"role":"user","parts":[{"text":"x"}]}]}`,
			runner.Usage{Input: 120, CacheRead: 30, Output: 17}},
	}
	for _, c := range cases {
		for _, stream := range []string{"false", "true", "array"} {
			if stream == "array" && c.d != inference.Gemini {
				continue
			}
			path, body := c.path, c.body
			if c.d == inference.Gemini {
				switch stream {
				case "false":
					path = strings.Replace(path, "%s", "generateContent", 1)
				case "true":
					path = strings.Replace(path, "%s", "streamGenerateContent", 1) + "?alt=sse"
				default:
					path = strings.Replace(path, "%s", "streamGenerateContent", 1)
				}
			} else {
				body = strings.Replace(body, "%s", stream, 1)
			}
			resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			answer, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, piece := range []int{1, 7, 64, len(answer)} {
				m := inference.NewMeter(c.d, resp.Header.Get("Content-Type"))
				for r := bytes.NewReader(answer); r.Len() > 0; {
					b := make([]byte, min(piece, r.Len()))
					_, _ = r.Read(b)
					_, _ = m.Write(b)
				}
				got, ok := m.Usage()
				if diff := cmp.Diff(c.want, got); diff != "" || !ok {
					t.Errorf("%s stream=%s in pieces of %d: seen %v (-want +got):\n%s", c.d, stream, piece, ok, diff)
				}
			}
		}
	}
}

// TestMeterWithoutUsage: an answer that says nothing of usage, or is cut
// short, is reported as unmetered rather than as zero tokens.
func TestMeterWithoutUsage(t *testing.T) {
	for _, c := range []struct {
		d          inference.Dialect
		ct, answer string
	}{
		{inference.OpenAIChat, "text/event-stream", "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n"},
		{inference.Anthropic, "application/json", `{"type":"message","content":[]}`},
		{inference.Gemini, "application/json", `not json`},
		{inference.OpenAIResponses, "text/event-stream", "event: response.created\ndata: {\"response\":{\"usage\":null}}\n\n"},
	} {
		m := inference.NewMeter(c.d, c.ct)
		_, _ = m.Write([]byte(c.answer))
		if u, ok := m.Usage(); ok || u != (runner.Usage{}) {
			t.Errorf("%s %q: %+v seen=%v, want nothing seen", c.d, c.answer, u, ok)
		}
	}
	// Gemini's thoughts come on top of its candidates.
	m := inference.NewMeter(inference.Gemini, "application/json")
	_, _ = m.Write([]byte(`{"usageMetadata":{"promptTokenCount":100,"cachedContentTokenCount":40,"candidatesTokenCount":10,"thoughtsTokenCount":5}}`))
	if u, _ := m.Usage(); u != (runner.Usage{Input: 60, CacheRead: 40, Output: 15, Reasoning: 5}) {
		t.Errorf("gemini with thoughts: %+v", u)
	}
}
