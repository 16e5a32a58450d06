package oidctest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// TestCodeFlowWithPKCE drives the real provider the way berth's panel and
// CLI will: discovery, the JWKS, an authorization-code flow with PKCE,
// state and nonce through the login app, and the ID token checked with
// go-oidc (issuer, audience, expiry, signature by a key of the JWKS), its
// nonce and the scripted user's claims; then a refresh, and a refresh
// refused once the provider revoked the user's sessions.
func TestCodeFlowWithPKCE(t *testing.T) {
	p := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const redirectURI = "http://127.0.0.1:1/callback" // never requested: Authorize stops there
	if err := p.CreateClient(ctx, Client{ID: "berth-panel", Secret: "s3cret-of-the-test", RedirectURIs: []string{redirectURI}}); err != nil {
		t.Fatal(err)
	}
	p.AddUser(User{Subject: "ada", Email: "ada@example.test", Name: "Ada", Groups: []string{"berth-admins", "eng"}})
	p.AddUser(User{Subject: "bob", Email: "bob@example.test", Groups: []string{"eng"}})

	provider, err := oidc.NewProvider(ctx, p.Issuer) // fails unless discovery's issuer is exactly p.Issuer
	if err != nil {
		t.Fatal(err)
	}
	var disc struct {
		JWKS       string   `json:"jwks_uri"`
		Challenges []string `json:"code_challenge_methods_supported"`
	}
	if err := provider.Claims(&disc); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(disc.Challenges, "S256") {
		t.Fatalf("code_challenge_methods_supported = %v, want S256", disc.Challenges)
	}
	kids := jwksKids(t, disc.JWKS)

	conf := oauth2.Config{
		ClientID:     "berth-panel",
		ClientSecret: "s3cret-of-the-test",
		Endpoint:     provider.Endpoint(),
		RedirectURL:  redirectURI,
		Scopes:       []string{oidc.ScopeOpenID, oidc.ScopeOfflineAccess, "email", "profile", "groups"},
	}
	verifier := provider.Verifier(&oidc.Config{ClientID: conf.ClientID})

	for _, tc := range []struct {
		hint, email string
		groups      []string
	}{
		{"ada", "ada@example.test", []string{"berth-admins", "eng"}},
		{"bob", "bob@example.test", []string{"eng"}},
	} {
		t.Run(tc.hint, func(t *testing.T) {
			state, nonce, pkce := oauth2.GenerateVerifier(), oauth2.GenerateVerifier(), oauth2.GenerateVerifier()
			authURL := conf.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(pkce),
				oauth2.SetAuthURLParam("login_hint", tc.hint))
			cb, err := Authorize(ctx, authURL, redirectURI)
			if err != nil {
				t.Fatal(err)
			}
			if got := cb.Query().Get("state"); got != state {
				t.Fatalf("state = %q, want %q (callback %s)", got, state, cb)
			}
			code := cb.Query().Get("code")
			if code == "" {
				t.Fatalf("no code in the callback %s", cb)
			}
			// The code without its verifier is refused: PKCE is enforced.
			if _, err := conf.Exchange(ctx, code, oauth2.VerifierOption(oauth2.GenerateVerifier())); err == nil {
				t.Fatal("exchange with the wrong PKCE verifier succeeded")
			}
			// hydra spends the code on the failed try; a new flow gets another.
			tok, raw := signIn(ctx, t, conf, authURL, pkce)
			idt, err := verifier.Verify(ctx, raw)
			if err != nil {
				t.Fatal(err)
			}
			if idt.Issuer != p.Issuer || !slices.Equal(idt.Audience, []string{conf.ClientID}) || idt.Subject != tc.hint {
				t.Fatalf("iss %q aud %v sub %q; want %q [%s] %q", idt.Issuer, idt.Audience, idt.Subject, p.Issuer, conf.ClientID, tc.hint)
			}
			if idt.Nonce != nonce {
				t.Fatalf("nonce = %q, want %q", idt.Nonce, nonce)
			}
			if kid := tokenKid(t, raw); !slices.Contains(kids, kid) {
				t.Fatalf("ID token signed with kid %q, not one of the JWKS's %v", kid, kids)
			}
			var claims struct {
				Email  string   `json:"email"`
				Groups []string `json:"groups"`
			}
			if err := idt.Claims(&claims); err != nil {
				t.Fatal(err)
			}
			if claims.Email != tc.email || !slices.Equal(claims.Groups, tc.groups) {
				t.Fatalf("email %q groups %v, want %q %v", claims.Email, claims.Groups, tc.email, tc.groups)
			}
			// Another client's verifier refuses the token: the audience is checked.
			if _, err := provider.Verifier(&oidc.Config{ClientID: "someone-else"}).Verify(ctx, raw); err == nil || !strings.Contains(err.Error(), "audience") {
				t.Fatalf("verify with another client id: %v, want an audience error", err)
			}

			if tok.RefreshToken == "" {
				t.Fatal("no refresh token for offline_access")
			}
			old := *tok
			old.Expiry = time.Now().Add(-time.Minute) // makes the source refresh
			fresh, err := conf.TokenSource(ctx, &old).Token()
			if err != nil {
				t.Fatal(err)
			}
			if fresh.AccessToken == tok.AccessToken {
				t.Fatal("refresh returned the same access token")
			}
			if err := p.RevokeSessions(ctx, tc.hint); err != nil {
				t.Fatal(err)
			}
			fresh.Expiry = time.Now().Add(-time.Minute)
			if _, err := conf.TokenSource(ctx, fresh).Token(); err == nil {
				t.Fatal("refresh after the provider revoked the sessions succeeded")
			}
		})
	}
}

