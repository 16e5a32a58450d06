package gateway

import (
	"net/http"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
)

func (s *Server) whoami(w http.ResponseWriter, r *http.Request, p account.Principal) {
	org, err := s.accounts.Organisation(r.Context(), p, "")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Whoami{User: apiUser(p.User), Organisation: apiOrg(org), KeyID: p.KeyID, Sandbox: p.Sandbox})
}

func (s *Server) listOrgs(w http.ResponseWriter, r *http.Request, p account.Principal) {
	lp, err := readPage(r, "orgs", nil)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	orgs, next, err := s.accounts.Organisations(r.Context(), p, lp.req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	setNext(w, r, lp, next)
	out := make([]api.Organisation, len(orgs))
	for i, o := range orgs {
		out[i] = apiOrg(o)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) createOrg(w http.ResponseWriter, r *http.Request, p account.Principal) {
	var req api.CreateOrganisation
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	org, _, err := s.accounts.CreateOrganisation(r.Context(), p, req.Name, req.Project)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, apiOrg(org))
}

func (s *Server) getOrg(w http.ResponseWriter, r *http.Request, p account.Principal) {
	org, err := s.accounts.Organisation(r.Context(), p, r.PathValue("org"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiOrg(org))
}

func (s *Server) listProjects(w http.ResponseWriter, r *http.Request, p account.Principal) {
	lp, err := readPage(r, "projects of "+r.PathValue("org"), nil)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	prjs, next, err := s.accounts.Projects(r.Context(), p, r.PathValue("org"), lp.req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	setNext(w, r, lp, next)
	out := make([]api.Project, len(prjs))
	for i, prj := range prjs {
		out[i] = apiProject(prj, i == 0 && lp.req.After == nil) // oldest first: the default
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) createProject(w http.ResponseWriter, r *http.Request, p account.Principal) {
	var req api.CreateProject
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	prj, err := s.accounts.CreateProject(r.Context(), p, r.PathValue("org"), req.Name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, apiProject(prj, false))
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request, p account.Principal) {
	lp, err := readPage(r, "users of "+r.PathValue("org"), nil)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	users, next, err := s.accounts.Users(r.Context(), p, r.PathValue("org"), lp.req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	setNext(w, r, lp, next)
	out := make([]api.User, len(users))
	for i, u := range users {
		out[i] = apiUser(u)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) createUser(w http.ResponseWriter, r *http.Request, p account.Principal) {
	var req api.CreateUser
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	role, err := account.ParseRole(req.Role)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	u, err := s.accounts.CreateUser(r.Context(), p, r.PathValue("org"), req.Name, req.Email, role)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, apiUser(u))
}

func (s *Server) getGuardrail(w http.ResponseWriter, r *http.Request, p account.Principal) {
	g, err := s.accounts.Guardrail(r.Context(), p, r.PathValue("org"), r.PathValue("project"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiGuardrail(g))
}

// putGuardrail writes a guardrail whole (SPEC S7): a field left out of the
// body clears that limit.
func (s *Server) putGuardrail(w http.ResponseWriter, r *http.Request, p account.Principal) {
	var req api.Guardrail
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	g, err := domainGuardrail(req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.accounts.SetGuardrail(r.Context(), p, r.PathValue("org"), r.PathValue("project"), g); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.getGuardrail(w, r, p)
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request, p account.Principal) {
	lp, err := readPage(r, "keys", map[string]string{"user": r.URL.Query().Get("user")})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	keys, next, err := s.accounts.Keys(r.Context(), p, lp.filters["user"], lp.req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	setNext(w, r, lp, next)
	out := make([]api.Key, len(keys))
	for i, k := range keys {
		out[i] = apiKey(k)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request, p account.Principal) {
	var req api.CreateKey
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	k, err := s.accounts.CreateKey(r.Context(), p, req.User, req.Name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, apiNewKey(k))
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request, p account.Principal) {
	if err := s.accounts.RevokeKey(r.Context(), p, r.PathValue("id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// disableUser disables a user (SPEC S9): their keys stop working, their
// agent sandboxes are terminated and their engineer sandboxes expire, with
// every repository credential revoked.
func (s *Server) disableUser(w http.ResponseWriter, r *http.Request, p account.Principal) {
	u, err := s.accounts.SetDisabled(r.Context(), p, r.PathValue("org"), r.PathValue("user"), true)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	n, err := s.sandboxes.EndOwner(r.Context(), p, u.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.DisabledUser{User: apiUser(u), Sandboxes: n})
}

// enableUser lets a disabled user back in; their sandboxes stay as they are.
func (s *Server) enableUser(w http.ResponseWriter, r *http.Request, p account.Principal) {
	u, err := s.accounts.SetDisabled(r.Context(), p, r.PathValue("org"), r.PathValue("user"), false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiUser(u))
}
