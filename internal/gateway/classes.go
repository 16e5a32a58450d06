package gateway

import (
	"net/http"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/paging"
)

// The class routes (SPEC S4): list, apply a sandboxes file, delete.

func (s *Server) listClasses(w http.ResponseWriter, r *http.Request, p account.Principal) {
	replyPage(s, w, r, "classes", map[string]string{"org": r.URL.Query().Get("org")}, func(lp listPage) ([]api.ClassStatus, *paging.Key, error) {
		classes, next, err := s.classes.List(r.Context(), p, lp.filters["org"], lp.req)
		return each(classes, func(c class.Status) api.ClassStatus {
			return api.ClassStatus{Class: apiClass(c.Class), Startable: c.Startable, Reason: c.Reason}
		}), next, err
	})
}

// applyClasses takes a sandboxes file as the body: YAML, or JSON (which the
// YAML parser reads too), with a top-level sandboxes: list.
func (s *Server) applyClasses(w http.ResponseWriter, r *http.Request, p account.Principal) {
	reply(s, w, r, http.StatusOK, func() (api.AppliedClasses, error) {
		res, err := s.classes.Apply(r.Context(), p, r.URL.Query().Get("org"), r.Body)
		return api.AppliedClasses{Created: nonNil(res.Created), Updated: nonNil(res.Updated), Warnings: res.Warnings}, err
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Server) deleteClass(w http.ResponseWriter, r *http.Request, p account.Principal) {
	s.replyDone(w, r, s.classes.Delete(r.Context(), p, r.URL.Query().Get("org"), r.PathValue("name")))
}
