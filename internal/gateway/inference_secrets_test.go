package gateway_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/paging"
)

// TestModelSecretsStayOnGateway: a sandbox is told its models and Pi's
// files, never a vendor credential, and may not be given one; after
// requests in every dialect, refused ones included, no log line and no
// audit entry holds a vendor credential or a sandbox's key.
func TestModelSecretsStayOnGateway(t *testing.T) {
	m := newModelWorld(t)
	sb, key := m.agentKey(t, "secretive", "")
	env := m.envOf(t, sb)
	for name := range m.creds {
		if _, ok := env[name]; ok {
			t.Errorf("the sandbox's environment holds %s", name)
		}
	}
	for k, v := range env {
		for _, cred := range m.creds {
			if strings.Contains(v, cred) {
				t.Errorf("the sandbox's %s holds a vendor credential", k)
			}
		}
	}
	if env["BERTH_MODEL"] != scriptedModel || env["ANTHROPIC_MODEL"] != scriptedModel || env["BERTH_SESSION"] != sb ||
		env["ANTHROPIC_CUSTOM_HEADERS"] != "X-Berth-Session: "+sb {
		t.Errorf("model variables: BERTH_MODEL %q ANTHROPIC_MODEL %q BERTH_SESSION %q ANTHROPIC_CUSTOM_HEADERS %q",
			env["BERTH_MODEL"], env["ANTHROPIC_MODEL"], env["BERTH_SESSION"], env["ANTHROPIC_CUSTOM_HEADERS"])
	}
	var models struct {
		Providers map[string]struct {
			BaseURL string `json:"baseUrl"`
			APIKey  string `json:"apiKey"`
			Models  []struct {
				ID string `json:"id"`
			} `json:"models"`
		} `json:"providers"`
	}
	if err := json.Unmarshal([]byte(env["BERTH_PI_CONFIG"]), &models); err != nil {
		t.Fatalf("BERTH_PI_CONFIG: %v", err)
	}
	berth := models.Providers["berth"]
	var ids []string
	for _, x := range berth.Models {
		ids = append(ids, x.ID)
	}
	if berth.APIKey != "BERTH_API_KEY" || berth.BaseURL != m.url+"/v1" || strings.Contains(env["BERTH_PI_CONFIG"], key) ||
		strings.Join(ids, ",") != "scripted-model,claude-test,gpt-test,gemini-test,down-model,auto" {
		t.Errorf("Pi's models.json: %s", env["BERTH_PI_CONFIG"])
	}
	var settings map[string]string
	if err := json.Unmarshal([]byte(env["BERTH_PI_SETTINGS"]), &settings); err != nil || settings["defaultProvider"] != "berth" || settings["defaultModel"] != scriptedModel {
		t.Errorf("Pi's settings.json: %s (%v)", env["BERTH_PI_SETTINGS"], err)
	}
	_, err := m.owner.CreateSandbox(t.Context(), api.CreateSandbox{Name: "smuggler", Purpose: "agent", Repo: "acme/app", Task: "x",
		Env: map[string]string{"TEST_OPENAI_KEY": "sk-mine"}})
	if !isCode(err, api.CodeInvalid) || !strings.Contains(err.Error(), "TEST_OPENAI_KEY") {
		t.Errorf("a caller-added vendor credential: %v, want invalid", err)
	}

	for _, d := range dialects {
		_, model := vendorModel(d)
		for _, stream := range []bool{false, true} {
			answer(t, m.call(t, d, model, stream, key, sb, nil))
		}
		answer(t, m.call(t, d, "no-such-model", false, key, sb, nil))
		answer(t, m.call(t, d, model, false, "berth_0123456789abcdef_notakey", "", nil))
	}
	zero := 0.0
	m.setInference(t, "default", api.InferenceSettings{BudgetUSD: &zero, SystemPrompt: "house rules"})
	answer(t, m.call(t, inference.Anthropic, claudeModel, true, key, sb, nil))
	if _, err := m.owner.Terminate(t.Context(), sb); err != nil {
		t.Fatal(err)
	}
	answer(t, m.call(t, inference.Anthropic, claudeModel, true, key, sb, nil))

	events, _, err := m.st.ListAudit(t.Context(), audit.Filter{}, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	logs, table := m.logs.String(), fmt.Sprintf("%+v", events)
	if strings.Count(logs, `"msg":"model request"`) < 8 || !strings.Contains(table, inference.AuditSet) {
		t.Fatalf("the capture holds too little to mean anything: %d bytes of logs, %d audit events", len(logs), len(events))
	}
	secrets := map[string]string{"the sandbox's key": key}
	for name, v := range m.creds {
		secrets[name] = v
	}
	for what, secret := range secrets {
		if strings.Contains(logs, secret) {
			t.Errorf("a log line holds %s", what)
		}
		if strings.Contains(table, secret) {
			t.Errorf("the audit log holds %s", what)
		}
	}
}
