package store_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/idp"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/sso"
	"berth.dev/berth/internal/store"
)

const issuer = "https://idp.example.com"

// auditOf is what org's audit log holds of action: the events' targets
// and details, in order.
func auditOf(t *testing.T, st *store.Store, org, action string) []string {
	t.Helper()
	events, _, err := st.ListAudit(t.Context(), audit.Filter{Org: org}, paging.Request{})
	if err != nil {
		t.Fatalf("ListAudit: %v", err)
	}
	var out []string
	for _, e := range events {
		if e.Action == action {
			out = append(out, e.Target+": "+e.Detail)
		}
	}
	return out
}

// testSSOMappings: none set reads as no groups; a mapping round-trips
// (nil and empty lists apart) and is replaced whole, with its event;
// SSOMappings lists those with groups, the oldest organisation's first.
func testSSOMappings(t *testing.T, st *store.Store) {
	ctx := t.Context()
	if got, err := st.SSOMappings(ctx); err != nil || len(got) != 0 {
		t.Errorf("SSOMappings of an empty store = %v, %v; want none", got, err)
	}
	acme := newFixture(t, st, "acme")
	globex := newFixture(t, st, "globex")
	initech := newFixture(t, st, "initech")
	got, err := st.SSOMapping(ctx, acme.org.ID)
	if err != nil {
		t.Fatalf("SSOMapping(never set): %v", err)
	}
	if diff := cmp.Diff(idp.Mapping{Org: acme.org.ID}, got); diff != "" {
		t.Errorf("SSOMapping(never set) (-want +got):\n%s", diff)
	}

	// Set the younger organisation's first: the list is by age, not by
	// when the mappings were written.
	g := idp.Mapping{Org: globex.org.ID, Administrators: []string{"globex-admins"}}
	a := idp.Mapping{Org: acme.org.ID, Members: []string{"eng", "ops"}, Administrators: []string{}}
	empty := idp.Mapping{Org: initech.org.ID, Members: []string{}, Administrators: []string{}}
	for _, m := range []idp.Mapping{g, {Org: acme.org.ID, Members: []string{"old"}}, a, empty} {
		ev := audit.Event{At: t0, Org: m.Org, Action: audit.SSOMapping, Target: m.Org, Detail: "set"}
		if err := st.SetSSOMapping(ctx, m, ev); err != nil {
			t.Fatalf("SetSSOMapping(%s): %v", m.Org, err)
		}
	}
	for _, want := range []idp.Mapping{g, a, empty} {
		got, err := st.SSOMapping(ctx, want.Org)
		if err != nil {
			t.Fatalf("SSOMapping(%s): %v", want.Org, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("SSOMapping(%s) (-want +got):\n%s", want.Org, diff)
		}
	}
	all, err := st.SSOMappings(ctx)
	if err != nil {
		t.Fatalf("SSOMappings: %v", err)
	}
	if diff := cmp.Diff([]idp.Mapping{a, g}, all); diff != "" {
		t.Errorf("SSOMappings: the oldest organisation's first, none without groups (-want +got):\n%s", diff)
	}
	if got := auditOf(t, st, acme.org.ID, audit.SSOMapping); len(got) != 2 {
		t.Errorf("acme's mapping events = %q, want the two writes'", got)
	}
	wantErr(t, "SetSSOMapping(unknown organisation)", st.SetSSOMapping(ctx, idp.Mapping{Org: "org_nope", Members: []string{"x"}}), fault.NotFound)
}

// testSSOUsers: the first organisation; a user linked at creation or by
// UpdateSignedIn reads back everywhere users are read; a person's users
// across organisations; one person is one user per organisation
// (fault.Conflict); an unlinked user found by email, case aside.
func testSSOUsers(t *testing.T, st *store.Store) {
	ctx := t.Context()
	_, err := st.FirstOrganisation(ctx)
	wantErr(t, "FirstOrganisation(none)", err, fault.NotFound)
	acme := newFixture(t, st, "acme")
	globex := newFixture(t, st, "globex")
	if got, err := st.FirstOrganisation(ctx); err != nil || got != acme.org {
		t.Errorf("FirstOrganisation = %+v, %v; want %+v (the first made, at the same time)", got, err, acme.org)
	}
	older := account.Organisation{ID: "org_older", Name: "older", CreatedAt: t0.Add(-time.Hour)}
	if err := st.CreateOrganisation(ctx, older, account.Project{ID: "prj_older", Org: older.ID, Name: "default", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.FirstOrganisation(ctx); err != nil || got != older {
		t.Errorf("FirstOrganisation = %+v, %v; want %+v (the oldest)", got, err, older)
	}

	// Found by email without regard to case (Unicode's too, on both
	// dialects), the oldest of several, never once linked.
	for _, email := range []string{"ANN@example.COM", "ann@example.com"} {
		if got, err := st.UnlinkedUserByEmail(ctx, acme.org.ID, email); err != nil || got.ID != acme.ann.ID {
			t.Errorf("UnlinkedUserByEmail(%q) = %s, %v; want %s", email, got.ID, err, acme.ann.ID)
		}
	}
	ann2 := account.User{ID: "usr_ann2", Org: acme.org.ID, Name: "ann2", Email: "Ann@Example.com", Role: account.RoleMember, CreatedAt: t0.Add(time.Second)}
	unal := account.User{ID: "usr_unal", Org: acme.org.ID, Name: "unal", Email: "Ünal@example.com", Role: account.RoleMember, CreatedAt: t0}
	for _, u := range []account.User{ann2, unal} {
		if err := st.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := st.UnlinkedUserByEmail(ctx, acme.org.ID, "ünal@EXAMPLE.com"); err != nil || got.ID != unal.ID {
		t.Errorf("UnlinkedUserByEmail(non-ASCII, other case) = %s, %v; want %s", got.ID, err, unal.ID)
	}
	_, err = st.UnlinkedUserByEmail(ctx, acme.org.ID, "")
	wantErr(t, "UnlinkedUserByEmail(\"\") (bob has no email)", err, fault.NotFound)
	_, err = st.UnlinkedUserByEmail(ctx, older.ID, "ann@example.com")
	wantErr(t, "UnlinkedUserByEmail(another organisation)", err, fault.NotFound)

	// Linked by a sign-in: every field it writes reads back everywhere.
	ann := acme.ann
	ann.Issuer, ann.Subject, ann.Email, ann.Role = issuer, "sub-ann", "ann@new.example.com", account.RoleMember
	ann.Disabled, ann.DisabledByIdP = true, true
	ev := audit.Event{At: t0, Org: acme.org.ID, Action: audit.UserLink, Target: ann.Name, Detail: "sub-ann"}
	if err := st.UpdateSignedIn(ctx, ann, ev); err != nil {
		t.Fatalf("UpdateSignedIn: %v", err)
	}
	checkUser(t, st, ann)
	if got := auditOf(t, st, acme.org.ID, audit.UserLink); len(got) != 1 {
		t.Errorf("link events = %q, want UpdateSignedIn's one", got)
	}
	if got, err := st.UnlinkedUserByEmail(ctx, acme.org.ID, "ann@example.com"); err != nil || got.ID != ann2.ID {
		t.Errorf("UnlinkedUserByEmail after ann is linked = %s, %v; want %s", got.ID, err, ann2.ID)
	}
	ann.Disabled, ann.DisabledByIdP = false, false
	if err := st.UpdateSignedIn(ctx, ann); err != nil {
		t.Fatalf("UpdateSignedIn(enabled): %v", err)
	}
	checkUser(t, st, ann)

	// The same person in another organisation, made linked and older.
	carl := account.User{ID: "usr_carl", Org: globex.org.ID, Name: "carl", Email: "ann@example.com", Role: account.RoleAdmin,
		CreatedAt: t0.Add(-time.Minute), Issuer: issuer, Subject: "sub-ann"}
	if err := st.CreateUser(ctx, carl); err != nil {
		t.Fatalf("CreateUser(linked): %v", err)
	}
	checkUser(t, st, carl)
	got, err := st.IdentityUsers(ctx, issuer, "sub-ann")
	if err != nil {
		t.Fatalf("IdentityUsers: %v", err)
	}
	if diff := cmp.Diff([]account.User{carl, ann}, got); diff != "" {
		t.Errorf("IdentityUsers, oldest first (-want +got):\n%s", diff)
	}
	if got, err := st.IdentityUsers(ctx, "https://other.example.com", "sub-ann"); err != nil || len(got) != 0 {
		t.Errorf("IdentityUsers(another issuer) = %v, %v; want none", got, err)
	}

	// One person is at most one user of an organisation.
	bob := acme.bob
	bob.Issuer, bob.Subject = issuer, "sub-ann"
	wantErr(t, "UpdateSignedIn(a person another user has)", st.UpdateSignedIn(ctx, bob), fault.Conflict)
	dan := account.User{ID: "usr_dan", Org: acme.org.ID, Name: "dan", Role: account.RoleMember, CreatedAt: t0, Issuer: issuer, Subject: "sub-ann"}
	wantErr(t, "CreateUser(a person another user has)", st.CreateUser(ctx, dan), fault.Conflict)
	bob.Subject = "sub-bob"
	if err := st.UpdateSignedIn(ctx, bob); err != nil {
		t.Errorf("UpdateSignedIn(another person of the issuer): %v", err)
	}
	ghost := account.User{ID: "usr_nope", Org: acme.org.ID, Name: "ghost", Role: account.RoleMember, Issuer: issuer, Subject: "sub-ghost"}
	wantErr(t, "UpdateSignedIn(unknown user)", st.UpdateSignedIn(ctx, ghost, ev), fault.NotFound)
	if got := auditOf(t, st, acme.org.ID, audit.UserLink); len(got) != 1 {
		t.Errorf("link events after a refused update = %q, want the first's alone", got)
	}
}

// checkUser fails unless GetUser, FindUser and ListUsers all read want.
func checkUser(t *testing.T, st *store.Store, want account.User) {
	t.Helper()
	ctx := t.Context()
	got, err := st.GetUser(ctx, want.ID)
	if err != nil {
		t.Fatalf("GetUser: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetUser (-want +got):\n%s", diff)
	}
	if got, err = st.FindUser(ctx, want.Org, want.Name); err != nil {
		t.Fatalf("FindUser: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FindUser (-want +got):\n%s", diff)
	}
	users, _, err := st.ListUsers(ctx, want.Org, paging.Request{})
	if err != nil {
		t.Fatalf("ListUsers: %v", err)
	}
	i := slices.IndexFunc(users, func(u account.User) bool { return u.ID == want.ID })
	if i < 0 {
		t.Fatalf("ListUsers has no %s", want.ID)
	}
	if diff := cmp.Diff(want, users[i]); diff != "" {
		t.Errorf("ListUsers (-want +got):\n%s", diff)
	}
}

// testSSODisable: disabling records whether the identity provider did,
// enabling clears it, and the events are in the write's transaction.
func testSSODisable(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	for _, tc := range []struct {
		disabled, byIdP bool
		want            account.User
		action          string
	}{
		{true, true, account.User{Disabled: true, DisabledByIdP: true}, audit.UserDisable},
		{false, true, account.User{}, audit.UserEnable},
		{true, false, account.User{Disabled: true}, audit.UserDisable},
		{false, false, account.User{}, audit.UserEnable},
	} {
		ev := audit.Event{At: t0, Org: fx.org.ID, Action: tc.action, Target: fx.bob.Name}
		if err := st.SetUserDisabled(ctx, fx.bob.ID, tc.disabled, tc.byIdP, ev); err != nil {
			t.Fatalf("SetUserDisabled(%t, %t): %v", tc.disabled, tc.byIdP, err)
		}
		got, err := st.GetUser(ctx, fx.bob.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Disabled != tc.want.Disabled || got.DisabledByIdP != tc.want.DisabledByIdP {
			t.Errorf("after SetUserDisabled(%t, %t): disabled %t by the provider %t; want %t, %t",
				tc.disabled, tc.byIdP, got.Disabled, got.DisabledByIdP, tc.want.Disabled, tc.want.DisabledByIdP)
		}
	}
	if d, e := auditOf(t, st, fx.org.ID, audit.UserDisable), auditOf(t, st, fx.org.ID, audit.UserEnable); len(d) != 2 || len(e) != 2 {
		t.Errorf("events: %d disable, %d enable; want 2 and 2", len(d), len(e))
	}
	ev := audit.Event{At: t0, Org: fx.org.ID, Action: audit.UserDisable, Target: "ghost"}
	wantErr(t, "SetUserDisabled(unknown)", st.SetUserDisabled(ctx, "usr_nope", true, true, ev), fault.NotFound)
	if d := auditOf(t, st, fx.org.ID, audit.UserDisable); len(d) != 2 {
		t.Errorf("a refused SetUserDisabled recorded its event: %q", d)
	}
}

// takeOnce takes with take from n goroutines at once and returns how
// many got it; every other must be fault.NotFound.
func takeOnce(t *testing.T, n int, take func() error) int {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
	)
	for range n {
		wg.Go(func() {
			err := take()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, fault.NotFound):
				t.Errorf("a concurrent take = %v, want nil or NotFound", err)
			}
		})
	}
	wg.Wait()
	return wins
}

// testSSOAttempts: an attempt round-trips (with and without the CLI's
// part), is taken once, even by takes at once, and an expired one is
// not found, then gone.
func testSSOAttempts(t *testing.T, st *store.Store) {
	ctx := t.Context()
	expires := t0.Add(sso.AttemptTTL)
	panel := sso.Attempt{ID: "state-panel", Nonce: "n1", Verifier: "v1", Browser: []byte{1, 2, 3}, Next: "/sandboxes", Org: "acme",
		CreatedAt: t0, ExpiresAt: expires}
	cli := sso.Attempt{ID: "state-cli", Nonce: "n2", Verifier: "v2", Browser: []byte{4, 5}, CLI: &sso.CLI{Port: 49152, Challenge: "ch", State: "st"},
		CreatedAt: t0, ExpiresAt: expires}
	device := sso.Attempt{ID: "state-device", Nonce: "n3", Verifier: "v3", Browser: []byte{6}, Device: &sso.DeviceRef{ID: "dev-1", UserCode: "BCDFGHJK"},
		CreatedAt: t0, ExpiresAt: expires}
	for _, a := range []sso.Attempt{panel, cli, device} {
		if err := st.CreateSSOAttempt(ctx, a); err != nil {
			t.Fatalf("CreateSSOAttempt(%s): %v", a.ID, err)
		}
		got, err := st.TakeSSOAttempt(ctx, a.ID, expires.Add(-1))
		if err != nil {
			t.Fatalf("TakeSSOAttempt(%s): %v", a.ID, err)
		}
		if diff := cmp.Diff(a, got); diff != "" {
			t.Errorf("TakeSSOAttempt(%s) (-want +got):\n%s", a.ID, diff)
		}
		_, err = st.TakeSSOAttempt(ctx, a.ID, t0)
		wantErr(t, "TakeSSOAttempt(taken)", err, fault.NotFound)
	}
	_, err := st.TakeSSOAttempt(ctx, "state-nope", t0)
	wantErr(t, "TakeSSOAttempt(unknown)", err, fault.NotFound)

	if err := st.CreateSSOAttempt(ctx, panel); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "CreateSSOAttempt(taken id)", st.CreateSSOAttempt(ctx, panel), fault.Conflict)
	_, err = st.TakeSSOAttempt(ctx, panel.ID, expires)
	wantErr(t, "TakeSSOAttempt(expired)", err, fault.NotFound)
	_, err = st.TakeSSOAttempt(ctx, panel.ID, t0)
	wantErr(t, "TakeSSOAttempt(after an expired take)", err, fault.NotFound)

	if err := st.CreateSSOAttempt(ctx, cli); err != nil {
		t.Fatal(err)
	}
	if wins := takeOnce(t, 8, func() error { _, err := st.TakeSSOAttempt(ctx, cli.ID, t0); return err }); wins != 1 {
		t.Errorf("%d of 8 concurrent takes of an attempt got it, want 1", wins)
	}
}

// testSSOHandoffs: TakeSSOHandoff is TakeSSOAttempt for handoffs.
func testSSOHandoffs(t *testing.T, st *store.Store) {
	ctx := t.Context()
	fx := newFixture(t, st, "acme")
	expires := t0.Add(sso.HandoffTTL)
	h := sso.Handoff{ID: "code-1", User: fx.ann.ID, Challenge: "ch",
		Session:   sso.Session{Client: sso.ClientCLI, Issuer: issuer, Subject: "sub-ann", Refresh: []byte("sealed")},
		CreatedAt: t0, ExpiresAt: expires}
	tokenless := h
	tokenless.ID, tokenless.Session.Refresh = "code-2", nil
	for _, want := range []sso.Handoff{h, tokenless} {
		if err := st.CreateSSOHandoff(ctx, want); err != nil {
			t.Fatalf("CreateSSOHandoff: %v", err)
		}
		got, err := st.TakeSSOHandoff(ctx, want.ID, t0)
		if err != nil {
			t.Fatalf("TakeSSOHandoff: %v", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("TakeSSOHandoff (-want +got):\n%s", diff)
		}
		_, err = st.TakeSSOHandoff(ctx, want.ID, t0)
		wantErr(t, "TakeSSOHandoff(taken)", err, fault.NotFound)
	}
	orphan := h
	orphan.ID, orphan.User = "code-3", "usr_nope"
	wantErr(t, "CreateSSOHandoff(unknown user)", st.CreateSSOHandoff(ctx, orphan), fault.NotFound)

	if err := st.CreateSSOHandoff(ctx, h); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "CreateSSOHandoff(taken id)", st.CreateSSOHandoff(ctx, h), fault.Conflict)
	_, err := st.TakeSSOHandoff(ctx, h.ID, expires.Add(time.Second))
	wantErr(t, "TakeSSOHandoff(expired)", err, fault.NotFound)
	_, err = st.TakeSSOHandoff(ctx, h.ID, t0)
	wantErr(t, "TakeSSOHandoff(after an expired take)", err, fault.NotFound)

	if err := st.CreateSSOHandoff(ctx, h); err != nil {
		t.Fatal(err)
	}
	if wins := takeOnce(t, 8, func() error { _, err := st.TakeSSOHandoff(ctx, h.ID, t0); return err }); wins != 1 {
		t.Errorf("%d of 8 concurrent takes of a handoff got it, want 1", wins)
	}
}
