package idp_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"

	"berth.dev/berth/internal/idp"
	"berth.dev/berth/internal/oidctest"
	"berth.dev/berth/internal/secret"
)

const callback = "http://127.0.0.1:1/signin/callback" // never requested: oidctest.Authorize stops there

// world is the real provider (ory/hydra) with berth's client and two
// people.
type world struct {
	hydra *oidctest.Provider
	cfg   idp.Config
}

func newWorld(t *testing.T, opts ...oidctest.Option) *world {
	t.Helper()
	h := oidctest.Start(t, opts...)
	ctx := t.Context()
	for _, id := range []string{"berth", "other-app"} {
		if err := h.CreateClient(ctx, oidctest.Client{ID: id, Secret: "secret-of-" + id, RedirectURIs: []string{callback}}); err != nil {
			t.Fatal(err)
		}
	}
	h.AddUser(oidctest.User{Subject: "ada", Email: "ada@example.test", Name: "Ada", Username: "ada.l", Groups: []string{"platform", "engineering"}})
	h.AddUser(oidctest.User{Subject: "bob", Email: "bob@example.test", Groups: []string{"engineering"}})
	h.AddUser(oidctest.User{Subject: "eve", Refuse: true})
	return &world{hydra: h, cfg: idp.Config{Issuer: h.Issuer, ClientID: "berth", ClientSecret: secret.New("secret-of-berth"),
		Scopes: []string{"openid", "email", "profile", "groups"}, RedirectURL: callback}}
}

// provider is berth's side, with the clock now.
func (w *world) provider(t *testing.T, cfg idp.Config, now func() time.Time) *idp.Provider {
	t.Helper()
	p, err := idp.New(t.Context(), cfg, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// signIn runs a browser's sign-in as subject up to the callback.
func (w *world) signIn(t *testing.T, p *idp.Provider, subject string) (idp.Attempt, url.Values) {
	t.Helper()
	w.hydra.SignInAs(subject)
	a := p.Start()
	cb, err := oidctest.Authorize(t.Context(), a.URL, callback)
	if err != nil {
		t.Fatal(err)
	}
	return a, cb.Query()
}

// TestSignInThroughTheProvider: the authorization code flow with state,
// nonce and PKCE against the real provider gives who signed in, with
// their groups; the organisation's mapping makes ada an administrator
// and bob a member; a key rotation at the provider is followed.
func TestSignInThroughTheProvider(t *testing.T) {
	w := newWorld(t)
	p := w.provider(t, w.cfg, nil)
	m := idp.Mapping{Org: "acme", Members: []string{"engineering"}, Administrators: []string{"platform"}}
	for _, tt := range []struct {
		subject, email, username string
		groups                   []string
		role                     idp.Role
	}{
		{"ada", "ada@example.test", "ada.l", []string{"platform", "engineering"}, idp.RoleAdmin},
		{"bob", "bob@example.test", "", []string{"engineering"}, idp.RoleMember},
	} {
		a, q := w.signIn(t, p, tt.subject)
		if q.Get("code") == "" || q.Get("state") != a.State {
			t.Fatalf("%s: callback %v", tt.subject, q)
		}
		id, err := p.Finish(t.Context(), a, q)
		if err != nil {
			t.Fatalf("%s: %v", tt.subject, err)
		}
		if id.Issuer != w.hydra.Issuer || id.Subject != tt.subject || id.Email != tt.email || id.Username != tt.username || !slices.Equal(id.Groups, tt.groups) {
			t.Errorf("%s: identity %+v", tt.subject, id)
		}
		if got := m.Role(id); got != tt.role {
			t.Errorf("%s: role %q, want %q", tt.subject, got, tt.role)
		}
		if time.Until(id.Expiry) <= 0 {
			t.Errorf("%s: the ID token expired at %s", tt.subject, id.Expiry)
		}
	}

	// The provider rotates its signing key: a token under the new key,
	// which berth has not seen, is checked against the keys fetched anew.
	kid, err := w.hydra.RotateSigningKey(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	a, q := w.signIn(t, p, "bob")
	if _, err := p.Finish(t.Context(), a, q); err != nil {
		t.Errorf("after the provider rotated to key %s: %v", kid, err)
	}
}

// TestSignInRefused: every answer a sign-in must not accept is refused,
// saying which check failed: the provider's own refusal, a state that is
// not the attempt's, a nonce that is not, a code given twice, a token for
// another client, an expired token, and a token signed by a key the
// provider never published.
func TestSignInRefused(t *testing.T) {
	w := newWorld(t)
	p := w.provider(t, w.cfg, nil)
	refused := func(what string, err error, want string) {
		t.Helper()
		t.Logf("%s: %v", what, err)
		if !errors.Is(err, idp.ErrRefused) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a refusal saying %q", what, err, want)
		}
	}

	a, q := w.signIn(t, p, "eve")
	_, err := p.Finish(t.Context(), a, q)
	refused("a user the provider refuses", err, "access_denied")

	a, q = w.signIn(t, p, "bob")
	other := a
	other.State = "not-" + a.State
	_, err = p.Finish(t.Context(), other, q)
	refused("another state", err, "the state is not this sign-in's")
	other = a
	other.Nonce = "not-" + a.Nonce
	_, err = p.Finish(t.Context(), other, q)
	refused("another nonce", err, "nonce is not this sign-in's")
	_, err = p.Finish(t.Context(), a, q)
	refused("a code given twice", err, "exchanging the code")

	// A token the provider issued to another client.
	cfg := w.cfg
	cfg.ClientID, cfg.ClientSecret = "other-app", secret.New("secret-of-other-app")
	theirs := w.provider(t, cfg, nil)
	raw := rawIDToken(t, w, cfg, "bob")
	if _, err := theirs.Verify(t.Context(), raw, ""); err != nil {
		t.Fatalf("the other client's own token: %v", err)
	}
	_, err = p.Verify(t.Context(), raw, "")
	refused("a token for another client", err, "audience")

	// Past its expiry and the clock skew berth allows.
	late := w.provider(t, w.cfg, func() time.Time { return time.Now().Add(2 * time.Hour) })
	a, q = w.signIn(t, late, "bob")
	_, err = late.Finish(t.Context(), a, q)
	refused("an expired token", err, "expired")

	// Signed by a key of an attacker's, naming the provider and berth.
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: "attacker", Algorithm: "RS256"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	claims, _ := json.Marshal(map[string]any{"iss": w.hydra.Issuer, "aud": "berth", "sub": "ada", "groups": []string{"platform"},
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()})
	jws, err := signer.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Verify(t.Context(), forged, "")
	refused("a token signed by an unknown key", err, "the ID token")
}

// rawIDToken signs subject in with the client of cfg, outside idp, and
// returns the raw ID token the provider gave it.
func rawIDToken(t *testing.T, w *world, cfg idp.Config, subject string) string {
	t.Helper()
	ctx := t.Context()
	conf := oauth2.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret.Reveal(), RedirectURL: callback, Scopes: cfg.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: w.hydra.Issuer + "/oauth2/auth", TokenURL: w.hydra.Issuer + "/oauth2/token"}}
	w.hydra.SignInAs(subject)
	state, verifier := oauth2.GenerateVerifier(), oauth2.GenerateVerifier()
	cb, err := oidctest.Authorize(ctx, conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("nonce", "n-"+state)), callback)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := conf.Exchange(ctx, cb.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		t.Fatal("no ID token")
	}
	return raw
}

