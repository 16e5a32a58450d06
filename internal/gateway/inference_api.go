package gateway

import (
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/paging"
)

// listModels answers GET /api/v1/models: what the caller's key may reach
// (berth model list).
func (s *Server) listModels(w http.ResponseWriter, r *http.Request, p account.Principal) {
	replyPage(s, w, r, "models", nil, func(lp listPage) (api.ModelList, *paging.Key, error) {
		if s.inference == nil {
			return api.ModelList{Models: []api.Model{}}, nil, nil
		}
		ms, err := s.inference.Models(r.Context(), p)
		if err != nil {
			return api.ModelList{}, nil, err
		}
		// The catalog is in memory: a page of it in its order, chat models
		// first, each kind by id.
		slices.SortStableFunc(ms, func(a, b inference.Model) int { return strings.Compare(modelKey(a).Name, modelKey(b).Name) })
		ms, next := paging.Slice(ms, lp.req, modelKey, paging.ByName)
		return api.ModelList{Models: each(ms, apiModel)}, next, nil
	})
}

func apiModel(m inference.Model) api.Model {
	am := api.Model{ID: m.ID, Name: m.Name, Provider: m.Provider, Router: m.Targets, ContextWindow: m.ContextWindow, MaxTokens: m.MaxTokens}
	if !m.Router() {
		am.Price = &api.ModelPrice{Input: m.Price.Input, Output: m.Price.Output, CacheRead: m.Price.CacheRead, CacheWrite: m.Price.CacheWrite}
	}
	return am
}

// modelKey is where a model sits in the list of GET /api/v1/models.
func modelKey(m inference.Model) paging.Key {
	kind := "0"
	if m.Router() {
		kind = "1"
	}
	return paging.Key{Name: kind + "\x00" + m.ID}
}

// vendorModels answers GET /v1/models, authenticated as the model routes
// are, in a shape both OpenAI's and Anthropic's clients read: OpenAI's
// object/owned_by and Anthropic's type/display_name side by side.
func (s *Server) vendorModels(w http.ResponseWriter, r *http.Request, _ account.Principal) {
	d := inference.OpenAIChat
	if r.Header.Get("X-Api-Key") != "" || r.Header.Get("Anthropic-Version") != "" {
		d = inference.Anthropic
	}
	if s.inference == nil {
		s.modelError(w, r, d, errNoModels)
		return
	}
	p, err := s.modelPrincipal(r)
	if err != nil {
		s.modelError(w, r, d, err)
		return
	}
	ms, err := s.inference.Models(r.Context(), p)
	if err != nil {
		s.modelError(w, r, d, err)
		return
	}
	data := []map[string]any{}
	for _, m := range ms {
		data = append(data, map[string]any{"id": m.ID, "object": "model", "type": "model", "display_name": m.Name,
			"owned_by": "berth", "created": 0, "created_at": "1970-01-01T00:00:00Z"})
	}
	out := map[string]any{"object": "list", "data": data, "has_more": false, "first_id": nil, "last_id": nil}
	if len(ms) > 0 {
		out["first_id"], out["last_id"] = ms[0].ID, ms[len(ms)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}

// getInference answers an organisation's or a project's inference
// settings (administrators).
func (s *Server) getInference(w http.ResponseWriter, r *http.Request, p account.Principal) {
	reply(s, w, r, http.StatusOK, func() (api.InferenceStatus, error) {
		if s.inference == nil {
			return api.InferenceStatus{}, errNoModels
		}
		st, err := s.inference.Settings(r.Context(), p, r.PathValue("org"), r.PathValue("project"))
		return apiInferenceStatus(st), err
	})
}

// putInference writes them whole: a field left out clears it.
func (s *Server) putInference(w http.ResponseWriter, r *http.Request, p account.Principal) {
	replyTo(s, w, r, http.StatusOK, func(req api.InferenceSettings) (api.InferenceStatus, error) {
		if s.inference == nil {
			return api.InferenceStatus{}, errNoModels
		}
		set := inference.Settings{Models: req.Models, BudgetUSD: req.BudgetUSD, SystemPrompt: req.SystemPrompt}
		if req.Rate != nil {
			rate, err := inference.ParseRate(*req.Rate)
			if err != nil {
				return api.InferenceStatus{}, err
			}
			set.Rate = &rate
		}
		st, err := s.inference.SetSettings(r.Context(), p, r.PathValue("org"), r.PathValue("project"), set)
		return apiInferenceStatus(st), err
	})
}

func apiInferenceStatus(st inference.Status) api.InferenceStatus {
	set := api.InferenceSettings{Models: st.Settings.Models, BudgetUSD: st.Settings.BudgetUSD, SystemPrompt: st.Settings.SystemPrompt}
	if r := st.Settings.Rate; r != nil {
		rate := r.String()
		set.Rate = &rate
	}
	reach := st.Reachable
	if reach == nil {
		reach = []string{}
	}
	return api.InferenceStatus{Organisation: st.Org, Project: st.Project, ProjectName: st.ProjectName, Settings: set,
		Month: st.Month, SpentUSD: st.SpentUSD, ReservedUSD: st.ReservedUSD, Reachable: reach}
}

// handlerTransport serves requests with a handler inside the gateway (the
// scripted model server), streaming as a network upstream would: the
// response is handed back once the handler writes its header, and its body
// arrives through a pipe as the handler writes it. Closing the body ends
// the handler's writes.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	rw := &pipeResponse{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			if v := recover(); v != nil {
				rw.WriteHeader(http.StatusInternalServerError)
			}
			rw.WriteHeader(http.StatusOK) // a handler that wrote nothing
			pw.Close()
		}()
		t.h.ServeHTTP(rw, req)
	}()
	select {
	case <-rw.ready:
	case <-req.Context().Done():
		pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	return &http.Response{Status: http.StatusText(rw.status), StatusCode: rw.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rw.sent, Body: pr, ContentLength: -1, Request: req}, nil
}

// pipeResponse is the handler's side of a handlerTransport.
type pipeResponse struct {
	header http.Header
	pw     *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
	status int
	sent   http.Header
}

func (p *pipeResponse) Header() http.Header { return p.header }

func (p *pipeResponse) WriteHeader(status int) {
	p.once.Do(func() {
		p.status, p.sent = status, p.header.Clone()
		close(p.ready)
	})
}

func (p *pipeResponse) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	return p.pw.Write(b)
}

// Flush does nothing: a pipe hands every write over at once.
func (p *pipeResponse) Flush() {}

func scriptedTransport(h http.Handler) http.RoundTripper {
	if h == nil {
		return nil
	}
	return handlerTransport{h}
}

// modelTransportOr returns rt, or the gateway's own transport to the model
// vendors: it never asks for compression (answers are metered as they
// pass) and keeps connections to each vendor open for reuse. Model answers
// can take minutes to start, so no header timeout.
func modelTransportOr(rt http.RoundTripper) http.RoundTripper {
	if rt != nil {
		return rt
	}
	return &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 128,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		DisableCompression:  true,
	}
}
