package gateway_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
)

// postJSON sends body to path with key ("" for none) and returns the
// status, the answer's headers and its body.
func postJSON(t *testing.T, url, method, key string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// keyRE matches a berth key's secret.
var keyRE = regexp.MustCompile(`berth_[a-z0-9]{16}_[A-Za-z0-9]+`)

// TestOperatorsKeysAreNotFoundBelowOperator: through /api/v1/keys, the
// operator's keys do not exist for an administrator of the operator's own
// organisation nor for a member: list, mint and revoke answer 404 (not
// 403), by name and by id, and the operator's key still works.
func TestOperatorsKeysAreNotFoundBelowOperator(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	me, err := w.operator.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, who := range []struct {
		name string
		c    *client.Client
	}{{"administrator", w.admin}, {"member", w.owner}} {
		for _, ref := range []string{me.User.Name, me.User.ID} {
			_, err := who.c.Keys(ctx, ref)
			if status, cd := code(err); status != http.StatusNotFound || cd != api.CodeNotFound {
				t.Errorf("%s: GET /api/v1/keys?user=%s = %v (%d), want 404 not_found", who.name, ref, err, status)
			}
			k, err := who.c.CreateKey(ctx, api.CreateKey{User: ref, Name: "stolen"})
			if status, cd := code(err); status != http.StatusNotFound || cd != api.CodeNotFound {
				t.Errorf("%s: POST /api/v1/keys {user: %s} = %v (%d), want 404 not_found", who.name, ref, err, status)
			}
			if k.Secret != "" {
				if got, err := client.New(w.url, k.Secret, nil).Whoami(ctx); err == nil && got.User.Role == "operator" {
					t.Errorf("%s: minted a working operator key", who.name)
				}
			}
		}
		err := who.c.RevokeKey(ctx, me.KeyID)
		if status, cd := code(err); status != http.StatusNotFound || cd != api.CodeNotFound {
			t.Errorf("%s: DELETE /api/v1/keys/%s (the operator's) = %v (%d), want 404 not_found", who.name, me.KeyID, err, status)
		}
		_, err = who.c.Invite(ctx, "acme", me.User.Name, api.CreateInvitation{})
		if status, _ := code(err); who.name == "administrator" && status != http.StatusNotFound {
			t.Errorf("administrator: invite the operator = %v (%d), want 404", err, status)
		}
	}
	if _, err := w.operator.Whoami(ctx); err != nil {
		t.Fatalf("the operator's key after the attempts: %v", err)
	}
	keys, err := w.operator.Keys(ctx, "")
	if err != nil || len(keys) != 1 {
		t.Errorf("the operator's keys = %+v, %v; want the one bootstrap key", keys, err)
	}
}

// TestAdministratorMintsNoKeyForAnother: POST /api/v1/keys naming a member
// or another administrator is 403 for an administrator, saying to invite;
// they still list and revoke those keys (incident response).
func TestAdministratorMintsNoKeyForAnother(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	w.user(t, "acme", "carol", "admin")
	for _, ref := range []string{"alice", "carol"} {
		_, err := w.admin.CreateKey(ctx, api.CreateKey{User: ref})
		if status, cd := code(err); status != http.StatusForbidden || cd != api.CodeForbidden || !strings.Contains(err.Error(), "invit") {
			t.Errorf("administrator: POST /api/v1/keys {user: %s} = %v (%d), want 403 forbidden pointing to an invitation", ref, err, status)
		}
	}
	laptop, err := w.owner.CreateKey(ctx, api.CreateKey{Name: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := w.admin.Keys(ctx, "alice")
	if err != nil || len(keys) != 2 {
		t.Fatalf("administrator: GET /api/v1/keys?user=alice = %+v, %v; want her 2 keys", keys, err)
	}
	if err := w.admin.RevokeKey(ctx, laptop.ID); err != nil {
		t.Fatalf("administrator: revoke alice's laptop key: %v", err)
	}
	if _, err := client.New(w.url, laptop.Secret, nil).Whoami(ctx); err == nil {
		t.Error("the key the administrator revoked still works")
	}
}

// TestInvitationOverHTTP: an administrator creates dan and invites him;
// the public redemption route gives dan's key once (no-store); a second
// use is 409 saying it was already used, and the administrator's audit
// log shows the use and the refusal, each with the client's address. An
// invitation is never a key; garbage is 401; a big body is 400 naming
// body and the limit; an enrolled user is not invited again (403) but an
// operator's recovery invitation works.
func TestInvitationOverHTTP(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	dan, err := w.admin.CreateUser(ctx, "acme", api.CreateUser{Name: "dan", Role: "member"})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := w.admin.Invite(ctx, "acme", "dan", api.CreateInvitation{TTL: "24h"})
	if err != nil {
		t.Fatalf("invite dan: %v", err)
	}
	if inv.User.ID != dan.ID || inv.Recovery || inv.ExpiresAt.Sub(inv.CreatedAt).Hours() != 24 {
		t.Errorf("invitation = %+v; want dan's, not recovery, for 24h", inv)
	}
	if _, err := client.New(w.url, inv.Secret, nil).Whoami(ctx); err == nil {
		t.Error("an invitation works as a key")
	}

	body, _ := json.Marshal(api.RedeemInvitation{Invitation: inv.Secret, KeyName: "laptop"})
	status, hdr, b := postJSON(t, w.url+api.InvitationRedeemPath, "POST", "", body)
	if status != http.StatusCreated || hdr.Get("Cache-Control") != "no-store" {
		t.Fatalf("redeem = %d (Cache-Control %q) %s, want 201 no-store", status, hdr.Get("Cache-Control"), b)
	}
	var e api.Enrollment
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	who, err := client.New(w.url, e.Key.Secret, nil).Whoami(ctx)
	if err != nil || who.User.ID != dan.ID || e.Key.Name != "laptop" || e.Organisation.Name != "acme" {
		t.Fatalf("the redeemed key is %+v, %v (named %q in %q); want dan's laptop key in acme", who.User, err, e.Key.Name, e.Organisation.Name)
	}

	_, err = client.New(w.url, "", nil).Redeem(ctx, api.RedeemInvitation{Invitation: inv.Secret})
	if status, cd := code(err); status != http.StatusConflict || cd != api.CodeConflict || !strings.Contains(err.Error(), "already used") {
		t.Errorf("second redeem = %v (%d), want 409 conflict saying it was already used", err, status)
	}
	events, err := w.admin.Audit(ctx, client.AuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var used, refused, issued int
	for _, ev := range events {
		switch {
		case ev.Action == "invitation.create" && ev.Target == "dan" && ev.ActorName == "ada":
			issued++
		case ev.Action == "invitation.redeem" && ev.Target == inv.ID && ev.Outcome == "ok" && strings.Contains(ev.Detail, "127.0.0.1"):
			used++
		case ev.Action == "invitation.redeem" && ev.Target == inv.ID && ev.Outcome == "refused" && strings.Contains(ev.Detail, "127.0.0.1"):
			refused++
		}
		if strings.Contains(ev.Detail, inv.Secret) || strings.Contains(ev.Detail, e.Key.Secret) {
			t.Errorf("audit event %+v holds a secret", ev)
		}
	}
	if issued != 1 || used != 1 || refused != 1 {
		t.Errorf("audit: %d issued, %d used, %d refused; want 1 each: %+v", issued, used, refused, events)
	}

	// Not an invitation, or too big a body.
	for _, tc := range []struct {
		name, body string
		status     int
		field      string
	}{
		{"garbage", `{"invitation": "berth_inv_0123456789abcdef_nope"}`, http.StatusUnauthorized, ""},
		{"a key", `{"invitation": "` + w.opKey + `"}`, http.StatusUnauthorized, ""},
		{"unknown field", `{"invitation": "x", "user": "dan"}`, http.StatusBadRequest, "body"},
		{"over 4 KiB", `{"invitation": "` + strings.Repeat("a", 5000) + `"}`, http.StatusRequestEntityTooLarge, "body"},
	} {
		status, _, b := postJSON(t, w.url+api.InvitationRedeemPath, "POST", "", []byte(tc.body))
		var ae api.Error
		_ = json.Unmarshal(b, &ae)
		if status != tc.status || ae.Field != tc.field {
			t.Errorf("redeem %s = %d %s, want %d naming %q", tc.name, status, b, tc.status, tc.field)
		}
		if tc.name == "over 4 KiB" && !strings.Contains(ae.Message, "4 KiB") {
			t.Errorf("redeem %s says %q, want the 4 KiB limit", tc.name, ae.Message)
		}
	}

	// dan has enrolled: the administrator cannot invite him again; an
	// operator's recovery invitation works.
	_, err = w.admin.Invite(ctx, "acme", "dan", api.CreateInvitation{})
	if status, cd := code(err); status != http.StatusForbidden || cd != api.CodeForbidden {
		t.Errorf("administrator: invite enrolled dan = %v (%d), want 403", err, status)
	}
	_, err = w.admin.Invite(ctx, "acme", "dan", api.CreateInvitation{TTL: "30d"})
	if status, _ := code(err); status != http.StatusForbidden && status != http.StatusBadRequest {
		t.Errorf("administrator: invite for 30d = %v (%d), want refused", err, status)
	}
	rec, err := w.operator.Invite(ctx, "acme", "dan", api.CreateInvitation{})
	if err != nil || !rec.Recovery {
		t.Fatalf("operator: invite dan = %+v, %v; want a recovery invitation", rec, err)
	}
	got, err := client.New(w.url, "", nil).Redeem(ctx, api.RedeemInvitation{Invitation: rec.Secret})
	if err != nil || got.User.ID != dan.ID {
		t.Fatalf("redeem the recovery invitation = %+v, %v", got.User, err)
	}
	// The TTL is bounded, and named when wrong.
	ghost, err := w.operator.CreateUser(ctx, "acme", api.CreateUser{Name: "ghost", Role: "member"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ttl := range []string{"30d", "1m", "soon"} {
		_, err := w.admin.Invite(ctx, "acme", ghost.Name, api.CreateInvitation{TTL: ttl})
		ae, _ := errors.AsType[*api.Error](err)
		if status, _ := code(err); status != http.StatusBadRequest || ae == nil || ae.Field != "ttl" {
			t.Errorf("invite for %s = %v (%d), want 400 naming ttl", ttl, err, status)
		}
	}
}

// TestInvitationRedemptionIsRateLimited: the public route takes at most
// 10 requests a minute per client address, good or bad, then 429 with
// Retry-After.
func TestInvitationRedemptionIsRateLimited(t *testing.T) {
	w := newWorld(t)
	body := []byte(`{"invitation": "berth_inv_0123456789abcdef_nope"}`)
	for i := range 10 {
		if status, _, b := postJSON(t, w.url+api.InvitationRedeemPath, "POST", "", body); status != http.StatusUnauthorized {
			t.Fatalf("request %d = %d %s, want 401", i+1, status, b)
		}
	}
	status, hdr, b := postJSON(t, w.url+api.InvitationRedeemPath, "POST", "", body)
	if status != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" {
		t.Fatalf("request 11 = %d (Retry-After %q) %s, want 429 with Retry-After", status, hdr.Get("Retry-After"), b)
	}
}

// TestNoAdministratorPathReachesAShell is SPEC S6's promise that an
// administrator never gets inside a member's sandbox, against every route
// an administrator has that could hand out a credential: mint a key for
// the owner (by name and id), invite the owner (enrolled), create users of
// their own and redeem their invitations, disable and enable the owner,
// revoke every key of the owner and invite again, redeem made-up
// invitations, read keys and the audit log. Whatever credential any of it
// yields, the tunnel to the owner's sandbox never answers 101 to it. The
// operator's tunnel (101) shows the sandbox was reachable all along.
func TestNoAdministratorPathReachesAShell(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	alice, err := w.owner.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Disabling ends the owner's sandboxes, so this step comes first.
	if _, err := w.admin.DisableUser(ctx, "acme", alice.User.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := w.admin.EnableUser(ctx, "acme", alice.User.Name); err != nil {
		t.Fatal(err)
	}
	sb := w.reachable(t, "dev")
	me, err := w.admin.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	adaKey := w.adminKey
	// take tries whatever secret a step yielded on the owner's sandbox
	// at once, before a later step could revoke it.
	tried := 0
	take := func(what, secret string) {
		t.Helper()
		if secret == "" {
			return
		}
		tried++
		c, err := client.New(w.url, secret, nil).Tunnel(ctx, sb.ID, 2222)
		if err == nil {
			c.Close()
			t.Errorf("%s opened a tunnel to the owner's sandbox", what)
			return
		}
		if status, _ := code(err); status == http.StatusSwitchingProtocols || status == 0 {
			t.Errorf("%s: tunnel = %v (%d), want a refusal", what, err, status)
		}
	}
	take("the administrator's own key", adaKey)

	for _, ref := range []string{alice.User.Name, alice.User.ID} {
		k, err := w.admin.CreateKey(ctx, api.CreateKey{User: ref})
		take("a key minted for "+ref, k.Secret)
		if err == nil {
			t.Errorf("the administrator minted a key for the owner (%s)", ref)
		}
	}
	inv, err := w.admin.Invite(ctx, "acme", alice.User.Name, api.CreateInvitation{})
	if err == nil {
		t.Errorf("the administrator invited the owner, who has a key")
		e, _ := client.New(w.url, "", nil).Redeem(ctx, api.RedeemInvitation{Invitation: inv.Secret})
		take("the owner's invitation", e.Key.Secret)
	}
	for _, role := range []string{"member", "admin"} {
		u, err := w.admin.CreateUser(ctx, "acme", api.CreateUser{Name: "new-" + role, Role: role})
		if err != nil {
			t.Fatal(err)
		}
		inv, err := w.admin.Invite(ctx, "acme", u.Name, api.CreateInvitation{})
		if err != nil {
			t.Fatalf("invite a new %s: %v", role, err)
		}
		e, err := client.New(w.url, "", nil).Redeem(ctx, api.RedeemInvitation{Invitation: inv.Secret})
		if err != nil {
			t.Fatalf("redeem the new %s's invitation: %v", role, err)
		}
		take("a new "+role+"'s key", e.Key.Secret)
	}
	keys, err := w.admin.Keys(ctx, alice.User.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Sandbox == "" {
			if err := w.admin.RevokeKey(ctx, k.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	inv, err = w.admin.Invite(ctx, "acme", alice.User.Name, api.CreateInvitation{})
	if err == nil {
		t.Errorf("the administrator invited the owner again once her keys were revoked")
		e, _ := client.New(w.url, "", nil).Redeem(ctx, api.RedeemInvitation{Invitation: inv.Secret})
		take("the owner's invitation after revoking her keys", e.Key.Secret)
	}
	for _, made := range []string{"berth_inv_0123456789abcdef_guess", adaKey, "berth_inv_" + strings.TrimPrefix(me.KeyID, "key_") + "_x"} {
		e, err := client.New(w.url, "", nil).Redeem(ctx, api.RedeemInvitation{Invitation: made})
		take("a made-up invitation", e.Key.Secret)
		if err == nil {
			t.Errorf("a made-up invitation %q was redeemed", made)
		}
	}
	// What the administrator may read holds no secret.
	for _, path := range []string{"/api/v1/keys?user=alice", "/api/v1/audit", "/api/v1/orgs/acme/users"} {
		status, _, b := postJSON(t, w.url+path, "GET", adaKey, nil)
		if status != http.StatusOK || keyRE.Match(b) {
			t.Errorf("GET %s = %d, holding a key: %v", path, status, keyRE.Match(b))
		}
	}

	if tried < 3 {
		t.Errorf("only %d credentials were tried, want at least the administrator's and two new users'", tried)
	}
	c, err := w.operator.Tunnel(ctx, sb.ID, 2222)
	if err != nil {
		t.Fatalf("the operator's tunnel to the sandbox: %v (it must be reachable for this test to mean anything)", err)
	}
	roundTrip(t, c)
	c.Close()
}
