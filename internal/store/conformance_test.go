package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/store"
)

// t0 is the suite's clock: the store reads none, so every time is given.
// The nanoseconds check that times round-trip exactly.
var t0 = time.Date(2026, 11, 3, 10, 0, 0, 123456789, time.UTC)

// runConformance checks a Store against the contracts of account.Store,
// account.GuardrailStore and sandbox.Store. open returns an empty, migrated
// store that lives until the test ends; each subtest gets its own.
func runConformance(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("Bootstrap", func(t *testing.T) { testBootstrap(t, open(t)) })
	t.Run("Organisations", func(t *testing.T) { testOrganisations(t, open(t)) })
	t.Run("Projects", func(t *testing.T) { testProjects(t, open(t)) })
	t.Run("Users", func(t *testing.T) { testUsers(t, open(t)) })
	t.Run("Keys", func(t *testing.T) { testKeys(t, open(t)) })
	t.Run("Invitations", func(t *testing.T) { testInvitations(t, open(t)) })
	t.Run("Guardrails", func(t *testing.T) { testGuardrails(t, open(t)) })
	t.Run("Classes", func(t *testing.T) { testClasses(t, open(t)) })
	t.Run("SandboxRoundTrip", func(t *testing.T) { testSandboxRoundTrip(t, open(t)) })
	t.Run("SandboxList", func(t *testing.T) { testSandboxList(t, open(t)) })
	t.Run("SandboxNames", func(t *testing.T) { testSandboxNames(t, open(t)) })
	t.Run("SandboxAdmit", func(t *testing.T) { testSandboxAdmit(t, open(t)) })
	t.Run("SandboxUpdate", func(t *testing.T) { testSandboxUpdate(t, open(t)) })
	t.Run("SandboxSegments", func(t *testing.T) { testSandboxSegments(t, open(t)) })
	t.Run("SandboxActivity", func(t *testing.T) { testSandboxActivity(t, open(t)) })
	t.Run("SandboxKeys", func(t *testing.T) { testSandboxKeys(t, open(t)) })
	t.Run("DeleteEnded", func(t *testing.T) { testDeleteEnded(t, open(t)) })
	t.Run("CountSandboxes", func(t *testing.T) { testCountSandboxes(t, open(t)) })
	t.Run("ConcurrentAdmission", func(t *testing.T) { testConcurrentAdmission(t, open(t)) })
	t.Run("Inference", func(t *testing.T) { testInference(t, open(t)) })
	t.Run("Leases", func(t *testing.T) { testLeases(t, open(t)) })
	t.Run("Runs", func(t *testing.T) { testRunRoundTrip(t, open(t)) })
	t.Run("RunSessions", func(t *testing.T) { testRunSessions(t, open(t)) })
	t.Run("RunWithoutSeq", func(t *testing.T) { testRunWithoutSeq(t, open(t)) })
	t.Run("DeleteEndedRuns", func(t *testing.T) { testDeleteEndedRuns(t, open(t)) })
	t.Run("RunLogs", func(t *testing.T) { testRunLogs(t, open(t)) })
	t.Run("Egress", func(t *testing.T) { testEgress(t, open(t)) })
	t.Run("Secrets", func(t *testing.T) { testSecrets(t, open(t)) })
	t.Run("AgentConfigs", func(t *testing.T) { testAgentConfigs(t, open(t)) })
	t.Run("Triggers", func(t *testing.T) { testTriggers(t, open(t)) })
	t.Run("SessionReports", func(t *testing.T) { testSessionReports(t, open(t)) })
	t.Run("Audit", func(t *testing.T) { testAudit(t, open(t)) })
	t.Run("AuditWithTheChange", func(t *testing.T) { testAuditWithTheChange(t, open(t)) })
	t.Run("WarmPools", func(t *testing.T) { testWarmPools(t, open(t)) })
	t.Run("Pages", func(t *testing.T) { testPages(t, open(t)) })
	t.Run("SSOMappings", func(t *testing.T) { testSSOMappings(t, open(t)) })
	t.Run("SSOUsers", func(t *testing.T) { testSSOUsers(t, open(t)) })
	t.Run("SSODisable", func(t *testing.T) { testSSODisable(t, open(t)) })
	t.Run("SSOAttempts", func(t *testing.T) { testSSOAttempts(t, open(t)) })
	t.Run("SSOHandoffs", func(t *testing.T) { testSSOHandoffs(t, open(t)) })
	t.Run("SSODevices", func(t *testing.T) { testSSODevices(t, open(t)) })
	t.Run("SSOSessions", func(t *testing.T) { testSSOSessionRoundTrip(t, open(t)) })
	t.Run("SSODue", func(t *testing.T) { testSSODue(t, open(t)) })
	t.Run("SSOEnd", func(t *testing.T) { testSSOEnd(t, open(t)) })
	t.Run("SSOEndUser", func(t *testing.T) { testSSOEndUser(t, open(t)) })
	t.Run("SSOForget", func(t *testing.T) { testSSOForget(t, open(t)) })
}

