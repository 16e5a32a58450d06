package gateway

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/tunnel"
)

// answer is how the gateway answers one kind of failure: its status, its
// code, and the headers the status needs.
type answer struct {
	status int
	code   string
	header func(http.Header, *fault.Error)
}

// answers is the one table from the domain's error kinds to HTTP. A
// sandbox the caller may not see is 404, never 403 (SPEC S6): the services
// answer fault.NotFound for those, and nothing here turns a not-found into
// anything else. None of the model routes' refusals (SPEC S14) is a status
// vendor clients retry (408, 409, 429 aside, 5xx) except the rate limit,
// which says when; busy (one writer at a time on SQLite) wrote nothing and
// may be sent again, and the client retries idempotent calls.
var answers = map[fault.Kind]answer{
	fault.Invalid:         {http.StatusBadRequest, api.CodeInvalid, nil},
	fault.Unauthenticated: {http.StatusUnauthorized, api.CodeUnauthenticated, bearerChallenge},
	fault.Budget:          {http.StatusPaymentRequired, api.CodeBudgetExceeded, nil},
	fault.Forbidden:       {http.StatusForbidden, api.CodeForbidden, nil},
	fault.Exceeded:        {http.StatusForbidden, api.CodeQuotaExceeded, nil},
	fault.NotFound:        {http.StatusNotFound, api.CodeNotFound, nil},
	fault.Unserved:        {http.StatusNotFound, api.CodeUnavailable, nil},
	fault.Conflict:        {http.StatusConflict, api.CodeConflict, nil},
	fault.Ambiguous:       {http.StatusConflict, api.CodeAmbiguous, nil},
	fault.Unavailable:     {http.StatusConflict, api.CodeUnavailable, nil},
	fault.TooLarge:        {http.StatusRequestEntityTooLarge, api.CodeTooLarge, nil},
	fault.UpgradeRequired: {http.StatusUpgradeRequired, api.CodeUpgradeRequired, func(h http.Header, _ *fault.Error) { tunnel.SetUpgradeHeaders(h) }},
	fault.RateLimited:     {http.StatusTooManyRequests, api.CodeRateLimited, retryAfter},
	fault.Upstream:        {http.StatusBadGateway, api.CodeUpstream, nil},
	fault.Busy:            {http.StatusServiceUnavailable, api.CodeBusy, retryAfter},
}

func bearerChallenge(h http.Header, _ *fault.Error) {
	h.Set("WWW-Authenticate", `Bearer realm="berth"`)
}

// retryAfter says when to send the request again, in whole seconds: at
// least one.
func retryAfter(h http.Header, e *fault.Error) {
	d := time.Second
	if e != nil {
		d = max(d, e.RetryAfter)
	}
	h.Set("Retry-After", strconv.Itoa(int(math.Ceil(d.Seconds()))))
}

// writeError is the one place that maps domain errors to HTTP. Internal
// details are logged, not sent.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, body := s.errorStatus(w, r, err)
	writeJSON(w, status, body)
}

// errorStatus is the mapping itself, with the headers a status needs set
// on w; the model routes render its answer in their vendor's error shape.
func (s *Server) errorStatus(w http.ResponseWriter, r *http.Request, err error) (int, api.Error) {
	// The one body rule (limitBody): whoever read the body, a body over
	// its route's limit gets this answer.
	if tooLarge, ok := errors.AsType[*http.MaxBytesError](err); ok {
		limit := byteSize(tooLarge.Limit)
		if !strings.HasSuffix(limit, " bytes") {
			limit += fmt.Sprintf(" (%d bytes)", tooLarge.Limit)
		}
		err = &fault.Error{Kind: fault.TooLarge, Field: "body", Message: "body: larger than " + limit + ", the most this route takes"}
	}
	a, ok := answers[fault.Of(err)]
	if !ok {
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		return http.StatusInternalServerError, api.Error{Code: api.CodeInternal, Message: "internal error"}
	}
	body := api.Error{Code: a.code, Message: err.Error()}
	e, _ := errors.AsType[*fault.Error](err)
	if e != nil {
		body.Field, body.IDs = e.Field, e.IDs
	}
	if a.header != nil {
		a.header(w.Header(), e)
	}
	return a.status, body
}
