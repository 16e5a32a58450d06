// Package fakeclock is a clock tests move by hand. The services and the
// gateway take their clock as a func() time.Time; a test gives them Now
// and moves time with Advance (STYLE.md §9: the clock is a boundary we
// fake). Only tests import it.
package fakeclock

import (
	"sync"
	"time"
)

// Clock is a time that moves only when told. It is safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a Clock that reads t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
