package store_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/agentconfig"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/store"
)

// testAgentConfigs checks agentconfig.Store: a scope never written reads
// as the zero Config; a write replaces the scope's whole and is audited;
// the organisation's own and a project's are apart.
func testAgentConfigs(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	if got, err := st.AgentConfig(ctx, fx.org.ID, ""); err != nil || !cmp.Equal(got, agentconfig.Config{}) {
		t.Fatalf("never written: %+v, %v", got, err)
	}
	e := audit.Event{At: t0, Org: fx.org.ID, Actor: fx.ann.ID, Action: audit.AgentConfigSet, Target: "organisation", Outcome: audit.OK}
	org := agentconfig.Config{Instructions: "Run the tests.\n", Effort: "high", Model: "claude-sonnet-4-5", UpdatedAt: t0, UpdatedBy: fx.ann.ID,
		Skills:     []runner.Skill{{Name: "release", Files: []runner.File{{Path: "SKILL.md", Content: []byte("---\nname: release\n---\n")}, {Path: "scripts/tag.sh", Content: []byte("git tag\n")}}}},
		SkillsPath: ".berth/skills", PullRequests: "off",
		MCP: []runner.MCPServer{{Name: "docs", Command: []string{"python3", "/opt/docs.py"}, Env: map[string]string{"MODE": "ro"}}, {Name: "tracker", URL: "https://mcp.example.com/mcp"}}}
	prj := agentconfig.Config{Instructions: "Use make.\n", UpdatedAt: t0, UpdatedBy: fx.ann.ID}
	for _, w := range []struct {
		project string
		c       agentconfig.Config
	}{{"", agentconfig.Config{Instructions: "old", UpdatedAt: t0}}, {"", org}, {fx.prj.ID, prj}} {
		if err := st.PutAgentConfig(ctx, fx.org.ID, w.project, w.c, e); err != nil {
			t.Fatal(err)
		}
	}
	for project, want := range map[string]agentconfig.Config{"": org, fx.prj.ID: prj} {
		if got, err := st.AgentConfig(ctx, fx.org.ID, project); err != nil || !cmp.Equal(got, want) {
			t.Errorf("scope %q: %+v, %v; want %+v", project, got, err, want)
		}
	}
}
