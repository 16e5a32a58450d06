package gateway_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/runner/runnertest"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/workspace"
)

// threeVendors serves one model from each of three providers that speak
// one vendor's API each, none first in the file in the API most runners
// speak: a run given the project's first model fails with every runner
// but the Gemini CLI.
const threeVendors = `
providers:
  - {name: google, kind: gemini, url: %[3]s, credential_env: TEST_GEMINI_KEY}
  - {name: openai, kind: openai, url: %[2]s/v1, credential_env: TEST_OPENAI_KEY}
  - {name: anthropic, kind: anthropic, url: %[1]s, credential_env: TEST_ANTHROPIC_KEY}
models:
  - {id: gemini-test, provider: google, upstream: gemini-upstream-1, price: {input: 1.25, output: 10}}
  - {id: gpt-test, provider: openai, price: {input: 1.25, output: 10}}
  - {id: gpt-mini, provider: openai, price: {input: 0.25, output: 2}}
  - {id: claude-test, provider: anthropic, upstream: claude-upstream-1, price: {input: 3, output: 15}}
`

// dialectWorld is a gateway serving threeVendors whose agent runs run a
// stand-in for each CLI: it makes the CLI's first model call as the CLI
// would from what the run was given (argv, environment, config files),
// and exits as the CLI does on the answer.
type dialectWorld struct {
	*modelWorld

	mu   sync.Mutex
	envs map[string]map[string]string // each run's environment, by sandbox id
}

func newDialectWorld(t *testing.T, defaultModel string) *dialectWorld {
	t.Helper()
	m := newModelWorldOf(t, threeVendors, func(c *worldConfig) {
		c.agents = func(w *world, rc *agentrun.Config) {
			images := map[string]string{}
			for _, r := range []string{"claude-code", "codex", "gemini", "opencode", "pi"} {
				images[r] = "localhost/berth-agent-" + r + ":latest"
			}
			rc.Images, rc.Model, rc.LogDir = images, defaultModel, t.TempDir()
			rc.Workspaces = workspace.New(t.TempDir(), os.Getuid(), w.forge, workspace.Local{Forge: w.forge})
		}
	})
	m.allowRepos(t, "acme")
	w := &dialectWorld{modelWorld: m, envs: map[string]map[string]string{}}
	m.drv.SetAgent(func(spec sandbox.Spec) ([]string, int) {
		w.mu.Lock()
		w.envs[string(spec.Sandbox.ID)] = spec.Env
		w.mu.Unlock()
		stream := strings.TrimSuffix(spec.Sandbox.Runner, "-code") // claude-code's streams are claude-*
		if status, body := firstCall(t, spec); status != http.StatusOK {
			t.Logf("%s's first call: %d %s", spec.Sandbox.Runner, status, body)
			return runnertest.Stream(t, stream+"-error"), 1
		}
		return runnertest.Stream(t, stream+"-text"), 0
	})
	return w
}

// envOf is the environment sandbox id's run was given.
func (w *dialectWorld) envOf(id string) map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.envs[id]
}