// TestNoDeviceGrant: the provider publishes no device authorization
// endpoint (hydra v2.3.0 has none), and berth says so rather than trying.
func TestNoDeviceGrant(t *testing.T) {
	w := newWorld(t)
	p := w.provider(t, w.cfg, nil)
	if _, err := p.StartDevice(context.Background()); err == nil || !strings.Contains(err.Error(), "has no device authorization endpoint") {
		t.Errorf("StartDevice = %v", err)
	}
}

// TestConcurrentSignIns: sign-ins coming back at once all come through.
// hydra's database fails some of a burst of token requests on its side
// (server_error: "Unable to serialize access due to a concurrent
// update"; measured: 8 of 60 code exchanges six at once), which berth
// tries again rather than turning the person away. (The browser's side
// of each sign-in goes one at a time: hydra's authorization endpoint
// fails the same way under a burst, and that is the browser's to retry.)
func TestConcurrentSignIns(t *testing.T) {
	w := newWorld(t)
	p := w.provider(t, w.cfg, nil)
	w.hydra.SignInAs("bob")
	type back struct {
		a idp.Attempt
		q url.Values
	}
	var backs []back
	for range 30 {
		a := p.Start()
		cb, err := oidctest.Authorize(t.Context(), a.URL, callback)
		if err != nil {
			t.Fatal(err)
		}
		backs = append(backs, back{a, cb.Query()})
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range 6 {
		wg.Go(func() {
			for _, b := range backs[i*5 : i*5+5] {
				if _, err := p.Finish(t.Context(), b.a, b.q); err != nil {
					failed.Add(1)
					t.Errorf("a sign-in among others: %v", err)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("30 sign-ins come back, six at once: %d failed", failed.Load())
}
