package runner

import "encoding/json"

// opencode runs OpenCode (`opencode run`), each model through the bundled
// AI SDK provider of the API its provider speaks, to the gateway.
type opencode struct{}

func (opencode) Name() string   { return "opencode" }
func (opencode) Binary() string { return "opencode" }

// ContainerArgs: run with JSON events, the model as provider/model. Effort
// becomes --variant, OpenCode's name for a model's reasoning settings.
// With no message argument run reads the prompt from stdin.
func (opencode) ContainerArgs(o Options) ([]string, error) {
	if err := checkOptions(o); err != nil {
		return nil, err
	}
	args := []string{"run", "--format", "json", "--model", provider + "/" + o.Model}
	if o.Effort != "" {
		args = append(args, "--variant", o.Effort)
	}
	if o.Resume {
		// The newest session of this project (OpenCode's project is the
		// checkout's repository) in ~/.local/share/opencode.
		args = append(args, "--continue")
	}
	return args, nil
}

// Uncounted: OpenCode first asks the small model for its session's
// title, without tools, and reports only the agent's steps.
func (opencode) Uncounted() string {
	return "OpenCode does not count the call that titles its session (made before its first step, without tools)"
}

// APIs: OpenCode bundles the AI SDK's OpenAI-compatible (Chat
// Completions), Anthropic and Google providers, and opencode.json names one
// per model; Chat Completions first, the dialect it was first tested in.
func (opencode) APIs() []API { return []API{APIOpenAIChat, APIAnthropic, APIGemini} }

// Credentials: opencode.json reads the key as {env:BERTH_API_KEY}.
func (opencode) Credentials() []string { return []string{keyVar} }

// Env turns off what OpenCode fetches on its own: updates, the models.dev
// catalogue, LSP servers, default plugins and sharing. One lookup of the
// npm registry's host remains; it fails harmlessly on the allowlist
// network.
func (opencode) Env(g Gateway) ([]EnvVar, error) {
	return gatewayEnv(g,
		EnvVar{"OPENCODE_DISABLE_AUTOUPDATE", "1"},
		EnvVar{"OPENCODE_DISABLE_DEFAULT_PLUGINS", "1"},
		EnvVar{"OPENCODE_DISABLE_LSP_DOWNLOAD", "1"},
		EnvVar{"OPENCODE_DISABLE_MODELS_FETCH", "1"},
		EnvVar{"OPENCODE_DISABLE_SHARE", "1"},
	)
}

type opencodeConfig struct {
	Model string `json:"model"`
	// SmallModel serves OpenCode's title call; unset, it may pick a model
	// the sandbox cannot reach.
	SmallModel string                      `json:"small_model"`
	Autoupdate bool                        `json:"autoupdate"`
	Share      string                      `json:"share"`
	Snapshot   bool                        `json:"snapshot"`
	Permission map[string]string           `json:"permission"`
	Provider   map[string]opencodeProvider `json:"provider"`
}

type opencodeProvider struct {
	NPM  string `json:"npm"`
	Name string `json:"name"`
	// Options carry no baseURL: OpenCode would take it over every model's
	// own.
	Options struct {
		APIKey  string            `json:"apiKey"`
		Headers map[string]string `json:"headers"`
	} `json:"options"`
	Models map[string]opencodeModel `json:"models"`
}

type opencodeModel struct {
	Name string `json:"name"`
	// Provider is the model's own SDK package and URL (OpenCode 1.18 takes
	// them per model, over the provider's): its API's.
	Provider struct {
		NPM string `json:"npm"`
		API string `json:"api"`
	} `json:"provider"`
	Limit *opencodeLimit `json:"limit,omitempty"`
	Cost  *opencodeCost  `json:"cost,omitempty"`
}

// opencodeAPI is the bundled AI SDK package OpenCode calls an API with, and
// that API's base URL on the gateway.
func opencodeAPI(a API) (npm, path string) {
	switch a {
	case APIAnthropic:
		return "@ai-sdk/anthropic", "/v1"
	case APIGemini:
		return "@ai-sdk/google", "/v1beta"
	}
	return "@ai-sdk/openai-compatible", "/v1"
}

type opencodeLimit struct {
	Context int `json:"context"`
	Output  int `json:"output"`
}

