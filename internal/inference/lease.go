package inference

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"berth.dev/berth/internal/fault"
)

// Replicas sharing a database share its budgets through leases: each
// replica holds, for each budget it admits against, a lease in the
// database, and admits a request in its own memory while the request's
// worst case fits what its lease holds beyond its requests in flight.
// When it does not, the replica asks the database (Leases.Lease): under a
// lock of the organisation's, it reads the month's spend and every
// replica's lease, and takes what the request needs, plus some room for
// the next ones while the budget has plenty left. So the month's spend
// and all leases together never pass the budget, and neither does what
// the replicas admit.
//
// A settled request's record takes its reservation off the lease in the
// transaction that writes it (Record.Lease), so a cost moves from the
// lease to the spend and is counted once; what the answer did not use is
// free for every replica again. Leases live leaseTTL and are renewed a
// third of it before (Service.Run); a lease unused since the last renewal
// gives back its room, or goes once nothing in flight holds it. A replica
// that dies renews nothing: its leases stop counting leaseTTL after its
// last renewal and are removed by another replica's next renewal.

// leaseTTL is how long a lease counts without being renewed: how long a
// dead replica's requests can hold a budget.
const leaseTTL = 30 * time.Second

// What a lease takes beyond the request that asked for it: a quarter of
// what no lease holds, at most room for leaseRoom more requests like it,
// and none when that is under one request's worth. Near the end of a
// budget each request asks the database and takes only its own worst case,
// so no replica sits on room another's request needs.
const (
	leaseShare = 4
	leaseRoom  = 64
)

// Leases keeps replicas' leases of budgets in the database; the store
// implements it. A scope is an organisation's budget (project "") or a
// project's.
type Leases interface {
	// Lease changes one replica's leases of an organisation's budgets at
	// once, under a lock of the organisation's that every Lease takes: it
	// reads each scope's figures (Leased, read together so no record falls
	// between them; other replicas' leases expired at g.Now count no more)
	// and hands them to decide, which returns what to add to each of the
	// replica's leases; they are written with g.Expires. decide's error is
	// returned as it is, and nothing is written.
	Lease(ctx context.Context, g LeaseGrant, decide func([]Leased) ([]float64, error)) error
	// ReturnLease takes amount off a replica's lease of a scope.
	ReturnLease(ctx context.Context, replica, org, project string, month time.Time, amount float64) error
	// DropLease removes a replica's lease of a scope.
	DropLease(ctx context.Context, replica, org, project string, month time.Time) error
	// RenewLeases moves the expiry of every lease of the replica to until,
	// and removes every lease expired at now.
	RenewLeases(ctx context.Context, replica string, now, until time.Time) error
	// LeaseStatus reads a scope's month: what was spent, and what the
	// leases live at now hold.
	LeaseStatus(ctx context.Context, org, project string, month, now time.Time) (spent, held float64, err error)
}

// LeaseGrant is what a replica asks of an organisation's budgets.
type LeaseGrant struct {
	Replica  string
	Org      string
	Projects []string // one per scope: "" the organisation's budget, else a project's id
	Month    time.Time
	Now      time.Time // leases that expired by now count no more
	Expires  time.Time
}

// Leased is one scope's month as Lease reads it.
type Leased struct {
	Spent  float64 // recorded this month
	Others float64 // what other replicas' live leases hold
	Mine   float64 // what the asking replica's lease holds
	Have   bool    // the asking replica has a lease, expired or not
}

// Release is what the record of a settled request takes off the leases of
// the replica that admitted it (Record.Lease), committed with the record.
type Release struct {
	Replica  string // "" when the gateway holds no leases
	Month    time.Time
	Projects []string // the scopes, as LeaseGrant names them
	Amount   float64
}

// shared is the ledger of a replica.
type shared struct {
	leases  Leases
	replica string

	mu   sync.Mutex
	held map[leaseKey]*lease
	// orgs take turns per organisation: one change of its leases at a
	// time (a buffered channel of one is a lock a context can leave).
	orgs map[string]chan struct{}
	// wait is what the requests waiting for a turn need of each lease.
	wait map[leaseKey]float64
	// renewed is when the leases were last renewed.
	renewed time.Time
}

type leaseKey struct {
	scope string
	month int64
}

// lease is one of this replica's leases.
type lease struct {
	org, project string
	month        time.Time
	// amount is the lease as the database holds it: granted, less what
	// recorded requests released.
	amount   float64
	reserved float64   // held by this replica's requests in flight
	inFlight int       // how many
	budget   float64   // the budget it was granted against
	expires  time.Time // as last written
	used     time.Time // its last reservation
}

func newShared(leases Leases) *shared {
	return &shared{leases: leases, replica: "rep_" + rand.Text()[:16], held: map[leaseKey]*lease{}, orgs: map[string]chan struct{}{},
		wait: map[leaseKey]float64{}}
}

