package egress

import (
	"cmp"
	"context"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Tally is what one sandbox's connections to one host and port came to,
// allowed or refused: the per-sandbox egress summary (`berth sandbox
// egress`) is its tallies.
type Tally struct {
	Sandbox     string
	Host        string
	Port        int
	Allowed     bool
	Connections int64
	Up, Down    int64 // bytes to and from the host
	First, Last time.Time
	Why         string // the last refusal's reason
}

// Target is the tally's host:port, as a rule writes it (443 left out).
func (t Tally) Target() string {
	if t.Port == DefaultPort {
		return t.Host
	}
	return net.JoinHostPort(t.Host, strconv.Itoa(t.Port))
}

// add counts u into t.
func (t *Tally) add(u Tally) {
	t.Connections += u.Connections
	t.Up += u.Up
	t.Down += u.Down
	if t.First.IsZero() || (!u.First.IsZero() && u.First.Before(t.First)) {
		t.First = u.First
	}
	if u.Last.After(t.Last) {
		t.Last = u.Last
	}
	if u.Why != "" {
		t.Why = u.Why
	}
}

// Tallies keeps sandboxes' tallies (the store): Add counts each into the
// one of its sandbox, host, port and decision, across replicas.
type Tallies interface {
	AddEgress(ctx context.Context, ts []Tally) error
	EgressOf(ctx context.Context, sandbox string) ([]Tally, error)
}

// FlushAfter is how long a ledger holds an allowed connection's count
// before it writes it: one write for a burst of connections.
const FlushAfter = time.Second

// Ledger counts the egress proxy's connections into the sandboxes'
// tallies. Connections, allowed or refused, are gathered and written at
// most FlushAfter later, so a sandbox that opens (or is refused) hundreds
// costs one write; a read through the ledger (Of, Refused) writes what it
// holds first, so a run read right after a refusal lists it.
type Ledger struct {
	store Tallies
	log   *slog.Logger

	mu      sync.Mutex
	pending map[tallyKey]*Tally
	// reached are the hosts learning sandboxes reached, as their
	// connections opened (a tally comes when one ends): Freeze learns
	// them too. A sandbox's set goes at its freeze, or after maxReachedAge.
	reached map[string]*reachedSet
	timer   *time.Timer
	stopped bool // Stop was called: nothing more is counted
}

type tallyKey struct {
	sandbox, host string
	port          int
	allowed       bool
}

type reachedSet struct {
	since time.Time
	rules []Rule
}

// maxReachedAge bounds how long a learning sandbox's reached hosts are
// held for its freeze: setups longer than this are learnt from the
// tallies alone.
const maxReachedAge = 6 * time.Hour

// NewLedger returns a ledger writing to store.
func NewLedger(store Tallies, log *slog.Logger) *Ledger {
	return &Ledger{store: store, log: log, pending: map[tallyKey]*Tally{}, reached: map[string]*reachedSet{}}
}

// Reached notes that a learning sandbox opened a connection to host:port,
// for its freeze: a tunnel still open, or just closed and not yet
// tallied, is learnt all the same.
func (l *Ledger) Reached(sandbox, host string, port int, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, rs := range l.reached {
		if now.Sub(rs.since) > maxReachedAge {
			delete(l.reached, id)
		}
	}
	rs := l.reached[sandbox]
	if rs == nil {
		rs = &reachedSet{since: now}
		l.reached[sandbox] = rs
	}
	r := Rule{Host: host, Port: port}
	if len(rs.rules) < maxRules && !slices.Contains(rs.rules, r) {
		rs.rules = append(rs.rules, r)
	}
}

// Count adds one connection.
func (l *Ledger) Count(t Tally) {
	t.Connections = 1
	k := tallyKey{t.Sandbox, t.Host, t.Port, t.Allowed}
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	if p, ok := l.pending[k]; ok {
		p.add(t)
	} else {
		l.pending[k] = &t
	}
	if l.timer == nil {
		l.timer = time.AfterFunc(FlushAfter, func() { _ = l.Flush(context.Background()) })
	}
	l.mu.Unlock()
}

// Stop writes what is pending and counts nothing more: the gateway is on
// its way out (a tunnel that ends after this is cut at the exit anyway).
func (l *Ledger) Stop(ctx context.Context) error {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
	return l.Flush(ctx)
}

// Flush writes what is pending. What fails to be written stays pending
// for the next flush.
func (l *Ledger) Flush(ctx context.Context) error {
	l.mu.Lock()
	pending := l.pending
	l.pending = map[tallyKey]*Tally{}
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.mu.Unlock()
	if len(pending) == 0 {
		return nil
	}
	ts := make([]Tally, 0, len(pending))
	for _, t := range pending {
		ts = append(ts, *t)
	}
	err := l.store.AddEgress(context.WithoutCancel(ctx), ts)
	if err == nil {
		return nil
	}
	l.log.WarnContext(ctx, "the egress summary is not written; it is kept for the next try", "tallies", len(ts), "err", err)
	l.mu.Lock()
	for k, t := range pending {
		if p, ok := l.pending[k]; ok {
			p.add(*t)
		} else {
			l.pending[k] = t
		}
	}
	if l.timer == nil && !l.stopped {
		l.timer = time.AfterFunc(FlushAfter, func() { _ = l.Flush(context.Background()) })
	}
	l.mu.Unlock()
	return err
}

// Of returns a sandbox's tallies, what this gateway still holds included:
// refused first, then by host and port.
func (l *Ledger) Of(ctx context.Context, sandbox string) ([]Tally, error) {
	_ = l.Flush(ctx)
	ts, err := l.store.EgressOf(ctx, sandbox)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(ts, func(a, b Tally) int {
		if a.Allowed != b.Allowed {
			if !a.Allowed {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.Port, b.Port))
	})
	return ts, nil
}

// Refused lists the host:port targets a sandbox was refused, in order.
func (l *Ledger) Refused(ctx context.Context, sandbox string) ([]string, error) {
	ts, err := l.Of(ctx, sandbox)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range ts {
		if !t.Allowed {
			out = append(out, t.Target())
		}
	}
	return out, nil
}

// Freeze ends a sandbox's learning (ModeLearn): what the ledger holds is
// written, and the hosts the sandbox reached by name become its policy
// through set, which changes a sandbox that still learns and reports
// whether it did. It returns that policy.
func (l *Ledger) Freeze(ctx context.Context, sandbox string, set func(ctx context.Context, to string) (bool, error)) (Policy, bool, error) {
	ts, err := l.Of(ctx, sandbox)
	if err != nil {
		return Policy{}, false, err
	}
	l.mu.Lock()
	if rs := l.reached[sandbox]; rs != nil {
		for _, r := range rs.rules {
			ts = append(ts, Tally{Sandbox: sandbox, Host: r.Host, Port: r.Port, Allowed: true})
		}
		delete(l.reached, sandbox)
	}
	l.mu.Unlock()
	p := Learned(ts)
	froze, err := set(ctx, p.String())
	return p, froze, err
}

// Learned is the policy of the hosts a sandbox reached by name (its
// allowed tallies; addresses are left out: a name is what a class
// should list), as a class would write it.
func Learned(ts []Tally) Policy {
	seen := map[string]bool{}
	var rules []Rule
	for _, t := range ts {
		if !t.Allowed {
			continue
		}
		r := Rule{Host: t.Host, Port: t.Port}
		if _, err := netip.ParseAddr(t.Host); err == nil || seen[r.String()] {
			continue
		}
		if len(rules) == maxRules {
			break // what a policy holds; the rest stays refused
		}
		seen[r.String()] = true
		rules = append(rules, r)
	}
	if len(rules) == 0 {
		return None
	}
	return Policy{Mode: ModeList, Rules: rules}
}
