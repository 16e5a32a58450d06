package idp_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/idp"
	"berth.dev/berth/internal/oidctest"
	"berth.dev/berth/internal/secret"
)

// defaults is w's configuration asking for the default scopes.
func (w *world) defaults() idp.Config {
	cfg := w.cfg
	cfg.Scopes = nil
	return cfg
}

// signedIn signs subject in through p and returns who the provider says
// they are, with the refresh token it gave.
func (w *world) signedIn(t *testing.T, p *idp.Provider, subject string) idp.Identity {
	t.Helper()
	a, q := w.signIn(t, p, subject)
	id, err := p.Finish(t.Context(), a, q)
	if err != nil {
		t.Fatalf("%s signs in: %v", subject, err)
	}
	return id
}

// TestRefresh: a sign-in with offline_access gives a refresh token; a
// refresh (by berth restarted since: a Provider that has made no request)
// says who it is again, with a new refresh token (hydra rotates them);
// a group changed at the provider shows in the next refresh; the first
// refresh token used again is refused as revoked, and so are the ones
// that followed it (hydra takes a reuse for a theft and revokes them all).
func TestRefresh(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	id := w.signedIn(t, w.provider(t, w.defaults(), nil), "bob")
	first := id.Refresh.Reveal()
	if first == "" {
		t.Fatal("no refresh token for a sign-in with offline_access")
	}

	p := w.provider(t, w.defaults(), nil)
	r, err := p.Refresh(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if r.Identity == nil {
		t.Fatal("the refresh gave no ID token")
	}
	got := *r.Identity
	if got.Issuer != w.hydra.Issuer || got.Subject != "bob" || got.Email != "bob@example.test" || !slices.Equal(got.Groups, []string{"engineering"}) {
		t.Errorf("refreshed identity %+v", got)
	}
	if next := r.Refresh.Reveal(); next == "" || next == first || got.Refresh.Reveal() != next {
		t.Errorf("refresh token: %q after %q (the identity's %q), want a new one", next, first, got.Refresh.Reveal())
	}

	w.hydra.SetGroups("bob", "sales")
	r2, err := p.Refresh(ctx, r.Refresh.Reveal())
	if err != nil {
		t.Fatal(err)
	}
	if got := *r2.Identity; got.Subject != "bob" || got.Email != "bob@example.test" || !slices.Equal(got.Groups, []string{"sales"}) {
		t.Errorf("after the provider moved bob to sales: %+v", got)
	}

	_, err = p.Refresh(ctx, first)
	t.Logf("the first refresh token again: %v", err)
	if !errors.Is(err, idp.ErrRevoked) || !strings.Contains(err.Error(), "invalid_grant") {
		t.Errorf("the first refresh token again: %v, want ErrRevoked (invalid_grant)", err)
	}
	if _, err := p.Refresh(ctx, r2.Refresh.Reveal()); !errors.Is(err, idp.ErrRevoked) {
		t.Errorf("the latest refresh token after a reuse: %v, want ErrRevoked", err)
	}
}

// TestRefreshRefused: what the provider says of the person (disabled
// there, their sessions revoked, the grant expired) is ErrRevoked; what
// says nothing of them (the provider down, berth's client refused) is
// another error, which must never disable anyone. Every refresh is made
// by a Provider that has made no request before, as after a restart.
func TestRefreshRefused(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []oidctest.Option
		// refresh changes the world, then refreshes bob's token.
		refresh func(t *testing.T, w *world, token string) error
		revoked bool
		says    string
	}{
		{name: "disabled at the provider", revoked: true, says: "access_denied",
			refresh: func(t *testing.T, w *world, token string) error {
				w.hydra.SetRefused("bob", true)
				_, err := w.provider(t, w.defaults(), nil).Refresh(t.Context(), token)
				// hydra refuses before it rotates: once enabled again,
				// the same refresh token works.
				w.hydra.SetRefused("bob", false)
				if _, err := w.provider(t, w.defaults(), nil).Refresh(t.Context(), token); err != nil {
					t.Errorf("once enabled again: %v", err)
				}
				return err
			}},
		{name: "consent sessions revoked at the provider", revoked: true, says: "invalid_grant",
			refresh: func(t *testing.T, w *world, token string) error {
				if err := w.hydra.RevokeSessions(t.Context(), "bob"); err != nil {
					t.Fatal(err)
				}
				_, err := w.provider(t, w.defaults(), nil).Refresh(t.Context(), token)
				return err
			}},
		{name: "refresh token expired", revoked: true, says: "invalid_grant",
			opts: []oidctest.Option{oidctest.WithEnv("TTL_REFRESH_TOKEN=1s")},
			refresh: func(t *testing.T, w *world, token string) error {
				time.Sleep(2 * time.Second)
				_, err := w.provider(t, w.defaults(), nil).Refresh(t.Context(), token)
				return err
			}},
		{name: "the provider down", says: "connection refused",
			refresh: func(t *testing.T, w *world, token string) error {
				p := w.provider(t, w.defaults(), nil)
				w.hydra.Stop()
				_, err := p.Refresh(t.Context(), token)
				return err
			}},
		{name: "berth's client secret wrong", says: "invalid_client",
			refresh: func(t *testing.T, w *world, token string) error {
				cfg := w.defaults()
				cfg.ClientSecret = secret.New("not-the-secret")
				_, err := w.provider(t, cfg, nil).Refresh(t.Context(), token)
				return err
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, tt.opts...)
			id := w.signedIn(t, w.provider(t, w.defaults(), nil), "bob")
			err := tt.refresh(t, w, id.Refresh.Reveal())
			t.Logf("refresh: %v", err)
			if err == nil || errors.Is(err, idp.ErrRevoked) != tt.revoked || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("refresh: %v; want an error saying %q, ErrRevoked: %t", err, tt.says, tt.revoked)
			}
		})
	}
}

