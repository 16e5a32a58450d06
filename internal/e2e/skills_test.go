package e2e_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/modelserver"
)

// skillFile is a SKILL.md whose description carries marker.
func skillFile(name, marker string) string {
	return "---\nname: " + name + "\ndescription: Use when asked about " + marker + ".\n---\nSay " + marker + ".\n"
}

// TestSkillsAndMCPReachTheRealCLIs (issue 23): an organisation's agent
// configuration with instructions, an uploaded skill, a skills path in the repository
// and an MCP server (a program in the checkout, run by the image's bash)
// reaches each real CLI in the form it reads. Behind the gateway, each
// runner's vendor stand-in finds the instructions and both skills'
// descriptions in what the CLI sent, then asks for the tool "probe", which only the MCP server
// offers (each CLI names it its own way); the server's answer carries a
// marker from the environment the configuration gave it, and the marker
// is found in the model's next request: the CLI started the server,
// offered its tool, called it and handed back the answer. Pi has no MCP:
// its run leaves the server out and still succeeds, with the skills.
func TestSkillsAndMCPReachTheRealCLIs(t *testing.T) {
	mark := func(p string) string { return p + strings.ToLower(rand.Text()[:10]) }
	uploaded, fromRepo, probe, rule := mark("uploadedskill"), mark("reposkill"), mark("probeanswer"), mark("instructionrule")
	keys := map[modelserver.Vendor]string{
		modelserver.VendorAnthropic: "sk-ant-e2e-" + fmt.Sprint(time.Now().UnixNano()),
		modelserver.VendorOpenAI:    "sk-oai-e2e-" + fmt.Sprint(time.Now().UnixNano()),
		modelserver.VendorGemini:    "goog-e2e-" + fmt.Sprint(time.Now().UnixNano()),
	}
	script := modelserver.Script{Turns: []modelserver.Turn{
		{Tool: "probe", Input: map[string]any{"word": "hi"}},
		{Text: "Done: the probe answered."},
	}}
	servers := map[modelserver.Vendor]*modelserver.Server{}
	urls := map[modelserver.Vendor]string{}
	for v, key := range keys {
		servers[v] = modelserver.New(script, modelserver.AsVendor(v, key), modelserver.WithMarkers(uploaded, fromRepo, probe, rule))
		srv := httptest.NewServer(servers[v].Handler())
		t.Cleanup(srv.Close)
		urls[v] = srv.URL
	}
	runners := []struct {
		runner string
		vendor modelserver.Vendor
		mcp    bool
	}{
		{"claude-code", modelserver.VendorAnthropic, true},
		{"codex", modelserver.VendorOpenAI, true},
		{"opencode", modelserver.VendorGemini, true},
		{"gemini", modelserver.VendorGemini, true},
		{"pi", modelserver.VendorGemini, false},
	}
	var names []string
	for _, r := range runners {
		names = append(names, r.runner)
	}
	g := startAgentGatewayWith(t, fmt.Sprintf(vendorsYAML, urls[modelserver.VendorAnthropic], urls[modelserver.VendorOpenAI], urls[modelserver.VendorGemini]),
		[]string{"E2E_ANTHROPIC_KEY=" + keys[modelserver.VendorAnthropic], "E2E_OPENAI_KEY=" + keys[modelserver.VendorOpenAI], "E2E_GEMINI_KEY=" + keys[modelserver.VendorGemini]},
		names...)
	probeScript, err := os.ReadFile("testdata/mcp/probe.sh")
	if err != nil {
		t.Fatal(err)
	}
	g.seedRepoFiles("acme/app", map[string]string{
		"mcp/probe.sh":                      string(probeScript),
		".berth/skills/repo-skill/SKILL.md": skillFile("repo-skill", fromRepo),
	})
	ctx := context.Background()
	me, err := g.operator.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.operator.SetAgentConfig(ctx, me.Organisation.ID, "", api.AgentConfig{
		Instructions: "Every answer mentions " + rule + ".\n",
		Skills:       []api.AgentSkill{{Name: "uploaded-skill", Files: map[string]string{"SKILL.md": skillFile("uploaded-skill", uploaded), "notes/more.md": "more\n"}}},
		SkillsPath:   ".berth/skills",
		MCP:          []api.MCPServer{{Name: "berth_probe", Command: []string{"bash", "/work/mcp/probe.sh"}, Env: map[string]string{"PROBE_MARKER": probe}}},
	}); err != nil {
		t.Fatal(err)
	}
	for _, r := range runners {
		t.Run(r.runner, func(t *testing.T) {
			if !imageBuilt(g.root, agentImage(r.runner)) {
				t.Skipf("%s is not built (images/build agent %s)", agentImage(r.runner), r.runner)
			}
			before := len(servers[r.vendor].Requests())
			sb, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: "skills-" + strings.ReplaceAll(r.runner, "-", ""), Purpose: "agent", Repo: "acme/app",
				Task: "Use the probe tool.", Runner: r.runner})
			if err != nil {
				t.Fatal(err)
			}
			end := g.waitEnded(sb.ID, 4*time.Minute)
			log, _ := g.berthErr("sandbox", "logs", "--raw", sb.Name)
			if end.State != "terminated" || end.Run == nil || end.Run.State != "succeeded" {
				t.Fatalf("sandbox %s (%s), run %+v; log:\n%.6000s", end.State, end.Reason, end.Run, log)
			}
			var skills, instructed, answered bool
			for _, req := range servers[r.vendor].Requests()[before:] {
				skills = skills || slices.Contains(req.Marked, uploaded) && slices.Contains(req.Marked, fromRepo)
				instructed = instructed || slices.Contains(req.Marked, rule)
				answered = answered || slices.Contains(req.Marked, probe)
			}
			if !instructed {
				t.Errorf("no model call of %s carried the instructions", r.runner)
			}
			if !skills {
				t.Errorf("no model call of %s carried both skills' descriptions; log:\n%.4000s", r.runner, log)
			}
			if answered != r.mcp {
				t.Errorf("%s: the MCP server's answer reached the model: %v, want %v; log:\n%.6000s", r.runner, answered, r.mcp, log)
			}
		})
	}
}

