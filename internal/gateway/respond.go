package gateway

import (
	"net/http"

	"berth.dev/berth/internal/paging"
)

// The skeletons of the JSON routes: decode, call, encode, with every
// error through the one mapper (writeError). A handler says only what it
// calls and how its answer is worded.

// reply answers with what do returns: its error, or its value as JSON
// with status.
func reply[T any](s *Server, w http.ResponseWriter, r *http.Request, status int, do func() (T, error)) {
	v, err := do()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, status, v)
}

// replyTo decodes the body into a Req (the one decoder: unknown fields
// and trailing data refused) and answers with what do makes of it, as
// reply does.
func replyTo[Req, T any](s *Server, w http.ResponseWriter, r *http.Request, status int, do func(req Req) (T, error)) {
	var req Req
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	reply(s, w, r, status, func() (T, error) { return do(req) })
}

// replyPage answers a list route with one page: the page the
// query asks for of the list named list with filters (readPage), what do
// gives of it, and the next page's Link when more follow.
func replyPage[T any](s *Server, w http.ResponseWriter, r *http.Request, list string, filters map[string]string, do func(lp listPage) (T, *paging.Key, error)) {
	lp, err := readPage(r, list, filters)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v, next, err := do(lp)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	setNext(w, r, lp, next)
	writeJSON(w, http.StatusOK, v)
}

// replyCredential answers a route that hands out a credential: the meter
// hears whether it was issued or refused, and an answer holding one is
// never cached.
func replyCredential[T any](s *Server, w http.ResponseWriter, r *http.Request, kind string, status int, v T, err error) {
	if err != nil {
		s.meter.CredentialRequested(kind, "refused")
		s.writeError(w, r, err)
		return
	}
	s.meter.CredentialRequested(kind, "issued")
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, v)
}

// replyDone answers 204 No Content, or err.
func (s *Server) replyDone(w http.ResponseWriter, r *http.Request, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// each words every entry of a page for the wire; an empty page is an
// empty list, never null.
func each[T, W any](in []T, word func(T) W) []W {
	out := make([]W, len(in))
	for i, v := range in {
		out[i] = word(v)
	}
	return out
}
