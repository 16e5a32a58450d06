package gateway

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/trigger"
	"berth.dev/berth/internal/trigger/event"
)

// noTriggers answers a gateway that keeps no triggers.
func (s *Server) noTriggers(w http.ResponseWriter, r *http.Request) bool {
	if s.triggers == nil {
		s.writeError(w, r, fault.Errorf(fault.Unserved, "this gateway keeps no triggers"))
		return true
	}
	return false
}

// listTriggers is GET …/projects/{project}/triggers.
func (s *Server) listTriggers(w http.ResponseWriter, r *http.Request, p account.Principal) {
	if s.noTriggers(w, r) {
		return
	}
	ts, err := s.triggers.List(r.Context(), p, r.PathValue("org"), r.PathValue("project"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.TriggerList{Triggers: []api.Trigger{}}
	for _, t := range ts {
		out.Triggers = append(out.Triggers, s.apiTrigger(t, p))
	}
	writeJSON(w, http.StatusOK, out)
}

// getTrigger is GET …/triggers/{name}: the trigger and its latest
// deliveries.
func (s *Server) getTrigger(w http.ResponseWriter, r *http.Request, p account.Principal) {
	if s.noTriggers(w, r) {
		return
	}
	t, ds, err := s.triggers.Get(r.Context(), p, r.PathValue("org"), r.PathValue("project"), r.PathValue("name"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := s.apiTrigger(t, p)
	for _, d := range ds {
		out.Deliveries = append(out.Deliveries, apiDelivery(t, d, false))
	}
	writeJSON(w, http.StatusOK, out)
}

// putTrigger is PUT …/triggers/{name}: the trigger written whole
// (administrators).
func (s *Server) putTrigger(w http.ResponseWriter, r *http.Request, p account.Principal) {
	if s.noTriggers(w, r) {
		return
	}
	var in api.Trigger
	if err := decode(r, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	if in.Name != "" && in.Name != r.PathValue("name") {
		s.writeError(w, r, fault.Field("name", "%q differs from the address's %q", in.Name, r.PathValue("name")))
		return
	}
	on, err := trigger.ParseOn(in.On)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	t := trigger.Trigger{
		Name: r.PathValue("name"), On: on, Repo: in.Repo, Base: in.Base, Class: in.Class, Runner: in.Runner, Model: in.Model, Role: in.Role,
		Task: in.Task, Concurrency: in.Concurrency, DailyTokens: in.DailyTokens, DailyUSD: in.DailyUSD, OpenPR: s.triggers.CanReport(), Session: in.Session,
	}
	if t.Concurrency == 0 {
		t.Concurrency = 1 // absent; a negative one Validate refuses, saying so
	}
	if in.OpenPR != nil {
		t.OpenPR = *in.OpenPR
	}
	t, err = s.triggers.Set(r.Context(), p, r.PathValue("org"), r.PathValue("project"), t)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.apiTrigger(t, p))
}

// deleteTrigger is DELETE …/triggers/{name} (administrators).
func (s *Server) deleteTrigger(w http.ResponseWriter, r *http.Request, p account.Principal) {
	if s.noTriggers(w, r) {
		return
	}
	if err := s.triggers.Delete(r.Context(), p, r.PathValue("org"), r.PathValue("project"), r.PathValue("name")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) apiTrigger(t trigger.Trigger, p account.Principal) api.Trigger {
	openPR := t.OpenPR
	out := api.Trigger{
		ID: t.ID, Name: t.Name, On: t.On.String(), Repo: t.Repo, Base: t.Base, Class: t.Class, Runner: t.Runner, Model: t.Model, Role: t.Role,
		Task: t.Task, Concurrency: t.Concurrency, DailyTokens: t.DailyTokens, DailyUSD: t.DailyUSD, OpenPR: &openPR, Session: t.Session, Owner: t.Owner,
		CreatedAt: timePtr(t.CreatedAt), UpdatedAt: timePtr(t.UpdatedAt), NextAt: timePtr(t.NextAt),
	}
	switch t.On.Source {
	case event.SourceSchedule:
		return out // nothing posts to it
	case event.SourceGitHub:
		out.HookURL = strings.TrimSuffix(s.publicURL, "/") + api.GitHubHookPath
	default:
		out.HookURL = strings.TrimSuffix(s.publicURL, "/") + "/hooks/v1/triggers/" + t.ID
		if p.IsAdminOf(t.Org) {
			out.Secret = s.triggers.Secret(t)
		}
	}
	return out
}

func apiDelivery(t trigger.Trigger, d trigger.Delivery, again bool) api.Delivery {
	return api.Delivery{Trigger: t.Name, ID: d.ID, At: d.At, Outcome: string(d.Outcome), Reason: d.Reason, Sandbox: string(d.Sandbox), Again: again, URL: d.URL}
}

// readHook reads a delivery's body whole (the route bounds it).
func (s *Server) readHook(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.writeError(w, r, err)
		return nil, false
	}
	return body, true
}

// hookAnswer answers a delivery: 202 with what each trigger made of it;
// an event nobody acts on is 202 with none.
func (s *Server) hookAnswer(w http.ResponseWriter, r *http.Request, rs []trigger.Received, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.HookAnswer{Deliveries: []api.Delivery{}}
	for _, x := range rs {
		out.Deliveries = append(out.Deliveries, apiDelivery(x.Trigger, x.Delivery, x.Again))
	}
	writeJSON(w, http.StatusAccepted, out)
}

// hookError answers a delivery the parser refused: a bad signature is
// 401, an event no trigger acts on 202.
func (s *Server) hookError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, event.ErrIgnored):
		writeJSON(w, http.StatusAccepted, api.HookAnswer{Deliveries: []api.Delivery{}})
	case errors.Is(err, event.ErrSignature):
		s.writeError(w, r, fault.Errorf(fault.Unauthenticated, "%v", err))
	default:
		s.writeError(w, r, err)
	}
}

// githubHook is POST /hooks/v1/github: a GitHub App's delivery, signed
// with the App's webhook secret, handed to every trigger on its
// repository.
func (s *Server) githubHook(w http.ResponseWriter, r *http.Request, _ account.Principal) {
	if s.noTriggers(w, r) {
		return
	}
	body, ok := s.readHook(w, r)
	if !ok {
		return
	}
	e, err := event.GitHub(r.Header, body, s.triggers.GitHubSecret())
	if err != nil {
		s.hookError(w, r, err)
		return
	}
	rs, err := s.triggers.GitHub(r.Context(), e)
	s.hookAnswer(w, r, rs, err)
}

// triggerHook is POST /hooks/v1/triggers/{id}: a GitLab project
// webhook's delivery (its secret token the trigger's secret) or a generic
// webhook's (signed with it). An unknown trigger and a bad signature are
// the same 401: the address alone tells nothing.
func (s *Server) triggerHook(w http.ResponseWriter, r *http.Request, _ account.Principal) {
	if s.noTriggers(w, r) {
		return
	}
	body, ok := s.readHook(w, r)
	if !ok {
		return
	}
	t, err := s.triggers.ByID(r.Context(), r.PathValue("id"))
	if errors.Is(err, fault.NotFound) {
		s.hookError(w, r, event.ErrSignature)
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	secret := s.triggers.Secret(t)
	var e event.Event
	switch t.On.Source {
	case event.SourceGitLab:
		e, err = event.GitLab(r.Header, body, secret)
	case event.SourceWebhook:
		e, err = event.Webhook(r.Header, body, []byte(secret), s.now())
	default:
		err = event.ErrSignature // a GitHub trigger takes the App's deliveries only
	}
	if err != nil {
		s.hookError(w, r, err)
		return
	}
	rs, err := s.triggers.Deliver(r.Context(), t, e)
	s.hookAnswer(w, r, rs, err)
}