// fixture is an organisation with a project and two users.
type fixture struct {
	org      account.Organisation
	prj      account.Project
	ann, bob account.User
}

func newFixture(t *testing.T, st *store.Store, name string) fixture {
	t.Helper()
	ctx := t.Context()
	fx := fixture{
		org: account.Organisation{ID: "org_" + name, Name: name, CreatedAt: t0},
		prj: account.Project{ID: "prj_" + name, Org: "org_" + name, Name: "default", CreatedAt: t0},
	}
	fx.ann = account.User{ID: "usr_" + name + "ann", Org: fx.org.ID, Name: "ann", Email: "ann@example.com", Role: account.RoleAdmin, CreatedAt: t0,
		Project: fx.prj.ID}
	fx.bob = account.User{ID: "usr_" + name + "bob", Org: fx.org.ID, Name: "bob", Role: account.RoleMember, CreatedAt: t0}
	if err := st.CreateOrganisation(ctx, fx.org, fx.prj); err != nil {
		t.Fatalf("CreateOrganisation: %v", err)
	}
	for _, u := range []account.User{fx.ann, fx.bob} {
		if err := st.CreateUser(ctx, u); err != nil {
			t.Fatalf("CreateUser %s: %v", u.Name, err)
		}
	}
	return fx
}

// wantErr fails unless err is target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s = %v, want %v", what, err, target)
	}
}

func testBootstrap(t *testing.T, st *store.Store) {
	ctx := t.Context()
	org := account.Organisation{ID: "org_first", Name: "acme", CreatedAt: t0}
	prj := account.Project{ID: "prj_first", Org: org.ID, Name: "default", CreatedAt: t0}
	usr := account.User{ID: "usr_first", Org: org.ID, Name: "root", Role: account.RoleOperator, CreatedAt: t0}
	key, _ := account.NewKey(usr.ID, "bootstrap", t0)
	if err := st.Bootstrap(ctx, org, prj, usr, key); err != nil {
		t.Fatalf("Bootstrap: %v", err)
	}
	gotOrg, err := st.GetOrganisation(ctx, org.ID)
	if err != nil || !cmp.Equal(gotOrg, org) {
		t.Errorf("GetOrganisation = %+v, %v; want %+v", gotOrg, err, org)
	}
	gotPrj, err := st.GetProject(ctx, org.ID, prj.ID)
	if err != nil || !cmp.Equal(gotPrj, prj) {
		t.Errorf("GetProject = %+v, %v; want %+v", gotPrj, err, prj)
	}
	gotUsr, err := st.GetUser(ctx, usr.ID)
	if err != nil || !cmp.Equal(gotUsr, usr) {
		t.Errorf("GetUser = %+v, %v; want %+v", gotUsr, err, usr)
	}
	gotKey, err := st.GetKey(ctx, key.ID)
	if err != nil || !cmp.Equal(gotKey, key) {
		t.Errorf("GetKey = %+v, %v; want %+v", gotKey, err, key)
	}

	// A second bootstrap fails whole: nothing of it is written.
	org2 := account.Organisation{ID: "org_second", Name: "other", CreatedAt: t0}
	prj2 := account.Project{ID: "prj_second", Org: org2.ID, Name: "default", CreatedAt: t0}
	usr2 := account.User{ID: "usr_second", Org: org2.ID, Name: "root", Role: account.RoleOperator, CreatedAt: t0}
	key2, _ := account.NewKey(usr2.ID, "bootstrap", t0)
	wantErr(t, "second Bootstrap", st.Bootstrap(ctx, org2, prj2, usr2, key2), fault.Conflict)
	orgs, _, err := st.ListOrganisations(ctx, paging.Request{})
	if err != nil {
		t.Fatalf("ListOrganisations: %v", err)
	}
	if diff := cmp.Diff([]account.Organisation{org}, orgs); diff != "" {
		t.Errorf("organisations after a refused bootstrap (-want +got):\n%s", diff)
	}
	_, err = st.GetKey(ctx, key2.ID)
	wantErr(t, "GetKey of the refused bootstrap's key", err, fault.NotFound)
}

