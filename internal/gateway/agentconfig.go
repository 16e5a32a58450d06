package gateway

import (
	"net/http"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentconfig"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/fault"
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
	c, err := s.agentCfg.Set(r.Context(), p, r.PathValue("org"), r.PathValue("project"), agentconfig.Config{Instructions: in.Instructions, Effort: in.Effort, Model: in.Model})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiAgentConfig(c))
}

func apiAgentConfig(c agentconfig.Config) api.AgentConfig {
	return api.AgentConfig{Instructions: c.Instructions, Effort: c.Effort, Model: c.Model, UpdatedAt: timePtr(c.UpdatedAt), UpdatedBy: c.UpdatedBy}
}