// opencodeCost is a price in OpenCode's spelling (USD per million tokens).
type opencodeCost struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read"`
	CacheWrite float64 `json:"cache_write"`
}

// Files renders ~/.config/opencode/opencode.json: the gateway as the one
// provider with every model the key may reach, each in the API its
// provider speaks (a model served in none OpenCode speaks is left out, and
// a run on one refused) and priced, so OpenCode's own cost is the
// gateway's; every permission allowed (nobody is there to answer), and
// snapshots, sharing and updates off.
func (r opencode) Files(g Gateway, o Options) ([]File, error) {
	base, models, err := g.forRun(o)
	if err != nil {
		return nil, err
	}
	p := opencodeProvider{NPM: "@ai-sdk/openai-compatible", Name: provider, Models: map[string]opencodeModel{}}
	p.Options.APIKey = "{env:" + keyVar + "}"
	p.Options.Headers = map[string]string{sessionHeader: "{env:" + sessionVar + "}"}
	models, apis, err := callable(r, o.Model, models)
	if err != nil {
		return nil, err
	}
	for i, m := range models {
		om := opencodeModel{Name: m.Name}
		npm, path := opencodeAPI(apis[i])
		om.Provider.NPM, om.Provider.API = npm, base+path
		if m.ContextWindow > 0 && m.MaxTokens > 0 { // a zero limit would read as "none allowed"
			om.Limit = &opencodeLimit{m.ContextWindow, m.MaxTokens}
		}
		if pr := m.Price; pr != nil {
			om.Cost = &opencodeCost{pr.Input, pr.Output, pr.CacheRead, pr.CacheWrite}
		}
		p.Models[m.ID] = om
	}
	run := provider + "/" + o.Model
	content, err := renderJSON(opencodeConfig{
		Model:      run,
		SmallModel: run,
		Share:      "disabled",
		Permission: map[string]string{"bash": "allow", "edit": "allow", "webfetch": "allow"},
		Provider:   map[string]opencodeProvider{provider: p},
	})
	if err != nil {
		return nil, err
	}
	return []File{{Path: ".config/opencode/opencode.json", Content: content}}, nil
}

// opencodeLine is a line of `opencode run --format json`.
type opencodeLine struct {
	Type      string `json:"type"`
	SessionID string `json:"sessionID"`
	Part      *struct {
		Tokens *struct {
			Input     int64 `json:"input"`
			Output    int64 `json:"output"`
			Reasoning int64 `json:"reasoning"`
			Cache     struct {
				Read  int64 `json:"read"`
				Write int64 `json:"write"`
			} `json:"cache"`
		} `json:"tokens"`
		Cost *float64 `json:"cost"`
	} `json:"part"`
	Error json.RawMessage `json:"error"`
}

// ParseLine reads OpenCode's events. There are no run totals: each
// step_finish (one per model call; the title call is not reported) adds
// its tokens and its cost, priced from opencode.json. Input excludes the
// cache; reasoning is counted apart from output. The model is never named
// (keep the one the run was given).
func (opencode) ParseLine(t *Telemetry, line []byte) Outcome {
	var l opencodeLine
	if o := decode(line, &l); o != Parsed {
		return o
	}
	switch l.Type {
	case "step_start", "text", "reasoning", "tool_use":
	case "step_finish":
		if l.Part != nil {
			if k := l.Part.Tokens; k != nil {
				t.addUsage(report{
					input:      k.Input,
					cacheRead:  k.Cache.Read,
					cacheWrite: k.Cache.Write,
					output:     k.Output,
					reasoning:  k.Reasoning,
				})
			}
			if l.Part.Cost != nil {
				t.addCost(*l.Part.Cost)
			}
		}
		t.Turns++
	case "error":
		t.fail(opencodeError(l.Error))
	default:
		return Unknown
	}
	t.setSession(l.SessionID)
	return Parsed
}

// opencodeError says what an error line's error is: its data's message,
// else its name. Decoded leniently: the error's shape varies by kind.
func opencodeError(raw json.RawMessage) string {
	var e struct {
		Name string `json:"name"`
		Data struct {
			Message json.RawMessage `json:"message"`
		} `json:"data"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return ""
	}
	var msg string
	if json.Unmarshal(e.Data.Message, &msg) == nil && msg != "" {
		return msg
	}
	return e.Name
}
