// Package overload says how long "not now" lasts: the gateway could not
// take a request in time because the work ahead of it had not drained, and
// the same request may be sent again shortly. The store refuses such a
// write as a fault.Busy carrying RetryAfter, the gateway answers it 503
// with Retry-After, and the client tries an idempotent call again. It
// imports nothing of ours.
package overload

import (
	"time"
)

// RetryAfter is how long a caller refused with fault.Busy waits before
// trying again (the Retry-After the gateway sends). A turn at the database lasts
// about a millisecond, so a second is enough for a queue that took the
// whole bound to drain, and short for a person.
const RetryAfter = time.Second
