package inference_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/runner"
)

const vendorsFile = `
providers:
  - {name: google, kind: gemini, url: "http://127.0.0.1:1", credential_env: K}
  - {name: oai, kind: openai, url: "http://127.0.0.1:1/v1", credential_env: K}
  - {name: ant, kind: anthropic, url: "http://127.0.0.1:1", credential_env: K}
models:
  - {id: gemini-x, provider: google, price: {input: 1, output: 2}}
  - {id: auto, router: [claude-x, gpt-x]}
  - {id: gpt-x, provider: oai, price: {input: 1, output: 2}}
  - {id: claude-x, provider: ant, price: {input: 3, output: 15}}
`

// TestReachableSaysEachModelsAPIs: what a sandbox's runner is told of the
// models its key may reach: chat models first, routers after, each with
// the APIs its provider speaks (a router's: its first reachable target's),
// so an agent run can be given one its CLI calls.
func TestReachableSaysEachModelsAPIs(t *testing.T) {
	e := newEnvOf(t, vendorsFile)
	org := e.admin.User.Org
	// apis lists what the key reaches, in order, with each one's APIs.
	apis := func(t *testing.T) ([]string, map[string][]runner.API) {
		t.Helper()
		reach, err := e.svc.Reachable(t.Context(), org, "default")
		if err != nil {
			t.Fatal(err)
		}
		var order []string
		got := map[string][]runner.API{}
		for _, m := range reach {
			order = append(order, m.ID)
			got[m.ID] = m.APIs
		}
		return order, got
	}
	want := map[string][]runner.API{
		"gemini-x": {runner.APIGemini},
		"gpt-x":    {runner.APIOpenAIChat, runner.APIOpenAIResponses},
		"claude-x": {runner.APIAnthropic},
		"auto":     {runner.APIAnthropic},
	}
	order, got := apis(t)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("APIs (-want +got):\n%s", diff)
	}
	if want := []string{"gemini-x", "gpt-x", "claude-x", "auto"}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v: chat models in the file's order, routers after", order, want)
	}
	// Without claude-x the router goes to gpt-x, and speaks its APIs.
	e.set(t, "default", inference.Settings{Models: []string{"gpt-x", "auto"}})
	order, got = apis(t)
	if diff := cmp.Diff(map[string][]runner.API{"gpt-x": want["gpt-x"], "auto": want["gpt-x"]}, got); diff != "" || !slices.Equal(order, []string{"gpt-x", "auto"}) {
		t.Errorf("with claude-x off the list: %v, APIs (-want +got):\n%s", order, diff)
	}
}

// TestSandboxEnvNamesTheRunsModel: BERTH_MODEL and Pi's default are the
// model given (an agent run's), else the first the key may reach; Pi's
// models.json writes each model in its provider's API; a model the key
// may not reach is refused.
func TestSandboxEnvNamesTheRunsModel(t *testing.T) {
	e := newEnvOf(t, vendorsFile)
	org := e.admin.User.Org
	for _, tt := range []struct{ model, want string }{{"", "gemini-x"}, {"claude-x", "claude-x"}} {
		env, err := e.svc.SandboxEnv(t.Context(), org, "default", tt.model)
		if err != nil {
			t.Fatal(err)
		}
		if env["BERTH_MODEL"] != tt.want || env["ANTHROPIC_MODEL"] != tt.want {
			t.Errorf("model %q: BERTH_MODEL %q ANTHROPIC_MODEL %q, want %s", tt.model, env["BERTH_MODEL"], env["ANTHROPIC_MODEL"], tt.want)
		}
		var settings struct{ DefaultProvider, DefaultModel string }
		if err := json.Unmarshal([]byte(env["BERTH_PI_SETTINGS"]), &settings); err != nil || settings.DefaultModel != tt.want || settings.DefaultProvider != "berth" {
			t.Errorf("model %q: Pi's settings %s (%v), want berth and %s", tt.model, env["BERTH_PI_SETTINGS"], err, tt.want)
		}
		var cfg struct {
			Providers map[string]struct {
				Models []struct{ ID, API, BaseURL string }
			}
		}
		if err := json.Unmarshal([]byte(env["BERTH_PI_CONFIG"]), &cfg); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, m := range cfg.Providers["berth"].Models {
			got[m.ID] = m.API + " " + m.BaseURL
		}
		wantAPIs := map[string]string{
			"gemini-x": "google-generative-ai http://gw/v1beta",
			"gpt-x":    "openai-completions http://gw/v1",
			"claude-x": "anthropic-messages http://gw",
			"auto":     "anthropic-messages http://gw",
		}
		if diff := cmp.Diff(wantAPIs, got); diff != "" {
			t.Errorf("Pi's models (-want +got):\n%s", diff)
		}
	}
	if _, err := e.svc.SandboxEnv(t.Context(), org, "default", "nope"); !errors.Is(err, fault.Forbidden) {
		t.Errorf("SandboxEnv of a model the key may not reach: %v, want fault.Forbidden (not allowed)", err)
	}
}
