package modelserver_test

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/modelserver"
)

// geminiBody is a generateContent request as Gemini CLI sends it: the
// shell tool declared with parametersJsonSchema, results as user
// functionResponse parts.
func geminiBody(results int) map[string]any {
	contents := []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "Create f.txt"}}}}
	for range results {
		contents = append(contents,
			map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"name": "run_shell_command", "args": map[string]any{}}}}},
			map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"name": "run_shell_command", "response": map[string]any{"output": "ok"}}}}})
	}
	return map[string]any{"contents": contents, "tools": []any{map[string]any{"functionDeclarations": []any{
		map[string]any{"name": "read_file", "parametersJsonSchema": map[string]any{"type": "object"}},
		map[string]any{"name": "run_shell_command", "parametersJsonSchema": bashSchema},
	}}}}
}

// geminiResponse is one GenerateContentResponse.
type geminiResponse struct {
	Candidates []struct {
		Content struct {
			Role  string           `json:"role"`
			Parts []map[string]any `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata map[string]any `json:"usageMetadata"`
	ModelVersion  string         `json:"modelVersion"`
}

var wantGeminiUsage = map[string]any{"promptTokenCount": 150.0, "candidatesTokenCount": 17.0,
	"cachedContentTokenCount": 30.0, "totalTokenCount": 167.0}

// parts checks r is one finished model candidate and returns its parts.
func (r geminiResponse) parts(t *testing.T) []map[string]any {
	t.Helper()
	if len(r.Candidates) != 1 || r.Candidates[0].Content.Role != "model" || r.Candidates[0].FinishReason != "STOP" {
		t.Fatalf("response %+v, want one model candidate finished with STOP", r)
	}
	if diff := cmp.Diff(wantGeminiUsage, r.UsageMetadata); diff != "" {
		t.Errorf("usageMetadata (-want +got):\n%s", diff)
	}
	return r.Candidates[0].Content.Parts
}

func TestGeminiStream(t *testing.T) {
	srv, url := start(t, scenario(t, modelserver.ScenarioTool))
	endpoint := url + "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"

	events := readEvents(t, post(t, endpoint, geminiBody(0), "x-goog-api-key", "mock-key"))
	if len(events) != 1 || events[0].name != "" {
		t.Fatalf("events %v, want one data-only event", events)
	}
	var got geminiResponse
	events[0].decode(t, &got)
	want := []map[string]any{
		{"text": modelserver.ToolPreface},
		{"functionCall": map[string]any{"name": "run_shell_command", "args": wantArgs}},
	}
	if diff := cmp.Diff(want, got.parts(t)); diff != "" {
		t.Errorf("parts (-want +got):\n%s", diff)
	}
	if got.ModelVersion != "gemini-2.5-pro" {
		t.Errorf("modelVersion %q, want gemini-2.5-pro", got.ModelVersion)
	}

	events = readEvents(t, post(t, endpoint, geminiBody(1)))
	got = geminiResponse{}
	events[0].decode(t, &got)
	if diff := cmp.Diff([]map[string]any{{"text": modelserver.DoneText}}, got.parts(t)); diff != "" {
		t.Errorf("parts after the result (-want +got):\n%s", diff)
	}

	prompt := []modelserver.Text{modelserver.TextOf("Create f.txt")}
	want2 := []modelserver.Request{
		{Method: "POST", Path: "/v1beta/models/gemini-2.5-pro:streamGenerateContent", Dialect: modelserver.Gemini,
			Model: "gemini-2.5-pro", Stream: true, Turn: 0, UserTexts: prompt, Credential: "X-Goog-Api-Key", Status: 200},
		{Method: "POST", Path: "/v1beta/models/gemini-2.5-pro:streamGenerateContent", Dialect: modelserver.Gemini,
			Model: "gemini-2.5-pro", Stream: true, ToolResults: 1, Turn: 1, UserTexts: prompt, Status: 200},
	}
	if diff := cmp.Diff(want2, srv.Requests()); diff != "" {
		t.Errorf("Requests() (-want +got):\n%s", diff)
	}
}

func TestGeminiNotStreaming(t *testing.T) {
	_, url := start(t, scenario(t, modelserver.ScenarioText))
	var one geminiResponse
	decodeJSON(t, post(t, url+"/v1beta/models/m:generateContent", geminiBody(0)), http.StatusOK, &one)
	if diff := cmp.Diff([]map[string]any{{"text": modelserver.HelloText}}, one.parts(t)); diff != "" {
		t.Errorf("generateContent parts (-want +got):\n%s", diff)
	}
	// Streaming without alt=sse is a JSON array of responses.
	var list []geminiResponse
	decodeJSON(t, post(t, url+"/v1beta/models/m:streamGenerateContent", geminiBody(0)), http.StatusOK, &list)
	if len(list) != 1 {
		t.Fatalf("got %d responses, want 1", len(list))
	}
	list[0].parts(t)
	var count map[string]any
	decodeJSON(t, post(t, url+"/v1beta/models/m:countTokens", geminiBody(0)), http.StatusOK, &count)
	if diff := cmp.Diff(map[string]any{"totalTokens": 150.0}, count); diff != "" {
		t.Errorf("countTokens (-want +got):\n%s", diff)
	}
}

// Gemini CLI's router asks for JSON of a schema (upper-case types) and
// retries for minutes on anything else.
func TestGeminiRouterGetsJSON(t *testing.T) {
	_, url := start(t, scenario(t, modelserver.ScenarioTool))
	body := map[string]any{
		"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "route this"}}}},
		"generationConfig": map[string]any{"responseMimeType": "application/json", "responseJsonSchema": map[string]any{
			"type": "OBJECT", "required": []string{"reasoning", "model_choice", "complexity_score"},
			"properties": map[string]any{
				"reasoning":        map[string]any{"type": "STRING"},
				"model_choice":     map[string]any{"type": "STRING", "enum": []string{"flash", "pro"}},
				"complexity_score": map[string]any{"type": "INTEGER"},
			}}},
	}
	var got geminiResponse
	decodeJSON(t, post(t, url+"/v1beta/models/gemini-flash-lite:generateContent", body), http.StatusOK, &got)
	parts := got.parts(t)
	if len(parts) != 1 {
		t.Fatalf("parts %v, want one text", parts)
	}
	want := map[string]any{"reasoning": "mock", "model_choice": "flash", "complexity_score": 1.0}
	if diff := cmp.Diff(want, mustJSON(t, parts[0]["text"].(string))); diff != "" {
		t.Errorf("router answer (-want +got):\n%s", diff)
	}
}

func TestGeminiError(t *testing.T) {
	_, url := start(t, scenario(t, modelserver.ScenarioError))
	var got map[string]any
	decodeJSON(t, post(t, url+"/v1beta/models/m:streamGenerateContent?alt=sse", geminiBody(0)), http.StatusBadRequest, &got)
	want := map[string]any{"error": map[string]any{"code": 400.0, "message": modelserver.FailureMessage, "status": "INVALID_ARGUMENT"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("error body (-want +got):\n%s", diff)
	}
}
