package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/repository"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
	"berth.dev/berth/internal/store/storetest"
)

// stallWait is the write wait of the stores the stall tests open.
const stallWait = 100 * time.Millisecond

// stalled is a store with a short write wait, an organisation and a
// sandbox, on a file another connection can lock.
type stalled struct {
	st   *store.Store
	path string
	fx   fixture
	sb   sandbox.Sandbox
	key  account.Key
}

func newStalled(t *testing.T) stalled {
	t.Helper()
	path := store.DefaultPath(t.TempDir())
	st, err := store.Open(t.Context(), path, store.WithWriteWait(stallWait))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fx := newFixture(t, st, "acme")
	sb, key := newSandbox(fx, fx.ann, "web", t0)
	mustCreate(t, st, sb, key)
	return stalled{st: st, path: path, fx: fx, sb: sb, key: key}
}

// events is how many audit entries of action s's store holds.
func (s stalled) events(ctx context.Context, action string) int {
	es, _, _ := s.st.ListAudit(ctx, audit.Filter{}, paging.Request{})
	n := 0
	for _, e := range es {
		if e.Action == action {
			n++
		}
	}
	return n
}

// event is an audit entry of action on s's sandbox.
func (s stalled) event(action string) audit.Event {
	return audit.Event{At: t0, Org: s.fx.org.ID, Sandbox: string(s.sb.ID), Action: action}
}

// stallCase is a write and how to tell it was written.
type stallCase struct {
	name    string
	write   func(ctx context.Context, s stalled) error
	written func(ctx context.Context, s stalled) bool
}

// TestBoundedWritesAreBusyUnderAStall: a write that starts something new,
// stalled past its wait, is fault.Busy (the gateway's 503) and has
// written nothing, neither its rows nor the audit entries that commit with
// them; before, it waited SQLite's 10 s busy timeout and came
// back as SQLITE_BUSY, a 500.
func TestBoundedWritesAreBusyUnderAStall(t *testing.T) {
	tests := []stallCase{
		{"create a sandbox",
			func(ctx context.Context, s stalled) error {
				sb, key := newSandbox(s.fx, s.fx.ann, "new", t0)
				return s.st.CreateSandbox(ctx, sb, key, admitAll, s.event(audit.SandboxCreate), s.event(audit.KeyCreate))
			},
			func(ctx context.Context, s stalled) bool {
				sbs, _ := s.st.ListSandboxes(ctx, sandbox.Filter{Name: "new"})
				return len(sbs) > 0 || s.events(ctx, audit.SandboxCreate)+s.events(ctx, audit.KeyCreate) > 0
			}},
		{"create a user",
			func(ctx context.Context, s stalled) error {
				return s.st.CreateUser(ctx, account.User{ID: "usr_new", Org: s.fx.org.ID, Name: "new", Role: account.RoleMember, CreatedAt: t0},
					s.event(audit.UserCreate))
			},
			func(ctx context.Context, s stalled) bool {
				_, err := s.st.GetUser(ctx, "usr_new")
				return err == nil || s.events(ctx, audit.UserCreate) > 0
			}},
		{"put a guardrail",
			func(ctx context.Context, s stalled) error {
				n := 3
				return s.st.PutGuardrail(ctx, s.fx.org.ID, "", guardrail.Guardrail{MaxSandboxes: &n}, s.event(audit.GuardrailSet))
			},
			func(ctx context.Context, s stalled) bool {
				g, _ := s.st.GetGuardrail(ctx, s.fx.org.ID, "")
				return g.MaxSandboxes != nil || s.events(ctx, audit.GuardrailSet) > 0
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStalled(t)
			release := storetest.LockSQLite(t, s.path)
			began := time.Now()
			err := tt.write(t.Context(), s)
			took := time.Since(began)
			release()
			if !errors.Is(err, fault.Busy) {
				t.Fatalf("stalled write = %v, want fault.Busy", err)
			}
			// Its own wait, not SQLite's old 10 s: loose, for a busy machine.
			if took > 5*time.Second {
				t.Errorf("the stalled write took %v to give up, with a wait of %v", took, stallWait)
			}
			if tt.written(t.Context(), s) {
				t.Error("the refused write was written")
			}
		})
	}
}