// TestClientSecretPost: berth's client registered to send its secret in
// the form (client_secret_post), which hydra takes only that way, signs
// in and refreshes, each by a Provider that has made no request before.
func TestClientSecretPost(t *testing.T) {
	w := newWorld(t)
	if err := w.hydra.CreateClient(t.Context(), oidctest.Client{ID: "berth-post", Secret: "secret-of-berth-post",
		RedirectURIs: []string{callback}, AuthMethod: "client_secret_post"}); err != nil {
		t.Fatal(err)
	}
	cfg := w.defaults()
	cfg.ClientID, cfg.ClientSecret = "berth-post", secret.New("secret-of-berth-post")
	id := w.signedIn(t, w.provider(t, cfg, nil), "bob")
	r, err := w.provider(t, cfg, nil).Refresh(t.Context(), id.Refresh.Reveal())
	if err != nil || r.Identity == nil || r.Identity.Subject != "bob" {
		t.Fatalf("refresh: %+v, %v", r, err)
	}
}

// TestDefaultScopes: with no scopes configured berth asks for openid,
// email and profile, and for groups and offline_access only when the
// discovery document lists them; scopes configured are asked for as they
// are. The real provider grants what was asked: groups in the ID token,
// a refresh token for offline_access.
func TestDefaultScopes(t *testing.T) {
	for _, tt := range []struct {
		name   string
		opts   []oidctest.Option
		scopes []string
		want   string
		// the sign-in gives groups, and a refresh token
		groups, refresh bool
	}{
		{name: "groups and offline_access listed", want: "openid email profile groups offline_access", groups: true, refresh: true},
		{name: "groups not listed", opts: []oidctest.Option{oidctest.WithEnv("WEBFINGER_OIDC_DISCOVERY_SUPPORTED_SCOPE=email,profile")},
			want: "openid email profile offline_access", refresh: true},
		{name: "configured", scopes: []string{"openid", "email"}, want: "openid email"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, tt.opts...)
			cfg := w.defaults()
			cfg.Scopes = tt.scopes
			p := w.provider(t, cfg, nil)
			if got := scopeOf(t, p.Start().URL); got != tt.want {
				t.Errorf("scope %q, want %q", got, tt.want)
			}
			id := w.signedIn(t, p, "bob")
			if (id.Groups != nil) != tt.groups || (id.Refresh.Reveal() != "") != tt.refresh {
				t.Errorf("groups %q, a refresh token: %t; want groups: %t, a refresh token: %t", id.Groups, id.Refresh.Reveal() != "", tt.groups, tt.refresh)
			}
		})
	}

	// Providers that list neither (GitLab lists no groups scope and
	// refuses a scope it does not know), or no scopes at all.
	for _, supported := range [][]string{{"openid", "profile", "email", "read_user", "api"}, nil} {
		p, err := idp.New(t.Context(), idp.Config{Issuer: discovery(t, supported), ClientID: "berth", RedirectURL: callback}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := scopeOf(t, p.Start().URL); got != "openid email profile" {
			t.Errorf("scopes_supported %q: scope %q, want %q", supported, got, "openid email profile")
		}
	}
}

// scopeOf is the scope an authorization URL asks for.
func scopeOf(t *testing.T, authURL string) string {
	t.Helper()
	u, err := url.Parse(authURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get("scope")
}

// discovery serves a discovery document listing scopes (none: no
// scopes_supported) and returns its issuer.
func discovery(t *testing.T, scopes []string) string {
	t.Helper()
	var issuer string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/openid-configuration" {
			http.NotFound(w, r)
			return
		}
		doc := map[string]any{"issuer": issuer, "authorization_endpoint": issuer + "/oauth/authorize",
			"token_endpoint": issuer + "/oauth/token", "jwks_uri": issuer + "/oauth/discovery/keys"}
		if scopes != nil {
			doc["scopes_supported"] = scopes
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(srv.Close)
	issuer = srv.URL
	return issuer
}
