package store_test

import (
	"errors"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
)

func testAudit(t *testing.T, st *store.Store) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for i, e := range []audit.Event{
		{At: t0, Org: "org_a", Actor: "usr_1", Sandbox: "sbx_1", Action: audit.SandboxCreate},
		{At: t0.Add(time.Minute), Org: "org_a", Actor: "usr_1", Sandbox: "sbx_1", Action: audit.ShellOpen, Detail: "12s, 3400 bytes"},
		{At: t0.Add(2 * time.Minute), Org: "org_b", Actor: "usr_2", Action: audit.KeyCreate, Target: "key_x"},
		{At: t0.Add(3 * time.Minute), Org: "org_a", Sandbox: "sbx_2", Action: audit.GitPush, Outcome: audit.Refused, Target: "acme/app", Detail: "refs/heads/main"},
	} {
		if err := st.Record(t.Context(), e); err != nil {
			t.Fatalf("Record %d: %v", i, err)
		}
	}
	all, _, err := st.ListAudit(t.Context(), audit.Filter{}, paging.Request{})
	if err != nil || len(all) != 4 || all[0].Action != audit.SandboxCreate || all[3].Outcome != audit.Refused || !all[1].At.Equal(t0.Add(time.Minute)) {
		t.Fatalf("ListAudit = %+v, %v", all, err)
	}
	if all[0].Outcome != audit.OK {
		t.Errorf("default outcome %q, want ok", all[0].Outcome)
	}
	for _, tc := range []struct {
		f    audit.Filter
		want int
	}{
		{audit.Filter{Org: "org_a"}, 3}, {audit.Filter{Sandbox: "sbx_1"}, 2}, {audit.Filter{Since: t0.Add(90 * time.Second)}, 2},
	} {
		got, _, err := st.ListAudit(t.Context(), tc.f, paging.Request{})
		if err != nil || len(got) != tc.want {
			t.Errorf("ListAudit(%+v) = %d events, %v; want %d", tc.f, len(got), err, tc.want)
		}
	}
	// Pages, oldest first: two, then the rest after the second's key;
	// a window that moved on meanwhile drops nothing after the key.
	first, next, err := st.ListAudit(t.Context(), audit.Filter{Org: "org_a"}, paging.Request{Limit: 2})
	if err != nil || len(first) != 2 || first[1].Action != audit.ShellOpen || next == nil || next.Seq != first[1].ID {
		t.Fatalf("first page = %+v, next %+v, %v; want create and shell.open, and the key of the latter", first, next, err)
	}
	rest, next, err := st.ListAudit(t.Context(), audit.Filter{Org: "org_a", Since: t0.Add(time.Hour)}, paging.Request{Limit: 2, After: next})
	if err != nil || len(rest) != 1 || rest[0].Action != audit.GitPush || next != nil {
		t.Errorf("second page = %+v, next %+v, %v; want git.push alone and no more", rest, next, err)
	}
}

// testAuditWithTheChange: the writes that take audit events commit them
// with the change, and only then: a refused create records nothing, a
// revoke of a revoked key records nothing, an update that conflicts
// records nothing.
func testAuditWithTheChange(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	count := func(action string) int {
		t.Helper()
		all, _, err := st.ListAudit(ctx, audit.Filter{}, paging.Request{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range all {
			if e.Action == action {
				n++
			}
		}
		return n
	}
	ev := func(action string) audit.Event { return audit.Event{At: t0, Org: fx.org.ID, Action: action} }

	sb, key := newSandbox(fx, fx.ann, "dev", t0)
	refuse := func(sandbox.Live) error { return errors.New("over the quota") }
	if err := st.CreateSandbox(ctx, sb, key, refuse, ev(audit.SandboxCreate), ev(audit.KeyCreate)); err == nil {
		t.Fatal("a refused create succeeded")
	}
	if n := count(audit.SandboxCreate) + count(audit.KeyCreate); n != 0 {
		t.Errorf("a refused create recorded %d events", n)
	}
	if err := st.CreateSandbox(ctx, sb, key, admitAll, ev(audit.SandboxCreate), ev(audit.KeyCreate)); err != nil {
		t.Fatal(err)
	}
	if count(audit.SandboxCreate) != 1 || count(audit.KeyCreate) != 1 {
		t.Errorf("a create recorded %d sandbox.create and %d key.create, want one each", count(audit.SandboxCreate), count(audit.KeyCreate))
	}

	next := sb
	next.State = sandbox.StateRunning
	if err := st.UpdateSandbox(ctx, sandbox.Update{Sandbox: next, From: sandbox.StateSuspended, At: t0, Audit: []audit.Event{ev(audit.SandboxState)}}); !errors.Is(err, fault.Conflict) {
		t.Fatalf("an update from the wrong state = %v, want a conflict", err)
	}
	if n := count(audit.SandboxState); n != 0 {
		t.Errorf("an update that did not happen recorded %d events", n)
	}

	k, _ := account.NewKey(fx.bob.ID, "laptop", t0)
	if err := st.CreateKey(ctx, k, ev(audit.KeyCreate)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := st.RevokeKey(ctx, k.ID, t0, ev(audit.KeyRevoke)); err != nil {
			t.Fatal(err)
		}
	}
	if count(audit.KeyCreate) != 2 || count(audit.KeyRevoke) != 1 {
		t.Errorf("key.create %d, key.revoke %d; want 2 (the sandbox's, the user's) and 1 (a second revoke changes nothing)",
			count(audit.KeyCreate), count(audit.KeyRevoke))
	}
}
