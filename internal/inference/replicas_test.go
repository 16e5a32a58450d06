package inference_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/store"
	"berth.dev/berth/internal/store/storetest"
)

// replicas returns n inference services on one PostgreSQL database, as n
// gateway replicas have them: each with its own store (its own
// connections) and its own ledger, sharing the budgets through leases in
// the database, and one clock.
func replicas(t *testing.T, n int) []env {
	t.Helper()
	url := storetest.PostgresURL(t)
	first := newEnvAt(t, url, file)
	out := make([]env, n)
	for i := range out {
		r := first
		if i > 0 {
			st, err := store.Open(t.Context(), url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			r.st = st
			r.opts.Store, r.opts.Audit = st, st
			r.opts.Accounts = account.NewService(st, st, first.clock.Now, nil, st, nil)
		}
		r.opts.Leases = r.st
		r.svc = inference.NewService(r.opts)
		out[i] = r
	}
	return out
}

// reservationOf is what a request of body holds while in flight, read
// from a gateway that keeps its reservations in memory (leases hold more
// than their requests), with no budget in the way (a big one, cleared
// afterwards).
func reservationOf(t *testing.T, e env, body string) float64 {
	t.Helper()
	o := e.opts
	o.Leases = nil
	e.svc = inference.NewService(o)
	big := 1e6
	e.set(t, "default", inference.Settings{BudgetUSD: &big})
	defer e.set(t, "default", inference.Settings{})
	tk, err := admit(t, e, e.user, inference.Anthropic, body)
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.svc.Settings(t.Context(), e.admin, "", "default")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Settle(t.Context(), tk, 500, nil); err != nil { // an error costs nothing
		t.Fatal(err)
	}
	return st.ReservedUSD
}

// TestBudgetsHoldAcrossReplicas sends back-to-back bursts of requests
// split between two replicas, each burst's admitted requests all in flight
// at once (or each settled as the others are admitted), until a whole
// burst is refused. Every request holds its worst
// case while in flight and costs at most that, so what the requests in
// flight when the budget ran out can add to it is what they cost beyond
// their reservations: nothing. The bound asserted is therefore exact:
// what is charged never passes the budget. And no request the budget could
// pay is refused once the replicas gave back what their leases held
// unused: what is left at the end is less than one request's worst case.
// Each replica's own memory of reservations (as before leases) admits up
// to the whole budget on each.
func TestBudgetsHoldAcrossReplicas(t *testing.T) {
	body := `{"model":"cheap","max_tokens":1000,"messages":[]}`
	for _, c := range []struct {
		name  string
		usage string // the answer's usage; "" says none: charged the worst case
		// hold keeps a burst's admitted requests in flight until the whole
		// burst was admitted or refused; else each settles at once, while
		// others are being admitted.
		hold bool
	}{
		{"charged the worst case", "", true},
		{"metered below it", `{"usage":{"input_tokens":30,"output_tokens":100}}`, true},
		{"settled as others are admitted", `{"usage":{"input_tokens":30,"output_tokens":100}}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rs := replicas(t, 2)
			worst := reservationOf(t, rs[0], body)
			budget := 20.5 * worst
			rs[0].set(t, "default", inference.Settings{BudgetUSD: &budget})
			admitted, bursts := 0, 0
			burst := func() int {
				var (
					mu           sync.Mutex
					n            int
					tried, ended sync.WaitGroup
				)
				inFlight := make(chan struct{})
				if !c.hold {
					close(inFlight)
				}
				for i := range 32 {
					r := rs[i%2]
					tried.Add(1)
					ended.Go(func() {
						tk, err := admit(t, r, r.user, inference.Anthropic, body)
						tried.Done()
						if err != nil {
							if !errors.Is(err, fault.Budget) {
								t.Error(err)
							}
							return
						}
						mu.Lock()
						n++
						mu.Unlock()
						<-inFlight
						var m *inference.Meter
						if c.usage != "" {
							m = inference.NewMeter(inference.Anthropic, "application/json")
							_, _ = m.Write([]byte(c.usage))
						}
						if _, err := r.svc.Settle(t.Context(), tk, 200, m); err != nil {
							t.Error(err)
						}
					})
				}
				tried.Wait()
				if c.hold {
					close(inFlight)
				}
				ended.Wait()
				bursts++
				return n
			}
			untilRefused := func() {
				for n := burst(); n > 0 && bursts < 500; n = burst() {
					admitted += n
				}
			}
			untilRefused()
			// Leases unused since the last renewal give their room back.
			for range 2 {
				rs[0].clock.Advance(11 * time.Second)
				for _, r := range rs {
					if err := r.svc.RenewLeases(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
			}
			untilRefused()
			charged, err := rs[1].st.InferenceSpend(t.Context(), rs[0].admin.User.Org, "", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
			if err != nil {
				t.Fatal(err)
			}
			over := fmt.Sprintf("%d requests admitted in %d bursts of 32 charged $%.6f against a budget of $%.6f (%+.1f%%)",
				admitted, bursts, charged, budget, 100*(charged-budget)/budget)
			if charged > budget*(1+1e-12) {
				t.Errorf("%s: over it", over)
			}
			if charged <= budget-worst {
				t.Errorf("%s: a request's worst case ($%.6f) was left and refused", over, worst)
			}
			t.Log(over)
		})
	}
}

// TestCrashedReplicasLeaseStopsCounting: a replica that dies with
// requests in flight holds its lease of the budget until the lease
// expires, unrenewed; then another replica may spend all of it (the dead
// one's requests were never recorded, so they charged nothing).
func TestCrashedReplicasLeaseStopsCounting(t *testing.T) {
	rs := replicas(t, 2)
	a, b := rs[0], rs[1]
	body := `{"model":"cheap","max_tokens":1000,"messages":[]}`
	worst := reservationOf(t, a, body)
	budget := 20.5 * worst
	a.set(t, "default", inference.Settings{BudgetUSD: &budget})
	// a admits five and dies: it never settles them nor renews its lease.
	for range 5 {
		if _, err := admit(t, a, a.user, inference.Anthropic, body); err != nil {
			t.Fatal(err)
		}
	}
	untilRefused := func() int {
		n := 0
		for ; n < 100; n++ {
			if _, err := admit(t, b, b.user, inference.Anthropic, body); errors.Is(err, fault.Budget) {
				return n
			} else if err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	before := untilRefused()
	if before+5 > 20 {
		t.Errorf("b admitted %d beside a's 5 in flight: over a budget that fits 20", before)
	}
	b.clock.Advance(31 * time.Second)
	if err := b.svc.RenewLeases(t.Context()); err != nil {
		t.Fatal(err)
	}
	after := untilRefused()
	if before+after != 20 {
		t.Errorf("b admitted %d while a's lease counted and %d once it had expired; want 20 in all, the budget's worth", before, after)
	}
	st, err := b.svc.Settings(t.Context(), b.admin, "", "default")
	if err != nil {
		t.Fatal(err)
	}
	if held := st.ReservedUSD; held < 20*worst*0.9999 || held > 20.5*worst {
		t.Errorf("the leases hold $%.6f; want b's 20 requests in flight ($%.6f) and nothing of a's", held, 20*worst)
	}
}

// settleDuring is the database's leases with a hook: the next grant runs
// during once it has read the figures, before it writes.
type settleDuring struct {
	inference.Leases
	during func()
}

func (s *settleDuring) Lease(ctx context.Context, g inference.LeaseGrant, decide func([]inference.Leased) ([]float64, error)) error {
	return s.Leases.Lease(ctx, g, func(fs []inference.Leased) ([]float64, error) {
		add, err := decide(fs)
		if f := s.during; f != nil {
			s.during = nil
			f()
		}
		return add, err
	})
}

// TestGrantWhileARequestSettles: a request that settles while its
// replica's grant is between reading the budget and writing its lease
// lowers the lease in the database, and the replica's view of it too, so
// the replica admits no more than the database knows it holds, and with
// another replica's requests the budget is not passed.
func TestGrantWhileARequestSettles(t *testing.T) {
	rs := replicas(t, 2)
	a, b := rs[0], rs[1]
	hook := &settleDuring{Leases: a.st}
	a.opts.Leases = hook
	a.svc = inference.NewService(a.opts)
	body := `{"model":"cheap","max_tokens":1000,"messages":[]}`
	worst := reservationOf(t, a, body)
	budget := 3.5 * worst
	a.set(t, "default", inference.Settings{BudgetUSD: &budget})
	var held []*inference.Ticket
	first, err := admit(t, a, a.user, inference.Anthropic, body)
	if err != nil {
		t.Fatal(err)
	}
	// The second request's grant reads the lease holding the first; the
	// first settles (charged its worst case) before the grant writes.
	hook.during = func() {
		if _, err := a.svc.Settle(t.Context(), first, 200, nil); err != nil {
			t.Error(err)
		}
	}
	second, err := admit(t, a, a.user, inference.Anthropic, body)
	if err != nil {
		t.Fatal(err)
	}
	held = append(held, second)
	if hook.during != nil {
		t.Fatal("the second request took no grant")
	}
	for _, r := range []env{a, b, a, b} {
		if tk, err := admit(t, r, r.user, inference.Anthropic, body); err == nil {
			held = append(held, tk)
		} else if !errors.Is(err, fault.Budget) {
			t.Fatal(err)
		}
	}
	// One charged, the rest in flight at their worst case: what the budget
	// can pay is three.
	if 1+len(held) > 3 {
		t.Errorf("%d admitted in all against a budget that pays for 3", 1+len(held))
	}
}
