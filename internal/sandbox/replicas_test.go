package sandbox_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/reach"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/tunnel/tunneltest"
)

// seats plays the database's part for replicas in these tests: who leads,
// and who holds which sandbox. store.Replica is the real one, tested on
// PostgreSQL in package store.
type seats struct {
	mu     sync.Mutex
	leader string
	holds  map[sandbox.ID]map[string]int
}

// seat is one replica's view of seats.
type seat struct {
	name string
	all  *seats
}

func (s seat) Lead(context.Context) (bool, error) {
	s.all.mu.Lock()
	defer s.all.mu.Unlock()
	return s.all.leader == s.name, nil
}

func (s seat) Hold(_ context.Context, id sandbox.ID) (func(), error) {
	s.all.mu.Lock()
	defer s.all.mu.Unlock()
	for other, n := range s.all.holds[id] {
		if other != s.name && n > 0 {
			return nil, errors.New("held by " + other)
		}
	}
	if s.all.holds[id] == nil {
		s.all.holds[id] = map[string]int{}
	}
	s.all.holds[id][s.name]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.all.mu.Lock()
			defer s.all.mu.Unlock()
			s.all.holds[id][s.name]--
		})
	}, nil
}

func (s seat) HeldElsewhere(_ context.Context, id sandbox.ID) (bool, error) {
	s.all.mu.Lock()
	defer s.all.mu.Unlock()
	for other, n := range s.all.holds[id] {
		if other != s.name && n > 0 {
			return true, nil
		}
	}
	return false, nil
}

// die ends a replica: its lead and its holds go, as its session would.
func (s *seats) die(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leader == name {
		s.leader = ""
	}
	for _, h := range s.holds {
		delete(h, name)
	}
}

func (s *seats) setLeader(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leader = name
}

// TestReplicasShareTheSweep runs two services on one database and driver:
// the one that does not lead never sweeps, the leader leaves alone a start
// the other holds, and once that replica dies the leader finishes the start
// it left behind, as a gateway does after its own restart.
func TestReplicasShareTheSweep(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	all := &seats{leader: "a", holds: map[sandbox.ID]map[string]int{}}
	replica := func(name string) *sandbox.Service {
		return sandbox.NewService(e.st, e.drv, e.accounts, e.cfg, slog.New(slog.NewTextHandler(t.Output(), nil)).With("replica", name),
			e.clock.Now, append(e.opts, sandbox.WithReplicas(seat{name, all}))...)
	}
	a, b := replica("a"), replica("b")

	// a takes a create and, never running its loop, keeps the start queued.
	sb, err := a.Create(ctx, e.alice, sandbox.CreateRequest{Name: "dev", Class: "standard", SSHKeys: []string{testKey}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed)+len(res.Resumed) != 0 {
		t.Fatalf("a sweep on b failed %v and restarted %v; want a's start left to a", res.Failed, res.Resumed)
	}

	// b runs its loop but does not lead: it never sweeps, not even at
	// start-up, though a is gone and its start with it.
	all.die("a")
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Run(runCtx, 10*time.Millisecond)
	}()
	t.Cleanup(func() { cancel(); <-done })
	time.Sleep(100 * time.Millisecond) // ten intervals
	if got, _ := e.st.GetSandbox(ctx, sb.ID); got.State != sandbox.StateStarting {
		t.Fatalf("sandbox %s is %s while no replica leads, want starting", sb.ID, got.State)
	}

	// b takes the lead: its next sweep finishes the start a left behind,
	// with a key of its own (a's went with it).
	all.setLeader("b")
	got := e.waitState(t, sb.ID, sandbox.StateRunning)
	if got.KeyID == sb.KeyID {
		t.Errorf("the start a left was finished with a's key %s", sb.KeyID)
	}
}

// TestIdleClockAcrossReplicas: the idle clock (SPEC S3) counts connections
// through any replica. A connects an engineer to a sandbox for two hours
// while b leads the sweep; bytes moving reach the store within a tick of
// a's loop, and the close before a lets go of its hold, so b's sweep
// counts the quiet time from the close, not from the sandbox's start.
func TestIdleClockAcrossReplicas(t *testing.T) {
	e := newEnv(t, func(c *sandbox.Config) { c.IdleSuspend = 30 * time.Minute })
	ctx := t.Context()
	all := &seats{leader: "b", holds: map[sandbox.ID]map[string]int{}}
	replica := func(name string) *sandbox.Service {
		return sandbox.NewService(e.st, e.drv, e.accounts, e.cfg, slog.New(slog.NewTextHandler(t.Output(), nil)).With("replica", name),
			e.clock.Now, append(e.opts, sandbox.WithReplicas(seat{name, all}))...)
	}
	a, b := replica("a"), replica("b")
	aIn := e.wayIn(a, seat{"a", all})
	e.wayIn(b, seat{"b", all})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Run(runCtx, 10*time.Millisecond) // starts what a queues; never sweeps
	}()
	t.Cleanup(func() { cancel(); <-done })

	sb, err := a.Create(ctx, e.alice, sandbox.CreateRequest{Name: "dev", Class: "standard", SSHKeys: []string{testKey}})
	if err != nil {
		t.Fatal(err)
	}
	e.waitState(t, sb.ID, sandbox.StateRunning)
	e.drv.Point(sb.ID, 2222, tunneltest.Listen(t, tunneltest.Drain))
	conn, err := aIn.Connect(ctx, e.alice, "dev", 2222)
	if err != nil {
		t.Fatal(err)
	}

	e.clock.Advance(2 * time.Hour)
	conn.Active()
	typed := e.clock.Now()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := e.st.GetSandbox(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ActiveAt.Equal(typed) {
			if _, last := b.Activity(got); !last.Equal(typed) {
				t.Errorf("b sees the last activity at %v, want %v (saved by a)", last, typed)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bytes through a's connection at %v never reached the store (active_at %v)", typed, got.ActiveAt)
		}
		time.Sleep(10 * time.Millisecond)
	}

	e.clock.Advance(10 * time.Minute) // open and quiet: still activity
	conn.Close(ctx, reach.Traffic{End: "closed"})
	closed := e.clock.Now()
	if res, err := b.Sweep(ctx); err != nil || len(res.Suspended) != 0 {
		t.Fatalf("b's sweep just after the close: suspended %v (err %v); want nothing: the sandbox was in use through a", res.Suspended, err)
	}
	e.clock.Advance(29 * time.Minute)
	if res, _ := b.Sweep(ctx); len(res.Suspended) != 0 {
		t.Fatalf("suspended %v 29 minutes after the close", res.Suspended)
	}
	e.clock.Advance(2 * time.Minute)
	if res, _ := b.Sweep(ctx); len(res.Suspended) != 1 {
		t.Fatalf("31 quiet minutes after the close (at %v): suspended %v, want the sandbox", closed, res.Suspended)
	}
}
