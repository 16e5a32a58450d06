package runner

// pi runs Pi (`pi`, @mariozechner/pi-coding-agent), each model in the API
// its provider speaks, through the gateway.
type pi struct{}

func (pi) Name() string   { return "pi" }
func (pi) Binary() string { return "pi" }

// ContainerArgs: print mode with JSON events, the gateway's provider and
// the run's model. Pi asks no permissions, so it needs no flag for them.
// Effort becomes --thinking, Pi's thinking level.
func (pi) ContainerArgs(o Options) ([]string, error) {
	if err := checkOptions(o); err != nil {
		return nil, err
	}
	args := []string{"-p", "--mode", "json", "--provider", provider, "--model", o.Model}
	if o.Effort != "" {
		args = append(args, "--thinking", o.Effort)
	}
	if o.Resume {
		// The newest session of this working directory, under
		// ~/.pi/agent/sessions/--<directory>--.
		args = append(args, "--continue")
	}
	return args, nil
}

// APIs: models.json gives each model its own api (openai-completions,
// openai-responses, anthropic-messages, google-generative-ai); Chat
// Completions first, the dialect it was first tested in.
func (pi) APIs() []API { return []API{APIOpenAIChat, APIOpenAIResponses, APIAnthropic, APIGemini} }

// Credentials: models.json names the key's variable, BERTH_API_KEY.
func (pi) Credentials() []string { return []string{keyVar} }

// Env: PI_OFFLINE stops Pi's own network calls (update checks).
func (pi) Env(g Gateway) ([]EnvVar, error) {
	return gatewayEnv(g, EnvVar{"PI_OFFLINE", "1"})
}

type piModels struct {
	Providers map[string]piProvider `json:"providers"`
}

type piProvider struct {
	BaseURL string            `json:"baseUrl"`
	APIKey  string            `json:"apiKey"`
	Headers map[string]string `json:"headers"`
	Models  []piModel         `json:"models"`
}

type piModel struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// API and BaseURL are the model's own (Pi 0.73 takes both per model,
	// over the provider's): the API its provider speaks, in Pi's name.
	API           string  `json:"api"`
	BaseURL       string  `json:"baseUrl"`
	Reasoning     bool    `json:"reasoning,omitempty"`
	ContextWindow int     `json:"contextWindow,omitempty"`
	MaxTokens     int     `json:"maxTokens,omitempty"`
	Cost          *piCost `json:"cost,omitempty"`
}

// piCost is a price in Pi's spelling (USD per million tokens).
type piCost struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
}

// piAPI is Pi's name of an API it speaks, and where that API's base URL is
// on the gateway: Pi's Anthropic client adds /v1 itself, its Google client
// only the model's path.
func piAPI(a API) (name, path string) {
	switch a {
	case APIOpenAIResponses:
		return "openai-responses", "/v1"
	case APIAnthropic:
		return "anthropic-messages", ""
	case APIGemini:
		return "google-generative-ai", "/v1beta"
	}
	return "openai-completions", "/v1"
}

type piSettings struct {
	DefaultProvider string `json:"defaultProvider"`
	DefaultModel    string `json:"defaultModel"`
}

// Files renders ~/.pi/agent/models.json and settings.json as SPEC S14 has
// the gateway do: every chat model the key may reach, routers after them,
// the key named by its variable (BERTH_API_KEY) and never written, and the default
// provider pinned to berth. Each model is written in the API its provider
// speaks (piAPI), at that API's base URL on the gateway; a model served in
// none Pi speaks is left out, and a run on one is refused. A model's price
// goes in, so the cost Pi reports is the gateway's; a model without one
// costs 0 to Pi, which Settle does not take for a real zero.
func (r pi) Files(g Gateway, o Options) ([]File, error) {
	base, models, err := g.forRun(o)
	if err != nil {
		return nil, err
	}
	p := piProvider{
		// Pi wants a provider's base URL even when every model has its own.
		BaseURL: base + "/v1",
		// Pi reads a value that names a set variable as that variable's
		// value (resolveConfigValue in Pi 0.73): a bare name, not ${NAME},
		// which it would send as it stands.
		APIKey:  keyVar,
		Headers: map[string]string{sessionHeader: sessionVar},
	}
	models, apis, err := callable(r, o.Model, models)
	if err != nil {
		return nil, err
	}
	for i, m := range models {
		name, path := piAPI(apis[i])
		pm := piModel{ID: m.ID, Name: m.Name, API: name, BaseURL: base + path,
			Reasoning: m.Reasoning, ContextWindow: m.ContextWindow, MaxTokens: m.MaxTokens}
		if pr := m.Price; pr != nil {
			pm.Cost = &piCost{pr.Input, pr.Output, pr.CacheRead, pr.CacheWrite}
		}
		p.Models = append(p.Models, pm)
	}
	modelsJSON, err := renderJSON(piModels{Providers: map[string]piProvider{provider: p}})
	if err != nil {
		return nil, err
	}
	settings, err := renderJSON(piSettings{DefaultProvider: provider, DefaultModel: o.Model})
	if err != nil {
		return nil, err
	}
	return []File{
		{Path: ".pi/agent/models.json", Content: modelsJSON},
		{Path: ".pi/agent/settings.json", Content: settings},
	}, nil
}

// piLine is a line of `pi --mode json`.
type piLine struct {
	Type string `json:"type"`
	// session: the first line.
	ID      string `json:"id"`
	Message *struct {
		Role         string `json:"role"`
		Model        string `json:"model"`
		StopReason   string `json:"stopReason"`
		ErrorMessage string `json:"errorMessage"`
		Usage        *struct {
			Input      int64 `json:"input"`
			Output     int64 `json:"output"`
			CacheRead  int64 `json:"cacheRead"`
			CacheWrite int64 `json:"cacheWrite"`
			Cost       *struct {
				Total float64 `json:"total"`
			} `json:"cost"`
		} `json:"usage"`
	} `json:"message"`
}

// ParseLine reads Pi's events. There are no run totals: each message_end
// of an assistant message (one per model call) adds its usage, input
// without the cache, and its cost, priced from models.json. message_update
// repeats the partial message and turn_end and agent_end repeat the
// finished ones: never summed. Pi exits 0 when the model fails; the
// assistant message's stopReason "error" is the only sign, and the last
// assistant message decides (a retry that succeeded clears it).
func (pi) ParseLine(t *Telemetry, line []byte) Outcome {
	var l piLine
	if o := decode(line, &l); o != Parsed {
		return o
	}
	switch l.Type {
	case "session":
		t.setSession(l.ID)
	case "agent_start", "agent_end", "agent_settled", "turn_start", "turn_end",
		"message_start", "message_update",
		"tool_execution_start", "tool_execution_update", "tool_execution_end",
		"queue_update", "compaction_start", "compaction_end", "auto_retry_start", "auto_retry_end":
	case "message_end":
		m := l.Message
		if m == nil || m.Role != "assistant" {
			break
		}
		if u := m.Usage; u != nil {
			t.addUsage(report{input: u.Input, cacheRead: u.CacheRead, cacheWrite: u.CacheWrite, output: u.Output, outputHasReasoning: true})
			if u.Cost != nil {
				t.addCost(u.Cost.Total)
			}
		}
		t.setModel(m.Model)
		t.Turns++
		t.Error = ""
		switch m.StopReason {
		case "error":
			t.fail(m.ErrorMessage)
		case "aborted":
			t.fail("aborted: " + m.ErrorMessage)
		}
	default:
		return Unknown
	}
	return Parsed
}
