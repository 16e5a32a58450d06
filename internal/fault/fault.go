// Package fault is berth's one error vocabulary: the kinds of failure the
// domain reports (not found, conflict, invalid, forbidden, …) and the one
// Error that carries a kind with what an answer needs (the field at fault,
// the candidate ids, when to try again). The domain packages return it, the
// gateway answers each kind with its status and code from one table, and
// the client turns the code back into the kind, so errors.Is(err,
// fault.NotFound) holds on both sides of the wire. It imports nothing of
// ours.
//
// A Kind is an error itself: a bare kind (return fault.NotFound) says its
// words and nothing else. An Error's message never repeats its kind's
// words: the kind is what errors.Is matches and what the gateway's code
// says.
package fault

import (
	"errors"
	"fmt"
	"time"
)

// Kind is a kind of failure. errors.Is(err, k) is true for the bare kind
// and for every *Error of that kind, however wrapped.
type Kind string

// The kinds. Their words are the message of a bare kind.
const (
	// NotFound: absent, or not the caller's to see (SPEC S6: 404, never
	// 403).
	NotFound Kind = "not found"
	// Conflict: the state does not allow it, or the name is taken.
	Conflict Kind = "conflict"
	// Ambiguous: a name matches several things the caller may see; IDs
	// lists them.
	Ambiguous Kind = "ambiguous"
	// Invalid: bad input; Field names it when one field is at fault.
	Invalid Kind = "invalid"
	// Forbidden: the caller may see the thing but not do this.
	Forbidden Kind = "forbidden"
	// Unauthenticated: no credential, or one that is unknown, revoked or
	// expired.
	Unauthenticated Kind = "unauthenticated"
	// Unavailable: this deployment cannot do it (no driver, an unmapped
	// tier, no forge).
	Unavailable Kind = "unavailable"
	// Unserved: nothing here serves what was asked for (a gateway that
	// serves no models).
	Unserved Kind = "not served"
	// Exceeded: a guardrail (a quota) refuses it.
	Exceeded Kind = "quota exceeded"
	// Budget: it does not fit what is left of a budget.
	Budget Kind = "budget exceeded"
	// RateLimited: over a rate limit; RetryAfter says when to come back.
	RateLimited Kind = "rate limited"
	// Busy: not taken in time, and nothing of it done; it may be sent
	// again after RetryAfter.
	Busy Kind = "busy"
	// TooLarge: a request over the size it may have.
	TooLarge Kind = "too large"
	// Upstream: a service berth calls could not be reached.
	Upstream Kind = "upstream unreachable"
	// UpgradeRequired: a request without the protocol upgrade its route
	// needs.
	UpgradeRequired Kind = "upgrade required"
)

// Kinds lists every kind, for tables that must cover them all.
var Kinds = []Kind{NotFound, Conflict, Ambiguous, Invalid, Forbidden, Unauthenticated, Unavailable, Unserved,
	Exceeded, Budget, RateLimited, Busy, TooLarge, Upstream, UpgradeRequired}

// Error returns the kind's words.
func (k Kind) Error() string { return string(k) }

// Error is a failure of a kind, with what its answer needs.
type Error struct {
	Kind Kind
	// Message says what failed, for a person; it does not repeat Kind.
	Message string
	// Field is the input at fault (Invalid).
	Field string
	// IDs are the candidates (Ambiguous).
	IDs []string
	// RetryAfter is when the same request may succeed (RateLimited, Busy).
	RetryAfter time.Duration
	// Err is the cause, if any; errors.Is and errors.As see it too.
	Err error
}

// Error returns the message, or the kind's words when there is none.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Kind.Error()
	}
	return e.Message
}

// Is makes errors.Is(err, k) true for e's kind.
func (e *Error) Is(target error) bool {
	k, ok := target.(Kind)
	return ok && k == e.Kind
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error of kind k whose message is formatted as
// fmt.Errorf formats it: a %w verb makes its operand the cause.
func Errorf(k Kind, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &Error{Kind: k, Message: err.Error(), Err: errors.Unwrap(err)}
}

// Field returns an Invalid *Error naming the field at fault; its message
// is "field: reason".
func Field(field, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &Error{Kind: Invalid, Field: field, Message: field + ": " + err.Error(), Err: errors.Unwrap(err)}
}

// Of returns the kind of err: its first *Error's, else a bare kind's, else
// the first kind an Is method of its own says it is; "" for an error of no
// kind.
func Of(err error) Kind {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Kind
	}
	if k, ok := errors.AsType[Kind](err); ok {
		return k
	}
	for _, k := range Kinds {
		if errors.Is(err, k) {
			return k
		}
	}
	return ""
}
