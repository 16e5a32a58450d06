package inference

import (
	"fmt"
	"sync"
	"time"

	"berth.dev/berth/internal/fault"
)

// limiter is a token bucket per scope: a rate of N per period allows a
// burst of N and refills continuously. Like the ledger it is the gateway
// process's own.
type limiter struct {
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	rate   Rate
	tokens float64
	at     time.Time
}

func newLimiter() *limiter { return &limiter{buckets: map[string]*bucket{}} }

// scopeRate is one rate limit a request counts against.
type scopeRate struct {
	scope string
	name  string
	rate  Rate
}

// take spends one token from every bucket, all or none. When one is
// empty it returns a fault.RateLimited saying when to come back.
func (l *limiter) take(rates []scopeRate, now time.Time) error {
	if len(rates) == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	bs := make([]*bucket, len(rates))
	for i, r := range rates {
		b := l.buckets[r.scope]
		if b == nil || b.rate != r.rate {
			// A new or changed limit starts full.
			b = &bucket{rate: r.rate, tokens: float64(r.rate.Requests), at: now}
			l.buckets[r.scope] = b
		}
		perToken := r.rate.Per / time.Duration(r.rate.Requests)
		if el := now.Sub(b.at); el > 0 {
			b.tokens = min(b.tokens+float64(el)/float64(perToken), float64(r.rate.Requests))
			b.at = now
		}
		if b.tokens < 1 {
			wait := time.Duration((1 - b.tokens) * float64(perToken))
			after := max(wait, time.Second)
			return &fault.Error{Kind: fault.RateLimited, RetryAfter: after,
				Message: fmt.Sprintf("%s allows %s; try again in %s", r.name, r.rate, after.Round(time.Second))}
		}
		bs[i] = b
	}
	for _, b := range bs {
		b.tokens--
	}
	return nil
}

// rates are the rate limits that hold under a policy, the organisation's
// first.
func (p Policy) rates() []scopeRate {
	var out []scopeRate
	if r := p.OrgRules.Rate; r != nil {
		out = append(out, scopeRate{scope: scopeKey(p.Org, ""), name: "the organisation", rate: *r})
	}
	if r := p.Rules.Rate; r != nil {
		out = append(out, scopeRate{scope: scopeKey(p.Org, p.Project), name: "project " + p.ProjectName, rate: *r})
	}
	return out
}
