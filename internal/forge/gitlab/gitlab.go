// Package gitlab is the GitLab forge (SPEC S9): it mints project access
// tokens (one project, Developer role, until midnight UTC after the
// sandbox's end) and revokes them.
package gitlab

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/forge/rest"
	"berth.dev/berth/internal/secret"
)

// Config is how the deployment reaches its GitLab (SPEC S9, S16).
type Config struct {
	// URL is the GitLab instance (BERTH_SANDBOX_GIT_URL): "" for
	// https://gitlab.com; a path is kept (GitLab under a relative URL).
	URL string
	// Token is the deployment's token, api scope, held by a Maintainer of
	// the projects (the file BERTH_SANDBOX_GIT_TOKEN_FILE names). Spaces and
	// line ends around it are trimmed.
	Token secret.Secret
}

// Forge mints project access tokens: one project, Developer role,
// read_repository and write_repository, expiring at midnight UTC after the
// sandbox's end, and revokes them.
//
// Repository addresses name the URL's host[:port]; clone URLs are the
// URL's scheme://host[:port][/path] followed by group/…/name.git.
//
// A Token's ID is "<project path, URL-escaped>/<token id>"
// (group%2Fapp/42): revoking needs the project as well as the token's id.
type Forge struct {
	api *rest.Client
	web url.URL // scheme://host[:port][/path] of clone URLs
	now func() time.Time
}

// developer is GitLab's access level 30, Developer: push to
// unprotected branches, nothing more.
const developer = 30

// New returns the GitLab forge of cfg. It refuses an empty token and
// a URL that is not http(s)://host[/path]. hc carries the API calls (it is
// copied: redirects are not followed); now is the clock tokens are checked
// against.
func New(cfg Config, hc *http.Client, now func() time.Time) (*Forge, error) {
	if hc == nil || now == nil {
		return nil, fmt.Errorf("gitlab forge: an HTTP client and a clock are required")
	}
	token := strings.TrimSpace(cfg.Token.Reveal())
	if token == "" || strings.ContainsFunc(token, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return nil, fmt.Errorf("gitlab forge: the token file must hold one token (a GitLab token with the api scope)")
	}
	base, err := rest.BaseURL(cfg.URL, "https://gitlab.com")
	if err != nil {
		return nil, fmt.Errorf("gitlab forge: %w", err)
	}
	return &Forge{
		api: rest.New(base, hc, http.Header{
			"Private-Token": {token},
			"Accept":        {"application/json"},
			"User-Agent":    {"berth"},
		}),
		web: *base,
		now: now,
	}, nil
}

// Kind is gitlab.
func (*Forge) Kind() string { return "gitlab" }

// Host is the GitLab instance's host[:port].
func (g *Forge) Host() string { return g.web.Host }

// CloneURL is scheme://host[/path]/group/…/name.git.
func (g *Forge) CloneURL(r forge.Repo) string { return g.web.String() + "/" + r.Path + ".git" }

// Token mints a project access token for r that expires at midnight UTC
// after until. fault.NotFound when GitLab has no such project (or the
// deployment's token cannot see it); forge.ErrNoCredential when GitLab refuses
// to give one.
func (g *Forge) Token(ctx context.Context, r forge.Repo, until time.Time) (forge.Token, error) {
	t, err := g.token(ctx, r, until)
	if err != nil {
		return forge.Token{}, fmt.Errorf("gitlab token for %s: %w", r, err)
	}
	return t, nil
}

