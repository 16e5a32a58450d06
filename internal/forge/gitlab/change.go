package gitlab

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/forge/rest"
)

// This file is the GitLab forge as a forge.Reporter (SPEC S13), with the
// deployment's own token: never one of the project access tokens Token
// mints for sandboxes.

var _ forge.Reporter = (*Forge)(nil)

// maxTitle is the longest title GitLab takes, in characters.
const maxTitle = 255

// project is what berth reads of a project.
type project struct {
	DefaultBranch string `json:"default_branch"`
	WebURL        string `json:"web_url"`
}

// mergeRequest is what berth reads of a merge request.
type mergeRequest struct {
	IID    int    `json:"iid"`
	WebURL string `json:"web_url"`
}

// projectPath checks that r is a project on this GitLab and returns its
// API path, /api/v4/projects/<path, escaped>.
func (g *Forge) projectPath(r forge.Repo) (string, error) {
	if err := forge.CheckRemote(r, g.Host()); err != nil {
		return "", err
	}
	return "/api/v4/projects/" + url.PathEscape(r.Path), nil
}

// project reads the project at path.
func (g *Forge) project(ctx context.Context, path string) (project, error) {
	var p project
	err := g.api.Do(ctx, http.MethodGet, path, nil, nil, &p)
	if err := reportError(err, "GitLab has no such project, or the deployment's token cannot see it"); err != nil {
		return project{}, err
	}
	return p, nil
}

// DefaultBranch is r's default branch, as GitLab names it.
func (g *Forge) DefaultBranch(ctx context.Context, r forge.Repo) (string, error) {
	b, err := g.defaultBranch(ctx, r)
	if err != nil {
		return "", fmt.Errorf("gitlab default branch of %s: %w", r, err)
	}
	return b, nil
}

func (g *Forge) defaultBranch(ctx context.Context, r forge.Repo) (string, error) {
	path, err := g.projectPath(r)
	if err != nil {
		return "", err
	}
	p, err := g.project(ctx, path)
	if err != nil {
		return "", err
	}
	if p.DefaultBranch == "" {
		return "", fmt.Errorf("GitLab names no default branch (is the repository empty?)")
	}
	return p.DefaultBranch, nil
}

// OpenChange opens a draft merge request from req.Head into req.Base: its
// title starts "Draft: " (what makes one a draft on GitLab) and is cut to
// GitLab's 255 characters, its description cut to forge.MaxReportBody.
// When GitLab has one open already from that head into that base, it
// returns that one, Existed.
func (g *Forge) OpenChange(ctx context.Context, r forge.Repo, req forge.ChangeRequest) (forge.Change, error) {
	c, err := g.openChange(ctx, r, req)
	if err != nil {
		return forge.Change{}, fmt.Errorf("gitlab open a merge request on %s from %q: %w", r, req.Head, err)
	}
	return c, nil
}

func (g *Forge) openChange(ctx context.Context, r forge.Repo, req forge.ChangeRequest) (forge.Change, error) {
	if err := req.Check(); err != nil {
		return forge.Change{}, err
	}
	path, err := g.projectPath(r)
	if err != nil {
		return forge.Change{}, err
	}
	if _, err := g.project(ctx, path); err != nil {
		return forge.Change{}, err
	}
	// GitLab refuses a source branch it does not have, but takes a target
	// it does not have and makes a merge request that can never merge.
	err = g.api.Do(ctx, http.MethodGet, path+"/repository/branches/"+url.PathEscape(req.Base), nil, nil, nil)
	if rest.Status(err) == http.StatusNotFound {
		return forge.Change{}, fault.Field("base", "GitLab's project has no branch %q to merge into", req.Base)
	}
	if err := reportError(err, "GitLab has no such project, or the deployment's token cannot see it"); err != nil {
		return forge.Change{}, err
	}

	in := struct {
		SourceBranch string `json:"source_branch"`
		TargetBranch string `json:"target_branch"`
		Title        string `json:"title"`
		Description  string `json:"description"`
	}{req.Head, req.Base, draftTitle(req.Title), forge.TrimBody(req.Body)}
	var mr mergeRequest
	err = g.api.Do(ctx, http.MethodPost, path+"/merge_requests", nil, in, &mr)
	if rest.Status(err) == http.StatusConflict {
		// Another open merge request from the same source into the same
		// target: GitLab refuses a second.
		found, ok, lookErr := g.openMergeRequest(ctx, path, req)
		switch {
		case lookErr != nil:
			return forge.Change{}, fmt.Errorf("%w; then looking for the open one: %w", err, lookErr)
		case ok:
			return forge.Change{Number: found.IID, URL: found.WebURL, Existed: true}, nil
		}
		return forge.Change{}, err
	}
	if err := reportError(err, "GitLab has no such project, or the deployment's token cannot see it"); err != nil {
		return forge.Change{}, err
	}
	if mr.IID <= 0 || mr.WebURL == "" {
		return forge.Change{}, fmt.Errorf("GitLab's answer names no merge request")
	}
	return forge.Change{Number: mr.IID, URL: mr.WebURL}, nil
}

