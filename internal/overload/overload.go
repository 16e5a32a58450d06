// Package overload names the one refusal that means "not now": the
// gateway could not take a request in time because the work ahead of it
// had not drained, and the same request may be sent again shortly. The
// store returns it, the gateway answers it 503 with Retry-After, and the
// client tries an idempotent call again. It imports nothing of ours.
package overload

import (
	"errors"
	"time"
)

// ErrBusy is a write that did not get its turn at the database within its
// bound: nothing of it was written.
var ErrBusy = errors.New("busy")

// RetryAfter is how long a caller refused with ErrBusy waits before trying
// again (the Retry-After the gateway sends). A turn at the database lasts
// about a millisecond, so a second is enough for a queue that took the
// whole bound to drain, and short for a person.
const RetryAfter = time.Second
