package reach_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/reach"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/tunnel/tunneltest"
)

// TestConnectionKeepsTheSandboxAwake is idle suspend (SPEC S3) with the
// tunnel's connections on a controlled clock: a sandbox with a connection
// open is never idle, however long nobody types; once it closes, the idle
// clock counts from the close, and the sweep suspends the sandbox after
// the limit. The connection's audit entry says how long it was open.
func TestConnectionKeepsTheSandboxAwake(t *testing.T) {
	e := newEnv(t, func(c *sandbox.Config) { c.IdleSuspend = 30 * time.Minute })
	e.run(t)
	ctx := t.Context()
	sb := e.engineer(t, e.alice, "dev")
	e.waitState(t, sb.ID, sandbox.StateRunning)
	e.drv.Point(sb.ID, 2222, tunneltest.Listen(t, tunneltest.Drain))

	conn, err := e.reach.Connect(ctx, e.alice, "dev", 2222)
	if err != nil {
		t.Fatal(err)
	}
	if open, _ := e.svc.Activity(sb); open != 1 {
		t.Fatalf("open connections %d, want 1", open)
	}
	e.clock.Advance(2 * time.Hour)
	if res, _ := e.svc.Sweep(ctx); len(res.Suspended) != 0 {
		t.Fatalf("suspended %v with a connection open", res.Suspended)
	}
	// Bytes moving count as activity too.
	conn.Active()
	if _, last := e.svc.Activity(sb); !last.Equal(e.clock.Now()) {
		t.Errorf("after bytes moved, last activity %v, want now (%v)", last, e.clock.Now())
	}
	conn.Close(ctx, reach.Traffic{Up: 10, Down: 20, End: "closed"})
	conn.Close(ctx, reach.Traffic{}) // a second close changes nothing
	if open, _ := e.svc.Activity(sb); open != 0 {
		t.Fatalf("open connections %d after close, want 0", open)
	}

	e.clock.Advance(29 * time.Minute)
	if res, _ := e.svc.Sweep(ctx); len(res.Suspended) != 0 {
		t.Fatalf("suspended %v 29 minutes after the connection closed", res.Suspended)
	}
	e.clock.Advance(2 * time.Minute)
	if res, _ := e.svc.Sweep(ctx); len(res.Suspended) != 1 {
		t.Fatalf("31 quiet minutes after the close: suspended %v, want the sandbox", res.Suspended)
	}

	all, _, err := e.st.ListAudit(ctx, audit.Filter{Sandbox: string(sb.ID)}, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var events []audit.Event
	for _, ev := range all {
		if ev.Action == audit.ShellOpen {
			events = append(events, ev)
		}
	}
	if len(events) != 1 {
		t.Fatalf("audit %+v, want one shell", events)
	}
	want := "2h open, ended closed; 10 bytes to the sandbox, 20 from it"
	if ev := events[0]; ev.Action != audit.ShellOpen || ev.Actor != e.alice.User.ID || !strings.HasPrefix(ev.Detail, want) {
		t.Errorf("audit event %+v, want alice's shell with %q", ev, want)
	}
}

// TestConnectRefuses: S6's shell column and the states a shell needs.
func TestConnectRefuses(t *testing.T) {
	e := newEnv(t)
	e.run(t)
	ctx := t.Context()
	sb := e.engineer(t, e.alice, "dev")
	e.waitState(t, sb.ID, sandbox.StateRunning)
	e.drv.Point(sb.ID, 2222, tunneltest.Listen(t, tunneltest.Drain))
	agent, err := e.svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: "task", Purpose: "agent", Repo: "acme/app", Task: "fix it"})
	if err != nil {
		t.Fatal(err)
	}
	e.waitState(t, agent.ID, sandbox.StateRunning)

	tests := []struct {
		name    string
		err     func() error
		wantErr error
	}{
		{"operator", func() error { return connect(e, e.operator, string(sb.ID)) }, nil},
		{"owner", func() error { return connect(e, e.alice, "dev") }, nil},
		{"administrator", func() error { return connect(e, e.admin, string(sb.ID)) }, fault.Forbidden},
		{"another member", func() error { return connect(e, e.bob, string(sb.ID)) }, fault.NotFound},
		{"another organisation", func() error { return connect(e, e.stranger, string(sb.ID)) }, fault.NotFound},
		{"an agent sandbox", func() error { return connect(e, e.alice, "task") }, fault.Conflict},
		{"a privileged port", func() error {
			_, err := e.reach.Connect(ctx, e.alice, "dev", 22)
			return err
		}, fault.Invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.err(); !errors.Is(err, tt.wantErr) {
				t.Errorf("Connect = %v, want %v", err, tt.wantErr)
			}
		})
	}
	if _, err := e.svc.Suspend(ctx, e.alice, "dev"); err != nil {
		t.Fatal(err)
	}
	err = connect(e, e.alice, "dev")
	if !errors.Is(err, fault.Conflict) || !strings.Contains(err.Error(), "resume it first") {
		t.Errorf("Connect to a suspended sandbox = %v, want a conflict that says to resume it", err)
	}
}

// connect opens and closes a connection to port 2222 of ref as p.
func connect(e *env, p account.Principal, ref string) error {
	c, err := e.reach.Connect(context.Background(), p, ref, 2222)
	if err == nil {
		c.Close(context.Background(), reach.Traffic{})
	}
	return err
}
