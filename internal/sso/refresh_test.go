package sso_test

import (
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/idp"
	"berth.dev/berth/internal/oidctest"
	"berth.dev/berth/internal/sso"
)

// everyTime makes every live session due at each pass.
func everyTime(c *sso.Config) { c.RefreshEvery = time.Nanosecond }

// bobSignedIn signs bob in to the panel and the CLI.
func bobSignedIn(t *testing.T, w *world) (panel, cli account.NewKeyResult) {
	t.Helper()
	out, err := w.signIn(t, "bob", "")
	if err != nil {
		t.Fatal(err)
	}
	_, cli, err = w.cliLogin(t, "bob")
	if err != nil {
		t.Fatal(err)
	}
	return out.Key, cli
}

func (w *world) refresh(t *testing.T) int {
	t.Helper()
	n, err := w.svc.RefreshDue(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// cutOff checks bob is cut off: disabled by the provider, his sign-ins'
// keys revoked, his sandboxes ended, all of it audited, saying why.
func (w *world) cutOff(t *testing.T, why string, keys ...account.NewKeyResult) {
	t.Helper()
	bob := w.user(t, "acme", "bob@example.test")
	if !bob.Disabled || !bob.DisabledByIdP {
		t.Errorf("bob is not disabled by the provider: %+v", bob)
	}
	for _, k := range keys {
		if w.works(t, k) {
			t.Errorf("bob's key %s still works", k.Key.ID)
		}
		if kk, err := w.st.GetKey(t.Context(), k.Key.ID); err != nil || kk.RevokedAt.IsZero() {
			t.Errorf("bob's key %s is not revoked (%v)", k.Key.ID, err)
		}
	}
	if w.ends.of(bob.ID) != 1 {
		t.Errorf("bob's sandboxes were ended %d times, want once", w.ends.of(bob.ID))
	}
	if !has(w.events(t, audit.UserDisable), "", "bob@example.test", "by the identity provider", why) {
		t.Errorf("bob's disabling is not in the audit log saying %q: %+v", why, w.events(t, audit.UserDisable))
	}
	if n := len(w.events(t, audit.SSOSignOut)); n != len(keys) {
		t.Errorf("%d sign-ins ended in the audit log, want %d", n, len(keys))
	}
	for _, k := range keys {
		if !has(w.events(t, audit.KeyRevoke), "", k.Key.ID, "its sign-in ended") {
			t.Errorf("the revocation of bob's key %s is not in the audit log", k.Key.ID)
		}
	}
}

// TestRefreshFollowsGroups: a refresh reads the person again at the
// provider; a new group raises the role, at once, audited, and the keys
// go on working.
func TestRefreshFollowsGroups(t *testing.T) {
	w := newWorld(t, everyTime)
	panel, cli := bobSignedIn(t, w)
	if n := w.refresh(t); n != 2 {
		t.Errorf("%d sessions refreshed, want 2", n)
	}
	w.hydra.AddUser(oidctest.User{Subject: "bob", Email: "bob@example.test", Groups: []string{"engineering", "platform"}})
	w.refresh(t)
	if u := w.user(t, "acme", "bob@example.test"); u.Role != account.RoleAdmin || u.Disabled {
		t.Errorf("bob after the refresh: %+v", u)
	}
	if !has(w.events(t, audit.UserRole), "", "bob@example.test", "member → admin", "(refresh)") {
		t.Errorf("the role's change is not in the audit log")
	}
	if !w.works(t, panel) || !w.works(t, cli) {
		t.Errorf("bob's keys stopped working")
	}
	// Refreshed again (the provider rotated the refresh tokens), still in.
	if n := w.refresh(t); n != 2 || !w.works(t, cli) {
		t.Errorf("a second refresh: %d sessions", n)
	}
}

// TestLostGroupCutsOff: the group that made bob a member is gone at the
// provider: the next refresh disables him, revokes both his sign-ins'
// keys and ends his sandboxes; when the provider gives it back, his next
// sign-in enables him again, with a new key; the old ones stay revoked.
func TestLostGroupCutsOff(t *testing.T) {
	w := newWorld(t, everyTime)
	panel, cli := bobSignedIn(t, w)
	w.hydra.AddUser(oidctest.User{Subject: "bob", Email: "bob@example.test", Groups: []string{"sales"}})
	w.refresh(t)
	w.cutOff(t, "no group of theirs", panel, cli)
	if n := w.refresh(t); n != 0 {
		t.Errorf("%d sessions of a cut-off user refreshed", n)
	}

	w.hydra.AddUser(oidctest.User{Subject: "bob", Email: "bob@example.test", Groups: []string{"engineering"}})
	out, err := w.signIn(t, "bob", "")
	if err != nil {
		t.Fatal(err)
	}
	if u := w.user(t, "acme", "bob@example.test"); u.Disabled || u.DisabledByIdP || !w.works(t, out.Key) || w.works(t, panel) {
		t.Errorf("bob after signing in again: %+v", u)
	}
	if !has(w.events(t, audit.UserEnable), "", "bob@example.test", "lets them in again") {
		t.Errorf("bob's enabling is not in the audit log")
	}
}

// TestLostGroupAtSignIn: a person whose group is gone is cut off at their
// next sign-in too, which is refused.
func TestLostGroupAtSignIn(t *testing.T) {
	w := newWorld(t)
	panel, cli := bobSignedIn(t, w)
	w.hydra.AddUser(oidctest.User{Subject: "bob", Email: "bob@example.test", Groups: []string{"sales"}})
	if _, err := w.signIn(t, "bob", ""); !errors.As(err, new(*sso.Refusal)) {
		t.Fatalf("bob signing in without his group: %v", err)
	}
	w.cutOff(t, "no group of theirs", panel, cli)
}

// TestRefusedRefreshCutsOff: the provider refuses the person (disabled
// there), or their sessions were revoked there: the refresh is refused,
// and they are cut off.
func TestRefusedRefreshCutsOff(t *testing.T) {
	for _, tt := range []struct {
		name string
		at   func(t *testing.T, w *world)
	}{
		{"disabled at the provider", func(t *testing.T, w *world) {
			w.hydra.AddUser(oidctest.User{Subject: "bob", Email: "bob@example.test", Groups: []string{"engineering"}, Refuse: true})
		}},
		{"sessions revoked at the provider", func(t *testing.T, w *world) {
			if err := w.hydra.RevokeSessions(t.Context(), "bob"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, everyTime)
			panel, cli := bobSignedIn(t, w)
			tt.at(t, w)
			w.refresh(t)
			w.cutOff(t, "refused to refresh", panel, cli)
			if !has(w.events(t, audit.SSORefresh), audit.Refused, "bob@example.test", "refused the refresh") {
				t.Errorf("the refused refresh is not in the audit log: %+v", w.events(t, audit.SSORefresh))
			}
		})
	}
}

// flaky is a transport that can be made to fail, as a provider that
// cannot be reached.
type flaky struct{ down atomic.Bool }

func (f *flaky) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.down.Load() {
		return nil, errors.New("connect: connection refused")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestRefreshFailuresSayNothingOfThePerson: a provider that cannot be
// reached, or that refuses berth's own client (a wrong secret), disables
// nobody: the sessions stay due and are refreshed once it works again.
func TestRefreshFailuresSayNothingOfThePerson(t *testing.T) {
	w := newWorld(t, everyTime)
	tr := &flaky{}
	p, err := idp.New(t.Context(), providerConfig(w.hydra, "secret-of-berth"),
		&http.Client{Transport: tr, Timeout: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := w.cfg
	cfg.Provider = p
	if w.svc, err = sso.New(cfg, w.st, w.ends, w.st, nil, nil); err != nil {
		t.Fatal(err)
	}
	panel, cli := bobSignedIn(t, w)

	tr.down.Store(true)
	if n := w.refresh(t); n != 0 {
		t.Errorf("%d sessions refreshed with the provider down", n)
	}
	wrong, err := idp.New(t.Context(), providerConfig(w.hydra, "not-the-secret"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Provider = wrong // the sealing key stays the deployment's
	misconfigured, err := sso.New(cfg, w.st, w.ends, w.st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := misconfigured.RefreshDue(t.Context()); err != nil || n != 0 {
		t.Errorf("a refresh with a wrong client secret: %d, %v", n, err)
	}
	if u := w.user(t, "acme", "bob@example.test"); u.Disabled || !w.works(t, panel) || !w.works(t, cli) || len(w.ends.owners) > 0 {
		t.Fatalf("bob was cut off by berth's own trouble: %+v", u)
	}
	tr.down.Store(false)
	if n := w.refresh(t); n != 2 {
		t.Errorf("%d sessions refreshed once the provider answers again, want 2", n)
	}
}

// TestNewClientEndsSessions: the deployment moved to another client at
// the same provider (BERTH_OIDC_CLIENT_ID): the provider would refuse
// the old client's refresh tokens as another client's, which says
// nothing of the person. Nobody is disabled; the old sign-ins end, their
// keys revoked, and a new sign-in works.
func TestNewClientEndsSessions(t *testing.T) {
	w := newWorld(t, everyTime)
	panel, cli := bobSignedIn(t, w)
	if err := w.hydra.CreateClient(t.Context(), oidctest.Client{ID: "berth-2", Secret: "secret-of-berth", RedirectURIs: []string{callback}}); err != nil {
		t.Fatal(err)
	}
	cfg := providerConfig(w.hydra, "secret-of-berth")
	cfg.ClientID = "berth-2"
	p, err := idp.New(t.Context(), cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.cfg.Provider = p
	if w.svc, err = sso.New(w.cfg, w.st, w.ends, w.st, nil, nil); err != nil {
		t.Fatal(err)
	}
	w.refresh(t)
	if u := w.user(t, "acme", "bob@example.test"); u.Disabled || len(w.ends.owners) > 0 {
		t.Fatalf("bob was cut off by the deployment's new client: %+v", u)
	}
	if w.works(t, panel) || w.works(t, cli) {
		t.Errorf("the old client's sign-ins' keys still work")
	}
	if !has(w.events(t, audit.SSOSignOut), "", "bob@example.test", `opened for the client "berth"`, `now the client "berth-2"`) {
		t.Errorf("the ended sign-ins are not in the audit log: %+v", w.events(t, audit.SSOSignOut))
	}
	out, err := w.signIn(t, "bob", "")
	if err != nil || !w.works(t, out.Key) {
		t.Fatalf("bob signs in with the new client: %v", err)
	}
	if n := w.refresh(t); n != 1 {
		t.Errorf("%d sessions refreshed with the new client, want 1", n)
	}
}

// TestRefreshReadsEveryBatch: a pass refreshes every due session, however
// many batches that takes; one whose provider did not answer is not read
// again in the same pass.
func TestRefreshReadsEveryBatch(t *testing.T) {
	sso.SetRefreshBatch(t, 2)
	w := newWorld(t, everyTime)
	bobSignedIn(t, w)
	bobSignedIn(t, w)
	if _, err := w.signIn(t, "ada", ""); err != nil {
		t.Fatal(err)
	}
	if n := w.refresh(t); n != 5 {
		t.Errorf("%d of 5 sessions refreshed in one pass of batches of 2", n)
	}
}
