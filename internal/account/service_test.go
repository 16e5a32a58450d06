package account_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fakeclock"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/secret"
	"berth.dev/berth/internal/store"
)

// env is the account service on a real SQLite store: organisation acme
// with its operator ops (the bootstrap's), an administrator ada, members
// alice (who has a key an operator minted) and dan (who has none yet);
// and organisation other with its administrator olga.
type env struct {
	dir      string
	st       *store.Store
	clock    *fakeclock.Clock
	accounts *account.Service
	// Principals, authenticated with their real keys.
	ops, ada, alice, olga account.Principal
	opsKey                string // the operator's bootstrap key's id
	dan                   account.User
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := t.Context()
	e := &env{dir: t.TempDir(), clock: fakeclock.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))}
	st, err := store.Open(ctx, filepath.Join(e.dir, "berth.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.st = st
	e.accounts = account.NewService(st, st, e.clock.Now, nil, st, nil)
	_, _, _, opKey, err := e.accounts.Bootstrap(ctx, "acme", "default", "ops")
	if err != nil {
		t.Fatal(err)
	}
	e.opsKey = opKey.Key.ID
	e.ops = e.auth(t, opKey.Secret)
	if _, _, err := e.accounts.CreateOrganisation(ctx, e.ops, "other", ""); err != nil {
		t.Fatal(err)
	}
	e.ada = e.person(t, "acme", "ada", account.RoleAdmin)
	e.alice = e.person(t, "acme", "alice", account.RoleMember)
	e.olga = e.person(t, "other", "olga", account.RoleAdmin)
	if e.dan, err = e.accounts.CreateUser(ctx, e.ada, "", "dan", "", account.RoleMember); err != nil {
		t.Fatal(err)
	}
	return e
}

// person makes a user with a key an operator minted, as the deployment's
// scripts do, and returns them signed in with it.
func (e *env) person(t *testing.T, org, name string, role account.Role) account.Principal {
	t.Helper()
	u, err := e.accounts.CreateUser(t.Context(), e.ops, org, name, "", role)
	if err != nil {
		t.Fatal(err)
	}
	k, err := e.accounts.CreateKey(t.Context(), e.ops, u.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	return e.auth(t, k.Secret)
}

func (e *env) auth(t *testing.T, s secret.Secret) account.Principal {
	t.Helper()
	p, err := e.accounts.Authenticate(t.Context(), s.Reveal())
	if err != nil {
		t.Fatalf("authenticate: %v", err)
	}
	return p
}

// redemptions returns acme's invitation.redeem events.
func (e *env) redemptions(t *testing.T) []audit.Event {
	t.Helper()
	events, _, err := e.st.ListAudit(t.Context(), audit.Filter{Org: e.ops.User.Org}, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Event
	for _, ev := range events {
		if ev.Action == audit.InvitationRedeem {
			out = append(out, ev)
		}
	}
	return out
}

func wantIs(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s = %v, want %v", what, err, target)
	}
}

// TestOperatorsKeysDoNotExistBelowOperator: to an administrator of the
// operator's own organisation, and to a member, the operator's keys are
// not found by any call (not forbidden), by name or id; the operator's key
// still works after every attempt.
func TestOperatorsKeysDoNotExistBelowOperator(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	for _, who := range []struct {
		name string
		p    account.Principal
	}{{"administrator", e.ada}, {"member", e.alice}} {
		for _, ref := range []string{"ops", e.ops.User.ID} {
			_, err := e.accounts.CreateKey(ctx, who.p, ref, "stolen")
			wantIs(t, who.name+": CreateKey("+ref+")", err, fault.NotFound)
			_, _, err = e.accounts.Keys(ctx, who.p, ref, paging.Request{})
			wantIs(t, who.name+": Keys("+ref+")", err, fault.NotFound)
			_, err = e.accounts.Invite(ctx, who.p, "", ref, 0)
			if who.p.User.Role == account.RoleAdmin {
				wantIs(t, who.name+": Invite("+ref+")", err, fault.NotFound)
			} else if err == nil {
				t.Errorf("%s: Invite(%s) succeeded", who.name, ref)
			}
		}
		wantIs(t, who.name+": RevokeKey(the operator's)", e.accounts.RevokeKey(ctx, who.p, e.opsKey), fault.NotFound)
	}
	keys, _, err := e.accounts.Keys(ctx, e.ops, "", paging.Request{})
	if err != nil || len(keys) != 1 || !keys[0].RevokedAt.IsZero() {
		t.Errorf("the operator's keys = %+v, %v; want the bootstrap key, live", keys, err)
	}
}

// TestAKeyIsMintedOnlyByItsUserOrAnOperator: an administrator may list
// and revoke a member's keys but never mint one, for a member or another
// administrator, by name or id; the user and an operator may.
func TestAKeyIsMintedOnlyByItsUserOrAnOperator(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	carol := e.person(t, "acme", "carol", account.RoleAdmin)
	for _, ref := range []string{"alice", e.alice.User.ID, "carol", carol.User.ID, "dan"} {
		_, err := e.accounts.CreateKey(ctx, e.ada, ref, "")
		wantIs(t, "administrator: CreateKey("+ref+")", err, fault.Forbidden)
	}
	_, err := e.accounts.CreateKey(ctx, e.olga, "alice", "")
	wantIs(t, "another organisation's administrator: CreateKey(alice)", err, fault.NotFound)
	_, err = e.accounts.CreateKey(ctx, e.alice, "carol", "")
	wantIs(t, "member: CreateKey(another's)", err, fault.NotFound)
	if keys, _, _ := e.accounts.Keys(ctx, e.ops, e.dan.ID, paging.Request{}); len(keys) != 0 {
		t.Fatalf("refused mints left keys for dan: %+v", keys)
	}

	// Incident response: the administrator lists alice's keys and revokes one.
	keys, _, err := e.accounts.Keys(ctx, e.ada, "alice", paging.Request{})
	if err != nil || len(keys) != 1 {
		t.Fatalf("administrator: Keys(alice) = %+v, %v; want her one key", keys, err)
	}
	if err := e.accounts.RevokeKey(ctx, e.ada, keys[0].ID); err != nil {
		t.Fatalf("administrator: RevokeKey(alice's) = %v", err)
	}

	// alice and an operator mint alice's keys; the administrator their own.
	if _, err := e.accounts.CreateKey(ctx, e.ops, "alice", "by ops"); err != nil {
		t.Errorf("operator: CreateKey(alice) = %v", err)
	}
	if _, err := e.accounts.CreateKey(ctx, carol, "", "laptop"); err != nil {
		t.Errorf("administrator: CreateKey(themselves) = %v", err)
	}
}

// TestInvitationIsUsedOnce: an administrator invites a new user; the
// invitation gives the user's key once, and a second use is refused
// saying when the first was, both on the audit log with the addresses.
func TestInvitationIsUsedOnce(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	inv, err := e.accounts.Invite(ctx, e.ada, "", "dan", 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := e.clock.Now().Add(72 * time.Hour); !inv.Invitation.ExpiresAt.Equal(want) || inv.Invitation.Recovery {
		t.Errorf("invitation expires %v (recovery %v), want %v and not recovery", inv.Invitation.ExpiresAt, inv.Invitation.Recovery, want)
	}
	if _, err := e.accounts.Authenticate(ctx, inv.Secret.Reveal()); !errors.Is(err, fault.Unauthenticated) {
		t.Errorf("the invitation authenticates as a key: %v", err)
	}
	first := e.clock.Now()
	got, err := e.accounts.Redeem(ctx, inv.Secret.Reveal(), "laptop", "192.0.2.10")
	if err != nil {
		t.Fatalf("Redeem: %v", err)
	}
	if p := e.auth(t, got.Key.Secret); p.User.ID != e.dan.ID || got.Key.Key.Name != "laptop" || got.Organisation.Name != "acme" {
		t.Errorf("the invitation's key is %s's named %q in %s, want dan's laptop in acme", p.User.Name, got.Key.Key.Name, got.Organisation.Name)
	}

	e.clock.Advance(time.Hour)
	_, err = e.accounts.Redeem(ctx, inv.Secret.Reveal(), "", "198.51.100.20")
	wantIs(t, "Redeem(again)", err, fault.Conflict)
	if err != nil {
		for _, words := range []string{"already used", first.Format("2006-01-02 15:04:05"), "administrator"} {
			if !strings.Contains(err.Error(), words) {
				t.Errorf("the second use's error %q does not say %q", err, words)
			}
		}
	}
	if keys, _, _ := e.accounts.Keys(ctx, e.ops, e.dan.ID, paging.Request{}); len(keys) != 1 {
		t.Errorf("dan has %d keys after two uses, want 1", len(keys))
	}
	events := e.redemptions(t)
	if len(events) != 2 {
		t.Fatalf("audit holds %d redemptions, want 2: %+v", len(events), events)
	}
	if ok := events[0]; ok.Outcome != audit.OK || ok.Actor != e.dan.ID || ok.Target != inv.Invitation.ID || !strings.Contains(ok.Detail, "192.0.2.10") {
		t.Errorf("the use on record = %+v; want ok, by dan, of %s, from 192.0.2.10", ok, inv.Invitation.ID)
	}
	if bad := events[1]; bad.Outcome != audit.Refused || !strings.Contains(bad.Detail, "198.51.100.20") || !strings.Contains(bad.Detail, "192.0.2.10") {
		t.Errorf("the second use on record = %+v; want refused, naming both addresses", bad)
	}
}

// TestInvitationRefusals: garbage and a wrong secret say nothing but
// "unauthenticated" (the wrong secret is on the record); an expired,
// replaced or disabled user's invitation is refused without being used up.
func TestInvitationRefusals(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	for _, token := range []string{"", "berth_inv_x", "berth_0123456789abcdef_secret"} {
		_, err := e.accounts.Redeem(ctx, token, "", "192.0.2.1")
		wantIs(t, "Redeem("+token+")", err, fault.Unauthenticated)
	}
	inv, err := e.accounts.Invite(ctx, e.ada, "", "dan", 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.accounts.Redeem(ctx, inv.Secret.Reveal()+"x", "", "192.0.2.2")
	wantIs(t, "Redeem(wrong secret)", err, fault.Unauthenticated)
	if ev := e.redemptions(t); len(ev) != 1 || ev[0].Outcome != audit.Refused || !strings.Contains(ev[0].Detail, "wrong secret") {
		t.Errorf("the wrong secret on record = %+v, want one refused redemption saying so", ev)
	}

	// Disabled: refused, and usable once enabled again.
	if _, err := e.accounts.SetDisabled(ctx, e.ada, "", "dan", true); err != nil {
		t.Fatal(err)
	}
	_, err = e.accounts.Redeem(ctx, inv.Secret.Reveal(), "", "192.0.2.3")
	wantIs(t, "Redeem(disabled user)", err, fault.Conflict)
	if _, err := e.accounts.SetDisabled(ctx, e.ada, "", "dan", false); err != nil {
		t.Fatal(err)
	}

	// Replaced: the newer one is the one that works.
	newer, err := e.accounts.Invite(ctx, e.ada, "", "dan", 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.accounts.Redeem(ctx, inv.Secret.Reveal(), "", "192.0.2.4")
	wantIs(t, "Redeem(replaced)", err, fault.Conflict)
	if err != nil && !strings.Contains(err.Error(), "replaced") {
		t.Errorf("Redeem(replaced) = %q, want it to say replaced", err)
	}

	// Expired: at its expiry, not a moment later.
	e.clock.Advance(72 * time.Hour)
	_, err = e.accounts.Redeem(ctx, newer.Secret.Reveal(), "", "192.0.2.5")
	wantIs(t, "Redeem(expired)", err, fault.Conflict)
	if err != nil && !strings.Contains(err.Error(), "expired") {
		t.Errorf("Redeem(expired) = %q, want it to say expired", err)
	}
	if keys, _, _ := e.accounts.Keys(ctx, e.ops, e.dan.ID, paging.Request{}); len(keys) != 0 {
		t.Errorf("refused redemptions gave dan keys: %+v", keys)
	}

	// A life is bounded: 5m to 7d.
	for _, ttl := range []time.Duration{time.Minute, 8 * 24 * time.Hour} {
		_, err := e.accounts.Invite(ctx, e.ada, "", "dan", ttl)
		wantIs(t, "Invite(ttl "+ttl.String()+")", err, fault.Invalid)
	}
	short, err := e.accounts.Invite(ctx, e.ada, "", "dan", time.Hour)
	if err != nil || !short.Invitation.ExpiresAt.Equal(e.clock.Now().Add(time.Hour)) {
		t.Errorf("Invite(ttl 1h) = expires %v, %v; want in an hour", short.Invitation.ExpiresAt, err)
	}
}

// TestInvitationIsStoredAsAHashOnly: the database holds the SHA-256 of an
// invitation's secret and never the secret, in any file SQLite writes.
func TestInvitationIsStoredAsAHashOnly(t *testing.T) {
	e := newEnv(t)
	inv, err := e.accounts.Invite(t.Context(), e.ada, "", "dan", 0)
	if err != nil {
		t.Fatal(err)
	}
	id, secret, ok := account.ParseInvitation(inv.Secret.Reveal())
	if !ok || id != inv.Invitation.ID {
		t.Fatalf("ParseInvitation(its own secret) = %q, %v", id, ok)
	}
	stored, err := e.st.GetInvitation(t.Context(), id)
	if sum := sha256.Sum256([]byte(secret)); err != nil || !bytes.Equal(stored.Hash, sum[:]) {
		t.Errorf("stored hash %x, %v; want the secret's SHA-256", stored.Hash, err)
	}
	files, _ := filepath.Glob(filepath.Join(e.dir, "berth.db*"))
	if len(files) == 0 {
		t.Fatal("no database files")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds the invitation's secret", filepath.Base(f))
		}
	}
}

// TestReinvitingAnEnrolledUser: an administrator may invite only a user
// who has never had a key, and revoking every key does not change that;
// an operator may invite anyone, and their recovery invitation works for
// a user who has keys.
func TestReinvitingAnEnrolledUser(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	inv, err := e.accounts.Invite(ctx, e.ada, "", "dan", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.accounts.Redeem(ctx, inv.Secret.Reveal(), "", "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"dan", "alice", "ada"} {
		_, err := e.accounts.Invite(ctx, e.ada, "", ref, 0)
		wantIs(t, "administrator: Invite("+ref+", who has a key)", err, fault.Forbidden)
	}
	keys, _, _ := e.accounts.Keys(ctx, e.ada, "dan", paging.Request{})
	for _, k := range keys {
		if err := e.accounts.RevokeKey(ctx, e.ada, k.ID); err != nil {
			t.Fatal(err)
		}
	}
	_, err = e.accounts.Invite(ctx, e.ada, "", "dan", 0)
	wantIs(t, "administrator: Invite(dan, every key revoked)", err, fault.Forbidden)
	_, err = e.accounts.Invite(ctx, e.olga, "acme", "dan", 0)
	wantIs(t, "another organisation's administrator: Invite(dan)", err, fault.NotFound)
	_, err = e.accounts.Invite(ctx, e.alice, "", "dan", 0)
	wantIs(t, "member: Invite(dan)", err, fault.Forbidden)

	// The operator's recovery invitation: alice, who has a key, gets another.
	rec, err := e.accounts.Invite(ctx, e.ops, "acme", "alice", 0)
	if err != nil || !rec.Invitation.Recovery {
		t.Fatalf("operator: Invite(alice) = recovery %v, %v; want a recovery invitation", rec.Invitation.Recovery, err)
	}
	got, err := e.accounts.Redeem(ctx, rec.Secret.Reveal(), "recovered", "192.0.2.2")
	if err != nil {
		t.Fatalf("Redeem(recovery) = %v", err)
	}
	if p := e.auth(t, got.Key.Secret); p.User.ID != e.alice.User.ID {
		t.Errorf("the recovery invitation's key is %s's, want alice's", p.User.Name)
	}
}