func testOrganisations(t *testing.T, st *store.Store) {
	ctx := t.Context()
	acme := newFixture(t, st, "acme")
	globex := newFixture(t, st, "globex")
	for _, ref := range []string{acme.org.ID, acme.org.Name} {
		got, err := st.GetOrganisation(ctx, ref)
		if err != nil {
			t.Fatalf("GetOrganisation(%q): %v", ref, err)
		}
		if diff := cmp.Diff(acme.org, got); diff != "" {
			t.Errorf("GetOrganisation(%q) (-want +got):\n%s", ref, diff)
		}
	}
	_, err := st.GetOrganisation(ctx, "initech")
	wantErr(t, "GetOrganisation(unknown)", err, fault.NotFound)

	got, _, err := st.ListOrganisations(ctx, paging.Request{})
	if err != nil {
		t.Fatalf("ListOrganisations: %v", err)
	}
	if diff := cmp.Diff([]account.Organisation{acme.org, globex.org}, got); diff != "" {
		t.Errorf("ListOrganisations (-want +got):\n%s", diff)
	}

	// A taken name fails the whole create, its project too.
	dup := account.Organisation{ID: "org_dup", Name: "acme", CreatedAt: t0}
	dupPrj := account.Project{ID: "prj_dup", Org: dup.ID, Name: "default", CreatedAt: t0}
	wantErr(t, "CreateOrganisation(taken name)", st.CreateOrganisation(ctx, dup, dupPrj), fault.Conflict)
	_, err = st.GetOrganisation(ctx, dup.ID)
	wantErr(t, "GetOrganisation(refused)", err, fault.NotFound)
}

func testProjects(t *testing.T, st *store.Store) {
	ctx := t.Context()
	acme := newFixture(t, st, "acme")
	globex := newFixture(t, st, "globex")
	// Same timestamp as the default: insertion order breaks the tie.
	web := account.Project{ID: "prj_web", Org: acme.org.ID, Name: "web", CreatedAt: t0}
	api := account.Project{ID: "prj_api", Org: acme.org.ID, Name: "api", CreatedAt: t0.Add(time.Minute)}
	for _, p := range []account.Project{web, api} {
		if err := st.CreateProject(ctx, p); err != nil {
			t.Fatalf("CreateProject %s: %v", p.Name, err)
		}
	}
	got, _, err := st.ListProjects(ctx, acme.org.ID, paging.Request{})
	if err != nil {
		t.Fatalf("ListProjects: %v", err)
	}
	if diff := cmp.Diff([]account.Project{acme.prj, web, api}, got); diff != "" {
		t.Errorf("ListProjects, oldest first (-want +got):\n%s", diff)
	}

	for _, ref := range []string{web.ID, web.Name} {
		got, err := st.GetProject(ctx, acme.org.ID, ref)
		if err != nil {
			t.Fatalf("GetProject(%q): %v", ref, err)
		}
		if diff := cmp.Diff(web, got); diff != "" {
			t.Errorf("GetProject(%q) (-want +got):\n%s", ref, diff)
		}
	}
	_, err = st.GetProject(ctx, globex.org.ID, web.ID)
	wantErr(t, "GetProject(another organisation's id)", err, fault.NotFound)
	_, err = st.GetProject(ctx, acme.org.ID, "nope")
	wantErr(t, "GetProject(unknown)", err, fault.NotFound)

	wantErr(t, "CreateProject(taken name)",
		st.CreateProject(ctx, account.Project{ID: "prj_web2", Org: acme.org.ID, Name: "web", CreatedAt: t0}), fault.Conflict)
	if err := st.CreateProject(ctx, account.Project{ID: "prj_gweb", Org: globex.org.ID, Name: "web", CreatedAt: t0}); err != nil {
		t.Errorf("CreateProject(a name another organisation uses): %v", err)
	}
	wantErr(t, "CreateProject(unknown organisation)",
		st.CreateProject(ctx, account.Project{ID: "prj_x", Org: "org_nope", Name: "x", CreatedAt: t0}), fault.NotFound)
}

