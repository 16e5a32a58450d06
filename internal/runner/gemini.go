package runner

import "encoding/json"

// gemini runs Google's Gemini CLI (`gemini`), which speaks Gemini's
// streamGenerateContent to GOOGLE_GEMINI_BASE_URL.
type gemini struct{}

func (gemini) Name() string   { return "gemini" }
func (gemini) Binary() string { return "gemini" }

// ContainerArgs: always -m (the default "auto" first asks a router model,
// which costs minutes against a gateway that does not answer it in JSON),
// stream-json, and --yolo so tools run unasked. The prompt comes on stdin
// alone. Gemini CLI has no effort flag: Effort is ignored.
func (gemini) ContainerArgs(o Options) ([]string, error) {
	if err := checkOptions(o); err != nil {
		return nil, err
	}
	args := []string{"-m", o.Model, "--output-format", "stream-json", "--yolo"}
	if o.Resume {
		// The newest session of this project (the working directory),
		// under ~/.gemini/tmp/<project>/chats.
		args = append(args, "--resume", "latest")
	}
	return args, nil
}

// APIs: the Gemini CLI speaks Gemini's generateContent only.
func (gemini) APIs() []API { return []API{APIGemini} }

// Credentials: Gemini CLI sends GEMINI_API_KEY as x-goog-api-key; here it
// carries the sandbox's gateway key.
func (gemini) Credentials() []string { return []string{"GEMINI_API_KEY"} }

// Env points Gemini CLI at the gateway (no /v1: it appends /v1beta/…) and
// trusts the workspace, which would otherwise be a prompt. The session
// header comes through GEMINI_CLI_CUSTOM_HEADERS ("X-Berth-Session: <id>"),
// which the gateway hands every agent sandbox (SPEC S15).
func (gemini) Env(g Gateway) ([]EnvVar, error) {
	base, err := g.baseURL()
	if err != nil {
		return nil, err
	}
	return []EnvVar{
		{"GEMINI_CLI_TRUST_WORKSPACE", "true"},
		{"GOOGLE_GEMINI_BASE_URL", base},
	}, nil
}

// Files renders ~/.gemini/settings.json: API-key auth (without it the CLI
// exits 41, "Invalid auth method selected"), and usage statistics,
// telemetry and update checks off; without them it calls a telemetry host.
func (gemini) Files(g Gateway, o Options) ([]File, error) {
	if _, _, err := g.forRun(o); err != nil {
		return nil, err
	}
	content, err := renderJSON(map[string]any{
		"general":   map[string]bool{"disableAutoUpdate": true, "disableUpdateNag": true},
		"privacy":   map[string]bool{"usageStatisticsEnabled": false},
		"security":  map[string]any{"auth": map[string]string{"selectedType": "gemini-api-key"}},
		"telemetry": map[string]bool{"enabled": false},
	})
	if err != nil {
		return nil, err
	}
	return []File{{Path: ".gemini/settings.json", Content: content}}, nil
}

// geminiLine is a line of Gemini CLI's stream-json.
type geminiLine struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
	Model     string `json:"model"`
	// result
	Status string          `json:"status"`
	Error  json.RawMessage `json:"error"`
	Stats  *struct {
		InputTokens  int64                      `json:"input_tokens"`
		OutputTokens int64                      `json:"output_tokens"`
		Cached       int64                      `json:"cached"`
		Models       map[string]json.RawMessage `json:"models"`
	} `json:"stats"`
}

// ParseLine reads Gemini CLI's events. The result's stats are the run's
// totals; their input_tokens include the cached tokens. No cost is
// reported (Settle computes it). A failed run's result says status
// "error", and the exit code is the HTTP status modulo 256.
func (gemini) ParseLine(t *Telemetry, line []byte) Outcome {
	var l geminiLine
	if o := decode(line, &l); o != Parsed {
		return o
	}
	switch l.Type {
	case "init":
		t.setSession(l.SessionID)
		t.setModel(l.Model)
	case "message", "tool_use", "tool_result", "error":
		// error lines are warnings the CLI carries on from; the result
		// says whether the run failed.
	case "result":
		if s := l.Stats; s != nil {
			t.totalUsage(report{input: s.InputTokens, cacheRead: s.Cached, output: s.OutputTokens, inputHasCache: true, outputHasReasoning: true})
			if t.Model == "" && len(s.Models) == 1 {
				for m := range s.Models {
					t.setModel(m)
				}
			}
		}
		t.Error = ""
		if l.Status == "error" {
			t.fail(geminiError(l.Error))
		}
	default:
		return Unknown
	}
	return Parsed
}

// geminiError is a result error's message, decoded leniently.
func geminiError(raw json.RawMessage) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return ""
	}
	return e.Message
}
