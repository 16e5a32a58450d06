package sso_test

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/oidctest"
	"berth.dev/berth/internal/sso"
)

// TestSignInMakesUsers: a first sign-in through the real provider makes
// the person's user in the organisation the mapping names (just in
// time), with the role their groups give; the panel gets a key of theirs
// that lasts the key lifetime; a second sign-in finds the same user; all
// of it in the audit log.
func TestSignInMakesUsers(t *testing.T) {
	w := newWorld(t)
	for _, tt := range []struct {
		subject, name string
		role          account.Role
	}{
		{"ada", "ada@example.test", account.RoleAdmin},
		{"bob", "bob@example.test", account.RoleMember},
	} {
		before := time.Now()
		out, err := w.signIn(t, tt.subject, "")
		if err != nil {
			t.Fatalf("%s: %v", tt.subject, err)
		}
		if out.User.Name != tt.name || out.User.Role != tt.role || out.Org.Name != "acme" || out.Next != "/sandboxes" {
			t.Errorf("%s: signed in as %s (%s) of %s, next %q", tt.subject, out.User.Name, out.User.Role, out.Org.Name, out.Next)
		}
		u := w.user(t, "acme", tt.name)
		if u.Issuer != w.hydra.Issuer || u.Subject != tt.subject || u.Email != tt.name {
			t.Errorf("%s: the user is %+v", tt.subject, u)
		}
		p, err := w.accounts.Authenticate(t.Context(), out.Key.Secret.Reveal())
		if err != nil || p.User.ID != u.ID {
			t.Fatalf("%s: the panel's key: %v", tt.subject, err)
		}
		if exp := out.Key.Key.ExpiresAt; exp.Before(before.Add(sso.DefaultKeyTTL)) || exp.After(time.Now().Add(sso.DefaultKeyTTL)) {
			t.Errorf("%s: the key expires at %s, want %s from now", tt.subject, exp, sso.DefaultKeyTTL)
		}
		again, err := w.signIn(t, tt.subject, "")
		if err != nil || again.User.ID != u.ID {
			t.Errorf("%s: signing in again: %v, user %s (want %s)", tt.subject, err, again.User.ID, u.ID)
		}
	}
	made := w.events(t, audit.UserCreate)
	if !has(made, "", "ada@example.test", "admin", "first sign-in", "administrator by platform") ||
		!has(made, "", "bob@example.test", "member", "member by engineering") {
		t.Errorf("the users made are not in the audit log as such: %+v", made)
	}
	if n := len(slices.DeleteFunc(made, func(e audit.Event) bool { return e.Detail == "" || !strings.Contains(e.Detail, "sign-in") })); n != 2 {
		t.Errorf("%d users made at sign-in, want 2 (a second sign-in makes none)", n)
	}
	if ins := w.events(t, audit.SSOSignIn); !has(ins, audit.OK, "ada@example.test", "panel", "ada at "+w.hydra.Issuer) || len(ins) != 4 {
		t.Errorf("sign-ins in the audit log: %+v", ins)
	}
}

// TestRoleFollowsGroups: the role is the provider's groups' at every
// sign-in, up and down, audited; an operator comes only from the
// deployment's own groups, and an organisation's mapping that names the
// operators' group makes no operator.
func TestRoleFollowsGroups(t *testing.T) {
	w := newWorld(t)
	if _, err := w.signIn(t, "bob", ""); err != nil {
		t.Fatal(err)
	}
	w.hydra.AddUser(oidctest.User{Subject: "bob", Email: "bob@example.test", Groups: []string{"engineering", "platform"}})
	out, err := w.signIn(t, "bob", "")
	if err != nil || out.User.Role != account.RoleAdmin {
		t.Fatalf("bob, now in platform: %v, %s", err, out.User.Role)
	}
	w.hydra.AddUser(oidctest.User{Subject: "bob", Email: "bob@example.test", Groups: []string{"engineering"}})
	if out, err = w.signIn(t, "bob", ""); err != nil || out.User.Role != account.RoleMember {
		t.Fatalf("bob, out of platform again: %v, %s", err, out.User.Role)
	}
	roles := w.events(t, audit.UserRole)
	if !has(roles, "", "bob@example.test", "member → admin", "platform") || !has(roles, "", "bob@example.test", "admin → member") {
		t.Errorf("role changes in the audit log: %+v", roles)
	}

	// otto's group is the deployment's operators': with no mapping naming
	// him he is an operator of the oldest organisation.
	out, err = w.signIn(t, "otto", "")
	if err != nil || out.User.Role != account.RoleOperator || out.Org.Name != "acme" {
		t.Fatalf("otto: %v, %s of %s", err, out.User.Role, out.Org.Name)
	}
	// A mapping naming the operators' group as administrators makes nora's
	// (sales) an administrator of other, never an operator.
	w.mapping(t, "other", []string{"research"}, []string{"sales", "berth-operators"})
	if out, err = w.signIn(t, "nora", ""); err != nil || out.User.Role != account.RoleAdmin || out.Org.Name != "other" {
		t.Fatalf("nora: %v, %s of %s", err, out.User.Role, out.Org.Name)
	}
}

