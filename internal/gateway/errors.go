package gateway

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/overload"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/tunnel"
)

// writeError is the one place that maps domain errors to HTTP. A sandbox
// the caller may not see is 404, never 403 (SPEC S6): the services already
// answer ErrNotFound for those, and nothing here turns a not-found into
// anything else. Internal details are logged, not sent.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, body := s.errorStatus(w, r, err)
	writeJSON(w, status, body)
}

// errorStatus is the mapping itself, with the headers a status needs set
// on w; the model routes render its answer in their vendor's error shape.
func (s *Server) errorStatus(w http.ResponseWriter, r *http.Request, err error) (int, api.Error) {
	status, body := http.StatusInternalServerError, api.Error{Code: api.CodeInternal, Message: "internal error"}
	var (
		ambiguous *sandbox.AmbiguousError
		sbInvalid *sandbox.InvalidError
		clInvalid *class.InvalidError
		acInvalid *account.InvalidError
		rateLimit *inference.RateLimitError
		tooLarge  *http.MaxBytesError
	)
	switch {
	// The one body rule (limitBody): whoever read the body, a body over
	// its route's limit gets this answer.
	case errors.As(err, &tooLarge):
		limit := byteSize(tooLarge.Limit)
		if !strings.HasSuffix(limit, " bytes") {
			limit += fmt.Sprintf(" (%d bytes)", tooLarge.Limit)
		}
		status, body = http.StatusRequestEntityTooLarge, api.Error{Code: api.CodeTooLarge, Field: "body",
			Message: "body: larger than " + limit + ", the most this route takes"}
	// The model routes' refusals (SPEC S14). None is a status vendor
	// clients retry (408, 409, 429 aside, 5xx) except the rate limit,
	// which says when.
	case errors.As(err, &rateLimit):
		status, body = http.StatusTooManyRequests, api.Error{Code: api.CodeRateLimited, Message: err.Error()}
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(rateLimit.RetryAfter.Seconds()))))
	case errors.Is(err, inference.ErrBudget):
		status, body = http.StatusPaymentRequired, api.Error{Code: api.CodeBudgetExceeded, Message: err.Error()}
	case errors.Is(err, inference.ErrNotAllowed), errors.Is(err, inference.ErrForbidden):
		status, body = http.StatusForbidden, api.Error{Code: api.CodeForbidden, Message: err.Error()}
	case errors.Is(err, inference.ErrUnknownModel):
		status, body = http.StatusNotFound, api.Error{Code: api.CodeNotFound, Message: err.Error()}
	case errors.Is(err, inference.ErrUnavailable):
		status, body = http.StatusNotFound, api.Error{Code: api.CodeUnavailable, Message: err.Error()}
	case errors.Is(err, inference.ErrInvalid):
		status, body = http.StatusBadRequest, api.Error{Code: api.CodeInvalid, Message: err.Error()}
	case errors.Is(err, errUpstream):
		status, body = http.StatusBadGateway, api.Error{Code: api.CodeUpstream, Message: err.Error()}
	// Overload (one writer at a time on SQLite): the request wrote
	// nothing and may be sent again; the client retries idempotent calls.
	case errors.Is(err, overload.ErrBusy):
		status, body = http.StatusServiceUnavailable, api.Error{Code: api.CodeBusy, Message: err.Error()}
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(overload.RetryAfter.Seconds()))))
	case errors.Is(err, errTooLarge):
		status, body = http.StatusRequestEntityTooLarge, api.Error{Code: api.CodeTooLarge, Message: err.Error()}
	case errors.As(err, &ambiguous):
		status, body = http.StatusConflict, api.Error{Code: api.CodeAmbiguous, Message: err.Error()}
		for _, id := range ambiguous.IDs {
			body.IDs = append(body.IDs, string(id))
		}
	case errors.As(err, &sbInvalid):
		status, body = http.StatusBadRequest, api.Error{Code: api.CodeInvalid, Message: err.Error(), Field: sbInvalid.Field}
	case errors.As(err, &clInvalid):
		status, body = http.StatusBadRequest, api.Error{Code: api.CodeInvalid, Message: err.Error(), Field: clInvalid.Field}
	case errors.As(err, &acInvalid):
		status, body = http.StatusBadRequest, api.Error{Code: api.CodeInvalid, Message: err.Error(), Field: acInvalid.Field}
	case errors.Is(err, sandbox.ErrInvalid), errors.Is(err, class.ErrInvalid), errors.Is(err, account.ErrInvalid):
		status, body = http.StatusBadRequest, api.Error{Code: api.CodeInvalid, Message: err.Error()}
	case errors.Is(err, tunnel.ErrUpgradeRequired):
		status, body = http.StatusUpgradeRequired, api.Error{Code: api.CodeUpgradeRequired, Message: err.Error()}
		tunnel.SetUpgradeHeaders(w.Header())
	case errors.Is(err, account.ErrUnauthenticated):
		status, body = http.StatusUnauthorized, api.Error{Code: api.CodeUnauthenticated, Message: err.Error()}
		w.Header().Set("WWW-Authenticate", `Bearer realm="berth"`)
	case errors.Is(err, guardrail.ErrExceeded):
		status, body = http.StatusForbidden, api.Error{Code: api.CodeQuotaExceeded, Message: err.Error()}
	case errors.Is(err, sandbox.ErrNotFound), errors.Is(err, class.ErrNotFound), errors.Is(err, account.ErrNotFound):
		status, body = http.StatusNotFound, api.Error{Code: api.CodeNotFound, Message: err.Error()}
	case errors.Is(err, sandbox.ErrForbidden), errors.Is(err, class.ErrForbidden), errors.Is(err, account.ErrForbidden):
		status, body = http.StatusForbidden, api.Error{Code: api.CodeForbidden, Message: err.Error()}
	case errors.Is(err, sandbox.ErrUnavailable):
		status, body = http.StatusConflict, api.Error{Code: api.CodeUnavailable, Message: err.Error()}
	case errors.Is(err, sandbox.ErrConflict), errors.Is(err, account.ErrConflict):
		status, body = http.StatusConflict, api.Error{Code: api.CodeConflict, Message: err.Error()}
	default:
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	body.Message = tidy(body.Message)
	return status, body
}

// sentinels are the words errors.Is matches on; the code already says
// them, so a message does not end with them as well.
var sentinels = []error{
	sandbox.ErrNotFound, sandbox.ErrConflict, sandbox.ErrInvalid, sandbox.ErrForbidden, sandbox.ErrUnavailable,
	class.ErrNotFound, class.ErrInvalid, class.ErrForbidden,
	account.ErrNotFound, account.ErrConflict, account.ErrInvalid, account.ErrForbidden, account.ErrUnauthenticated,
	guardrail.ErrExceeded, tunnel.ErrUpgradeRequired,
	inference.ErrBudget, inference.ErrNotAllowed, inference.ErrForbidden, inference.ErrUnknownModel,
	inference.ErrUnavailable, inference.ErrInvalid, errUpstream, errTooLarge, overload.ErrBusy,
}

// tidy drops a trailing sentinel from a message: "only an administrator
// may: forbidden" becomes "only an administrator may". A message that is
// nothing but the sentinel keeps it.
func tidy(msg string) string {
	for changed := true; changed; {
		changed = false
		for _, s := range sentinels {
			if t, ok := strings.CutSuffix(msg, ": "+s.Error()); ok && t != "" {
				msg, changed = t, true
			}
		}
	}
	return msg
}