func (g *Forge) token(ctx context.Context, r forge.Repo, until time.Time) (forge.Token, error) {
	if err := forge.CheckRemote(r, g.Host()); err != nil {
		return forge.Token{}, err
	}
	path := r.Path
	if now := g.now(); !until.After(now) {
		return forge.Token{}, fmt.Errorf("it would end at %s, which is past", until.UTC().Format(time.RFC3339))
	}
	expires := midnightAfter(until)
	req := struct {
		Name        string   `json:"name"`
		Scopes      []string `json:"scopes"`
		AccessLevel int      `json:"access_level"`
		ExpiresAt   string   `json:"expires_at"`
	}{
		Name:        "berth sandbox until " + until.UTC().Format("2006-01-02 15:04 UTC"),
		Scopes:      []string{"read_repository", "write_repository"},
		AccessLevel: developer,
		ExpiresAt:   expires.Format(time.DateOnly),
	}
	var tok struct {
		ID        int64  `json:"id"`
		Token     string `json:"token"`
		ExpiresAt string `json:"expires_at"`
	}
	project := url.PathEscape(path)
	err := g.api.Do(ctx, http.MethodPost, "/api/v4/projects/"+project+"/access_tokens", nil, req, &tok)
	if err := g.mapError(err); err != nil {
		return forge.Token{}, err
	}
	if tok.ID <= 0 || tok.Token == "" {
		return forge.Token{}, fmt.Errorf("GitLab's answer has no token or no id")
	}
	if d, err := time.Parse(time.DateOnly, tok.ExpiresAt); err == nil {
		expires = d // what GitLab recorded is what holds
	}
	return forge.Token{
		ID:        project + "/" + strconv.FormatInt(tok.ID, 10),
		Username:  "oauth2",
		Secret:    secret.New(tok.Token),
		ExpiresAt: expires,
	}, nil
}

// midnightAfter is the midnight UTC that ends until's UTC day: GitLab
// tokens expire at the start of their expiry date.
func midnightAfter(until time.Time) time.Time {
	y, m, d := until.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

// Revoke revokes a project access token Token minted. A token GitLab no
// longer has (404) is revoked already; an ID of "" is nothing to revoke.
func (g *Forge) Revoke(ctx context.Context, t forge.Token) error {
	if t.ID == "" {
		return nil
	}
	project, id, err := splitTokenID(t.ID)
	if err != nil {
		return fmt.Errorf("gitlab revoke token %q: %w", t.ID, err)
	}
	err = g.api.Do(ctx, http.MethodDelete, "/api/v4/projects/"+project+"/access_tokens/"+id, nil, nil, nil)
	if rest.Status(err) == http.StatusNotFound {
		return nil
	}
	if err != nil {
		return fmt.Errorf("gitlab revoke token %s: %w", t.ID, err)
	}
	return nil
}

// splitTokenID takes a Token.ID apart into the escaped project path and the
// token's id, checking both.
func splitTokenID(tid string) (project, id string, err error) {
	i := strings.LastIndexByte(tid, '/')
	if i < 0 {
		return "", "", fmt.Errorf("not a GitLab token id (project/id)")
	}
	project, id = tid[:i], tid[i+1:]
	if n, err := strconv.ParseInt(id, 10, 64); err != nil || n <= 0 {
		return "", "", fmt.Errorf("not a GitLab token id (project/id)")
	}
	path, err := url.PathUnescape(project)
	if err != nil || forge.CheckPath(path) != nil || url.PathEscape(path) != project {
		return "", "", fmt.Errorf("not a GitLab token id (project/id)")
	}
	return project, id, nil
}

// mapError says what a GitLab API error means for berth.
func (g *Forge) mapError(err error) error {
	switch rest.Status(err) {
	case 0:
		return err
	case http.StatusNotFound:
		return fault.Errorf(fault.NotFound, "GitLab has no such project, or the deployment's token cannot see it (%w): no such repository", err)
	case http.StatusUnauthorized:
		return fmt.Errorf("GitLab refused the deployment's token (is it valid, with the api scope?): %w", err)
	case http.StatusForbidden:
		return fmt.Errorf("GitLab gives no project access token for it (is the token's user a Maintainer; does the tier have project access tokens?) (%w): %w", err, forge.ErrNoCredential)
	default:
		return err
	}
}