// TestLinksAUserMadeByHand: a user an administrator made with the
// person's address is theirs at their first sign-in (by the provider's
// verified email), not a second user; their older keys keep working.
func TestLinksAUserMadeByHand(t *testing.T) {
	w := newWorld(t)
	ada, err := w.accounts.CreateUser(t.Context(), w.op, "acme", "ada", "ADA@example.test", account.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	out, err := w.signIn(t, "ada", "")
	if err != nil {
		t.Fatal(err)
	}
	if out.User.ID != ada.ID || out.User.Name != "ada" || out.User.Role != account.RoleAdmin {
		t.Errorf("ada signed in as %+v, want the user made by hand (%s), now an administrator", out.User, ada.ID)
	}
	if u := w.user(t, "acme", "ada"); u.Subject != "ada" || u.Issuer != w.hydra.Issuer {
		t.Errorf("ada is not linked: %+v", u)
	}
	if !has(w.events(t, audit.UserLink), "", "ada", "verified email") {
		t.Errorf("the link is not in the audit log")
	}
}

// TestSignInRefused: what must not sign anybody in does not, saying why
// in the audit log and only a general reason to the browser.
func TestSignInRefused(t *testing.T) {
	w := newWorld(t)
	refused := func(what string, out sso.Outcome, err error, public, reason string) {
		t.Helper()
		r, ok := errors.AsType[*sso.Refusal](err)
		if !ok {
			t.Errorf("%s: %v, want a refusal", what, err)
			return
		}
		if r.Public != public && !strings.Contains(r.Public, public) {
			t.Errorf("%s: the browser is told %q, want %q", what, r.Public, public)
		}
		if !strings.Contains(r.Reason, reason) {
			t.Errorf("%s: the reason is %q, want it to say %q", what, r.Reason, reason)
		}
		if out.Key.Secret.Reveal() != "" || out.User.ID != "" {
			t.Errorf("%s: signed in anyway: %+v", what, out.User)
		}
		if !has(w.events(t, audit.SSOSignIn), audit.Refused, "", reason) && !slices.ContainsFunc(w.events(t, audit.SSOSignIn), func(e audit.Event) bool {
			return e.Outcome == audit.Refused && strings.Contains(e.Detail, reason)
		}) {
			t.Errorf("%s: the refusal is not in the audit log", what)
		}
	}

	out, err := w.signIn(t, "eve", "")
	refused("a person the provider refuses", out, err, "did not sign you in", "access_denied")
	out, err = w.signIn(t, "nora", "")
	refused("a person whose groups no organisation maps", out, err, "not given access", "no organisation's mapping names a group of nora")
	out, err = w.signIn(t, "bob", "other")
	refused("an organisation the person's groups do not give", out, err, "not given access", "has no place in organisation other")
	out, err = w.finish(t, "bob", "", nil, "another browser's cookie")
	refused("another browser", out, err, "another browser", "not the one that started")

	// The state is good once: a second callback with it is refused.
	w.hydra.SignInAs("bob")
	to, ck, err := w.svc.Begin(t.Context(), "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := oidctest.Authorize(t.Context(), to, callback)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.svc.Finish(t.Context(), cb.Query(), ck.Reveal()); err != nil {
		t.Fatal(err)
	}
	out, err = w.svc.Finish(t.Context(), cb.Query(), ck.Reveal())
	refused("a state used already", out, err, "start again", "not a sign-in under way")
	q := cb.Query()
	q.Set("state", "made-up")
	out, err = w.svc.Finish(t.Context(), q, ck.Reveal())
	refused("a state berth never gave", out, err, "start again", "not a sign-in under way")

	// An administrator disabled bob: the provider still lets him in, berth
	// does not, and does not enable him.
	if _, err := w.accounts.SetDisabled(t.Context(), w.op, "acme", "bob@example.test", true); err != nil {
		t.Fatal(err)
	}
	out, err = w.signIn(t, "bob", "")
	refused("a user an administrator disabled", out, err, "disabled", "disabled by an administrator")
	if u := w.user(t, "acme", "bob@example.test"); !u.Disabled {
		t.Errorf("bob was enabled by signing in")
	}
}

// TestChooseOrganisation: carol's groups give her acme and other; she is
// asked which (nothing written yet), and the one she names signs her in.
func TestChooseOrganisation(t *testing.T) {
	w := newWorld(t)
	out, err := w.signIn(t, "carol", "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range out.Choose {
		names = append(names, o.Name)
	}
	if !slices.Equal(names, []string{"acme", "other"}) || out.User.ID != "" || out.Key.Secret.Reveal() != "" {
		t.Fatalf("carol is offered %v (user %q)", names, out.User.ID)
	}
	for _, org := range []string{"other", "acme"} {
		out, err := w.signIn(t, "carol", org)
		if err != nil || out.Org.Name != org || out.User.Role != account.RoleMember {
			t.Fatalf("carol in %s: %v, %s of %s", org, err, out.User.Role, out.Org.Name)
		}
	}
	if a, o := w.user(t, "acme", "carol@example.test"), w.user(t, "other", "carol@example.test"); a.ID == o.ID || a.Subject != "carol" || o.Subject != "carol" {
		t.Errorf("carol's users: %+v and %+v", a, o)
	}
}

// TestCLISignIn: berth login --sso's code, handed to its listener, is
// traded once, with the verifier only the CLI holds, for a key of the
// person's; a wrong verifier spends the code.
func TestCLISignIn(t *testing.T) {
	w := newWorld(t)
	u, k, err := w.cliLogin(t, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if u.Name != "bob@example.test" || k.Key.Name != "laptop" || !w.works(t, k) || k.Key.ExpiresAt.IsZero() {
		t.Errorf("the CLI's key: %+v of %s", k.Key, u.Name)
	}
	if !has(w.events(t, audit.SSOSignIn), audit.OK, "bob@example.test", "cli") {
		t.Errorf("the CLI's sign-in is not in the audit log")
	}

	verifier := oauth2.GenerateVerifier()
	out, err := w.finish(t, "bob", "", &sso.CLI{Port: 50000, Challenge: challenge(verifier), State: "s2"}, "")
	if err != nil {
		t.Fatal(err)
	}
	code := codeOf(t, out.Redirect, 50000, "s2")
	if _, _, _, err := w.svc.Exchange(t.Context(), code, oauth2.GenerateVerifier(), ""); !errors.Is(err, fault.Unauthenticated) {
		t.Errorf("another verifier: %v, want unauthenticated", err)
	}
	if _, _, _, err := w.svc.Exchange(t.Context(), code, verifier, ""); !errors.Is(err, fault.Unauthenticated) {
		t.Errorf("the right verifier after a wrong one: %v, want unauthenticated (the code is spent)", err)
	}
	if _, _, _, err := w.svc.Exchange(t.Context(), "never-given", verifier, ""); !errors.Is(err, fault.Unauthenticated) {
		t.Errorf("a code never given: %v", err)
	}

	// A refusal goes back to the CLI's listener with the public reason.
	out, err = w.finish(t, "nora", "", &sso.CLI{Port: 50001, Challenge: challenge(verifier), State: "s3"}, "")
	if _, ok := errors.AsType[*sso.Refusal](err); !ok {
		t.Fatalf("nora: %v", err)
	}
	r, _ := url.Parse(out.Redirect)
	if r.Host != "127.0.0.1:50001" || r.Query().Get("error") != "access_denied" || !strings.Contains(r.Query().Get("error_description"), "not given access") ||
		r.Query().Get("state") != "s3" || r.Query().Get("code") != "" {
		t.Errorf("nora's CLI is told %s", out.Redirect)
	}
}

// TestBeginRefusesBadCLIRequests: what berth login --sso sends is checked
// before the browser goes anywhere.
func TestBeginRefusesBadCLIRequests(t *testing.T) {
	w := newWorld(t)
	good := challenge(oauth2.GenerateVerifier())
	for _, tt := range []struct {
		cli   sso.CLI
		field string
	}{
		{sso.CLI{Port: 80, Challenge: good, State: "s"}, "port"},
		{sso.CLI{Port: 70000, Challenge: good, State: "s"}, "port"},
		{sso.CLI{Port: 4000, Challenge: "plain-verifier", State: "s"}, "challenge"},
		{sso.CLI{Port: 4000, Challenge: good, State: ""}, "state"},
		{sso.CLI{Port: 4000, Challenge: good, State: "a b"}, "state"},
		{sso.CLI{Port: 4000, Challenge: good, State: strings.Repeat("s", sso.MaxState+1)}, "state"},
	} {
		_, _, err := w.svc.Begin(t.Context(), "", "", &tt.cli)
		if fe, ok := errors.AsType[*fault.Error](err); !ok || fe.Field != tt.field {
			t.Errorf("%+v: %v, want a refusal naming %s", tt.cli, err, tt.field)
		}
		if back := sso.CLIFailed(tt.cli, "invalid_request", "no"); back != "" {
			t.Errorf("%+v: a browser is sent back to %s", tt.cli, back)
		}
	}
	// A request of the CLI's own that is good, failing on something else
	// (the organisation asked for), sends the browser back to it.
	back := sso.CLIFailed(sso.CLI{Port: 4000, Challenge: good, State: "s"}, "invalid_request", "org: too long")
	if u, err := url.Parse(back); err != nil || u.Host != "127.0.0.1:4000" || u.Query().Get("error_description") != "org: too long" || u.Query().Get("state") != "s" {
		t.Errorf("a failed start of a good CLI request goes to %q", back)
	}
}

// TestSignOut: signing out of the panel revokes the key its sign-in gave,
// and nothing else of the person's.
func TestSignOut(t *testing.T) {
	w := newWorld(t)
	panel, err := w.signIn(t, "bob", "")
	if err != nil {
		t.Fatal(err)
	}
	_, cli, err := w.cliLogin(t, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.svc.SignOut(t.Context(), panel.Key.Key.ID); err != nil {
		t.Fatal(err)
	}
	if w.works(t, panel.Key) || !w.works(t, cli) {
		t.Errorf("after signing out of the panel: the panel's key works %v, the CLI's %v", w.works(t, panel.Key), w.works(t, cli))
	}
	if !has(w.events(t, audit.SSOSignOut), "", "bob@example.test", "panel", "signed out") {
		t.Errorf("the sign-out is not in the audit log")
	}
	if err := w.svc.SignOut(t.Context(), "key_notasignin"); err != nil {
		t.Errorf("a key no sign-in gave: %v", err)
	}
}

// TestMappingRules: an organisation's mapping is read by its
// administrators and set by operators alone; another organisation's does
// not exist for them; bad group lists are refused naming the field.
func TestMappingRules(t *testing.T) {
	w := newWorld(t)
	admin, err := w.signIn(t, "ada", "")
	if err != nil {
		t.Fatal(err)
	}
	member, err := w.signIn(t, "bob", "")
	if err != nil {
		t.Fatal(err)
	}
	pa, _ := w.accounts.Authenticate(t.Context(), admin.Key.Secret.Reveal())
	pm, _ := w.accounts.Authenticate(t.Context(), member.Key.Secret.Reveal())
	if m, err := w.svc.Mapping(t.Context(), pa, "acme"); err != nil || !slices.Equal(m.Members, []string{"engineering"}) {
		t.Errorf("ada reads acme's mapping: %+v, %v", m, err)
	}
	if _, err := w.svc.Mapping(t.Context(), pm, "acme"); !errors.Is(err, fault.Forbidden) {
		t.Errorf("bob reads acme's mapping: %v, want forbidden", err)
	}
	if _, err := w.svc.Mapping(t.Context(), pa, "other"); !errors.Is(err, fault.NotFound) {
		t.Errorf("ada reads other's mapping: %v, want not found", err)
	}
	if _, err := w.svc.SetMapping(t.Context(), pa, "acme", []string{"everyone"}, nil); !errors.Is(err, fault.Forbidden) {
		t.Errorf("ada sets acme's mapping: %v, want forbidden", err)
	}
	for _, tt := range []struct {
		members, admins []string
		field           string
	}{
		{[]string{" "}, nil, "members"},
		{nil, []string{"a\x00b"}, "administrators"},
		{nil, []string{strings.Repeat("g", sso.MaxGroupName+1)}, "administrators"},
		{manyGroups(sso.MaxGroups + 1), nil, "members"},
	} {
		_, err := w.svc.SetMapping(t.Context(), w.op, "acme", tt.members, tt.admins)
		if fe, ok := errors.AsType[*fault.Error](err); !ok || fe.Field != tt.field {
			t.Errorf("members %d, administrators %d: %v, want a refusal naming %s", len(tt.members), len(tt.admins), err, tt.field)
		}
	}
	m, err := w.svc.SetMapping(t.Context(), w.op, "acme", []string{"engineering", "Engineering", " qa "}, []string{"platform"})
	if err != nil || !slices.Equal(m.Members, []string{"engineering", "qa"}) {
		t.Errorf("the mapping as set: %+v, %v", m, err)
	}
	if !has(w.events(t, audit.SSOMapping), "", "acme", "members: engineering, qa", "administrators: platform") {
		t.Errorf("the mapping's change is not in the audit log")
	}
}

func manyGroups(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "g" + strings.Repeat("x", i)
	}
	return out
}
