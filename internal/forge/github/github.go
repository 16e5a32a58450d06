// Package github is the GitHub forge (SPEC S9): it mints installation
// tokens of the deployment's GitHub App, one repository with contents read
// and write, for GitHub's hour; and it takes a run's results back (SPEC
// S13) as draft pull requests, comments and reviews, each call with a
// token of its own for the one repository, pull requests and issues
// written, contents read.
package github

import (
	"context"
	"crypto/rsa"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/forge/rest"
	"berth.dev/berth/internal/secret"
)

// Config is how the deployment reaches its GitHub App (SPEC S9, S16).
type Config struct {
	// URL is GitHub's API (BERTH_SANDBOX_GIT_URL): "" for
	// https://api.github.com, https://HOST/api/v3 for GitHub Enterprise
	// Server.
	URL string
	// AppID is the App's id (BERTH_SANDBOX_GIT_APP_ID).
	AppID string
	// Key is the App's RSA private key, PEM-encoded as GitHub hands it out
	// (the file BERTH_SANDBOX_GIT_APP_KEY_FILE names).
	Key secret.Secret
}

// Forge mints installation tokens of a GitHub App: one repository,
// contents read and write and nothing else, for the hour GitHub gives. As
// a forge.Reporter it opens draft pull requests and posts comments and
// reviews with tokens of its own (change.go).
//
// Repository addresses and clone URLs name GitHub's web host, derived from
// the API URL: github.com for api.github.com; for any other URL (GitHub
// Enterprise Server's https://HOST/api/v3, or a stand-in in a test) the
// URL's own scheme and host[:port], the path dropped.
type Forge struct {
	api   *rest.Client
	web   url.URL // scheme://host[:port] of clone URLs
	appID string
	key   *rsa.PrivateKey
	now   func() time.Time
}

// Lifetime of the App's JWT: issued a minute in the past against clock
// drift, expiring nine minutes ahead, under GitHub's ten-minute cap.
const (
	jwtBackdate = 60 * time.Second
	jwtLifetime = 9 * time.Minute
)

// New returns the GitHub forge of cfg. It refuses a missing App id,
// a key that is not an RSA private key in PEM, and a URL that is not
// http(s)://host[/path]. hc carries the API calls (it is copied: redirects
// are not followed); now is the clock the App's JWT is dated by.
func New(cfg Config, hc *http.Client, now func() time.Time) (*Forge, error) {
	if hc == nil || now == nil {
		return nil, fmt.Errorf("github forge: an HTTP client and a clock are required")
	}
	if cfg.AppID == "" || strings.ContainsFunc(cfg.AppID, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return nil, fmt.Errorf("github forge: the App id must be set, one word (as GitHub shows it on the App's page)")
	}
	key, err := jwt.ParseRSAPrivateKeyFromPEM([]byte(cfg.Key.Reveal()))
	if err != nil {
		// jwt's errors name what is wrong, never the key's bytes.
		return nil, fmt.Errorf("github forge: the App's key is not a PEM-encoded RSA private key (the .pem file GitHub generates): %v", err)
	}
	base, err := rest.BaseURL(cfg.URL, "https://api.github.com")
	if err != nil {
		return nil, fmt.Errorf("github forge: %w", err)
	}
	web := url.URL{Scheme: base.Scheme, Host: base.Host}
	if base.Host == "api.github.com" {
		web = url.URL{Scheme: "https", Host: "github.com"}
	}
	return &Forge{
		api: rest.New(base, hc, http.Header{
			"Accept":               {"application/vnd.github+json"},
			"X-Github-Api-Version": {"2022-11-28"},
			"User-Agent":           {"berth"},
		}),
		web:   web,
		appID: cfg.AppID,
		key:   key,
		now:   now,
	}, nil
}

// Kind is github.
func (*Forge) Kind() string { return "github" }

// Host is GitHub's web host: github.com, or the Enterprise Server's (with
// its port, if the URL has one).
func (g *Forge) Host() string { return g.web.Host }

// CloneURL is scheme://host/owner/name.git.
func (g *Forge) CloneURL(r forge.Repo) string { return g.web.String() + "/" + r.Path + ".git" }

// Token mints an installation token for r: the App's JWT finds the
// installation that covers r (fault.NotFound when the App is not installed
// there), which gives a token for r alone with contents:write. It lasts the
// hour GitHub gives; until cannot lengthen it. ID is "": GitHub revokes a
// token only when presented with the token itself.
func (g *Forge) Token(ctx context.Context, r forge.Repo, _ time.Time) (forge.Token, error) {
	t, err := g.repoToken(ctx, r, gitGrant())
	if err != nil {
		return forge.Token{}, fmt.Errorf("github token for %s: %w", r, err)
	}
	return t, nil
}

