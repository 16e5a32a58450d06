package gateway

import (
	"net/http"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
)

// The class routes (SPEC S4): list, apply a sandboxes file, delete.

func (s *Server) listClasses(w http.ResponseWriter, r *http.Request, p account.Principal) {
	lp, err := readPage(r, "classes", map[string]string{"org": r.URL.Query().Get("org")})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	classes, next, err := s.classes.List(r.Context(), p, lp.filters["org"], lp.req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	setNext(w, r, lp, next)
	out := make([]api.ClassStatus, len(classes))
	for i, c := range classes {
		out[i] = api.ClassStatus{Class: apiClass(c.Class), Startable: c.Startable, Reason: c.Reason}
	}
	writeJSON(w, http.StatusOK, out)
}

// applyClasses takes a sandboxes file as the body: YAML, or JSON (which the
// YAML parser reads too), with a top-level sandboxes: list.
func (s *Server) applyClasses(w http.ResponseWriter, r *http.Request, p account.Principal) {
	res, err := s.classes.Apply(r.Context(), p, r.URL.Query().Get("org"), r.Body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.AppliedClasses{Created: nonNil(res.Created), Updated: nonNil(res.Updated), Warnings: res.Warnings})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Server) deleteClass(w http.ResponseWriter, r *http.Request, p account.Principal) {
	if err := s.classes.Delete(r.Context(), p, r.URL.Query().Get("org"), r.PathValue("name")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