func testUsers(t *testing.T, st *store.Store) {
	ctx := t.Context()
	acme := newFixture(t, st, "acme")
	globex := newFixture(t, st, "globex")

	got, err := st.GetUser(ctx, acme.ann.ID)
	if err != nil {
		t.Fatalf("GetUser: %v", err)
	}
	if diff := cmp.Diff(acme.ann, got); diff != "" {
		t.Errorf("GetUser (-want +got):\n%s", diff)
	}
	_, err = st.GetUser(ctx, "ann")
	wantErr(t, "GetUser(a name)", err, fault.NotFound)

	for _, ref := range []string{acme.bob.ID, acme.bob.Name} {
		got, err := st.FindUser(ctx, acme.org.ID, ref)
		if err != nil {
			t.Fatalf("FindUser(%q): %v", ref, err)
		}
		if diff := cmp.Diff(acme.bob, got); diff != "" {
			t.Errorf("FindUser(%q) (-want +got):\n%s", ref, diff)
		}
	}
	_, err = st.FindUser(ctx, globex.org.ID, acme.bob.ID)
	wantErr(t, "FindUser(another organisation's user)", err, fault.NotFound)

	users, _, err := st.ListUsers(ctx, globex.org.ID, paging.Request{})
	if err != nil {
		t.Fatalf("ListUsers: %v", err)
	}
	if diff := cmp.Diff([]account.User{globex.ann, globex.bob}, users); diff != "" {
		t.Errorf("ListUsers (-want +got):\n%s", diff)
	}

	// A user's project is set, read back, and cleared, with its audit
	// event in the same write.
	ml := account.Project{ID: "prj_acmeml", Org: acme.org.ID, Name: "ml", CreatedAt: t0.Add(time.Second)}
	if err := st.CreateProject(ctx, ml); err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	ev := audit.Event{At: t0, Org: acme.org.ID, Actor: acme.ann.ID, Action: audit.UserProject, Target: acme.bob.Name, Detail: ml.Name}
	if err := st.SetUserProject(ctx, acme.bob.ID, ml.ID, ev); err != nil {
		t.Fatalf("SetUserProject: %v", err)
	}
	bob := acme.bob
	bob.Project = ml.ID
	for _, get := range []func() (account.User, error){
		func() (account.User, error) { return st.GetUser(ctx, bob.ID) },
		func() (account.User, error) { return st.FindUser(ctx, acme.org.ID, bob.Name) },
	} {
		got, err := get()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(bob, got); diff != "" {
			t.Errorf("user after SetUserProject (-want +got):\n%s", diff)
		}
	}
	events, _, err := st.ListAudit(ctx, audit.Filter{Org: acme.org.ID}, paging.Request{})
	var set []audit.Event
	for _, e := range events {
		if e.Action == audit.UserProject {
			set = append(set, e)
		}
	}
	if err != nil || len(set) != 1 || set[0].Detail != ml.Name {
		t.Errorf("audit of SetUserProject: %v, %v; want its one event", set, err)
	}
	if err := st.SetUserProject(ctx, bob.ID, ""); err != nil {
		t.Fatalf("SetUserProject(\"\"): %v", err)
	}
	if got, err := st.GetUser(ctx, bob.ID); err != nil || got.Project != "" {
		t.Errorf("user after clearing the project: %+v, %v", got, err)
	}
	wantErr(t, "SetUserProject(unknown user)", st.SetUserProject(ctx, "usr_nope", ml.ID), fault.NotFound)

	wantErr(t, "CreateUser(taken name)",
		st.CreateUser(ctx, account.User{ID: "usr_ann2", Org: acme.org.ID, Name: "ann", Role: account.RoleMember, CreatedAt: t0}),
		fault.Conflict)
	wantErr(t, "CreateUser(taken id)",
		st.CreateUser(ctx, account.User{ID: acme.ann.ID, Org: acme.org.ID, Name: "cat", Role: account.RoleMember, CreatedAt: t0}),
		fault.Conflict)
	wantErr(t, "CreateUser(unknown organisation)",
		st.CreateUser(ctx, account.User{ID: "usr_x", Org: "org_nope", Name: "x", Role: account.RoleMember, CreatedAt: t0}),
		fault.NotFound)
}

