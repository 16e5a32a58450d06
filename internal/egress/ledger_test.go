package egress_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/egress"
)

// tallies is an egress.Tallies in memory that counts its writes and can
// be told to fail them.
type tallies struct {
	mu     sync.Mutex
	rows   []egress.Tally
	writes int
	fail   error
}

func (s *tallies) AddEgress(_ context.Context, ts []egress.Tally) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.writes++
	s.rows = append(s.rows, ts...)
	return nil
}

func (s *tallies) EgressOf(_ context.Context, sandbox string) ([]egress.Tally, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []egress.Tally
	for _, t := range s.rows {
		if t.Sandbox == sandbox {
			out = append(out, t)
		}
	}
	return out, nil
}

func (s *tallies) state() (int, int) { s.mu.Lock(); defer s.mu.Unlock(); return s.writes, len(s.rows) }

// TestLedger: a burst of allowed connections to one host is one tally
// written once, within FlushAfter, and so is a burst of refusals; a read
// writes what the ledger holds first; a write that fails keeps what it
// held for the next; a read names what the gateway still holds, refused
// first.
func TestLedger(t *testing.T) {
	st := &tallies{}
	l := egress.NewLedger(st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	now := time.Now()
	for i := range 100 {
		l.Count(egress.Tally{Sandbox: "sbx_a", Host: "registry.npmjs.org", Port: 443, Allowed: true, Up: 10, Down: 100, First: now, Last: now.Add(time.Duration(i))})
	}
	if w, _ := st.state(); w != 0 {
		t.Fatalf("%d writes before FlushAfter, want the burst held", w)
	}
	deadline := time.Now().Add(5 * egress.FlushAfter)
	for w, _ := st.state(); w == 0 && time.Now().Before(deadline); w, _ = st.state() {
		time.Sleep(10 * time.Millisecond)
	}
	if w, n := st.state(); w != 1 || n != 1 || st.rows[0].Connections != 100 || st.rows[0].Down != 10000 {
		t.Fatalf("after FlushAfter: %d writes of %d rows %+v; want one tally of 100 connections", w, n, st.rows)
	}

	for range 50 { // a sandbox that loops on a refused host
		l.Count(egress.Tally{Sandbox: "sbx_a", Host: "evil.example", Port: 443, First: now, Last: now, Why: "not in this sandbox's egress policy"})
	}
	if w, _ := st.state(); w != 1 {
		t.Errorf("50 refusals: %d writes before FlushAfter, want them held", w)
	}
	if refused, err := l.Refused(t.Context(), "sbx_a"); err != nil || len(refused) != 1 || refused[0] != "evil.example" {
		t.Errorf("read at once: %v, %v; want the refusal, written by the read", refused, err)
	}
	if w, n := st.state(); w != 2 || n != 2 || st.rows[1].Connections != 50 {
		t.Errorf("after the read: %d writes, %d rows %+v; want one row of 50 refusals", w, n, st.rows)
	}

	st.mu.Lock()
	st.fail = errors.New("database is locked")
	st.mu.Unlock()
	l.Count(egress.Tally{Sandbox: "sbx_a", Host: "pypi.org", Port: 443, First: now, Last: now, Why: "no"})
	if err := l.Flush(t.Context()); err == nil {
		t.Fatal("a flush to a store that fails succeeded")
	}
	st.mu.Lock()
	st.fail = nil
	st.mu.Unlock()
	refused, err := l.Refused(t.Context(), "sbx_a")
	if err != nil || !slices.Equal(refused, []string{"evil.example", "pypi.org"}) {
		t.Errorf("Refused = %v, %v; want both refusals, the one whose write failed kept", refused, err)
	}
	ts, _ := l.Of(t.Context(), "sbx_a")
	if len(ts) != 3 || ts[0].Allowed || ts[2].Host != "registry.npmjs.org" {
		t.Errorf("Of = %+v, want the refused first", ts)
	}
	if got := egress.Learned(ts).Words(); !slices.Equal(got, []string{"registry.npmjs.org"}) {
		t.Errorf("Learned = %v, want the one host reached", got)
	}
}

// TestLearned: the learned policy lists each host and port reached by
// name once, leaves out addresses and refusals, and is none when nothing
// was reached.
func TestLearned(t *testing.T) {
	ts := []egress.Tally{
		{Host: "registry.npmjs.org", Port: 443, Allowed: true},
		{Host: "registry.npmjs.org", Port: 443, Allowed: true},
		{Host: "files.pythonhosted.org", Port: 8443, Allowed: true},
		{Host: "10.0.0.5", Port: 443, Allowed: true},
		{Host: "evil.example", Port: 443},
	}
	if got := egress.Learned(ts).Words(); !slices.Equal(got, []string{"registry.npmjs.org", "files.pythonhosted.org:8443"}) {
		t.Errorf("Learned = %v", got)
	}
	if got := egress.Learned(ts[4:]).String(); got != "none" {
		t.Errorf("Learned of a refusal alone = %q, want none", got)
	}
}
