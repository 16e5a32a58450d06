package client

import (
	"context"
	"time"
)

// WithSleep makes c wait through sleep before a retry, and returns c.
func WithSleep(c *Client, sleep func(context.Context, time.Duration) error) *Client {
	c.sleep = sleep
	return c
}

// The retry policy's bounds, for the tests.
const (
	MaxRetries = maxRetries
	MaxWait    = maxWait
)
