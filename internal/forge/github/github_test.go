package github_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/forge/forgetest"
	"berth.dev/berth/internal/forge/github"
	"berth.dev/berth/internal/secret"
	"github.com/google/go-cmp/cmp"
)

var _ forge.Forge = (*github.Forge)(nil)

const appID = "424242"

func TestGitHubHostAndCloneURL(t *testing.T) {
	_, key := forgetest.NewAppKey(t)
	tests := []struct {
		url, wantHost, wantClone string
	}{
		{"", "github.com", "https://github.com/acme/app.git"},
		{"https://api.github.com", "github.com", "https://github.com/acme/app.git"},
		{"https://API.GitHub.com/", "github.com", "https://github.com/acme/app.git"},
		{"https://ghe.example.com/api/v3", "ghe.example.com", "https://ghe.example.com/acme/app.git"},
		{"https://ghe.example.com:443/api/v3/", "ghe.example.com", "https://ghe.example.com/acme/app.git"},
		{"https://ghe.example.com:8443/api/v3", "ghe.example.com:8443", "https://ghe.example.com:8443/acme/app.git"},
		{"http://127.0.0.1:8080", "127.0.0.1:8080", "http://127.0.0.1:8080/acme/app.git"},
	}
	for _, tt := range tests {
		g, err := github.New(github.Config{URL: tt.url, AppID: appID, Key: secret.New(string(key))}, http.DefaultClient, time.Now)
		if err != nil {
			t.Fatalf("NewGitHub(URL %q): %v", tt.url, err)
		}
		if got := g.Host(); got != tt.wantHost {
			t.Errorf("NewGitHub(URL %q).Host() = %q, want %q", tt.url, got, tt.wantHost)
		}
		if got := g.CloneURL(forge.Repo{Host: g.Host(), Path: "acme/app"}); got != tt.wantClone {
			t.Errorf("NewGitHub(URL %q).CloneURL(acme/app) = %q, want %q", tt.url, got, tt.wantClone)
		}
	}
}

func TestNewGitHubRefuses(t *testing.T) {
	rsaKey, key := forgetest.NewAppKey(t)
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalECPrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  github.Config
		want string // in the error
	}{
		{"no app id", github.Config{Key: secret.New(string(key))}, "App id"},
		{"app id of two words", github.Config{AppID: "42 43", Key: secret.New(string(key))}, "App id"},
		{"no key", github.Config{AppID: appID}, "key"},
		{"not a key", github.Config{AppID: appID, Key: secret.New("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC")}, "key"},
		{"an EC key", github.Config{AppID: appID, Key: secret.New(string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecDER})))}, "RSA private key"},
		{"a public key", github.Config{AppID: appID, Key: secret.New(string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})))}, "RSA private key"},
		{"ftp URL", github.Config{URL: "ftp://ghe.example.com/api/v3", AppID: appID, Key: secret.New(string(key))}, "URL"},
		{"URL with a password", github.Config{URL: "https://u:hunter2@ghe.example.com/api/v3", AppID: appID, Key: secret.New(string(key))}, "URL"},
		{"URL with a query", github.Config{URL: "https://ghe.example.com/api/v3?x=1", AppID: appID, Key: secret.New(string(key))}, "URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := github.New(tt.cfg, http.DefaultClient, time.Now)
			if err == nil {
				t.Fatalf("NewGitHub = nil error, want one naming %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewGitHub = %v, want an error naming %q", err, tt.want)
			}
			if showsKey(err.Error(), tt.cfg.Key.Reveal()) || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("NewGitHub = %v: the error shows the key or a password", err)
			}
		})
	}
}

// showsKey reports whether msg holds a line of the PEM key.
func showsKey(msg, key string) bool {
	for line := range strings.Lines(key) {
		line = strings.TrimSpace(line)
		if len(line) >= 16 && !strings.HasPrefix(line, "-----") && strings.Contains(msg, line) {
			return true
		}
	}
	return false
}