// run creates an agent sandbox of runner (on model when given) and waits
// for its end.
func (w *dialectWorld) run(t *testing.T, name, runnerName, model string) api.Sandbox {
	t.Helper()
	sb, err := w.owner.CreateSandbox(t.Context(), api.CreateSandbox{Name: name, Purpose: "agent", Repo: "acme/app",
		Task: "say hello", Runner: runnerName, Model: model})
	if err != nil {
		t.Fatalf("create %s (%s): %v", name, runnerName, err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got, err := w.owner.Sandbox(t.Context(), sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.EndedAt != nil {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still %s", name, got.State)
		}
	}
}

// TestAgentRunsStartOnAModelTheirRunnerCalls: against a deployment with an
// Anthropic, an OpenAI and a Gemini provider, each runner's run starts on
// a model served in an API it speaks (BERTH_MODEL says which), and its
// first call reaches that model's vendor, at its path, with the
// deployment's credential in its header, and succeeds.
func TestAgentRunsStartOnAModelTheirRunnerCalls(t *testing.T) {
	w := newDialectWorld(t, "")
	for _, tt := range []struct {
		runner, model string
		vendor        inference.Kind
		path          string
	}{
		{"claude-code", "claude-test", inference.KindAnthropic, "/v1/messages"},
		{"codex", "gpt-test", inference.KindOpenAI, "/v1/responses"},
		{"gemini", "gemini-test", inference.KindGemini, "/v1beta/models/gemini-upstream-1:streamGenerateContent"},
		// Pi and OpenCode call each model in its provider's API: the
		// project's first, Gemini's, in Gemini's.
		{"opencode", "gemini-test", inference.KindGemini, "/v1beta/models/gemini-upstream-1:streamGenerateContent"},
		{"pi", "gemini-test", inference.KindGemini, "/v1beta/models/gemini-upstream-1:streamGenerateContent"},
	} {
		t.Run(tt.runner, func(t *testing.T) {
			name := "run-" + strings.ReplaceAll(tt.runner, "-", "")
			end := w.run(t, name, tt.runner, "")
			if end.Run == nil || end.Run.State != "succeeded" {
				t.Fatalf("%s: %s (%s), run %+v; want it succeeded", tt.runner, end.State, end.Reason, end.Run)
			}
			env := w.envOf(end.ID)
			if env["BERTH_MODEL"] != tt.model || env["ANTHROPIC_MODEL"] != tt.model {
				t.Errorf("BERTH_MODEL %q, ANTHROPIC_MODEL %q; want the run's %s", env["BERTH_MODEL"], env["ANTHROPIC_MODEL"], tt.model)
			}
			if got := w.vendors[tt.vendor].last(t); got.path != tt.path {
				t.Errorf("the %s vendor's last call was at %s, want %s", tt.vendor, got.path, tt.path)
			}
		})
	}
}

// TestAgentRunModelChosenAtCreate: --model is checked at create (one the
// project may reach, served in an API the runner speaks; else 400 naming
// model and why); the deployment's BERTH_AGENT_MODEL is taken only where
// it fits the runner; and a create no model fits is refused before
// anything starts, saying why.
func TestAgentRunModelChosenAtCreate(t *testing.T) {
	w := newDialectWorld(t, "gpt-mini")
	ctx := t.Context()

	// The deployment's default where the runner speaks its API, the first
	// model the runner speaks where it does not.
	for runnerName, want := range map[string]string{"codex": "gpt-mini", "pi": "gpt-mini", "claude-code": "claude-test", "gemini": "gemini-test"} {
		end := w.run(t, "default-"+strings.ReplaceAll(runnerName, "-", ""), runnerName, "")
		if got := w.envOf(end.ID)["BERTH_MODEL"]; end.Run == nil || end.Run.State != "succeeded" || got != want {
			t.Errorf("%s with BERTH_AGENT_MODEL=gpt-mini: %s (%s) on %q, run %+v; want it succeeded on %s", runnerName, end.State, end.Reason, got, end.Run, want)
		}
	}
	// The project's agent configuration's model over the deployment's,
	// where the runner speaks its API; the deployment's where it does not.
	if _, err := w.admin.SetAgentConfig(ctx, "acme", "default", api.AgentConfig{Model: "gpt-test"}); err != nil {
		t.Fatal(err)
	}
	for runnerName, want := range map[string]string{"codex": "gpt-test", "claude-code": "claude-test"} {
		end := w.run(t, "project-"+strings.ReplaceAll(runnerName, "-", ""), runnerName, "")
		if got := w.envOf(end.ID)["BERTH_MODEL"]; end.Run == nil || end.Run.State != "succeeded" || got != want {
			t.Errorf("%s with the project's model gpt-test: %s on %q, run %+v; want %s", runnerName, end.State, got, end.Run, want)
		}
	}
	if _, err := w.admin.SetAgentConfig(ctx, "acme", "default", api.AgentConfig{}); err != nil {
		t.Fatal(err)
	}
	// The creator's model, when the runner can call it.
	end := w.run(t, "chosen", "codex", "gpt-test")
	if got := w.envOf(end.ID)["BERTH_MODEL"]; end.Run == nil || end.Run.State != "succeeded" || got != "gpt-test" {
		t.Errorf("codex --model gpt-test: %s on %q, run %+v", end.State, got, end.Run)
	}

	refused := func(t *testing.T, req api.CreateSandbox, status int, code, field string, says ...string) {
		t.Helper()
		req.Purpose, req.Repo, req.Task = "agent", "acme/app", "say hello"
		starts := w.drv.Starts()
		_, err := w.owner.CreateSandbox(ctx, req)
		var e *api.Error
		if !errors.As(err, &e) || e.Status != status || e.Code != code || e.Field != field {
			t.Fatalf("create %s: %v; want %d %s naming %q", req.Name, err, status, code, field)
		}
		for _, s := range says {
			if !strings.Contains(e.Message, s) {
				t.Errorf("create %s: %q does not say %q", req.Name, e.Message, s)
			}
		}
		if _, err := w.owner.Sandbox(ctx, req.Name); err == nil {
			t.Errorf("create %s was refused, but the sandbox exists", req.Name)
		}
		if w.drv.Starts() != starts {
			t.Errorf("create %s was refused, but a machine was started", req.Name)
		}
	}
	t.Run("model the runner cannot call", func(t *testing.T) {
		refused(t, api.CreateSandbox{Name: "bad-1", Runner: "codex", Model: "claude-test"}, 400, api.CodeInvalid, "model",
			"claude-test is served in anthropic-messages", "codex speaks openai-responses")
	})
	t.Run("model the project may not reach", func(t *testing.T) {
		refused(t, api.CreateSandbox{Name: "bad-2", Runner: "claude-code", Model: "nope"}, 400, api.CodeInvalid, "model",
			`may not reach "nope"`, "claude-test (anthropic-messages)")
	})
	t.Run("model on an engineer sandbox", func(t *testing.T) {
		_, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "bad-3", Model: "gpt-test", SSHKeys: []string{sshKey}})
		var e *api.Error
		if !errors.As(err, &e) || e.Status != 400 || e.Field != "model" {
			t.Errorf("an engineer sandbox with a model: %v; want 400 naming model", err)
		}
	})
	t.Run("no model the runner speaks", func(t *testing.T) {
		w.setInference(t, "default", api.InferenceSettings{Models: []string{"claude-test", "gemini-test"}})
		refused(t, api.CreateSandbox{Name: "none-1", Runner: "codex"}, 409, api.CodeUnavailable, "",
			"codex speaks openai-responses", "it may reach gemini-test (gemini), claude-test (anthropic-messages)")
		// The deployment's default is no way round the allow-list.
		refused(t, api.CreateSandbox{Name: "none-2", Runner: "codex", Model: "gpt-mini"}, 400, api.CodeInvalid, "model", `may not reach "gpt-mini"`)
	})
	t.Run("no model at all", func(t *testing.T) {
		w.setInference(t, "default", api.InferenceSettings{Models: []string{}})
		refused(t, api.CreateSandbox{Name: "none-3", Runner: "claude-code"}, 409, api.CodeUnavailable, "", "may reach no model")
	})
}

