package client

import (
	"net/http"
	"strconv"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/fault"
)

// kinds turns the gateway's codes back into the kinds of failure its
// table (gateway/errors.go) answered with them. One code, unavailable,
// answers two kinds, told apart by the status.
var kinds = map[string]fault.Kind{
	api.CodeInvalid:         fault.Invalid,
	api.CodeUnauthenticated: fault.Unauthenticated,
	api.CodeForbidden:       fault.Forbidden,
	api.CodeQuotaExceeded:   fault.Exceeded,
	api.CodeNotFound:        fault.NotFound,
	api.CodeConflict:        fault.Conflict,
	api.CodeAmbiguous:       fault.Ambiguous,
	api.CodeUnavailable:     fault.Unavailable,
	api.CodeUpgradeRequired: fault.UpgradeRequired,
	api.CodeTooLarge:        fault.TooLarge,
	api.CodeRateLimited:     fault.RateLimited,
	api.CodeBudgetExceeded:  fault.Budget,
	api.CodeUpstream:        fault.Upstream,
	api.CodeBusy:            fault.Busy,
}

// withKind wraps e in the *fault.Error of its code's kind, with its field,
// ids and Retry-After; its message is e's, as the CLI prints it. A code of
// no kind (internal, no_git_credential) stays a bare *api.Error.
func withKind(e *api.Error, h http.Header) error {
	k, ok := kinds[e.Code]
	if !ok {
		return e
	}
	if k == fault.Unavailable && e.Status == http.StatusNotFound {
		k = fault.Unserved
	}
	var after time.Duration
	if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s > 0 {
		after = time.Duration(s) * time.Second
	}
	return &fault.Error{Kind: k, Message: e.Error(), Field: e.Field, IDs: e.IDs, RetryAfter: after, Err: e}
}