func testKeys(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	plain, secret := account.NewKey(fx.ann.ID, "laptop", t0)
	scoped, _ := account.NewSandboxKey(fx.ann.ID, "sbx_1", fx.prj.ID, t0.Add(4*time.Hour), t0.Add(time.Second))
	for _, k := range []account.Key{plain, scoped} {
		if err := st.CreateKey(ctx, k); err != nil {
			t.Fatalf("CreateKey %s: %v", k.Name, err)
		}
	}
	got, err := st.GetKey(ctx, plain.ID)
	if err != nil {
		t.Fatalf("GetKey: %v", err)
	}
	if diff := cmp.Diff(plain, got); diff != "" {
		t.Errorf("GetKey (-want +got):\n%s", diff)
	}
	_, token, _ := account.ParseSecret(secret.Reveal())
	if !got.Matches(token) || !got.Live(t0.Add(1000*time.Hour)) {
		t.Errorf("a stored key without expiry should match its secret and stay live")
	}
	keys, _, err := st.ListKeys(ctx, fx.ann.ID, paging.Request{})
	if err != nil {
		t.Fatalf("ListKeys: %v", err)
	}
	if diff := cmp.Diff([]account.Key{plain, scoped}, keys); diff != "" {
		t.Errorf("ListKeys (-want +got):\n%s", diff)
	}
	if !keys[1].Live(t0.Add(4*time.Hour-1)) || keys[1].Live(t0.Add(4*time.Hour)) {
		t.Errorf("a sandbox key read back should be live until its expiry and not after")
	}

	revoked := t0.Add(time.Hour)
	if err := st.RevokeKey(ctx, plain.ID, revoked); err != nil {
		t.Fatalf("RevokeKey: %v", err)
	}
	if err := st.RevokeKey(ctx, plain.ID, revoked.Add(time.Hour)); err != nil {
		t.Fatalf("RevokeKey again: %v", err)
	}
	got, err = st.GetKey(ctx, plain.ID)
	if err != nil {
		t.Fatalf("GetKey: %v", err)
	}
	if !got.RevokedAt.Equal(revoked) || got.Live(t0) {
		t.Errorf("RevokedAt = %v (live %t), want %v and not live: the first revocation stands", got.RevokedAt, got.Live(t0), revoked)
	}

	wantErr(t, "RevokeKey(unknown)", st.RevokeKey(ctx, "key_nope", t0), fault.NotFound)
	_, err = st.GetKey(ctx, "key_nope")
	wantErr(t, "GetKey(unknown)", err, fault.NotFound)
	wantErr(t, "CreateKey(taken id)", st.CreateKey(ctx, plain), fault.Conflict)
	orphan, _ := account.NewKey("usr_nope", "x", t0)
	wantErr(t, "CreateKey(unknown user)", st.CreateKey(ctx, orphan), fault.NotFound)
}

func testGuardrails(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	ptr := func(v int) *int { return &v }
	mem := int64(8192)
	cpu := quantity.Millicores(4000)
	ttl := 8 * time.Hour

	unset, err := st.GetGuardrail(ctx, fx.org.ID, "")
	if err != nil {
		t.Fatalf("GetGuardrail(never written): %v", err)
	}
	if diff := cmp.Diff(guardrail.Guardrail{}, unset); diff != "" {
		t.Errorf("GetGuardrail(never written) (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name    string
		project string
		g       guardrail.Guardrail
	}{
		{"every field", "", guardrail.Guardrail{
			MaxSandboxes: ptr(10), MaxSandboxMemory: &mem, MaxSandboxCPU: &cpu, MaxSandboxTTL: &ttl,
			AllowedRepos: []string{"acme", "globex/app"}, Egress: []string{"registry.npmjs.org", "*.pythonhosted.org:8443"},
		}},
		{"egress none", "", guardrail.Guardrail{Egress: []string{"none"}}},
		{"empty repository list", "", guardrail.Guardrail{MaxSandboxes: ptr(0), AllowedRepos: []string{}}},
		{"nil repository list", "", guardrail.Guardrail{MaxSandboxes: ptr(3)}},
		{"cleared", "", guardrail.Guardrail{}},
		{"project", fx.prj.ID, guardrail.Guardrail{MaxSandboxTTL: &ttl, AllowedRepos: []string{"acme/app"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := st.PutGuardrail(ctx, fx.org.ID, tc.project, tc.g); err != nil {
				t.Fatalf("PutGuardrail: %v", err)
			}
			got, err := st.GetGuardrail(ctx, fx.org.ID, tc.project)
			if err != nil {
				t.Fatalf("GetGuardrail: %v", err)
			}
			// cmp tells a nil slice from an empty one, which is the point.
			if diff := cmp.Diff(tc.g, got); diff != "" {
				t.Errorf("GetGuardrail (-want +got):\n%s", diff)
			}
		})
	}
	// The project's guardrail is its own row: the organisation's is still
	// the cleared one.
	got, err := st.GetGuardrail(ctx, fx.org.ID, "")
	if err != nil {
		t.Fatalf("GetGuardrail: %v", err)
	}
	if diff := cmp.Diff(guardrail.Guardrail{}, got); diff != "" {
		t.Errorf("organisation's guardrail after writing the project's (-want +got):\n%s", diff)
	}
	wantErr(t, "PutGuardrail(unknown organisation)", st.PutGuardrail(ctx, "org_nope", "", guardrail.Guardrail{}), fault.NotFound)
}
