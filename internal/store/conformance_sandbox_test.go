package store_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/egress"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
)

// newSandbox returns an engineer sandbox of owner in fx's default project,
// starting, and its key.
func newSandbox(fx fixture, owner account.User, name string, created time.Time) (sandbox.Sandbox, account.Key) {
	id := sandbox.NewID()
	expires := created.Add(4 * time.Hour)
	key, _ := account.NewSandboxKey(owner.ID, string(id), fx.prj.ID, expires, created)
	return sandbox.Sandbox{
		ID: id, Name: name, Org: fx.org.ID, Project: fx.prj.ID, Owner: owner.ID,
		Purpose: sandbox.PurposeEngineer, Class: "small", Image: "ghcr.io/acme/dev:1",
		Isolation: sandbox.TierIsolated, Runtime: "runsc", CPU: 2000, Memory: 4 << 30,
		State: sandbox.StateStarting, SSHKeys: []string{"ssh-ed25519 AAAAC3Nz ann@laptop"},
		KeyID: key.ID, CreatedAt: created, ExpiresAt: expires,
	}, key
}

func admitAll(sandbox.Live) error { return nil }

func mustCreate(t *testing.T, st *store.Store, sb sandbox.Sandbox, key account.Key) {
	t.Helper()
	if err := st.CreateSandbox(t.Context(), sb, key, admitAll); err != nil {
		t.Fatalf("CreateSandbox %s: %v", sb.Name, err)
	}
}

func mustGet(t *testing.T, st *store.Store, id sandbox.ID) sandbox.Sandbox {
	t.Helper()
	sb, err := st.GetSandbox(t.Context(), id)
	if err != nil {
		t.Fatalf("GetSandbox %s: %v", id, err)
	}
	return sb
}

// move changes sb's state in the store at at, as the service would.
func move(t *testing.T, st *store.Store, sb sandbox.Sandbox, to sandbox.State, at time.Time) sandbox.Sandbox {
	t.Helper()
	next := sb
	next.State = to
	if !next.Live() {
		next.EndedAt = at
	}
	if err := st.UpdateSandbox(t.Context(), sandbox.Update{Sandbox: next, From: sb.State, At: at}); err != nil {
		t.Fatalf("UpdateSandbox %s %s → %s: %v", sb.Name, sb.State, to, err)
	}
	return mustGet(t, st, sb.ID)
}

// checkAllSet fails for any zero field of v not in computed, so a field
// added to the type later cannot be forgotten by the round-trip test.
func checkAllSet(t *testing.T, v any, computed ...string) {
	t.Helper()
	rv := reflect.ValueOf(v)
	for i := range rv.NumField() {
		name := rv.Type().Field(i).Name
		if rv.Field(i).IsZero() && !slices.Contains(computed, name) {
			t.Errorf("the round-trip %s leaves %s unset; set it so the test covers it", rv.Type().Name(), name)
		}
	}
}

