package gateway

import (
	"maps"
	"net/http"
	"slices"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentconfig"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/runner"
)

// getAgentConfig is GET /api/v1/orgs/{org}[/projects/{project}]/agent-config:
// one scope's agent configuration as written, to whoever may see the
// organisation.
func (s *Server) getAgentConfig(w http.ResponseWriter, r *http.Request, p account.Principal) {
	if s.agentCfg == nil {
		s.writeError(w, r, fault.Errorf(fault.Unserved, "this gateway keeps no agent configuration"))
		return
	}
	c, err := s.agentCfg.Get(r.Context(), p, r.PathValue("org"), r.PathValue("project"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiAgentConfig(c))
}

// putAgentConfig is PUT /api/v1/orgs/{org}[/projects/{project}]/agent-config:
// one scope's agent configuration written whole (administrators).
func (s *Server) putAgentConfig(w http.ResponseWriter, r *http.Request, p account.Principal) {
	if s.agentCfg == nil {
		s.writeError(w, r, fault.Errorf(fault.Unserved, "this gateway keeps no agent configuration"))
		return
	}
	var in api.AgentConfig
	if err := decode(r, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.agentCfg.Set(r.Context(), p, r.PathValue("org"), r.PathValue("project"), agentconfig.Config{Instructions: in.Instructions, Effort: in.Effort, Model: in.Model,
		Skills: runnerSkills(in.Skills), SkillsPath: in.SkillsPath, MCP: runnerMCP(in.MCP), PullRequests: in.PullRequests})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiAgentConfig(c))
}

func apiAgentConfig(c agentconfig.Config) api.AgentConfig {
	out := api.AgentConfig{Instructions: c.Instructions, Effort: c.Effort, Model: c.Model, SkillsPath: c.SkillsPath, PullRequests: c.PullRequests,
		UpdatedAt: timePtr(c.UpdatedAt), UpdatedBy: c.UpdatedBy}
	for _, sk := range c.Skills {
		files := map[string]string{}
		for _, f := range sk.Files {
			files[f.Path] = string(f.Content)
		}
		out.Skills = append(out.Skills, api.AgentSkill{Name: sk.Name, Files: files})
	}
	for _, m := range c.MCP {
		out.MCP = append(out.MCP, api.MCPServer{Name: m.Name, Command: m.Command, URL: m.URL, Env: m.Env})
	}
	return out
}

// runnerSkills are the skills of a configuration written, their files in
// path order.
func runnerSkills(in []api.AgentSkill) []runner.Skill {
	var out []runner.Skill
	for _, sk := range in {
		s := runner.Skill{Name: sk.Name}
		for _, p := range slices.Sorted(maps.Keys(sk.Files)) {
			s.Files = append(s.Files, runner.File{Path: p, Content: []byte(sk.Files[p])})
		}
		out = append(out, s)
	}
	return out
}

func runnerMCP(in []api.MCPServer) []runner.MCPServer {
	var out []runner.MCPServer
	for _, m := range in {
		out = append(out, runner.MCPServer{Name: m.Name, Command: m.Command, URL: m.URL, Env: m.Env})
	}
	return out
}
