package github

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/forge/rest"
)

// This file is the GitHub forge as a forge.Reporter (SPEC S13). Every call
// mints its own installation token for the one repository, with
// reportGrant's permissions: no token outlives the call, and none can push.

var _ forge.Reporter = (*Forge)(nil)

// session is what one Reporter call works with: the repository's API path
// and a reporting token for it alone.
type session struct {
	owner string
	path  string      // /repos/owner/name
	auth  http.Header // Authorization: Bearer <installation token>
}

func (g *Forge) session(ctx context.Context, r forge.Repo) (session, error) {
	tok, err := g.repoToken(ctx, r, reportGrant())
	if err != nil {
		return session{}, err
	}
	owner, name, _ := g.ownerName(r) // repoToken checked r
	return session{
		owner: owner,
		path:  "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name),
		auth:  http.Header{"Authorization": {"Bearer " + tok.Secret.Reveal()}},
	}, nil
}

// DefaultBranch is r's default branch, as GitHub names it.
func (g *Forge) DefaultBranch(ctx context.Context, r forge.Repo) (string, error) {
	b, err := g.defaultBranch(ctx, r)
	if err != nil {
		return "", fmt.Errorf("github default branch of %s: %w", r, err)
	}
	return b, nil
}

func (g *Forge) defaultBranch(ctx context.Context, r forge.Repo) (string, error) {
	s, err := g.session(ctx, r)
	if err != nil {
		return "", err
	}
	var repo struct {
		DefaultBranch string `json:"default_branch"`
	}
	err = g.api.Do(ctx, http.MethodGet, s.path, s.auth, nil, &repo)
	if err := reportError(err, "GitHub has no such repository, or the App cannot see it"); err != nil {
		return "", err
	}
	if repo.DefaultBranch == "" {
		return "", fmt.Errorf("GitHub names no default branch (is the repository empty?)")
	}
	return repo.DefaultBranch, nil
}

// pull is what berth reads of a pull request.
type pull struct {
	Number  int    `json:"number"`
	HTMLURL string `json:"html_url"`
}

// OpenChange opens a draft pull request from req.Head into req.Base, its
// body cut to forge.MaxReportBody. When GitHub has one open already from
// that head into that base, it returns that one, Existed.
func (g *Forge) OpenChange(ctx context.Context, r forge.Repo, req forge.ChangeRequest) (forge.Change, error) {
	c, err := g.openChange(ctx, r, req)
	if err != nil {
		return forge.Change{}, fmt.Errorf("github open a pull request on %s from %q: %w", r, req.Head, err)
	}
	return c, nil
}

func (g *Forge) openChange(ctx context.Context, r forge.Repo, req forge.ChangeRequest) (forge.Change, error) {
	if err := req.Check(); err != nil {
		return forge.Change{}, err
	}
	s, err := g.session(ctx, r)
	if err != nil {
		return forge.Change{}, err
	}
	in := struct {
		Title string `json:"title"`
		Head  string `json:"head"`
		Base  string `json:"base"`
		Body  string `json:"body"`
		Draft bool   `json:"draft"`
	}{req.Title, req.Head, req.Base, forge.TrimBody(req.Body), true}
	var p pull
	err = g.api.Do(ctx, http.MethodPost, s.path+"/pulls", s.auth, in, &p)
	if rest.Status(err) == http.StatusUnprocessableEntity {
		// GitHub's message is "Validation Failed" whatever failed; why
		// is in a list rest does not keep. Whether a pull request from
		// the head into the base is open already is asked instead.
		found, ok, lookErr := g.openPull(ctx, s, req)
		switch {
		case lookErr != nil:
			return forge.Change{}, fmt.Errorf("%w; then looking for an open one: %w", err, lookErr)
		case ok:
			return forge.Change{Number: found.Number, URL: found.HTMLURL, Existed: true}, nil
		}
		return forge.Change{}, fmt.Errorf("GitHub refused it: are %q and %q both branches on GitHub, with commits on the first that the second lacks? Does the repository's plan have draft pull requests? (%w)", req.Head, req.Base, err)
	}
	if err := reportError(err, "GitHub has no such repository, or the App cannot see it"); err != nil {
		return forge.Change{}, err
	}
	if p.Number <= 0 || p.HTMLURL == "" {
		return forge.Change{}, fmt.Errorf("GitHub's answer names no pull request")
	}
	return forge.Change{Number: p.Number, URL: p.HTMLURL}, nil
}