// openMergeRequest finds the open merge request from req.Head into
// req.Base.
func (g *Forge) openMergeRequest(ctx context.Context, path string, req forge.ChangeRequest) (mergeRequest, bool, error) {
	q := url.Values{"source_branch": {req.Head}, "target_branch": {req.Base}, "state": {"opened"}}
	var mrs []mergeRequest
	err := g.api.Do(ctx, http.MethodGet, path+"/merge_requests?"+q.Encode(), nil, nil, &mrs)
	if err := reportError(err, "GitLab has no such project, or the deployment's token cannot see it"); err != nil {
		return mergeRequest{}, false, err
	}
	for _, mr := range mrs {
		if mr.IID > 0 && mr.WebURL != "" {
			return mr, true, nil
		}
	}
	return mergeRequest{}, false, nil
}

// draftTitle is title as a draft's: "Draft: " before it, all of it at
// most maxTitle characters.
func draftTitle(title string) string {
	const prefix = "Draft: "
	title = strings.TrimSpace(title)
	if len(title) >= len(prefix) && strings.EqualFold(title[:len(prefix)-1], prefix[:len(prefix)-1]) {
		title = strings.TrimSpace(title[len(prefix)-1:]) // a draft already
	}
	if utf8.RuneCountInString(prefix+title) <= maxTitle {
		return prefix + title
	}
	keep := maxTitle - utf8.RuneCountInString(prefix) - 1
	end := 0
	for range keep {
		_, size := utf8.DecodeRuneInString(title[end:])
		end += size
	}
	return prefix + title[:end] + "…"
}

// Comment posts body, cut to forge.MaxReportBody, as a note on issue or
// merge request t.Number (an iid) and returns the note's URL.
func (g *Forge) Comment(ctx context.Context, r forge.Repo, t forge.Thread, body string) (string, error) {
	u, err := g.comment(ctx, r, t, body)
	if err != nil {
		return "", fmt.Errorf("gitlab comment on %s %s #%d: %w", r, t.Kind, t.Number, err)
	}
	return u, nil
}

func (g *Forge) comment(ctx context.Context, r forge.Repo, t forge.Thread, body string) (string, error) {
	if err := t.Check(); err != nil {
		return "", err
	}
	if strings.TrimSpace(body) == "" {
		return "", fault.Field("body", "is empty")
	}
	path, err := g.projectPath(r)
	if err != nil {
		return "", err
	}
	// A note's answer has no URL: it is the thread's page and an anchor,
	// under the project's. Read before posting, so that a failure here
	// leaves nothing posted.
	p, err := g.project(ctx, path)
	if err != nil {
		return "", err
	}
	if p.WebURL == "" {
		return "", fmt.Errorf("GitLab's answer has no web URL for the project")
	}
	kind, what := "issues", "issue"
	if t.Kind == forge.ThreadChange {
		kind, what = "merge_requests", "merge request"
	}
	in := struct {
		Body string `json:"body"`
	}{forge.TrimBody(body)}
	var note struct {
		ID int64 `json:"id"`
	}
	iid := strconv.Itoa(t.Number)
	err = g.api.Do(ctx, http.MethodPost, path+"/"+kind+"/"+iid+"/notes", nil, in, &note)
	if err := reportError(err, fmt.Sprintf("GitLab has no %s #%d in the project", what, t.Number)); err != nil {
		return "", err
	}
	if note.ID <= 0 {
		return "", fmt.Errorf("GitLab's answer names no note")
	}
	return strings.TrimRight(p.WebURL, "/") + "/-/" + kind + "/" + iid + "#note_" + strconv.FormatInt(note.ID, 10), nil
}

// Review posts body as a note on merge request n: GitLab's merge requests
// take comments as notes, which neither approve nor block.
func (g *Forge) Review(ctx context.Context, r forge.Repo, n int, body string) (string, error) {
	u, err := g.comment(ctx, r, forge.Thread{Kind: forge.ThreadChange, Number: n}, body)
	if err != nil {
		return "", fmt.Errorf("gitlab review of %s merge request #%d: %w", r, n, err)
	}
	return u, nil
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
		return fmt.Errorf("GitLab refused the deployment's token (is it valid, with the api scope?): %w", err)
	case http.StatusForbidden:
		return fmt.Errorf("GitLab does not let the deployment's token do it (is its user a Developer or more of the project?) (%w)", err)
	default:
		return err
	}
}