func TestGitHubToken(t *testing.T) {
	key, pemKey := forgetest.NewAppKey(t)
	_, otherKey := forgetest.NewAppKey(t)
	stand := forgetest.NewGitHub(t, appID, &key.PublicKey, "acme/app", "acme/gone", "other/app")
	stand.Uninstall("acme/gone")
	now := time.Now().Truncate(time.Second)

	tests := []struct {
		name    string
		appID   string
		key     []byte
		now     time.Time
		repo    string
		wantErr error  // a sentinel, or nil
		wantMsg string // in the error
	}{
		{name: "installed", repo: "acme/app"},
		{name: "another owner's installation", repo: "other/app"},
		{name: "no such repository", repo: "acme/nowhere", wantErr: fault.NotFound, wantMsg: "not installed"},
		{name: "the App not installed there", repo: "acme/gone", wantErr: fault.NotFound, wantMsg: "not installed"},
		{name: "wrong App id", appID: "7", repo: "acme/app", wantMsg: "401"},
		{name: "another App's key", key: otherKey, repo: "acme/app", wantMsg: "401"},
		{name: "clock 20 minutes slow: JWT expired", now: now.Add(-20 * time.Minute), repo: "acme/app", wantMsg: "401"},
		{name: "clock 5 minutes fast: JWT issued in the future", now: now.Add(5 * time.Minute), repo: "acme/app", wantMsg: "401"},
		{name: "three path elements", repo: "acme/sub/app", wantErr: forge.ErrBadAddress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := github.Config{URL: stand.URL(), AppID: appID, Key: secret.New(string(pemKey))}
			if tt.appID != "" {
				cfg.AppID = tt.appID
			}
			if tt.key != nil {
				cfg.Key = secret.New(string(tt.key))
			}
			clock := now
			if !tt.now.IsZero() {
				clock = tt.now
			}
			g, err := github.New(cfg, stand.Client(), func() time.Time { return clock })
			if err != nil {
				t.Fatal(err)
			}
			before := len(stand.Minted())
			tok, err := g.Token(t.Context(), forge.Repo{Host: g.Host(), Path: tt.repo}, now.Add(8*time.Hour))

			if tt.wantErr != nil || tt.wantMsg != "" {
				if err == nil {
					t.Fatalf("Token(%s) = %+v, want an error", tt.repo, tok)
				}
				if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
					t.Errorf("Token(%s) = %v, want %v", tt.repo, err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("Token(%s) = %v, want it to say %q", tt.repo, err, tt.wantMsg)
				}
				// No JWT (base64 JSON starts eyJ), token or key in the message.
				if msg := err.Error(); strings.Contains(msg, "eyJ") || strings.Contains(msg, "ghs_") || showsKey(msg, cfg.Key.Reveal()) {
					t.Errorf("Token(%s) = %v: the error shows a credential", tt.repo, err)
				}
				if got := len(stand.Minted()); got != before {
					t.Errorf("the stand-in minted %d tokens, want none", got-before)
				}
				return
			}

			if err != nil {
				t.Fatalf("Token(%s) = %v", tt.repo, err)
			}
			minted := stand.Minted()
			if len(minted) != before+1 {
				t.Fatalf("the stand-in minted %d tokens, want 1", len(minted)-before)
			}
			m := minted[len(minted)-1]
			want := forge.Token{Username: "x-access-token", Secret: secret.New(m.Token), ExpiresAt: m.ExpiresAt}
			if diff := cmp.Diff(want, tok); diff != "" {
				t.Errorf("Token(%s) (-want +got):\n%s", tt.repo, diff)
			}
			if tok.Secret.Reveal() != m.Token {
				t.Errorf("Token(%s).Secret is not the token minted", tt.repo)
			}
			if m.Repo != tt.repo || !cmp.Equal(m.Permissions, map[string]string{"contents": "write"}) {
				t.Errorf("minted for %s with %v, want %s with exactly contents:write", m.Repo, m.Permissions, tt.repo)
			}
			if lifetime := time.Until(tok.ExpiresAt); lifetime < 59*time.Minute || lifetime > time.Hour {
				t.Errorf("Token(%s) expires in %s, want GitHub's hour whatever until says", tt.repo, lifetime)
			}
			wantJWT := forgetest.JWT{Issuer: appID, IssuedAt: now.Add(-time.Minute), ExpiresAt: now.Add(9 * time.Minute)}
			if diff := cmp.Diff(wantJWT, m.JWT); diff != "" {
				t.Errorf("the App's JWT (-want +got):\n%s", diff)
			}
			if life := m.JWT.ExpiresAt.Sub(now); life >= 10*time.Minute {
				t.Errorf("the App's JWT lives %s from now, want under ten minutes", life)
			}
		})
	}
}

func TestGitHubTokenOtherHost(t *testing.T) {
	_, key := forgetest.NewAppKey(t)
	// No server: the address is refused before any call.
	g, err := github.New(github.Config{AppID: appID, Key: secret.New(string(key))}, http.DefaultClient, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Token(t.Context(), forge.Repo{Host: "gitlab.com", Path: "acme/app"}, time.Now().Add(time.Hour))
	if !errors.Is(err, forge.ErrOtherHost) {
		t.Errorf("Token(gitlab.com/acme/app) = %v, want ErrOtherHost", err)
	}
}

func TestGitHubRevoke(t *testing.T) {
	key, pemKey := forgetest.NewAppKey(t)
	stand := forgetest.NewGitHub(t, appID, &key.PublicKey, "acme/app")
	g, err := github.New(github.Config{URL: stand.URL(), AppID: appID, Key: secret.New(string(pemKey))}, stand.Client(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	tok := forgetest.Mint(t, g, "acme/app")
	if tok.ID != "" {
		t.Errorf("Token.ID = %q, want \"\": GitHub cannot revoke without the token", tok.ID)
	}
	if err := g.Revoke(t.Context(), tok); err != nil {
		t.Errorf("Revoke = %v, want nil", err)
	}
}

func TestGitHubGit(t *testing.T) {
	key, pemKey := forgetest.NewAppKey(t)
	stand := forgetest.NewGitHub(t, appID, &key.PublicKey, "acme/app", "acme/other")
	g, err := github.New(github.Config{URL: stand.URL(), AppID: appID, Key: secret.New(string(pemKey))}, stand.Client(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	tok, other := forgetest.Mint(t, g, "acme/app"), forgetest.Mint(t, g, "acme/other")
	expired, revoked := forgetest.Mint(t, g, "acme/app"), forgetest.Mint(t, g, "acme/app")
	stand.Expire(expired.Secret.Reveal())
	stand.Revoke(revoked.Secret.Reveal())
	forgetest.CheckGit(t, g, "acme/app", stand.CloneURL("acme/app"), stand.BarePath("acme/app"), tok, []forgetest.Refusal{
		{Name: "a wrong token", User: "x-access-token", Password: "ghs_0000000000000000000000000000"},
		{Name: "another username", User: "oauth2", Password: tok.Secret.Reveal()},
		{Name: "another repository's token", User: "x-access-token", Password: other.Secret.Reveal()},
		{Name: "an expired token", User: "x-access-token", Password: expired.Secret.Reveal()},
		{Name: "a revoked token", User: "x-access-token", Password: revoked.Secret.Reveal()},
	})
}
