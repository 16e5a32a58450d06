package gateway_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/fault"
)

// TestTerminateTwice: terminating a sandbox that is already terminated is
// answered 200 with the sandbox as it is, and records nothing more.
func TestTerminateTwice(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	sb := w.running(t, w.owner, "dev", "standard", "")
	first, err := w.owner.Terminate(ctx, "dev")
	if err != nil || first.State != api.StateTerminated || first.EndedAt == nil {
		t.Fatalf("terminate: %+v, %v", first, err)
	}
	events := func() []api.AuditEvent {
		got, err := w.admin.Audit(ctx, client.AuditOptions{Sandbox: sb.ID})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	before := events()
	for _, ref := range []string{"dev", sb.ID} {
		again, err := w.owner.Terminate(ctx, ref)
		if err != nil {
			t.Fatalf("terminate %s again: %v, want 200", ref, err)
		}
		if again.ID != sb.ID || again.State != api.StateTerminated || again.EndedAt == nil || !again.EndedAt.Equal(*first.EndedAt) {
			t.Errorf("terminate %s again: %s %s ended %v, want it as the first terminate left it (ended %v)", ref, again.ID, again.State, again.EndedAt, first.EndedAt)
		}
	}
	if after := events(); len(after) != len(before) {
		t.Errorf("terminating again recorded %d audit events, want none", len(after)-len(before))
	}
	// Still only its owner (or an administrator) may: another member is told
	// it does not exist.
	if _, err := w.foreign.Terminate(ctx, sb.ID); !errors.Is(err, fault.NotFound) {
		t.Errorf("another organisation's member terminating it: %v, want not found", err)
	}
}

// TestExtendSaysWhatItCut: an extend's answer says when the lifetime asked
// for was cut and to what, and no_shorten refuses a lifetime that would
// end sooner than the current one, changing nothing.
func TestExtendSaysWhatItCut(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	sb, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "dev", Class: "standard", TTL: "30d", SSHKeys: []string{sshKey}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "ttl 30d is cut to 1d, the class's max_ttl"; sb.LifetimeCut != want {
		t.Errorf("create --ttl 30d: lifetime_cut %q, want %q", sb.LifetimeCut, want)
	}
	w.waitState(t, w.owner, sb.ID, "running")

	cut, err := w.owner.ExtendWith(ctx, "dev", api.Extend{TTL: "5d", NoShorten: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := "ttl 5d is cut to 1d, the class's max_ttl"; cut.LifetimeCut != want {
		t.Errorf("extend --ttl 5d: lifetime_cut %q, want %q", cut.LifetimeCut, want)
	}
	_, err = w.owner.ExtendWith(ctx, "dev", api.Extend{TTL: "2h", NoShorten: true})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != 409 || !strings.Contains(ae.Message, "a lifetime of 2h from now would shorten it") {
		t.Fatalf("extend --ttl 2h with no_shorten: %v, want 409 saying it would shorten it", err)
	}
	if now, _ := w.owner.Sandbox(ctx, "dev"); !now.ExpiresAt.Equal(cut.ExpiresAt) {
		t.Errorf("the refused extend moved the expiry from %v to %v", cut.ExpiresAt, now.ExpiresAt)
	}
	short, err := w.owner.Extend(ctx, "dev", "2h")
	if err != nil || short.LifetimeCut != "" || time.Until(short.ExpiresAt) > 2*time.Hour {
		t.Errorf("extend --ttl 2h without no_shorten: %v, %q, expires in %v; want 2h, nothing cut", err, short.LifetimeCut, time.Until(short.ExpiresAt))
	}
	if got, _ := w.owner.Sandbox(ctx, "dev"); got.LifetimeCut != "" {
		t.Errorf("a plain GET says lifetime_cut %q; only a create's or extend's answer does", got.LifetimeCut)
	}
}