// TestKelosImageGetsItsAgentConfiguration: a Kelos-shaped image on podman
// gets the agent configuration as seed 003 defines it: KELOS_AGENTS_MD,
// KELOS_EFFORT, and KELOS_PLUGIN_DIR, a directory of plugins in the
// <plugin>/skills/<skill>/SKILL.md layout holding the uploaded skill and
// the repository's, mounted read-only beside the checkout (not in it).
func TestKelosImageGetsItsAgentConfiguration(t *testing.T) {
	g := startAgentGateway(t, inferenceYAML, "claude-code")
	g.kelosClass("kelos", "")
	bare := g.seedRepoFiles("acme/app", map[string]string{".berth/skills/repo-skill/SKILL.md": skillFile("repo-skill", "repo")})
	ctx := context.Background()
	me, err := g.operator.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.operator.SetAgentConfig(ctx, me.Organisation.ID, "", api.AgentConfig{Instructions: "Always run the tests.\n", Effort: "high",
		Skills:     []api.AgentSkill{{Name: "uploaded-skill", Files: map[string]string{"SKILL.md": skillFile("uploaded-skill", "uploaded")}}},
		SkillsPath: ".berth/skills"}); err != nil {
		t.Fatal(err)
	}
	sb, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: "kelos-cfg", Class: "kelos", Purpose: "agent", Repo: "acme/app", Task: "Say hello."})
	if err != nil {
		t.Fatal(err)
	}
	end := g.waitEnded(sb.ID, 3*time.Minute)
	log, _ := g.berthErr("sandbox", "logs", "--raw", sb.Name)
	if end.State != "terminated" || end.Run == nil || end.Run.State != "succeeded" {
		t.Fatalf("sandbox %s (%s), run %+v; log:\n%.4000s", end.State, end.Reason, end.Run, log)
	}
	seen := kelosSaw(t, string(log))
	if seen.AgentsMD != "Always run the tests.\n" || seen.Effort != "high" || seen.PluginDir != "/kelos-plugins" {
		t.Errorf("the image saw KELOS_AGENTS_MD %q, KELOS_EFFORT %q, KELOS_PLUGIN_DIR %q", seen.AgentsMD, seen.Effort, seen.PluginDir)
	}
	if want := "./berth/skills/repo-skill/SKILL.md ./berth/skills/uploaded-skill/SKILL.md"; strings.TrimSpace(seen.PluginFiles) != want {
		t.Errorf("the plugin directory held %q, want %q", seen.PluginFiles, want)
	}
	if files := gitIn(t, bare, "ls-tree", "-r", "--name-only", end.Run.Commit); strings.Contains(files, "uploaded-skill") {
		t.Errorf("the plugins entered the checkout: %s", files)
	}
}