// TestKeyRotation: after a new signing key, ID tokens carry its kid, the
// JWKS lists it beside the old one, and go-oidc still verifies them.
func TestKeyRotation(t *testing.T) {
	p := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const redirectURI = "http://127.0.0.1:1/callback"
	if err := p.CreateClient(ctx, Client{ID: "berth-panel", Secret: "s3cret-of-the-test", RedirectURIs: []string{redirectURI}}); err != nil {
		t.Fatal(err)
	}
	p.AddUser(User{Subject: "ada"})
	provider, err := oidc.NewProvider(ctx, p.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	conf := oauth2.Config{ClientID: "berth-panel", ClientSecret: "s3cret-of-the-test", Endpoint: provider.Endpoint(), RedirectURL: redirectURI, Scopes: []string{oidc.ScopeOpenID}}
	verifier := provider.Verifier(&oidc.Config{ClientID: conf.ClientID})
	verified := func() string {
		t.Helper()
		pkce := oauth2.GenerateVerifier()
		_, raw := signIn(ctx, t, conf, conf.AuthCodeURL("st4te-of-the-test", oauth2.S256ChallengeOption(pkce)), pkce)
		if _, err := verifier.Verify(ctx, raw); err != nil {
			t.Fatal(err)
		}
		return raw
	}
	var disc struct {
		JWKS string `json:"jwks_uri"`
	}
	if err := provider.Claims(&disc); err != nil {
		t.Fatal(err)
	}
	before := tokenKid(t, verified())
	kid, err := p.RotateSigningKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if kid == before {
		t.Fatalf("the new key has the old kid %q", kid)
	}
	if got := tokenKid(t, verified()); got != kid {
		t.Fatalf("after rotation the ID token's kid = %q, want the new %q (old %q)", got, kid, before)
	}
	if kids := jwksKids(t, disc.JWKS); !slices.Contains(kids, kid) || !slices.Contains(kids, before) {
		t.Fatalf("JWKS kids %v, want both %q and %q", kids, before, kid)
	}
}

// TestRefusedUser: a user the provider refuses comes back to the client
// with error=access_denied, not a code.
func TestRefusedUser(t *testing.T) {
	p := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const redirectURI = "http://127.0.0.1:1/cli"
	if err := p.CreateClient(ctx, Client{ID: "berth-cli", Public: true, RedirectURIs: []string{redirectURI}}); err != nil {
		t.Fatal(err)
	}
	p.AddUser(User{Subject: "eve", Refuse: true})
	provider, err := oidc.NewProvider(ctx, p.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	conf := oauth2.Config{ClientID: "berth-cli", Endpoint: provider.Endpoint(), RedirectURL: redirectURI, Scopes: []string{oidc.ScopeOpenID}}
	cb, err := Authorize(ctx, conf.AuthCodeURL("st4te-of-the-test", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), redirectURI)
	if err != nil {
		t.Fatal(err)
	}
	if q := cb.Query(); q.Get("error") != "access_denied" || q.Get("code") != "" {
		t.Fatalf("callback %s, want error=access_denied and no code", cb)
	}
}

// TestRefreshRereadsUser: hydra calls the login app's token hook at every
// refresh, which puts the user's current record in the new ID token (for
// the scopes granted; sid and sub kept), and refuses a user now disabled
// (access_denied) without spending the refresh token.
func TestRefreshRereadsUser(t *testing.T) {
	p := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const redirectURI = "http://127.0.0.1:1/callback"
	if err := p.CreateClient(ctx, Client{ID: "berth", Secret: "s3cret-of-the-test", RedirectURIs: []string{redirectURI}}); err != nil {
		t.Fatal(err)
	}
	p.AddUser(User{Subject: "ada", Email: "ada@example.test", Name: "Ada", Username: "ada.l", Groups: []string{"eng"}})
	provider, err := oidc.NewProvider(ctx, p.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	verifier := provider.Verifier(&oidc.Config{ClientID: "berth"})
	type claims struct {
		Sub      string   `json:"sub"`
		Sid      string   `json:"sid"`
		Email    string   `json:"email"`
		Name     string   `json:"name"`
		Username string   `json:"preferred_username"`
		Groups   []string `json:"groups"` // nil: no groups claim
	}
	read := func(raw string) claims {
		t.Helper()
		idt, err := verifier.Verify(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		var c claims
		if err := idt.Claims(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	refresh := func(conf oauth2.Config, tok *oauth2.Token) (*oauth2.Token, claims, error) {
		t.Helper()
		old := *tok
		old.Expiry = time.Now().Add(-time.Minute)
		fresh, err := conf.TokenSource(ctx, &old).Token()
		if err != nil {
			return nil, claims{}, err
		}
		raw, _ := fresh.Extra("id_token").(string)
		return fresh, read(raw), nil
	}

	for _, tt := range []struct {
		scopes   []string
		username string
		groups   []string // after SetGroups
	}{
		{[]string{oidc.ScopeOpenID, oidc.ScopeOfflineAccess, "email", "profile", "groups"}, "ada.l", []string{"ops", "eng"}},
		{[]string{oidc.ScopeOpenID, oidc.ScopeOfflineAccess}, "", nil}, // only what was granted
	} {
		p.AddUser(User{Subject: "ada", Email: "ada@example.test", Name: "Ada", Username: "ada.l", Groups: []string{"eng"}})
		conf := oauth2.Config{ClientID: "berth", ClientSecret: "s3cret-of-the-test", Endpoint: provider.Endpoint(), RedirectURL: redirectURI, Scopes: tt.scopes}
		// Not x/oauth2's probe, which tries the form after any error and
		// so would report hydra's invalid_client for the form instead.
		conf.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
		pkce := oauth2.GenerateVerifier()
		tok, raw := signIn(ctx, t, conf, conf.AuthCodeURL("st4te-of-the-test", oauth2.S256ChallengeOption(pkce)), pkce)
		first := read(raw)
		if first.Username != tt.username || first.Sid == "" {
			t.Fatalf("scopes %v: signed in with %+v", tt.scopes, first)
		}

		p.SetGroups("ada", "ops", "eng")
		tok, got, err := refresh(conf, tok)
		if err != nil {
			t.Fatal(err)
		}
		if got.Sub != first.Sub || got.Sid != first.Sid || got.Email != first.Email || got.Name != first.Name || got.Username != first.Username ||
			!slices.Equal(got.Groups, tt.groups) || (got.Groups == nil) != (tt.groups == nil) {
			t.Errorf("scopes %v: refreshed %+v, want %+v with groups %v", tt.scopes, got, first, tt.groups)
		}

		p.SetRefused("ada", true)
		_, _, err = refresh(conf, tok)
		var re *oauth2.RetrieveError
		if !errors.As(err, &re) || re.ErrorCode != "access_denied" || re.Response.StatusCode != http.StatusForbidden {
			t.Errorf("scopes %v: refresh of a disabled user: %v, want 403 access_denied", tt.scopes, err)
		}
		p.SetRefused("ada", false)
		if _, _, err := refresh(conf, tok); err != nil {
			t.Errorf("scopes %v: the same refresh token once enabled again: %v", tt.scopes, err)
		}
	}
}

// signIn authorizes through authURL and exchanges the code with the PKCE
// verifier; it returns the token and its raw ID token.
func signIn(ctx context.Context, t *testing.T, conf oauth2.Config, authURL, pkce string) (*oauth2.Token, string) {
	t.Helper()
	cb, err := Authorize(ctx, authURL, conf.RedirectURL)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := conf.Exchange(ctx, cb.Query().Get("code"), oauth2.VerifierOption(pkce))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		t.Fatal("no id_token in the token response")
	}
	return tok, raw
}

// jwksKids fetches the JWKS and returns its signing keys' ids.
func jwksKids(t *testing.T, uri string) []string {
	t.Helper()
	resp, err := http.Get(uri)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
			Use string `json:"use"`
			Alg string `json:"alg"`
		} `json:"keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, k := range set.Keys {
		if k.Use == "sig" {
			kids = append(kids, k.Kid)
		}
	}
	if len(kids) == 0 {
		t.Fatalf("JWKS %s has no signing key: %+v", uri, set)
	}
	return kids
}

// tokenKid is the kid of a JWS's header.
func tokenKid(t *testing.T, raw string) string {
	t.Helper()
	h, err := base64.RawURLEncoding.DecodeString(strings.Split(raw, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	var hdr struct {
		Kid string `json:"kid"`
	}
	if err := json.Unmarshal(h, &hdr); err != nil {
		t.Fatal(err)
	}
	return hdr.Kid
}
