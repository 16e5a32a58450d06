package gateway

import (
	"net/http"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/paging"
)

func (s *Server) whoami(w http.ResponseWriter, r *http.Request, p account.Principal) {
	reply(s, w, r, http.StatusOK, func() (api.Whoami, error) {
		org, err := s.accounts.Organisation(r.Context(), p, "")
		return api.Whoami{User: apiUser(p.User), Organisation: apiOrg(org), KeyID: p.KeyID, Sandbox: p.Sandbox}, err
	})
}

func (s *Server) listOrgs(w http.ResponseWriter, r *http.Request, p account.Principal) {
	replyPage(s, w, r, "orgs", nil, func(lp listPage) ([]api.Organisation, *paging.Key, error) {
		orgs, next, err := s.accounts.Organisations(r.Context(), p, lp.req)
		return each(orgs, apiOrg), next, err
	})
}

func (s *Server) createOrg(w http.ResponseWriter, r *http.Request, p account.Principal) {
	replyTo(s, w, r, http.StatusCreated, func(req api.CreateOrganisation) (api.Organisation, error) {
		org, _, err := s.accounts.CreateOrganisation(r.Context(), p, req.Name, req.Project)
		return apiOrg(org), err
	})
}

func (s *Server) getOrg(w http.ResponseWriter, r *http.Request, p account.Principal) {
	reply(s, w, r, http.StatusOK, func() (api.Organisation, error) {
		org, err := s.accounts.Organisation(r.Context(), p, r.PathValue("org"))
		return apiOrg(org), err
	})
}

func (s *Server) listProjects(w http.ResponseWriter, r *http.Request, p account.Principal) {
	replyPage(s, w, r, "projects of "+r.PathValue("org"), nil, func(lp listPage) ([]api.Project, *paging.Key, error) {
		prjs, next, err := s.accounts.Projects(r.Context(), p, r.PathValue("org"), lp.req)
		out := make([]api.Project, len(prjs))
		for i, prj := range prjs {
			out[i] = apiProject(prj, i == 0 && lp.req.After == nil) // oldest first: the default
		}
		return out, next, err
	})
}

func (s *Server) createProject(w http.ResponseWriter, r *http.Request, p account.Principal) {
	replyTo(s, w, r, http.StatusCreated, func(req api.CreateProject) (api.Project, error) {
		prj, err := s.accounts.CreateProject(r.Context(), p, r.PathValue("org"), req.Name)
		return apiProject(prj, false), err
	})
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request, p account.Principal) {
	replyPage(s, w, r, "users of "+r.PathValue("org"), nil, func(lp listPage) ([]api.User, *paging.Key, error) {
		users, next, err := s.accounts.Users(r.Context(), p, r.PathValue("org"), lp.req)
		return each(users, apiUser), next, err
	})
}

func (s *Server) createUser(w http.ResponseWriter, r *http.Request, p account.Principal) {
	replyTo(s, w, r, http.StatusCreated, func(req api.CreateUser) (api.User, error) {
		role, err := account.ParseRole(req.Role)
		if err != nil {
			return api.User{}, err
		}
		u, err := s.accounts.CreateUser(r.Context(), p, r.PathValue("org"), req.Name, req.Email, role)
		return apiUser(u), err
	})
}

func (s *Server) getGuardrail(w http.ResponseWriter, r *http.Request, p account.Principal) {
	reply(s, w, r, http.StatusOK, func() (api.Guardrail, error) {
		g, err := s.accounts.Guardrail(r.Context(), p, r.PathValue("org"), r.PathValue("project"))
		return apiGuardrail(g), err
	})
}

// putGuardrail writes a guardrail whole (SPEC S7): a field left out of the
// body clears that limit. It answers the guardrail as read back.
func (s *Server) putGuardrail(w http.ResponseWriter, r *http.Request, p account.Principal) {
	replyTo(s, w, r, http.StatusOK, func(req api.Guardrail) (api.Guardrail, error) {
		g, err := domainGuardrail(req)
		if err != nil {
			return api.Guardrail{}, err
		}
		org, prj := r.PathValue("org"), r.PathValue("project")
		if err := s.accounts.SetGuardrail(r.Context(), p, org, prj, g); err != nil {
			return api.Guardrail{}, err
		}
		g, err = s.accounts.Guardrail(r.Context(), p, org, prj)
		return apiGuardrail(g), err
	})
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request, p account.Principal) {
	replyPage(s, w, r, "keys", map[string]string{"user": r.URL.Query().Get("user")}, func(lp listPage) ([]api.Key, *paging.Key, error) {
		keys, next, err := s.accounts.Keys(r.Context(), p, lp.filters["user"], lp.req)
		return each(keys, apiKey), next, err
	})
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request, p account.Principal) {
	replyTo(s, w, r, http.StatusCreated, func(req api.CreateKey) (api.NewKey, error) {
		k, err := s.accounts.CreateKey(r.Context(), p, req.User, req.Name)
		return apiNewKey(k), err
	})
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request, p account.Principal) {
	s.replyDone(w, r, s.accounts.RevokeKey(r.Context(), p, r.PathValue("id")))
}

// disableUser disables a user (SPEC S9): their keys stop working, their
// agent sandboxes are terminated and their engineer sandboxes expire, with
// every repository credential revoked.
func (s *Server) disableUser(w http.ResponseWriter, r *http.Request, p account.Principal) {
	reply(s, w, r, http.StatusOK, func() (api.DisabledUser, error) {
		u, err := s.accounts.SetDisabled(r.Context(), p, r.PathValue("org"), r.PathValue("user"), true)
		if err != nil {
			return api.DisabledUser{}, err
		}
		n, err := s.sandboxes.EndOwner(r.Context(), p, u.ID)
		return api.DisabledUser{User: apiUser(u), Sandboxes: n}, err
	})
}

// enableUser lets a disabled user back in; their sandboxes stay as they are.
// setUserProject sets the project a user's new sandboxes and keys land in
// (administrators).
func (s *Server) setUserProject(w http.ResponseWriter, r *http.Request, p account.Principal) {
	replyTo(s, w, r, http.StatusOK, func(req api.SetUserProject) (api.User, error) {
		u, _, err := s.accounts.SetProject(r.Context(), p, r.PathValue("org"), r.PathValue("user"), req.Project)
		return apiUser(u), err
	})
}

func (s *Server) enableUser(w http.ResponseWriter, r *http.Request, p account.Principal) {
	reply(s, w, r, http.StatusOK, func() (api.User, error) {
		u, err := s.accounts.SetDisabled(r.Context(), p, r.PathValue("org"), r.PathValue("user"), false)
		return apiUser(u), err
	})
}
