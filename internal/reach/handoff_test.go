package reach_test

import (
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"berth.dev/berth/internal/reach"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/tunnel/tunneltest"
)

// handHolder is a machine's receiver that is never given anything here.
type handHolder struct{}

func (handHolder) Give(*os.File) (<-chan struct{}, error) { return nil, nil }

// TestHandedConnectionIsNotDialled: when the driver's machine takes its
// connections over itself, ConnectOrHand admits the caller as always but dials
// nothing (a dial would cost sshd a process for nothing); Dial dials when
// the connection cannot be handed over after all; the connection counts
// for the idle clock either way.
func TestHandedConnectionIsNotDialled(t *testing.T) {
	e := newEnv(t, func(*sandbox.Config) {})
	e.run(t)
	ctx := t.Context()
	sb := e.engineer(t, e.alice, "dev")
	e.waitState(t, sb.ID, sandbox.StateRunning)
	var dialled atomic.Int32
	e.drv.Point(sb.ID, 2222, tunneltest.Listen(t, func(c net.Conn) { dialled.Add(1) }))
	e.drv.HandOver(sb.ID, 2222, handHolder{})

	conn, err := e.reach.ConnectOrHand(ctx, e.alice, "dev", 2222)
	if err != nil {
		t.Fatal(err)
	}
	if conn.Handoff == nil || conn.Conn != nil {
		t.Fatalf("a connection to a handing-over machine: handoff %v, conn %v; want a handoff and no dial", conn.Handoff, conn.Conn)
	}
	if open, _ := e.svc.Activity(sb); open != 1 {
		t.Errorf("open connections %d, want 1", open)
	}
	// An administrator is refused as before: the handoff changes who
	// dials, not who may get inside.
	if _, err := e.reach.ConnectOrHand(ctx, e.admin, string(sb.ID), 2222); err == nil {
		t.Error("an administrator got a connection to a handing-over machine")
	}
	if _, err := conn.Dial(ctx); err != nil || conn.Conn == nil {
		t.Fatalf("dial after all: %v", err)
	}
	conn.Close(ctx, reach.Traffic{End: "closed"})
	if open, _ := e.svc.Activity(sb); open != 0 {
		t.Errorf("open connections %d after close, want 0", open)
	}
	for deadline := time.Now().Add(2 * time.Second); dialled.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if n := dialled.Load(); n != 1 {
		t.Errorf("the sandbox's port was dialled %d times, want once (by Dial)", n)
	}

	// The panel's terminal and the preview speak to the port themselves:
	// Connect dials for them, receiver or not.
	conn, err = e.reach.Connect(ctx, e.alice, "dev", 2222)
	if err != nil {
		t.Fatal(err)
	}
	if conn.Handoff != nil || conn.Conn == nil {
		t.Errorf("Connect to a handing-over machine: handoff %v, conn %v; want a dialled connection", conn.Handoff, conn.Conn)
	}
	conn.Close(ctx, reach.Traffic{End: "closed"})

	// Without a receiver, ConnectOrHand dials at once.
	e.drv.HandOver(sb.ID, 2222, nil)
	conn, err = e.reach.ConnectOrHand(ctx, e.alice, "dev", 2222)
	if err != nil {
		t.Fatal(err)
	}
	if conn.Handoff != nil || conn.Conn == nil {
		t.Errorf("no receiver: handoff %v, conn %v; want a dialled connection", conn.Handoff, conn.Conn)
	}
	conn.Close(ctx, reach.Traffic{End: "closed"})
}