// grant is a set of permissions berth asks installation tokens with, and
// how to name it to the operator when GitHub refuses it.
type grant struct {
	permissions map[string]string
	name        string // as the token has it: contents:write
	needs       string // as the App's settings say it: Contents: Read and write
}

// gitGrant is what a sandbox's git gets (SPEC S9): contents read and
// write, nothing else.
func gitGrant() grant {
	return grant{map[string]string{"contents": "write"}, "contents:write", "Contents: Read and write"}
}

// reportGrant is what berth takes a run's results back with (SPEC S13):
// pull requests and issues written, contents read, nothing else.
func reportGrant() grant {
	return grant{
		map[string]string{"pull_requests": "write", "issues": "write", "contents": "read"},
		"pull_requests:write, issues:write and contents:read",
		"Pull requests and Issues: Read and write, and Contents: Read",
	}
}

// ownerName checks that r is a repository on this GitHub and takes its
// path apart.
func (g *Forge) ownerName(r forge.Repo) (owner, name string, err error) {
	if err := forge.CheckRemote(r, g.Host()); err != nil {
		return "", "", err
	}
	owner, name, _ = strings.Cut(r.Path, "/")
	if strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%q: a repository on GitHub is owner/name: %w", r.Path, forge.ErrBadAddress)
	}
	return owner, name, nil
}

// repoToken mints an installation token for r alone with gr's permissions.
func (g *Forge) repoToken(ctx context.Context, r forge.Repo, gr grant) (forge.Token, error) {
	owner, name, err := g.ownerName(r)
	if err != nil {
		return forge.Token{}, err
	}
	signed, err := g.jwt()
	if err != nil {
		return forge.Token{}, err
	}
	auth := http.Header{"Authorization": {"Bearer " + signed}}

	var inst struct {
		ID int64 `json:"id"`
	}
	err = g.api.Do(ctx, http.MethodGet, "/repos/"+url.PathEscape(owner)+"/"+url.PathEscape(name)+"/installation", auth, nil, &inst)
	if err := g.mapError(err, "the App is not installed on it, or it does not exist", gr); err != nil {
		return forge.Token{}, err
	}
	if inst.ID <= 0 {
		return forge.Token{}, fmt.Errorf("GitHub's answer names no installation")
	}

	req := struct {
		Repositories []string          `json:"repositories"`
		Permissions  map[string]string `json:"permissions"`
	}{[]string{name}, gr.permissions}
	var tok struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	err = g.api.Do(ctx, http.MethodPost, "/app/installations/"+strconv.FormatInt(inst.ID, 10)+"/access_tokens", auth, req, &tok)
	if err := g.mapError(err, "the App's installation is gone", gr); err != nil {
		return forge.Token{}, err
	}
	if tok.Token == "" || tok.ExpiresAt.IsZero() {
		return forge.Token{}, fmt.Errorf("GitHub's answer has no token or no expiry")
	}
	return forge.Token{Username: "x-access-token", Secret: secret.New(tok.Token), ExpiresAt: tok.ExpiresAt}, nil
}

// jwt is the App's proof of identity for the next ten minutes (RS256,
// issuer the App id).
func (g *Forge) jwt() (string, error) {
	now := g.now()
	signed, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{
		Issuer:    g.appID,
		IssuedAt:  jwt.NewNumericDate(now.Add(-jwtBackdate)),
		ExpiresAt: jwt.NewNumericDate(now.Add(jwtLifetime)),
	}).SignedString(g.key)
	if err != nil {
		return "", fmt.Errorf("sign the App's JWT: %v", err)
	}
	return signed, nil
}

// mapError says what an App call's error means for berth; notFound is what
// a 404 means for the call, gr the token being asked for.
func (g *Forge) mapError(err error, notFound string, gr grant) error {
	switch rest.Status(err) {
	case 0:
		return err
	case http.StatusNotFound:
		return fault.Errorf(fault.NotFound, "%s (%w): no such repository", notFound, err)
	case http.StatusUnauthorized:
		return fmt.Errorf("GitHub refused the App's JWT (check the App id and its key): %w", err)
	case http.StatusForbidden, http.StatusUnprocessableEntity:
		return fmt.Errorf("GitHub gives the App no %s token for it (does the App have %s, and does its installation include the repository?) (%w): %w", gr.name, gr.needs, err, forge.ErrNoCredential)
	default:
		return err
	}
}

// Revoke returns nil: berth keeps no GitHub token, and GitHub revokes one
// only when presented with it (SPEC S9: it lasts its hour).
func (*Forge) Revoke(context.Context, forge.Token) error { return nil }
