package runner

import "fmt"

// codex runs OpenAI's Codex CLI (`codex exec`), which speaks only the
// OpenAI Responses API, to the gateway's /v1.
type codex struct{}

// ThreadTotals: resumed, Codex's turn.completed counts its whole thread
// (measured with codex 0.171.0: a second task reported both tasks'
// tokens).
func (codex) ThreadTotals() {}

func (codex) Name() string   { return "codex" }
func (codex) Binary() string { return "codex" }

// ContainerArgs: exec with JSON events. Codex's own bubblewrap/landlock
// sandbox is unwanted inside ours, hence the bypass; --skip-git-repo-check
// because whether /work looks like a trusted repository to it is not ours
// to depend on. With no prompt argument exec reads the prompt from stdin.
func (codex) ContainerArgs(o Options) ([]string, error) {
	if err := checkOptions(o); err != nil {
		return nil, err
	}
	args := []string{"exec"}
	if o.Resume {
		// The newest session recorded under ~/.codex/sessions whose
		// working directory is this one. The subcommand takes the same
		// flags; its prompt is an argument, or stdin only when named "-"
		// (given --last, the one argument is the prompt, not a session).
		args = append(args, "resume", "--last")
	}
	args = append(args, "--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check", "-m", o.Model)
	if o.Effort != "" {
		// -c takes TOML: the quotes make the value a string.
		args = append(args, "-c", "model_reasoning_effort="+tomlString(o.Effort))
	}
	if o.Resume {
		args = append(args, "-")
	}
	return args, nil
}

// APIs: Codex speaks OpenAI Responses only (wire_api "chat" fails its
// config load).
func (codex) APIs() []API { return []API{APIOpenAIResponses} }

// Credentials: config.toml names BERTH_API_KEY as the provider's env_key,
// sent as a Bearer token.
func (codex) Credentials() []string { return []string{keyVar} }

// Env: none; everything is in config.toml.
func (codex) Env(g Gateway) ([]EnvVar, error) { return gatewayEnv(g) }

// Files renders ~/.codex/config.toml: the gateway as the only provider
// (wire_api "responses": "chat" fails to load), and update checks,
// plugins, apps, analytics and feedback off; without them Codex looks up
// those hosts on every run.
func (codex) Files(g Gateway, o Options) ([]File, error) {
	base, _, err := g.forRun(o)
	if err != nil {
		return nil, err
	}
	toml := fmt.Sprintf(`model = %s
model_provider = %s
check_for_update_on_startup = false

[model_providers.%s]
name = %s
base_url = %s
env_key = %s
env_http_headers = { %s = %s }
wire_api = "responses"

[features]
plugins = false
remote_plugin = false
apps = false

[analytics]
enabled = false

[feedback]
enabled = false
`, tomlString(o.Model), tomlString(provider), provider, tomlString(provider), tomlString(base+"/v1"),
		tomlString(keyVar), tomlString(sessionHeader), tomlString(sessionVar))
	return []File{{Path: ".codex/config.toml", Content: []byte(toml)}}, nil
}

// codexLine is a line of `codex exec --json`.
type codexLine struct {
	Type     string `json:"type"`
	ThreadID string `json:"thread_id"`
	Usage    *struct {
		InputTokens           int64 `json:"input_tokens"`
		CachedInputTokens     int64 `json:"cached_input_tokens"`
		CacheWriteInputTokens int64 `json:"cache_write_input_tokens"`
		OutputTokens          int64 `json:"output_tokens"`
		ReasoningOutputTokens int64 `json:"reasoning_output_tokens"`
	} `json:"usage"`
	// error lines carry message; turn.failed carries error.message.
	Message string `json:"message"`
	Error   *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// ParseLine reads Codex's events. The model is never named in the stream
// (keep the one the run was given) and no cost is reported (Settle
// computes it). turn.completed's usage covers every model call of its turn
// and counts cached tokens inside input_tokens and reasoning inside
// output_tokens. An item of type "error" is not a failure: Codex adds one
// for an unknown model slug and carries on.
func (codex) ParseLine(t *Telemetry, line []byte) Outcome {
	var l codexLine
	if o := decode(line, &l); o != Parsed {
		return o
	}
	switch l.Type {
	case "thread.started":
		t.setSession(l.ThreadID)
	case "turn.started", "item.started", "item.updated", "item.completed":
	case "turn.completed":
		if u := l.Usage; u != nil {
			t.addUsage(report{
				input:              u.InputTokens,
				cacheRead:          u.CachedInputTokens,
				cacheWrite:         u.CacheWriteInputTokens,
				output:             u.OutputTokens,
				reasoning:          u.ReasoningOutputTokens,
				inputHasCache:      true,
				outputHasReasoning: true,
			})
		}
		// A turn that completed supersedes an error reported during it.
		t.Error = ""
	case "error":
		t.fail(l.Message)
	case "turn.failed":
		msg := ""
		if l.Error != nil {
			msg = l.Error.Message
		}
		t.fail(msg)
	default:
		return Unknown
	}
	return Parsed
}