// firstCall makes the first model call a runner's CLI makes, from what its
// run was given alone, and returns the answer's status and body: each CLI
// reads the gateway's address, its key and its model where it really does
// (its flags, its environment, the config files the host rendered), and
// speaks the API its configuration says.
func firstCall(t *testing.T, spec sandbox.Spec) (int, string) {
	env, args := spec.Env, spec.Run.Args
	files := map[string]string{}
	var fs []struct{ Path, Content string }
	if err := json.Unmarshal([]byte(env["BERTH_RUNNER_FILES"]), &fs); err != nil {
		return 0, "BERTH_RUNNER_FILES: " + err.Error()
	}
	for _, f := range fs {
		files[f.Path] = f.Content
	}
	flag := func(names ...string) string {
		for i, a := range args {
			if slices.Contains(names, a) && i+1 < len(args) {
				return args[i+1]
			}
		}
		return ""
	}
	var (
		url, key string
		api      string // the API spoken: anthropic, openai-chat, openai-responses, gemini
	)
	model := flag("--model", "-m")
	switch spec.Sandbox.Runner {
	case "claude-code":
		url, key, api = env["ANTHROPIC_BASE_URL"]+"/v1/messages", env["ANTHROPIC_API_KEY"], "anthropic"
	case "gemini":
		url, key, api = env["GOOGLE_GEMINI_BASE_URL"]+"/v1beta/models/"+model+":streamGenerateContent?alt=sse", env["GEMINI_API_KEY"], "gemini"
	case "codex":
		toml := files[".codex/config.toml"]
		base := regexp.MustCompile(`(?m)^base_url = "([^"]+)"`).FindStringSubmatch(toml)
		keyVar := regexp.MustCompile(`(?m)^env_key = "([^"]+)"`).FindStringSubmatch(toml)
		wire := regexp.MustCompile(`(?m)^wire_api = "([^"]+)"`).FindStringSubmatch(toml)
		if base == nil || keyVar == nil || wire == nil || wire[1] != "responses" {
			return 0, "codex config.toml: no base_url, env_key or wire_api responses:\n" + toml
		}
		url, key, api = base[1]+"/responses", env[keyVar[1]], "openai-responses"
	case "pi":
		var cfg struct {
			Providers map[string]struct {
				API     string                              `json:"api"`
				BaseURL string                              `json:"baseUrl"`
				APIKey  string                              `json:"apiKey"`
				Models  []struct{ ID, API, BaseURL string } `json:"models"`
			} `json:"providers"`
		}
		if err := json.Unmarshal([]byte(files[".pi/agent/models.json"]), &cfg); err != nil {
			return 0, "pi models.json: " + err.Error()
		}
		p := cfg.Providers[flag("--provider")]
		i := slices.IndexFunc(p.Models, func(m struct{ ID, API, BaseURL string }) bool { return m.ID == model })
		if i < 0 {
			return 0, "pi models.json lists no " + model
		}
		m := p.Models[i]
		// A model's own api and baseUrl, else its provider's, as Pi takes them.
		m.API, m.BaseURL = cmp.Or(m.API, p.API), cmp.Or(m.BaseURL, p.BaseURL)
		key = env[p.APIKey] // Pi reads a variable's name as its value
		switch m.API {
		case "anthropic-messages":
			url, api = m.BaseURL+"/v1/messages", "anthropic"
		case "google-generative-ai":
			url, api = m.BaseURL+"/models/"+model+":streamGenerateContent?alt=sse", "gemini"
		case "openai-responses":
			url, api = m.BaseURL+"/responses", "openai-responses"
		default:
			url, api = m.BaseURL+"/chat/completions", "openai-chat"
		}
	case "opencode":
		var cfg struct {
			Provider map[string]struct {
				NPM     string `json:"npm"`
				Options struct {
					BaseURL string `json:"baseURL"`
					APIKey  string `json:"apiKey"`
				} `json:"options"`
				Models map[string]struct {
					Provider struct{ NPM, API string } `json:"provider"`
				} `json:"models"`
			} `json:"provider"`
		}
		if err := json.Unmarshal([]byte(files[".config/opencode/opencode.json"]), &cfg); err != nil {
			return 0, "opencode.json: " + err.Error()
		}
		provider, id, _ := strings.Cut(model, "/")
		p := cfg.Provider[provider]
		m, ok := p.Models[id]
		if !ok {
			return 0, "opencode.json lists no " + model
		}
		model = id
		// The model's SDK package, else its provider's; the provider's
		// baseURL over the model's URL, as OpenCode takes them.
		m.Provider.NPM, m.Provider.API = cmp.Or(m.Provider.NPM, p.NPM), cmp.Or(p.Options.BaseURL, m.Provider.API)
		key = env[strings.TrimSuffix(strings.TrimPrefix(p.Options.APIKey, "{env:"), "}")]
		switch m.Provider.NPM {
		case "@ai-sdk/anthropic":
			url, api = m.Provider.API+"/messages", "anthropic"
		case "@ai-sdk/google":
			url, api = m.Provider.API+"/models/"+model+":streamGenerateContent?alt=sse", "gemini"
		default:
			url, api = m.Provider.API+"/chat/completions", "openai-chat"
		}
	default:
		return 0, "no stand-in for runner " + spec.Sandbox.Runner
	}
	var body any
	hello := []any{map[string]any{"role": "user", "content": "say hello"}}
	switch api {
	case "anthropic":
		body = map[string]any{"model": model, "max_tokens": 1024, "stream": true, "messages": hello}
	case "openai-chat":
		body = map[string]any{"model": model, "stream": true, "messages": hello}
	case "openai-responses":
		body = map[string]any{"model": model, "stream": true, "store": false, "input": hello}
	case "gemini":
		body = map[string]any{"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "say hello"}}}}}
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Error(err)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return 0, fmt.Sprintf("%s: %v", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	switch api {
	case "anthropic":
		req.Header.Set("X-Api-Key", key)
		req.Header.Set("Anthropic-Version", "2023-06-01")
	case "gemini":
		req.Header.Set("X-Goog-Api-Key", key)
	default:
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}