// openPull finds the open pull request from req.Head into req.Base.
func (g *Forge) openPull(ctx context.Context, s session, req forge.ChangeRequest) (pull, bool, error) {
	// head is owner:branch: GitHub ignores a head filter without the
	// owner and lists every open pull request.
	q := url.Values{"head": {s.owner + ":" + req.Head}, "base": {req.Base}, "state": {"open"}}
	var pulls []pull
	err := g.api.Do(ctx, http.MethodGet, s.path+"/pulls?"+q.Encode(), s.auth, nil, &pulls)
	if err := reportError(err, "GitHub has no such repository, or the App cannot see it"); err != nil {
		return pull{}, false, err
	}
	for _, p := range pulls {
		if p.Number > 0 && p.HTMLURL != "" {
			return p, true, nil
		}
	}
	return pull{}, false, nil
}

// Comment posts body, cut to forge.MaxReportBody, on issue or pull request
// t.Number (GitHub comments on both alike) and returns the comment's URL.
func (g *Forge) Comment(ctx context.Context, r forge.Repo, t forge.Thread, body string) (string, error) {
	u, err := g.comment(ctx, r, t, body)
	if err != nil {
		return "", fmt.Errorf("github comment on %s %s #%d: %w", r, t.Kind, t.Number, err)
	}
	return u, nil
}

func (g *Forge) comment(ctx context.Context, r forge.Repo, t forge.Thread, body string) (string, error) {
	if err := t.Check(); err != nil {
		return "", err
	}
	if err := checkBody(body); err != nil {
		return "", err
	}
	s, err := g.session(ctx, r)
	if err != nil {
		return "", err
	}
	in := struct {
		Body string `json:"body"`
	}{forge.TrimBody(body)}
	var c struct {
		ID      int64  `json:"id"`
		HTMLURL string `json:"html_url"`
	}
	err = g.api.Do(ctx, http.MethodPost, s.path+"/issues/"+strconv.Itoa(t.Number)+"/comments", s.auth, in, &c)
	if err := reportError(err, fmt.Sprintf("GitHub has no issue or pull request #%d there, or no such repository", t.Number)); err != nil {
		return "", err
	}
	if c.ID <= 0 || c.HTMLURL == "" {
		return "", fmt.Errorf("GitHub's answer names no comment")
	}
	return c.HTMLURL, nil
}

// Review posts body, cut to forge.MaxReportBody, as a review of pull
// request n that only comments (event COMMENT: no approval, no request for
// changes), and returns the review's URL.
func (g *Forge) Review(ctx context.Context, r forge.Repo, n int, body string) (string, error) {
	u, err := g.review(ctx, r, n, body)
	if err != nil {
		return "", fmt.Errorf("github review of %s pull request #%d: %w", r, n, err)
	}
	return u, nil
}

func (g *Forge) review(ctx context.Context, r forge.Repo, n int, body string) (string, error) {
	if err := (forge.Thread{Kind: forge.ThreadChange, Number: n}).Check(); err != nil {
		return "", err
	}
	if err := checkBody(body); err != nil {
		return "", err
	}
	s, err := g.session(ctx, r)
	if err != nil {
		return "", err
	}
	// Without an event GitHub keeps the review pending, seen by no one.
	in := struct {
		Body  string `json:"body"`
		Event string `json:"event"`
	}{forge.TrimBody(body), "COMMENT"}
	var rv struct {
		ID      int64  `json:"id"`
		HTMLURL string `json:"html_url"`
	}
	err = g.api.Do(ctx, http.MethodPost, s.path+"/pulls/"+strconv.Itoa(n)+"/reviews", s.auth, in, &rv)
	if err := reportError(err, fmt.Sprintf("GitHub has no pull request #%d there, or no such repository", n)); err != nil {
		return "", err
	}
	if rv.ID <= 0 || rv.HTMLURL == "" {
		return "", fmt.Errorf("GitHub's answer names no review")
	}
	return rv.HTMLURL, nil
}

// reportError says what a Reporter call's error means for berth; notFound
// is what a 404 means for the call.
func reportError(err error, notFound string) error {
	switch rest.Status(err) {
	case 0:
		return err
	case http.StatusNotFound:
		return fault.Errorf(fault.NotFound, "%s (%w)", notFound, err)
	case http.StatusUnauthorized:
		return fmt.Errorf("GitHub refused the App's installation token: %w", err)
	case http.StatusForbidden:
		return fmt.Errorf("GitHub does not let the App do it (does the App have %s, and may it write to the repository?) (%w)", reportGrant().needs, err)
	default:
		return err
	}
}

// checkBody refuses an empty body, which GitHub refuses too.
func checkBody(body string) error {
	if strings.TrimSpace(body) == "" {
		return fault.Field("body", "is empty")
	}
	return nil
}
