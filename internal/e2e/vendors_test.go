package e2e_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/modelserver"
)

// vendorsYAML is a deployment of three providers that speak one vendor's
// API each, Gemini's model first: given the project's first model, every
// runner but the Gemini CLI would fail at its first call.
const vendorsYAML = `providers:
  - {name: google, kind: gemini, url: %[3]s, credential_env: E2E_GEMINI_KEY}
  - {name: openai, kind: openai, url: %[2]s/v1, credential_env: E2E_OPENAI_KEY}
  - {name: anthropic, kind: anthropic, url: %[1]s, credential_env: E2E_ANTHROPIC_KEY}
models:
  - {id: gemini-test, provider: google, upstream: gemini-upstream-1, price: {input: 1.25, output: 10, cache_read: 0.31}}
  - {id: gpt-test, provider: openai, price: {input: 1.25, output: 10, cache_read: 0.125}}
  - {id: claude-test, provider: anthropic, upstream: claude-upstream-1, price: {input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}}
`

// TestAgentRunsOnTheirRunnersVendor runs the real agent CLIs in their images
// against a deployment whose upstreams are three scripted model servers,
// each standing in for one vendor alone (its paths, its key header, its
// required fields): each run starts on a model its CLI can call, its calls
// reach that model's vendor, and it succeeds (the scripted tool call
// commits, the host pushes). Claude Code and Codex are the ones make
// images builds alongside Pi; the others run when built.
func TestAgentRunsOnTheirRunnersVendor(t *testing.T) {
	keys := map[modelserver.Vendor]string{
		modelserver.VendorAnthropic: "sk-ant-e2e-" + fmt.Sprint(time.Now().UnixNano()),
		modelserver.VendorOpenAI:    "sk-oai-e2e-" + fmt.Sprint(time.Now().UnixNano()),
		modelserver.VendorGemini:    "goog-e2e-" + fmt.Sprint(time.Now().UnixNano()),
	}
	servers := map[modelserver.Vendor]*modelserver.Server{}
	urls := map[modelserver.Vendor]string{}
	for v, key := range keys {
		script, err := modelserver.Scenario(modelserver.ScenarioTool)
		if err != nil {
			t.Fatal(err)
		}
		servers[v] = modelserver.New(script, modelserver.AsVendor(v, key))
		srv := httptest.NewServer(servers[v].Handler()) // on loopback: the gateway is a host process
		t.Cleanup(srv.Close)
		urls[v] = srv.URL
	}
	runners := []struct {
		runner string
		vendor modelserver.Vendor
		model  string
	}{
		{"claude-code", modelserver.VendorAnthropic, "claude-test"},
		{"codex", modelserver.VendorOpenAI, "gpt-test"},
		{"pi", modelserver.VendorGemini, "gemini-test"},
		{"gemini", modelserver.VendorGemini, "gemini-test"},
		{"opencode", modelserver.VendorGemini, "gemini-test"},
	}
	var names []string
	for _, r := range runners {
		names = append(names, r.runner)
	}
	g := startAgentGatewayWith(t, fmt.Sprintf(vendorsYAML, urls[modelserver.VendorAnthropic], urls[modelserver.VendorOpenAI], urls[modelserver.VendorGemini]),
		[]string{"E2E_ANTHROPIC_KEY=" + keys[modelserver.VendorAnthropic], "E2E_OPENAI_KEY=" + keys[modelserver.VendorOpenAI], "E2E_GEMINI_KEY=" + keys[modelserver.VendorGemini]},
		names...)
	bare := g.seedRepo("acme/app")
	ctx := context.Background()
	for _, r := range runners {
		t.Run(r.runner, func(t *testing.T) {
			if !imageBuilt(g.root, agentImage(r.runner)) {
				t.Skipf("%s is not built (images/build agent %s)", agentImage(r.runner), r.runner)
			}
			before := len(servers[r.vendor].Requests())
			name := "vendor-" + strings.ReplaceAll(r.runner, "-", "")
			sb, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: name, Purpose: "agent", Repo: "acme/app",
				Task: "Write f.txt and commit it.", Runner: r.runner})
			if err != nil {
				t.Fatal(err)
			}
			end := g.waitSandbox(g.operator, sb.ID, 4*time.Minute, func(sb api.Sandbox, late bool) bool {
				if late {
					t.Fatalf("sandbox %s is still %s", sb.Name, sb.State)
				}
				return sb.State == "terminated" || sb.State == "failed"
			})
			if end.State != "terminated" || end.Run == nil || end.Run.State != "succeeded" {
				log, _ := g.berthErr("sandbox", "logs", "--raw", name)
				t.Fatalf("sandbox %s (%s), run %+v; log:\n%s", end.State, end.Reason, end.Run, log)
			}
			if got := gitIn(t, bare, "show", end.Run.Commit+":f.txt"); got != "hi" {
				t.Errorf("f.txt in the pushed commit holds %q", got)
			}
			calls := servers[r.vendor].Requests()[before:]
			if len(calls) == 0 {
				t.Fatalf("the %s vendor saw no call of the run", r.vendor)
			}
			for _, c := range calls {
				if c.Status != 200 {
					t.Errorf("the %s vendor answered %s %s with %d", r.vendor, c.Method, c.Path, c.Status)
				}
			}
			// What the run started on is its BERTH_MODEL; the gateway
			// metered the model that answered.
			if m := end.Run.Metered; m == nil || m.Requests == 0 || !strings.Contains(fmt.Sprint(m.Models), r.model) {
				t.Errorf("the gateway metered %+v, want calls to %s", m, r.model)
			}
		})
	}
}
