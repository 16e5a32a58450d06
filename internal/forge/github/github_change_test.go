package github_test

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
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

// pushBranch pushes branch, one commit past main, to path on f with a
// token f mints, as a sandbox would.
func pushBranch(t *testing.T, f forge.Forge, path, branch string) {
	t.Helper()
	tok := forgetest.Mint(t, f, path)
	remote := forgetest.WithAuth(t, f.CloneURL(forge.Repo{Host: f.Host(), Path: path}), tok.Username, tok.Secret.Reveal())
	work := filepath.Join(t.TempDir(), "work")
	if _, err := forgetest.Git(t, "", "clone", "--quiet", remote, work); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "change.txt"), []byte(branch+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "change.txt"}, {"commit", "--quiet", "-m", "a change"}, {"push", "--quiet", "origin", "HEAD:refs/heads/" + branch}} {
		if _, err := forgetest.Git(t, work, args...); err != nil {
			t.Fatal(err)
		}
	}
}

// newReporter is a GitHub forge on a stand-in with acme/app, where branch
// berth/run-1 is pushed, and acme/gone, where the App is not installed.
func newReporter(t *testing.T) (*github.Forge, *forgetest.GitHub) {
	t.Helper()
	key, pemKey := forgetest.NewAppKey(t)
	stand := forgetest.NewGitHub(t, appID, &key.PublicKey, "acme/app", "acme/gone")
	stand.Uninstall("acme/gone")
	g, err := github.New(github.Config{URL: stand.URL(), AppID: appID, Key: secret.New(string(pemKey))}, stand.Client(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	pushBranch(t, g, "acme/app", "berth/run-1")
	return g, stand
}

func TestGitHubReporter(t *testing.T) {
	g, stand := newReporter(t)
	repo := forge.Repo{Host: g.Host(), Path: "acme/app"}
	issue := stand.AddIssue("acme/app", "a bug", "it breaks")
	gitTokens := len(stand.Minted())
	ctx := t.Context()

	if b, err := g.DefaultBranch(ctx, repo); err != nil || b != "main" {
		t.Errorf("DefaultBranch = %q, %v; want main", b, err)
	}

	long := strings.Repeat("a line of the run's log\n", 3000) // over forge.MaxReportBody
	req := forge.ChangeRequest{Head: "berth/run-1", Base: "main", Title: "Fix the bug", Body: long}
	c, err := g.OpenChange(ctx, repo, req)
	if err != nil {
		t.Fatalf("OpenChange = %v", err)
	}
	// Issues and pull requests share numbers: the issue is #1.
	want := forge.Change{Number: 2, URL: stand.URL() + "/acme/app/pull/2"}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("OpenChange (-want +got):\n%s", diff)
	}
	wantPull := forgetest.GitHubPull{Number: 2, Head: "berth/run-1", Base: "main", Title: "Fix the bug", Body: forge.TrimBody(long), Draft: true, URL: want.URL}
	if diff := cmp.Diff([]forgetest.GitHubPull{wantPull}, stand.Pulls("acme/app")); diff != "" {
		t.Errorf("pull requests on GitHub (-want +got):\n%s", diff)
	}

	again, err := g.OpenChange(ctx, repo, forge.ChangeRequest{Head: "berth/run-1", Base: "main", Title: "Fix the bug, again"})
	if err != nil {
		t.Fatalf("OpenChange again = %v", err)
	}
	if want := (forge.Change{Number: 2, URL: want.URL, Existed: true}); again != want {
		t.Errorf("OpenChange again = %+v, want %+v", again, want)
	}
	if n := len(stand.Pulls("acme/app")); n != 1 {
		t.Errorf("GitHub has %d pull requests, want 1", n)
	}

	u, err := g.Comment(ctx, repo, forge.Thread{Kind: forge.ThreadIssue, Number: issue}, "Fixed in "+c.URL)
	if err != nil || !strings.HasPrefix(u, stand.URL()+"/acme/app/issues/1#issuecomment-") {
		t.Errorf("Comment(issue #1) = %q, %v; want the comment's URL", u, err)
	}
	u, err = g.Comment(ctx, repo, forge.Thread{Kind: forge.ThreadChange, Number: c.Number}, long)
	if err != nil || !strings.HasPrefix(u, stand.URL()+"/acme/app/pull/2#issuecomment-") {
		t.Errorf("Comment(pull request #2) = %q, %v; want the comment's URL", u, err)
	}
	u, err = g.Review(ctx, repo, c.Number, "The run's summary")
	if err != nil || !strings.HasPrefix(u, stand.URL()+"/acme/app/pull/2#pullrequestreview-") {
		t.Errorf("Review(#2) = %q, %v; want the review's URL", u, err)
	}
	if got := stand.Comments("acme/app", issue); !cmp.Equal(got, []string{"Fixed in " + c.URL}) {
		t.Errorf("comments on the issue = %q", got)
	}
	if got := stand.Comments("acme/app", 2); !cmp.Equal(got, []string{forge.TrimBody(long)}) {
		t.Errorf("comments on the pull request: %d, want the one, cut", len(got))
	}
	if diff := cmp.Diff([]forgetest.GitHubReview{{Body: "The run's summary", Event: "COMMENT"}}, stand.Reviews("acme/app", 2)); diff != "" {
		t.Errorf("reviews (-want +got):\n%s", diff)
	}

	// Every call had a token of its own: the repository alone, pull
	// requests and issues written, contents read.
	reporting := map[string]string{"pull_requests": "write", "issues": "write", "contents": "read"}
	minted := stand.Minted()[gitTokens:]
	if len(minted) != 6 {
		t.Errorf("the reporter minted %d tokens, want one a call: 6", len(minted))
	}
	for _, m := range minted {
		if m.Repo != "acme/app" || !maps.Equal(m.Permissions, reporting) {
			t.Errorf("a token minted for %s with %v, want acme/app with %v", m.Repo, m.Permissions, reporting)
		}
	}
}

func TestGitHubReporterRefuses(t *testing.T) {
	g, stand := newReporter(t)
	issue := stand.AddIssue("acme/app", "a bug", "it breaks")
	at := func(path string) forge.Repo { return forge.Repo{Host: g.Host(), Path: path} }
	app := at("acme/app")
	open := func(r forge.Repo, head, base, title string) error {
		_, err := g.OpenChange(t.Context(), r, forge.ChangeRequest{Head: head, Base: base, Title: title, Body: "b"})
		return err
	}
	comment := func(r forge.Repo, kind forge.ThreadKind, n int, body string) error {
		_, err := g.Comment(t.Context(), r, forge.Thread{Kind: kind, Number: n}, body)
		return err
	}

	tests := []struct {
		name    string
		call    func() error
		wantErr error  // a sentinel, or nil
		wantMsg string // in the error
		mints   bool   // it gets as far as a token
	}{
		{"default branch where the App is not installed", func() error { _, err := g.DefaultBranch(t.Context(), at("acme/gone")); return err }, fault.NotFound, "not installed", false},
		{"pull request where the App is not installed", func() error { return open(at("acme/gone"), "berth/run-1", "main", "t") }, fault.NotFound, "not installed", false},
		{"comment on no such repository", func() error { return comment(at("acme/nowhere"), forge.ThreadIssue, 1, "b") }, fault.NotFound, "not installed", false},
		{"review where the App is not installed", func() error { _, err := g.Review(t.Context(), at("acme/gone"), 1, "b"); return err }, fault.NotFound, "not installed", false},
		{"comment on no such issue", func() error { return comment(app, forge.ThreadIssue, 9, "b") }, fault.NotFound, "no issue or pull request #9", true},
		{"review of an issue", func() error { _, err := g.Review(t.Context(), app, issue, "b"); return err }, fault.NotFound, "no pull request #1", true},
		{"pull request from a branch GitHub lacks", func() error { return open(app, "berth/nowhere", "main", "t") }, nil, "422", true},
		{"pull request into a branch GitHub lacks", func() error { return open(app, "berth/run-1", "nowhere", "t") }, nil, "422", true},
		{"pull request from a branch into itself", func() error { return open(app, "main", "main", "t") }, fault.Invalid, "head branch itself", false},
		{"pull request without a title", func() error { return open(app, "berth/run-1", "main", " ") }, fault.Invalid, "title", false},
		{"pull request into a name git refuses", func() error { return open(app, "berth/run-1", "main..x", "t") }, fault.Invalid, "base", false},
		{"empty comment", func() error { return comment(app, forge.ThreadIssue, issue, "\n") }, fault.Invalid, "body", false},
		{"comment on neither issue nor change", func() error { return comment(app, "commit", 1, "b") }, fault.Invalid, "thread", false},
		{"comment on #0", func() error { return comment(app, forge.ThreadIssue, 0, "b") }, fault.Invalid, "thread", false},
		{"review of #-1", func() error { _, err := g.Review(t.Context(), app, -1, "b"); return err }, fault.Invalid, "thread", false},
		{"another host", func() error {
			return comment(forge.Repo{Host: "gitlab.com", Path: "acme/app"}, forge.ThreadIssue, 1, "b")
		}, forge.ErrOtherHost, "", false},
		{"three path elements", func() error { return open(at("acme/sub/app"), "berth/run-1", "main", "t") }, forge.ErrBadAddress, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(stand.Minted())
			err := tt.call()
			if err == nil {
				t.Fatalf("= nil, want an error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("= %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("= %v, want it to say %q", err, tt.wantMsg)
			}
			if msg := err.Error(); strings.Contains(msg, "ghs_") || strings.Contains(msg, "eyJ") {
				t.Errorf("= %v: the error shows a credential", err)
			}
			if minted := len(stand.Minted()) > before; minted != tt.mints {
				t.Errorf("a token minted: %v, want %v", minted, tt.mints)
			}
		})
	}
	if n := len(stand.Pulls("acme/app")); n != 0 {
		t.Errorf("GitHub has %d pull requests, want none", n)
	}
}