// TestStateWritesWaitOutAStall: a write of what has happened, stalled far
// past the write wait, is neither refused nor dropped: it lands when the
// stall ends, with its audit entries, once (a try the lock refused wrote
// nothing). Before, it failed with SQLITE_BUSY after the busy timeout
// and the change was lost (the service logged it and went on).
func TestStateWritesWaitOutAStall(t *testing.T) {
	tests := []stallCase{
		{"a state change",
			func(ctx context.Context, s stalled) error {
				next := s.sb
				next.State = sandbox.StateRunning
				return s.st.UpdateSandbox(ctx, sandbox.Update{Sandbox: next, From: sandbox.StateStarting, At: t0})
			},
			func(ctx context.Context, s stalled) bool {
				sb, _ := s.st.GetSandbox(ctx, s.sb.ID)
				return sb.State == sandbox.StateRunning
			}},
		{"an audit event",
			func(ctx context.Context, s stalled) error {
				return s.st.Record(ctx, audit.Event{At: t0, Org: s.fx.org.ID, Sandbox: string(s.sb.ID), Action: audit.SandboxCreate, Target: string(s.sb.ID)})
			},
			func(ctx context.Context, s stalled) bool {
				es, _, _ := s.st.ListAudit(ctx, audit.Filter{Sandbox: string(s.sb.ID)}, paging.Request{})
				return len(es) == 1
			}},
		{"a run",
			func(ctx context.Context, s stalled) error {
				return s.st.PutRun(ctx, agentrun.Run{Sandbox: s.sb.ID, Runner: "pi", Model: "m", State: agentrun.RunRunning, StartedAt: t0})
			},
			func(ctx context.Context, s stalled) bool { _, err := s.st.GetRun(ctx, s.sb.ID); return err == nil }},
		{"activity",
			func(ctx context.Context, s stalled) error {
				return s.st.SaveActivity(ctx, s.sb.ID, t0.Add(time.Minute))
			},
			func(ctx context.Context, s stalled) bool {
				sb, _ := s.st.GetSandbox(ctx, s.sb.ID)
				return sb.ActiveAt.Equal(t0.Add(time.Minute))
			}},
		{"a key revoked",
			func(ctx context.Context, s stalled) error {
				return s.st.RevokeKey(ctx, s.key.ID, t0, s.event(audit.KeyRevoke))
			},
			func(ctx context.Context, s stalled) bool {
				k, _ := s.st.GetKey(ctx, s.key.ID)
				return !k.RevokedAt.IsZero() && s.events(ctx, audit.KeyRevoke) == 1
			}},
		{"a start finished after a restart, with a fresh key",
			func(ctx context.Context, s stalled) error {
				key, _ := account.NewSandboxKey(s.sb.Owner, string(s.sb.ID), s.sb.Project, s.sb.ExpiresAt, t0.Add(time.Minute))
				next := s.sb
				next.KeyID = key.ID
				return s.st.UpdateSandbox(ctx, sandbox.Update{Sandbox: next, From: sandbox.StateStarting, At: t0.Add(time.Minute), NewKey: &key,
					Audit: []audit.Event{s.event(audit.KeyRevoke), s.event(audit.KeyCreate)}})
			},
			func(ctx context.Context, s stalled) bool {
				sb, _ := s.st.GetSandbox(ctx, s.sb.ID)
				old, _ := s.st.GetKey(ctx, s.key.ID)
				return sb.KeyID != s.key.ID && !old.RevokedAt.IsZero() &&
					s.events(ctx, audit.KeyRevoke) == 1 && s.events(ctx, audit.KeyCreate) == 1
			}},
		{"a repository credential revoked",
			func(ctx context.Context, s stalled) error {
				return s.st.RevokeCredential(ctx, s.sb.ID, "tok_1", t0, s.event(audit.CredentialRevoke))
			},
			func(ctx context.Context, s stalled) bool {
				live, _ := s.st.LiveCredentials(ctx, s.sb.ID)
				return len(live) == 0 && s.events(ctx, audit.CredentialRevoke) == 1
			}},
		{"a model request's record",
			func(ctx context.Context, s stalled) error {
				return s.st.RecordInference(ctx, inference.Record{At: t0, Org: s.fx.org.ID, Project: s.fx.prj.ID, User: s.fx.ann.ID,
					Provider: "p", Model: "m", Dialect: inference.Anthropic, Status: 200, CostUSD: 0.5, Metered: true})
			},
			func(ctx context.Context, s stalled) bool {
				spent, _ := s.st.InferenceSpend(ctx, s.fx.org.ID, "", t0)
				return spent == 0.5
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStalled(t)
			// A credential for the revocation to revoke.
			if err := s.st.AddCredential(t.Context(), repository.Credential{Sandbox: s.sb.ID, TokenID: "tok_1", CreatedAt: t0, ExpiresAt: s.sb.ExpiresAt}); err != nil {
				t.Fatal(err)
			}
			release := storetest.LockSQLite(t, s.path)
			done := make(chan error, 1)
			go func() { done <- tt.write(t.Context(), s) }()
			// Many write waits, and more than one of SQLite's busy timeouts.
			select {
			case err := <-done:
				t.Fatalf("the write returned %v while the database was locked", err)
			case <-time.After(10 * stallWait):
			}
			release()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("the stalled write = %v, want it written once the lock is free", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the stalled write never returned after the lock was freed")
			}
			if !tt.written(t.Context(), s) {
				t.Error("the stalled write is not in the database")
			}
		})
	}
}

// TestStateWriteEndsWithItsContext: a patient write waits as long as its
// context, no longer.
func TestStateWriteEndsWithItsContext(t *testing.T) {
	s := newStalled(t)
	storetest.LockSQLite(t, s.path)
	ctx, cancel := context.WithTimeout(t.Context(), 5*stallWait)
	defer cancel()
	err := s.st.SaveActivity(ctx, s.sb.ID, t0)
	if err == nil || errors.Is(err, fault.Busy) {
		t.Fatalf("SaveActivity past its context = %v, want the context's end", err)
	}
}