func keyOf(lim limit, month time.Time) leaseKey { return leaseKey{lim.scope, month.UnixNano()} }

func (l *shared) reserve(ctx context.Context, limits []limit, amount float64, now time.Time) (reservation, error) {
	if len(limits) == 0 {
		return reservation{}, nil
	}
	r := reservation{limits: limits, amount: amount, month: monthOf(now)}
	if l.take(r, now) {
		return r, nil
	}
	// While it waits for its organisation's turn, the grant under way
	// takes what this request needs too: one transaction for a crowd.
	l.waiting(r, 1)
	unlock, err := l.lockOrg(ctx, limits[0].org)
	l.waiting(r, -1)
	if err != nil {
		return reservation{}, err
	}
	defer unlock()
	// Requests in flight settle meanwhile, and fast admits take room, so
	// a grant may have to be asked again; rarely more than once.
	for range 3 {
		if l.take(r, now) {
			return r, nil
		}
		if err := l.grant(ctx, r, now); err != nil {
			return reservation{}, err
		}
	}
	if l.take(r, now) {
		return r, nil
	}
	return reservation{}, errors.New("the budget's lease moved under three grants in a row; try again")
}

// waiting counts r in (sign 1) or out (-1) of the requests that wait for
// their organisation's turn to ask for a grant.
func (l *shared) waiting(r reservation, sign float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, lim := range r.limits {
		k := keyOf(lim, r.month)
		if l.wait[k] += sign * r.amount; sign < 0 && l.wait[k] <= 1e-12*r.amount {
			delete(l.wait, k)
		}
	}
}

// take reserves r against this replica's leases if every one has room
// for it, was granted against the budget that holds now, and is not near
// its expiry.
func (l *shared) take(r reservation, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls := make([]*lease, len(r.limits))
	for i, lim := range r.limits {
		x := l.held[keyOf(lim, r.month)]
		// reserved+amount as grant computes it: a difference may round
		// the other way.
		if x == nil || x.budget != lim.budget || x.reserved+r.amount > x.amount || now.After(x.expires.Add(-leaseTTL/3)) {
			return false
		}
		ls[i] = x
	}
	for _, x := range ls {
		x.reserved += r.amount
		x.inFlight++
		x.used = now
	}
	return true
}

// grant asks the database for what r needs on every lease of its
// organisation. The caller holds the organisation's turn.
func (l *shared) grant(ctx context.Context, r reservation, now time.Time) error {
	g := LeaseGrant{Replica: l.replica, Org: r.limits[0].org, Month: r.month, Now: now, Expires: now.Add(leaseTTL)}
	// must is what each lease has to hold afterwards: its requests in
	// flight and r, and never less than it holds now; crowd adds the
	// requests waiting their turn, when the budget has room for them.
	// (Requests admitted meanwhile on what it held beyond its requests
	// may leave r short after all: reserve asks again.)
	must, crowd := make([]float64, len(r.limits)), make([]float64, len(r.limits))
	l.mu.Lock()
	for i, lim := range r.limits {
		k := keyOf(lim, r.month)
		g.Projects = append(g.Projects, lim.project)
		must[i] = r.amount
		if x := l.held[k]; x != nil {
			must[i] = max(x.amount, x.reserved+r.amount)
		}
		crowd[i] = must[i] + l.wait[k]
	}
	l.mu.Unlock()
	add := make([]float64, len(r.limits))
	meant := make([]float64, len(r.limits)) // each lease once written, had nothing settled meanwhile
	have := make([]bool, len(r.limits))     // the database had the lease
	err := l.leases.Lease(ctx, g, func(fs []Leased) ([]float64, error) {
		if len(fs) != len(r.limits) {
			return nil, fmt.Errorf("the store read %d budgets of %d", len(fs), len(r.limits))
		}
		fits := func(must []float64) bool {
			for i, f := range fs {
				if must[i]-f.Mine > r.limits[i].budget-f.Spent-f.Others-f.Mine {
					return false
				}
			}
			return true
		}
		switch {
		case fits(crowd):
			must = crowd
		case !fits(must):
			for i, f := range fs {
				if lim := r.limits[i]; must[i]-f.Mine > lim.budget-f.Spent-f.Others-f.Mine {
					return nil, overBudget(lim, f.Spent, f.Others+f.Mine, r.amount, " and the replicas' leases")
				}
			}
		}
		for i, f := range fs {
			free := r.limits[i].budget - f.Spent - f.Others - f.Mine
			short := must[i] - f.Mine
			add[i], meant[i], have[i] = 0, f.Mine, f.Have
			if short > 0 {
				room := (free - short) / leaseShare
				if room < r.amount {
					room = 0
				}
				room = min(room, leaseRoom*r.amount)
				add[i], meant[i] = short+room, must[i]+room
			}
		}
		return add, nil
	})
	if err != nil {
		if errors.Is(err, fault.Budget) {
			return err
		}
		return fmt.Errorf("lease of %s's budget: %w", r.limits[0].name, err)
	}
	// The database added to the lease as it then was, which requests
	// settled since the figures were read may have lowered: so does this
	// replica's view, by the same sums. A lease the database had lost
	// (expired, removed by another replica) is what was written now.
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, lim := range r.limits {
		k := keyOf(lim, r.month)
		x := l.held[k]
		if x == nil {
			x = &lease{org: lim.org, project: lim.project, month: r.month}
			l.held[k] = x
		}
		if !have[i] {
			x.amount = 0
		}
		x.amount += add[i]
		// The sum in this order may round a hair under what was meant,
		// and refuse the very request it was asked for; a settle meanwhile
		// lowers it by a whole reservation, which stays.
		if d := meant[i] - x.amount; d > 0 && d <= 1e-12*meant[i] {
			x.amount = meant[i]
		}
		x.budget, x.expires = lim.budget, g.Expires
	}
	return nil
}

