package inference

import (
	"context"
	"fmt"
	"sync"
	"time"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/quantity"
)

// A budget is enforced with reservations (SPEC S14): before a request goes
// upstream, the most it can cost (worstCase) is reserved against every
// budget that holds for it; a reservation that does not fit what is left
// (the month's spend plus what is already reserved) refuses the request.
// When the answer is metered the reservation is released and the real
// cost added to the spend. So N concurrent requests never overshoot a
// budget: each one's worst case was counted before it started.
//
// Two ledgers keep the reservations. A gateway alone with its database
// (SQLite's one host) keeps them in its memory (local): it reads the
// month's spend once and is exact. Replicas sharing a database hold
// leases of each budget in it (shared, lease.go): a replica admits
// against its own lease and takes more from the database when it runs
// short, so what all of them admit never passes the budget.

// ledger is where reservations are kept.
type ledger interface {
	// reserve holds amount against every limit, all or none, or refuses
	// with fault.Budget.
	reserve(ctx context.Context, limits []limit, amount float64, now time.Time) (reservation, error)
	// release is what the record of r's request takes off the database's
	// leases when it is committed (Record.Lease).
	release(r reservation) Release
	// settle ends r: its request cost cost, and was recorded (with
	// release(r)) or not.
	settle(r reservation, org, project string, cost float64, recorded bool, now time.Time)
	// status is a scope's month: spent, and held by requests in flight.
	status(ctx context.Context, org, project string, now time.Time) (spent, held float64, err error)
}

// limit is one budget a request is charged to.
type limit struct {
	scope        string // scopeKey
	name         string // "the organisation", "project ml"
	org, project string
	budget       float64
}

// reservation is what one request holds against its budgets.
type reservation struct {
	limits []limit
	amount float64
	month  time.Time
}

// monthOf is the first instant of t's calendar month, in UTC.
func monthOf(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// overBudget is the refusal of a request whose worst case does not fit a
// budget.
func overBudget(lim limit, spent, held, worst float64, where string) error {
	left := max(lim.budget-spent-held, 0)
	return fault.Errorf(fault.Budget, "%s's inference budget of %s a month is spent: %s spent this month, %s held by requests in flight%s, %s left; this request may cost up to %s (ask an administrator to raise it with berth project inference set)",
		lim.name, quantity.USD(lim.budget), quantity.USD(spent), quantity.USD(held), where, quantity.USD(left), quantity.USD(worst))
}

// unreserve takes one request's amount off what requests in flight
// hold; the last one leaves exactly nothing, whatever sums of floats left.
func unreserve(reserved float64, inFlight int, amount float64) (float64, int) {
	if inFlight <= 1 {
		return 0, 0
	}
	return max(reserved-amount, 0), inFlight - 1
}

// Spend reads what an organisation (project "") or a project spent since
// a time; the store implements it.
type Spend func(ctx context.Context, org, project string, since time.Time) (float64, error)

// local is the ledger of a gateway alone with its database: the month's
// spend is read from the store once per scope and month, then kept up to
// date here, with the reservations of the requests in flight.
type local struct {
	spend Spend

	mu     sync.Mutex
	scopes map[string]*tally
}

// tally is one scope's month.
type tally struct {
	month    time.Time // the month spent counts
	spent    float64   // settled this month
	reserved float64   // in flight
	inFlight int       // requests reserved: none is a reserved of exactly 0
}

func newLocal(spend Spend) *local {
	return &local{spend: spend, scopes: map[string]*tally{}}
}

// tallyOf returns the scope's tally for the month of now, reading the
// month's spend from the store the first time. Call with l.mu held.
func (l *local) tallyOf(ctx context.Context, lim limit, now time.Time) (*tally, error) {
	month := monthOf(now)
	t := l.scopes[lim.scope]
	if t != nil && t.month.Equal(month) {
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
	// Reservations made last month are still in flight: they stay.
	t.month, t.spent = month, spent
	return t, nil
}

func (l *local) reserve(ctx context.Context, limits []limit, amount float64, now time.Time) (reservation, error) {
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
			return reservation{}, overBudget(lim, t.spent, t.reserved, amount, "")
		}
		tallies[i] = t
	}
	for _, t := range tallies {
		t.reserved += amount
		t.inFlight++
	}
	return reservation{limits: limits, amount: amount, month: monthOf(now)}, nil
}

func (l *local) release(reservation) Release { return Release{} }

// settle releases a reservation and adds what the request really cost to
// its organisation's and its project's month, whether or not they have a
// budget (one may be set while the request is in flight).
func (l *local) settle(r reservation, org, project string, cost float64, _ bool, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, lim := range r.limits {
		if t := l.scopes[lim.scope]; t != nil {
			t.reserved, t.inFlight = unreserve(t.reserved, t.inFlight, r.amount)
		}
	}
	month := monthOf(now)
	for _, key := range []string{scopeKey(org, ""), scopeKey(org, project)} {
		if t := l.scopes[key]; t != nil && t.month.Equal(month) {
			t.spent += cost
		}
	}
}

func (l *local) status(ctx context.Context, org, project string, now time.Time) (spent, reserved float64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, err := l.tallyOf(ctx, limit{scope: scopeKey(org, project), name: scopeKey(org, project), org: org, project: project}, now)
	if err != nil {
		return 0, 0, err
	}
	return t.spent, t.reserved, nil
}
