package sqldb

import (
	"context"
	"errors"
	"testing"
	"time"

	"berth.dev/berth/internal/fault"
)

// waitInLine waits until n callers wait in q.
func waitInLine(t *testing.T, q *queue, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		q.mu.Lock()
		got := q.waiting.Len()
		q.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d callers in line, want %d", got, n)
		}
	}
}

// TestQueueServesInOrder: the turn goes to the callers in the order they
// asked for it, however many wait.
func TestQueueServesInOrder(t *testing.T) {
	q := &queue{}
	if err := q.acquire(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	const n = 20
	served := make(chan int, n)
	for i := range n {
		go func() {
			if err := q.acquire(context.Background(), 0); err != nil {
				t.Error(err)
				return
			}
			served <- i
			q.release()
		}()
		waitInLine(t, q, i+1)
	}
	q.release()
	for want := range n {
		if got := <-served; got != want {
			t.Fatalf("caller %d was served in turn %d", got, want)
		}
	}
}

// TestQueueBoundedWait: a caller whose wait runs out leaves the line with
// fault.Busy, or with its context's error; those behind it move up,
// and the turn is free once the last one is done.
func TestQueueBoundedWait(t *testing.T) {
	q := &queue{}
	if err := q.acquire(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if err := q.acquire(t.Context(), 20*time.Millisecond); !errors.Is(err, fault.Busy) {
		t.Fatalf("a wait that ran out = %v, want fault.Busy", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancelled := make(chan error, 1)
	go func() { cancelled <- q.acquire(ctx, 0) }()
	waitInLine(t, q, 1)
	got := make(chan error, 1)
	go func() { got <- q.acquire(context.Background(), 0) }()
	waitInLine(t, q, 2)
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait = %v, want context.Canceled", err)
	}
	waitInLine(t, q, 1)
	q.release()
	if err := <-got; err != nil {
		t.Fatalf("the caller behind = %v, want the turn", err)
	}
	q.release()
	if err := q.acquire(t.Context(), time.Millisecond); err != nil {
		t.Fatalf("the free turn = %v", err)
	}
}