// lockOrg waits for the organisation's turn to change its leases.
func (l *shared) lockOrg(ctx context.Context, org string) (func(), error) {
	l.mu.Lock()
	turn := l.orgs[org]
	if turn == nil {
		turn = make(chan struct{}, 1)
		l.orgs[org] = turn
	}
	l.mu.Unlock()
	select {
	case turn <- struct{}{}:
		return func() { <-turn }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *shared) release(r reservation) Release {
	if len(r.limits) == 0 {
		return Release{}
	}
	rel := Release{Replica: l.replica, Month: r.month, Amount: r.amount}
	for _, lim := range r.limits {
		rel.Projects = append(rel.Projects, lim.project)
	}
	return rel
}

// settle ends a reservation. A recorded one also came off the database's
// lease with its record, and comes off this replica's view of it.
func (l *shared) settle(r reservation, _, _ string, _ float64, recorded bool, _ time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, lim := range r.limits {
		x := l.held[keyOf(lim, r.month)]
		if x == nil {
			continue
		}
		x.reserved, x.inFlight = unreserve(x.reserved, x.inFlight, r.amount)
		if recorded {
			x.amount -= r.amount
		}
	}
}

func (l *shared) status(ctx context.Context, org, project string, now time.Time) (spent, held float64, err error) {
	return l.leases.LeaseStatus(ctx, org, project, monthOf(now), now)
}

// renew renews this replica's leases; first those unused since the last
// renewal give back their room, or go when nothing in flight holds them.
// With everything, every lease does so now and none is renewed: the
// replica stops.
func (l *shared) renew(ctx context.Context, now time.Time, everything bool) error {
	l.mu.Lock()
	since := l.renewed
	var idle []leaseKey
	for k, x := range l.held {
		if everything || x.used.Before(since) {
			idle = append(idle, k)
		}
	}
	l.mu.Unlock()
	var errs []error
	for _, k := range idle {
		errs = append(errs, l.giveBack(ctx, k, since, everything))
	}
	if !everything {
		until := now.Add(leaseTTL)
		if err := l.leases.RenewLeases(ctx, l.replica, now, until); err != nil {
			errs = append(errs, fmt.Errorf("renew the budgets' leases: %w", err))
		} else {
			l.mu.Lock()
			for _, x := range l.held {
				x.expires = until
			}
			l.renewed = now
			l.mu.Unlock()
		}
	}
	return errors.Join(errs...)
}

// giveBack returns a lease's room to the database, or the lease, in its
// organisation's turn, if it is still unused since.
func (l *shared) giveBack(ctx context.Context, k leaseKey, since time.Time, everything bool) error {
	l.mu.Lock()
	x := l.held[k]
	l.mu.Unlock()
	if x == nil {
		return nil
	}
	unlock, err := l.lockOrg(ctx, x.org)
	if err != nil {
		return err
	}
	defer unlock()
	// The local view shrinks first: while the database still holds more
	// than it says, nothing is admitted on room that is going.
	l.mu.Lock()
	if l.held[k] != x || (!everything && !x.used.Before(since)) {
		l.mu.Unlock()
		return nil
	}
	room := x.amount - x.reserved
	drop := x.inFlight == 0
	switch {
	case drop:
		delete(l.held, k)
	case room > 0:
		x.amount = x.reserved
	}
	l.mu.Unlock()
	switch {
	case drop:
		err = l.leases.DropLease(ctx, l.replica, x.org, x.project, x.month)
	case room > 0:
		err = l.leases.ReturnLease(ctx, l.replica, x.org, x.project, x.month, room)
	}
	if err != nil {
		return fmt.Errorf("give back a budget's lease: %w", err)
	}
	return nil
}
