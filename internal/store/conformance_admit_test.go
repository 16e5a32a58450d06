package store_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
)

func testSandboxAdmit(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	other := newFixture(t, st, "globex")
	web := account.Project{ID: "prj_web", Org: fx.org.ID, Name: "web", CreatedAt: t0}
	if err := st.CreateProject(ctx, web); err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	a, ka := newSandbox(fx, fx.ann, "a", t0)
	b, kb := newSandbox(fx, fx.bob, "b", t0)
	c, kc := newSandbox(fx, fx.ann, "c", t0)
	c.Project = web.ID
	ended, ke := newSandbox(fx, fx.ann, "ended", t0)
	ended.State = sandbox.StateTerminated
	elsewhere, kx := newSandbox(other, other.ann, "a", t0)
	for _, x := range []struct {
		sb  sandbox.Sandbox
		key account.Key
	}{{a, ka}, {b, kb}, {c, kc}, {ended, ke}, {elsewhere, kx}} {
		mustCreate(t, st, x.sb, x.key)
	}

	next, key := newSandbox(fx, fx.ann, "next", t0)
	var seen sandbox.Live
	err := st.CreateSandbox(ctx, next, key, func(live sandbox.Live) error {
		seen = live
		return fault.Errorf(fault.Exceeded, "project default has %d live sandboxes", live.Project)
	})
	if !errors.Is(err, fault.Exceeded) {
		t.Errorf("CreateSandbox refused by admit = %v, want %v", err, fault.Exceeded)
	}
	if want := (sandbox.Live{Org: 3, Project: 2}); seen != want {
		t.Errorf("admit saw %+v, want %+v", seen, want)
	}
	_, err = st.GetSandbox(ctx, next.ID)
	wantErr(t, "GetSandbox(refused by admit)", err, fault.NotFound)
	_, err = st.GetKey(ctx, key.ID)
	wantErr(t, "GetKey(refused by admit)", err, fault.NotFound)

	// A sandbox created running (not what the service does) starts its clock.
	running, kr := newSandbox(fx, fx.ann, "running", t0)
	running.State = sandbox.StateRunning
	mustCreate(t, st, running, kr)
	if got := mustGet(t, st, running.ID); !got.RunningSince.Equal(t0) {
		t.Errorf("RunningSince of a sandbox created running = %v, want %v", got.RunningSince, t0)
	}
}

// testConcurrentAdmission races 50 creates from 5 users against a limit of
// 10 live sandboxes: exactly 10 may win.
func testConcurrentAdmission(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	users := []account.User{fx.ann, fx.bob}
	for _, name := range []string{"cat", "dan", "eve"} {
		u := account.User{ID: "usr_" + name, Org: fx.org.ID, Name: name, Role: account.RoleMember, CreatedAt: t0}
		if err := st.CreateUser(ctx, u); err != nil {
			t.Fatalf("CreateUser: %v", err)
		}
		users = append(users, u)
	}
	const limit, callers = 10, 50
	maxLive := limit
	if err := st.PutGuardrail(ctx, fx.org.ID, "", guardrail.Guardrail{MaxSandboxes: &maxLive}); err != nil {
		t.Fatalf("PutGuardrail: %v", err)
	}
	admit := admitOrg(t, st, fx.org.ID)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			sb, key := newSandbox(fx, users[i%len(users)], fmt.Sprintf("sb-%d", i), t0.Add(time.Duration(i)*time.Millisecond))
			errs[i] = st.CreateSandbox(ctx, sb, key, admit)
		})
	}
	wg.Wait()
	var admitted, refused int
	for i, err := range errs {
		switch {
		case err == nil:
			admitted++
		case errors.Is(err, fault.Exceeded):
			refused++
		default:
			t.Errorf("create %d: %v", i, err)
		}
	}
	if admitted != limit || refused != callers-limit {
		t.Errorf("%d admitted and %d refused, want %d and %d", admitted, refused, limit, callers-limit)
	}
	live, err := st.ListSandboxes(ctx, sandbox.Filter{Org: fx.org.ID})
	if err != nil {
		t.Fatalf("ListSandboxes: %v", err)
	}
	if len(live) != limit {
		t.Errorf("%d live sandboxes, want %d", len(live), limit)
	}
}

// admitOrg admits while the organisation has fewer live sandboxes than its
// guardrail's max_sandboxes. Like the service's, it reads the guardrail
// while the transaction that called it is open: the store must allow that
// read.
func admitOrg(t *testing.T, st *store.Store, org string) func(sandbox.Live) error {
	return func(live sandbox.Live) error {
		g, err := st.GetGuardrail(t.Context(), org, "")
		if err != nil {
			return err
		}
		if live.Org >= *g.MaxSandboxes {
			return fault.Errorf(fault.Exceeded, "the organisation has %d live sandboxes", live.Org)
		}
		return nil
	}
}
