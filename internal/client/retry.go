package client

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// A 503 says the gateway could not take the call in time: its writes take
// turns at the database and this one's wait ran out, having written
// nothing (a proxy's 503 means much the same). The client sends the call
// again, as the answer's Retry-After says, when the call is safe to repeat
// whatever happened to the first one.
//
// Safe to repeat are GET and HEAD, which change nothing, and PUT and
// DELETE, which the gateway's routes make idempotent: every PUT writes the
// whole thing (a guardrail, the classes, inference settings), so a second
// leaves what the first did, and every DELETE ends one thing (a key, a
// class), so a second finds it ended. POST is never sent again: a create
// or an action the first request completed (a proxy can answer 503 after
// the gateway acted) would happen twice, or come back as a conflict about
// the first.
const (
	maxRetries = 4                // after the first try
	maxWait    = 10 * time.Second // the most one wait lasts, whatever Retry-After says
	noHint     = time.Second      // the wait when a 503 gives no Retry-After
)

// safeToRepeat reports whether a request of method may be sent again.
func safeToRepeat(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// retryAfter says how long to wait before sending again the call that got
// resp, the retries-th retry, and whether to: a 503 to a call safe to
// repeat, while retries are left and ctx's deadline allows the wait. The
// wait is Retry-After (seconds or a date), at most maxWait, plus up to
// half of it again at random so the callers a 503 turned away do not all
// come back at the same instant.
func retryAfter(ctx context.Context, resp *http.Response, repeatable bool, retries int) (time.Duration, bool) {
	if resp.StatusCode != http.StatusServiceUnavailable || !repeatable || retries >= maxRetries {
		return 0, false
	}
	wait := noHint
	if v := resp.Header.Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(v); err == nil && s >= 0 {
			wait = time.Duration(s) * time.Second
		} else if at, err := http.ParseTime(v); err == nil {
			wait = max(0, time.Until(at))
		}
	}
	wait = min(wait, maxWait)
	if wait > 0 {
		wait += rand.N(wait/2 + 1)
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		return 0, false
	}
	return wait, true
}

// sleep waits d, or less if ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
