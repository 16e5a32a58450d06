package inference

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// A budget is enforced with reservations (SPEC S14): before a request goes
// upstream, the most it can cost is reserved against every budget that
// holds for it; a reservation that does not fit what is left (the month's
// spend plus what is already reserved) refuses the request. When the
// answer is metered the reservation is released and the real cost added
// to the spend. So N concurrent requests never overshoot a budget: each
// one's worst case was counted before it started.
//
// The ledger is the gateway process's own: the month's spend is read from
// the store, then kept up to date here. One gateway per database
// (SQLite's one host) reads it once per scope and month and is exact.
// Replicas sharing a database re-read it every refresh, so each sees what
// the others committed: what one admits can overshoot a budget by no more
// than the others' requests in flight and what they settled within the
// last refresh. Reservations stay each replica's own.

// limit is one budget a request is charged to.
type limit struct {
	scope        string // scopeKey
	name         string // "the organisation", "project ml"
	org, project string
	budget       float64
}

// Spend reads what an organisation (project "") or a project spent since
// a time; the store implements it.
type Spend func(ctx context.Context, org, project string, since time.Time) (float64, error)

type ledger struct {
	spend Spend
	// refresh is how old a month's spend read from the store may get
	// before it is read again; 0 never, within the month.
	refresh time.Duration

	mu     sync.Mutex
	scopes map[string]*tally
}

// tally is one scope's month.
type tally struct {
	month    time.Time // the month spent counts
	read     time.Time // when spent was read from the store
	spent    float64   // settled this month
	reserved float64   // in flight
}

func newLedger(spend Spend, refresh time.Duration) *ledger {
	return &ledger{spend: spend, refresh: refresh, scopes: map[string]*tally{}}
}

// monthOf is the first instant of t's calendar month, in UTC.
func monthOf(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// tallyOf returns the scope's tally for the month of now, reading the
// month's spend from the store the first time. Call with l.mu held.
func (l *ledger) tallyOf(ctx context.Context, lim limit, now time.Time) (*tally, error) {
	month := monthOf(now)
	t := l.scopes[lim.scope]
	if t != nil && t.month.Equal(month) && (l.refresh == 0 || now.Sub(t.read) < l.refresh) {
		return t, nil
	}
	spent, err := l.spend(ctx, lim.org, lim.project, month)
	if err != nil {
		return nil, fmt.Errorf("spend of %s: %w", lim.name, err)
	}
	if t == nil {
		t = &tally{}
		l.scopes[lim.scope] = t
	}
	// Reservations made last month are still in flight: they stay. What
	// this gateway settled is in the store before it is in spent (Settle),
	// so a fresh read loses none of it.
	t.month, t.read, t.spent = month, now, spent
	return t, nil
}

// reservation is what one request holds against its budgets.
type reservation struct {
	limits []limit
	amount float64
}

// reserve holds amount against every limit, all or none.
func (l *ledger) reserve(ctx context.Context, limits []limit, amount float64, now time.Time) (reservation, error) {
	if len(limits) == 0 {
		return reservation{}, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	tallies := make([]*tally, len(limits))
	for i, lim := range limits {
		t, err := l.tallyOf(ctx, lim, now)
		if err != nil {
			return reservation{}, err
		}
		if t.spent+t.reserved+amount > lim.budget {
			left := max(lim.budget-t.spent-t.reserved, 0)
			return reservation{}, fmt.Errorf("%s's inference budget of $%.2f a month is spent: $%.4f spent this month, $%.4f held by requests in flight, $%.4f left; this request may cost up to $%.4f (ask an administrator to raise it with berth project inference set): %w",
				lim.name, lim.budget, t.spent, t.reserved, left, amount, ErrBudget)
		}
		tallies[i] = t
	}
	for _, t := range tallies {
		t.reserved += amount
	}
	return reservation{limits: limits, amount: amount}, nil
}

// settle releases a reservation and adds what the request really cost to
// its organisation's and its project's month, whether or not they have a
// budget (one may be set while the request is in flight).
func (l *ledger) settle(r reservation, org, project string, cost float64, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, lim := range r.limits {
		if t := l.scopes[lim.scope]; t != nil {
			t.reserved = max(t.reserved-r.amount, 0)
		}
	}
	month := monthOf(now)
	for _, key := range []string{scopeKey(org, ""), scopeKey(org, project)} {
		if t := l.scopes[key]; t != nil && t.month.Equal(month) {
			t.spent += cost
		}
	}
}

// spentNow returns a scope's month as the ledger sees it.
func (l *ledger) spentNow(ctx context.Context, org, project string, now time.Time) (spent, reserved float64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, err := l.tallyOf(ctx, limit{scope: scopeKey(org, project), name: scopeKey(org, project), org: org, project: project}, now)
	if err != nil {
		return 0, 0, err
	}
	return t.spent, t.reserved, nil
}