func testClasses(t *testing.T, st *store.Store) {
	ctx := t.Context()
	acme := newFixture(t, st, "acme")
	globex := newFixture(t, st, "globex")
	full := class.Class{
		Name: "big", Description: "a large machine", Image: "ghcr.io/acme/dev:2", Isolation: class.TierVM,
		CPU: 8500, Memory: 32 << 30, Disk: 100 << 30, DefaultTTL: 8 * time.Hour, MaxTTL: 7 * 24 * time.Hour,
		Warm: 3, Purposes: []class.Purpose{class.PurposeEngineer}, Git: class.GitToken,
		// The store keeps what it is given; class.Parse decides what makes sense.
		Contract: class.ContractKelos, SetupCommand: []string{"make", "deps"}, Runner: "codex", Ports: []int{3000, 8080},
		Egress:      mustEgress(t, "registry.npmjs.org", "*.pythonhosted.org:8443", "10.0.0.0/8:5432"),
		SessionIdle: 90 * time.Minute,
	}
	checkAllSet(t, full)
	small := class.Class{
		Name: "small", Image: "ghcr.io/acme/dev:1", Isolation: class.TierIsolated,
		CPU: class.DefaultCPU, Memory: class.DefaultMemory, DefaultTTL: class.DefaultTTL, MaxTTL: class.DefaultMaxTTL,
	}

	created, err := st.PutClasses(ctx, acme.org.ID, []class.Class{small, full})
	if err != nil {
		t.Fatalf("PutClasses: %v", err)
	}
	if diff := cmp.Diff([]string{"small", "big"}, created); diff != "" {
		t.Errorf("PutClasses created, in input order (-want +got):\n%s", diff)
	}
	got, _, err := st.ListClasses(ctx, acme.org.ID, paging.Request{})
	if err != nil {
		t.Fatalf("ListClasses: %v", err)
	}
	if diff := cmp.Diff([]class.Class{full, small}, got); diff != "" {
		t.Errorf("ListClasses, by name (-want +got):\n%s", diff)
	}

	agent := class.Class{Name: "agent", Image: "ghcr.io/acme/agent:1", Isolation: class.TierStandard,
		CPU: 1000, Memory: 2 << 30, DefaultTTL: time.Hour, MaxTTL: 2 * time.Hour, Purposes: []class.Purpose{class.PurposeAgent}}
	changed := small
	changed.Image, changed.Warm, changed.SessionIdle = "ghcr.io/acme/dev:3", 2, 30*time.Minute // an upsert writes it too
	created, err = st.PutClasses(ctx, acme.org.ID, []class.Class{changed, agent})
	if err != nil {
		t.Fatalf("PutClasses again: %v", err)
	}
	if diff := cmp.Diff([]string{"agent"}, created); diff != "" {
		t.Errorf("PutClasses again created (-want +got):\n%s", diff)
	}
	for _, want := range []class.Class{changed, agent, full} {
		got, err := st.GetClass(ctx, acme.org.ID, want.Name)
		if err != nil {
			t.Fatalf("GetClass %s: %v", want.Name, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GetClass %s (-want +got):\n%s", want.Name, diff)
		}
	}

	// Classes belong to one organisation.
	if got, _, err := st.ListClasses(ctx, globex.org.ID, paging.Request{}); err != nil || len(got) != 0 {
		t.Errorf("ListClasses(another organisation) = %v, %v; want none", got, err)
	}
	_, err = st.GetClass(ctx, globex.org.ID, "big")
	wantErr(t, "GetClass(another organisation's class)", err, fault.NotFound)

	if err := st.DeleteClass(ctx, acme.org.ID, "big"); err != nil {
		t.Fatalf("DeleteClass: %v", err)
	}
	_, err = st.GetClass(ctx, acme.org.ID, "big")
	wantErr(t, "GetClass(deleted)", err, fault.NotFound)
	wantErr(t, "DeleteClass(deleted)", st.DeleteClass(ctx, acme.org.ID, "big"), fault.NotFound)
	_, err = st.PutClasses(ctx, "org_nope", []class.Class{small})
	wantErr(t, "PutClasses(unknown organisation)", err, fault.NotFound)
}

func testSandboxRoundTrip(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	full, key := newSandbox(fx, fx.ann, "full", t0)
	full.Purpose, full.Isolation, full.Disk = sandbox.PurposeAgent, sandbox.TierVM, 20<<30
	full.Reason, full.Repo, full.Branch, full.GitMode = "a reason", "acme/app", "main", sandbox.GitToken
	full.Task, full.Runner, full.Role, full.Model = "fix the build", "claude-code", sandbox.RoleReviewer, "claude-sonnet-4-5"
	full.Contract, full.SetupCommand = sandbox.ContractKelos, []string{"sh", "-c", "make deps"}
	full.Env = map[string]string{"FOO": "bar", "EMPTY": ""}
	full.EndedAt, full.FromPool, full.Session = t0.Add(time.Hour), true, true
	full.Checkpoint, full.ForkedFrom, full.Compare = 5<<20, "sbx_source", []sandbox.ID{"sbx_try1", "sbx_try2"}
	full.Egress = "registry.npmjs.org, *.pythonhosted.org:8443"
	checkAllSet(t, full, "Ran", "RunningSince", "FirstRan", "LastRanUntil", "ActiveAt", "LifetimeCut") // LifetimeCut is an answer's, never stored
	mustCreate(t, st, full, key)
	if diff := cmp.Diff(full, mustGet(t, st, full.ID)); diff != "" {
		t.Errorf("GetSandbox (-want +got):\n%s", diff)
	}
	gotKey, err := st.GetKey(ctx, key.ID)
	if err != nil {
		t.Fatalf("GetKey of the sandbox's key: %v", err)
	}
	if diff := cmp.Diff(key, gotKey); diff != "" {
		t.Errorf("sandbox's key (-want +got):\n%s", diff)
	}

	// nil and empty lists and maps stay what they were.
	for _, tc := range []struct {
		name string
		keys []string
		env  map[string]string
	}{
		{"nil", nil, nil},
		{"empty", []string{}, map[string]string{}},
	} {
		sb, key := newSandbox(fx, fx.bob, tc.name, t0)
		sb.SSHKeys, sb.Env = tc.keys, tc.env
		mustCreate(t, st, sb, key)
		if diff := cmp.Diff(sb, mustGet(t, st, sb.ID)); diff != "" {
			t.Errorf("GetSandbox with %s lists (-want +got):\n%s", tc.name, diff)
		}
	}

	_, err = st.GetSandbox(ctx, "sbx_nope")
	wantErr(t, "GetSandbox(unknown)", err, fault.NotFound)
}

func testSandboxList(t *testing.T, st *store.Store) {
	ctx := t.Context()
	acme := newFixture(t, st, "acme")
	globex := newFixture(t, st, "globex")
	annWeb, k1 := newSandbox(acme, acme.ann, "web", t0)
	annJob, k2 := newSandbox(acme, acme.ann, "job", t0.Add(time.Minute))
	annJob.Purpose, annJob.Class, annJob.SSHKeys = sandbox.PurposeAgent, "big", nil
	bobWeb, k3 := newSandbox(acme, acme.bob, "web", t0.Add(2*time.Minute))
	// Same created_at as annJob but written later: it lists first.
	globexWeb, k4 := newSandbox(globex, globex.ann, "web", t0.Add(time.Minute))
	annOld, k5 := newSandbox(acme, acme.ann, "old", t0.Add(3*time.Minute))
	annOld.State, annOld.EndedAt = sandbox.StateTerminated, t0.Add(4*time.Minute)
	for _, c := range []struct {
		sb  sandbox.Sandbox
		key account.Key
	}{{annWeb, k1}, {annJob, k2}, {bobWeb, k3}, {globexWeb, k4}, {annOld, k5}} {
		mustCreate(t, st, c.sb, c.key)
	}

	for _, tc := range []struct {
		name string
		f    sandbox.Filter
		want []sandbox.Sandbox
	}{
		{"live", sandbox.Filter{}, []sandbox.Sandbox{bobWeb, globexWeb, annJob, annWeb}},
		{"all", sandbox.Filter{Ended: true}, []sandbox.Sandbox{annOld, bobWeb, globexWeb, annJob, annWeb}},
		{"org", sandbox.Filter{Org: acme.org.ID}, []sandbox.Sandbox{bobWeb, annJob, annWeb}},
		{"owner", sandbox.Filter{Owner: acme.ann.ID}, []sandbox.Sandbox{annJob, annWeb}},
		{"owner, all", sandbox.Filter{Owner: acme.ann.ID, Ended: true}, []sandbox.Sandbox{annOld, annJob, annWeb}},
		{"name", sandbox.Filter{Name: "web"}, []sandbox.Sandbox{bobWeb, globexWeb, annWeb}},
		{"org and name", sandbox.Filter{Org: globex.org.ID, Name: "web"}, []sandbox.Sandbox{globexWeb}},
		{"class", sandbox.Filter{Class: "big"}, []sandbox.Sandbox{annJob}},
		{"purpose", sandbox.Filter{Purpose: sandbox.PurposeEngineer, Org: acme.org.ID}, []sandbox.Sandbox{bobWeb, annWeb}},
		{"created since", sandbox.Filter{Org: acme.org.ID, Ended: true, CreatedSince: t0.Add(2 * time.Minute)}, []sandbox.Sandbox{annOld, bobWeb}},
		{"nothing", sandbox.Filter{Name: "nope"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := st.ListSandboxes(ctx, tc.f)
			if err != nil {
				t.Fatalf("ListSandboxes: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ListSandboxes(%+v) (-want +got):\n%s", tc.f, diff)
			}
		})
	}
}

func testSandboxNames(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	dev, key := newSandbox(fx, fx.ann, "dev", t0)
	mustCreate(t, st, dev, key)

	again, key2 := newSandbox(fx, fx.ann, "dev", t0.Add(time.Minute))
	err := st.CreateSandbox(ctx, again, key2, admitAll)
	wantErr(t, "CreateSandbox(a live name of the same owner)", err, fault.Conflict)
	if err != nil && !strings.Contains(err.Error(), "taken") {
		t.Errorf("CreateSandbox(a live name) = %v, want it to say the name is taken", err)
	}
	_, err = st.GetKey(ctx, key2.ID)
	wantErr(t, "GetKey of a refused sandbox's key", err, fault.NotFound)

	bobs, key3 := newSandbox(fx, fx.bob, "dev", t0)
	if err := st.CreateSandbox(ctx, bobs, key3, admitAll); err != nil {
		t.Errorf("CreateSandbox(a name another owner uses): %v", err)
	}

	// A failed engineer sandbox that ran keeps its volume, so it keeps its
	// name.
	dev = move(t, st, dev, sandbox.StateRunning, t0.Add(time.Minute))
	dev = move(t, st, dev, sandbox.StateFailed, t0.Add(2*time.Minute))
	wantErr(t, "CreateSandbox(a failed engineer sandbox's name)", st.CreateSandbox(ctx, again, key2, admitAll), fault.Conflict)
	// A terminated one frees it.
	move(t, st, dev, sandbox.StateTerminated, t0.Add(3*time.Minute))
	if err := st.CreateSandbox(ctx, again, key2, admitAll); err != nil {
		t.Errorf("CreateSandbox(a terminated sandbox's name): %v", err)
	}
	// So does one that failed before it ever ran: it holds no volume.
	never, key6 := newSandbox(fx, fx.ann, "never", t0)
	mustCreate(t, st, never, key6)
	if got := move(t, st, never, sandbox.StateFailed, t0.Add(time.Minute)); got.Live() {
		t.Errorf("a failed engineer sandbox that never ran is live")
	}
	never2, key7 := newSandbox(fx, fx.ann, "never", t0.Add(time.Minute))
	if err := st.CreateSandbox(ctx, never2, key7, admitAll); err != nil {
		t.Errorf("CreateSandbox(the name of a failed sandbox that never ran): %v", err)
	}

	// A failed agent sandbox is gone, and frees its name.
	job, key4 := newSandbox(fx, fx.ann, "job", t0)
	job.Purpose = sandbox.PurposeAgent
	mustCreate(t, st, job, key4)
	move(t, st, job, sandbox.StateFailed, t0.Add(time.Minute))
	job2, key5 := newSandbox(fx, fx.ann, "job", t0.Add(time.Minute))
	job2.Purpose = sandbox.PurposeAgent
	if err := st.CreateSandbox(ctx, job2, key5, admitAll); err != nil {
		t.Errorf("CreateSandbox(a failed agent sandbox's name): %v", err)
	}
}

func testSandboxUpdate(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	sb, key := newSandbox(fx, fx.ann, "dev", t0)
	mustCreate(t, st, sb, key)

	// The audit events an update carries commit with it, or not at all.
	event := func(detail string) audit.Event {
		return audit.Event{At: t0, Org: sb.Org, Sandbox: string(sb.ID), Action: audit.SandboxState, Target: sb.Name, Detail: detail}
	}
	stale := sb
	stale.State = sandbox.StateSuspended
	err := st.UpdateSandbox(ctx, sandbox.Update{Sandbox: stale, From: sandbox.StateRunning, At: t0, Audit: []audit.Event{event("refused")}})
	wantErr(t, "UpdateSandbox(from a state the row is not in)", err, fault.Conflict)
	if got := mustGet(t, st, sb.ID); got.State != sandbox.StateStarting {
		t.Errorf("state after a refused update = %s, want %s", got.State, sandbox.StateStarting)
	}

	ghost := sb
	ghost.ID = "sbx_nope"
	err = st.UpdateSandbox(ctx, sandbox.Update{Sandbox: ghost, From: sandbox.StateStarting, At: t0})
	wantErr(t, "UpdateSandbox(unknown)", err, fault.NotFound)

	next := sb
	next.State, next.Reason, next.ExpiresAt = sandbox.StateSuspended, "exited 0", t0.Add(8*time.Hour)
	next.Session = true // an update writes it too
	next.Checkpoint = 7 << 20
	if err := st.UpdateSandbox(ctx, sandbox.Update{Sandbox: next, From: sandbox.StateStarting, At: t0, Audit: []audit.Event{event("done")}}); err != nil {
		t.Fatalf("UpdateSandbox: %v", err)
	}
	if diff := cmp.Diff(next, mustGet(t, st, sb.ID)); diff != "" {
		t.Errorf("GetSandbox after UpdateSandbox (-want +got):\n%s", diff)
	}
	log, _, err := st.ListAudit(ctx, audit.Filter{Sandbox: string(sb.ID)}, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var details []string
	for _, e := range log {
		details = append(details, e.Detail)
	}
	if !slices.Equal(details, []string{"done"}) {
		t.Errorf("audit of the sandbox after a refused and an accepted update = %q, want [done]", details)
	}
}

// testSandboxActivity: what replicas save of a sandbox's connections only
// moves forward, survives the service's state writes, and a sandbox gone
// is no error.
func testSandboxActivity(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	sb, key := newSandbox(fx, fx.ann, "dev", t0)
	mustCreate(t, st, sb, key)
	if got := mustGet(t, st, sb.ID); !got.ActiveAt.IsZero() {
		t.Fatalf("ActiveAt of a new sandbox = %v, want zero", got.ActiveAt)
	}
	later := t0.Add(2 * time.Hour)
	for _, at := range []time.Time{t0.Add(time.Hour), later, t0.Add(90 * time.Minute)} {
		if err := st.SaveActivity(ctx, sb.ID, at); err != nil {
			t.Fatalf("SaveActivity(%v): %v", at, err)
		}
	}
	if got := mustGet(t, st, sb.ID); !got.ActiveAt.Equal(later) {
		t.Errorf("ActiveAt after saves at 1h, 2h, 1h30 = %v, want %v (never back)", got.ActiveAt, later)
	}
	sb = move(t, st, sb, sandbox.StateRunning, t0)
	if !sb.ActiveAt.Equal(later) {
		t.Errorf("ActiveAt after a state change = %v, want %v kept", sb.ActiveAt, later)
	}
	if err := st.SaveActivity(ctx, "sbx_nope", later); err != nil {
		t.Errorf("SaveActivity of an unknown sandbox: %v, want nil", err)
	}
}

func testSandboxSegments(t *testing.T, st *store.Store) {
	fx := newFixture(t, st, "acme")
	sb, key := newSandbox(fx, fx.ann, "dev", t0)
	mustCreate(t, st, sb, key)
	check := func(sb sandbox.Sandbox, ran time.Duration, since, until time.Time) {
		t.Helper()
		if sb.Ran != ran || !sb.RunningSince.Equal(since) || !sb.LastRanUntil.Equal(until) {
			t.Errorf("%s: Ran %v, RunningSince %v, LastRanUntil %v; want %v, %v, %v", sb.State, sb.Ran, sb.RunningSince, sb.LastRanUntil, ran, since, until)
		}
	}
	check(sb, 0, time.Time{}, time.Time{})
	sb = move(t, st, sb, sandbox.StateRunning, t0)
	check(sb, 0, t0, time.Time{}) // no segment closed yet
	sb = move(t, st, sb, sandbox.StateSuspended, t0.Add(90*time.Second))
	check(sb, 90*time.Second, time.Time{}, t0.Add(90*time.Second))
	sb = move(t, st, sb, sandbox.StateStarting, t0.Add(190*time.Second))
	check(sb, 90*time.Second, time.Time{}, t0.Add(90*time.Second))
	sb = move(t, st, sb, sandbox.StateRunning, t0.Add(200*time.Second))
	check(sb, 90*time.Second, t0.Add(200*time.Second), t0.Add(90*time.Second)) // the open one has not ended
	// Running to running (an extend) leaves the segment open.
	sb.ExpiresAt = t0.Add(8 * time.Hour)
	sb = move(t, st, sb, sandbox.StateRunning, t0.Add(250*time.Second))
	check(sb, 90*time.Second, t0.Add(200*time.Second), t0.Add(90*time.Second))
	sb = move(t, st, sb, sandbox.StateTerminated, t0.Add(300*time.Second))
	check(sb, 190*time.Second, time.Time{}, t0.Add(300*time.Second)) // the latest, not the first
	if !sb.FirstRan.Equal(t0) {
		t.Errorf("FirstRan = %v, want the first segment's start %v", sb.FirstRan, t0)
	}
	if never := mustGet(t, st, mustCreateFresh(t, st, fx)); !never.FirstRan.IsZero() {
		t.Errorf("FirstRan of a sandbox that never ran = %v, want zero", never.FirstRan)
	}

	// A segment is never closed before it opened: a start that finished
	// after expiry is closed at the expiry, which is earlier.
	late, key2 := newSandbox(fx, fx.ann, "late", t0)
	mustCreate(t, st, late, key2)
	late = move(t, st, late, sandbox.StateRunning, t0.Add(10*time.Second))
	late = move(t, st, late, sandbox.StateExpired, t0.Add(5*time.Second))
	check(late, 0, time.Time{}, t0.Add(10*time.Second))
}

func testSandboxKeys(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	keyOf := func(id string) account.Key {
		t.Helper()
		k, err := st.GetKey(ctx, id)
		if err != nil {
			t.Fatalf("GetKey %s: %v", id, err)
		}
		return k
	}
	sb, k1 := newSandbox(fx, fx.ann, "dev", t0)
	mustCreate(t, st, sb, k1)
	sb = move(t, st, sb, sandbox.StateRunning, t0)
	if !keyOf(k1.ID).Live(t0) {
		t.Errorf("a plain update revoked the sandbox's key")
	}

	t1 := t0.Add(4 * time.Hour)
	next := sb
	next.State = sandbox.StateExpired
	if err := st.UpdateSandbox(ctx, sandbox.Update{Sandbox: next, From: sb.State, At: t1, RevokeKey: true}); err != nil {
		t.Fatalf("UpdateSandbox(RevokeKey): %v", err)
	}
	if got := keyOf(k1.ID).RevokedAt; !got.Equal(t1) {
		t.Errorf("key revoked at %v, want %v", got, t1)
	}

	// Resume after expiry: a new key replaces the revoked one, whose
	// revocation time stands.
	t2 := t1.Add(time.Hour)
	k2, _ := account.NewSandboxKey(fx.ann.ID, string(sb.ID), fx.prj.ID, t2.Add(4*time.Hour), t2)
	sb = next
	next.State, next.KeyID, next.Env = sandbox.StateStarting, k2.ID, nil
	if err := st.UpdateSandbox(ctx, sandbox.Update{Sandbox: next, From: sb.State, At: t2, NewKey: &k2}); err != nil {
		t.Fatalf("UpdateSandbox(NewKey): %v", err)
	}
	if got := keyOf(k1.ID).RevokedAt; !got.Equal(t1) {
		t.Errorf("old key's revocation moved to %v, want %v", got, t1)
	}
	if diff := cmp.Diff(k2, keyOf(k2.ID)); diff != "" {
		t.Errorf("new key (-want +got):\n%s", diff)
	}
	if got := mustGet(t, st, sb.ID).KeyID; got != k2.ID {
		t.Errorf("row's key = %s, want %s", got, k2.ID)
	}

	// Terminate revokes the key the row names now.
	t3 := t2.Add(time.Hour)
	sb = next
	next.State, next.EndedAt = sandbox.StateTerminated, t3
	if err := st.UpdateSandbox(ctx, sandbox.Update{Sandbox: next, From: sb.State, At: t3, RevokeKey: true}); err != nil {
		t.Fatalf("UpdateSandbox(RevokeKey): %v", err)
	}
	if got := keyOf(k2.ID).RevokedAt; !got.Equal(t3) {
		t.Errorf("new key revoked at %v, want %v", got, t3)
	}

	// A new key alone also revokes the one it replaces.
	other, k3 := newSandbox(fx, fx.bob, "other", t0)
	mustCreate(t, st, other, k3)
	k4, _ := account.NewSandboxKey(fx.bob.ID, string(other.ID), fx.prj.ID, t3.Add(time.Hour), t3)
	moved := other
	moved.State, moved.KeyID = sandbox.StateSuspended, k4.ID
	if err := st.UpdateSandbox(ctx, sandbox.Update{Sandbox: moved, From: other.State, At: t3, NewKey: &k4}); err != nil {
		t.Fatalf("UpdateSandbox(NewKey): %v", err)
	}
	if got := keyOf(k3.ID).RevokedAt; !got.Equal(t3) {
		t.Errorf("replaced key revoked at %v, want %v", got, t3)
	}
	if !keyOf(k4.ID).Live(t3) {
		t.Errorf("the new key is not live")
	}
}

// mustCreateFresh creates a sandbox that never runs and returns its id.
func mustCreateFresh(t *testing.T, st *store.Store, fx fixture) sandbox.ID {
	t.Helper()
	sb, key := newSandbox(fx, fx.ann, "fresh", t0)
	mustCreate(t, st, sb, key)
	return sb.ID
}

func mustEgress(t *testing.T, rules ...string) egress.Policy {
	t.Helper()
	p, err := egress.ParsePolicy("", rules)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
