package gitlab_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/forge/forgetest"
	"berth.dev/berth/internal/forge/gitlab"
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

// newReporter is a GitLab forge on a stand-in with group/sub/app, where
// branches berth/run-1 and berth/run-2 are pushed.
func newReporter(t *testing.T) (*gitlab.Forge, *forgetest.GitLab) {
	t.Helper()
	stand := forgetest.NewGitLab(t, adminToken, "group/sub/app")
	g, err := gitlab.New(gitlab.Config{URL: stand.URL(), Token: secret.New(adminToken)}, stand.Client(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	pushBranch(t, g, "group/sub/app", "berth/run-1")
	pushBranch(t, g, "group/sub/app", "berth/run-2")
	return g, stand
}

func TestGitLabReporter(t *testing.T) {
	g, stand := newReporter(t)
	repo := forge.Repo{Host: g.Host(), Path: "group/sub/app"}
	issue := stand.AddIssue("group/sub/app", "a bug", "it breaks")
	web := stand.URL() + "/group/sub/app"
	ctx := t.Context()

	if b, err := g.DefaultBranch(ctx, repo); err != nil || b != "main" {
		t.Errorf("DefaultBranch = %q, %v; want main", b, err)
	}

	long := strings.Repeat("a line of the run's log\n", 3000) // over forge.MaxReportBody
	c, err := g.OpenChange(ctx, repo, forge.ChangeRequest{Head: "berth/run-1", Base: "main", Title: "Fix the bug", Body: long})
	if err != nil {
		t.Fatalf("OpenChange = %v", err)
	}
	// Merge requests have iids of their own: the issue's #1 does not count.
	want := forge.Change{Number: 1, URL: web + "/-/merge_requests/1"}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("OpenChange (-want +got):\n%s", diff)
	}
	again, err := g.OpenChange(ctx, repo, forge.ChangeRequest{Head: "berth/run-1", Base: "main", Title: "Fix the bug, again"})
	if err != nil {
		t.Fatalf("OpenChange again = %v", err)
	}
	if want := (forge.Change{Number: 1, URL: want.URL, Existed: true}); again != want {
		t.Errorf("OpenChange again = %+v, want %+v", again, want)
	}
	longTitle := strings.Repeat("ü", 300)
	second, err := g.OpenChange(ctx, repo, forge.ChangeRequest{Head: "berth/run-2", Base: "main", Title: "Draft: " + longTitle})
	if err != nil || second.Number != 2 || second.Existed {
		t.Errorf("OpenChange(berth/run-2) = %+v, %v; want merge request !2", second, err)
	}
	mrs := stand.MergeRequests("group/sub/app")
	if len(mrs) != 2 {
		t.Fatalf("GitLab has %d merge requests, want 2", len(mrs))
	}
	wantMR := forgetest.GitLabMergeRequest{IID: 1, Source: "berth/run-1", Target: "main", Title: "Draft: Fix the bug", Description: forge.TrimBody(long), Draft: true, URL: want.URL}
	if diff := cmp.Diff(wantMR, mrs[0]); diff != "" {
		t.Errorf("merge request !1 (-want +got):\n%s", diff)
	}
	if title := mrs[1].Title; !mrs[1].Draft || utf8.RuneCountInString(title) != 255 || !strings.HasPrefix(title, "Draft: üü") || !strings.HasSuffix(title, "ü…") {
		t.Errorf("merge request !2's title = %q (%d characters), want one draft prefix, cut to GitLab's 255", title, utf8.RuneCountInString(title))
	}

	u, err := g.Comment(ctx, repo, forge.Thread{Kind: forge.ThreadIssue, Number: issue}, "Fixed in "+c.URL)
	if err != nil || !strings.HasPrefix(u, web+"/-/issues/1#note_") {
		t.Errorf("Comment(issue #1) = %q, %v; want the note's URL", u, err)
	}
	u, err = g.Comment(ctx, repo, forge.Thread{Kind: forge.ThreadChange, Number: c.Number}, long)
	if err != nil || !strings.HasPrefix(u, web+"/-/merge_requests/1#note_") {
		t.Errorf("Comment(merge request !1) = %q, %v; want the note's URL", u, err)
	}
	review, err := g.Review(ctx, repo, c.Number, "The run's summary")
	if err != nil || !strings.HasPrefix(review, web+"/-/merge_requests/1#note_") || review == u {
		t.Errorf("Review(!1) = %q, %v; want a new note's URL", review, err)
	}
	if got := stand.Notes("group/sub/app", forge.ThreadIssue, issue); !cmp.Equal(got, []string{"Fixed in " + c.URL}) {
		t.Errorf("notes on the issue = %q", got)
	}
	if got := stand.Notes("group/sub/app", forge.ThreadChange, 1); !cmp.Equal(got, []string{forge.TrimBody(long), "The run's summary"}) {
		t.Errorf("notes on the merge request: %d, want the comment (cut) and the review", len(got))
	}
	if n := len(stand.Minted()); n != 2 {
		t.Errorf("GitLab minted %d project access tokens, want only the pushes' 2: the reporter uses the deployment's token", n)
	}
}

func TestGitLabReporterRefuses(t *testing.T) {
	g, stand := newReporter(t)
	issue := stand.AddIssue("group/sub/app", "a bug", "it breaks")
	bad, err := gitlab.New(gitlab.Config{URL: stand.URL(), Token: secret.New("glpat-not-the-admin")}, stand.Client(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	at := func(path string) forge.Repo { return forge.Repo{Host: g.Host(), Path: path} }
	app := at("group/sub/app")
	open := func(f *gitlab.Forge, r forge.Repo, head, base, title string) error {
		_, err := f.OpenChange(t.Context(), r, forge.ChangeRequest{Head: head, Base: base, Title: title, Body: "b"})
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
	}{
		{"default branch of no such project", func() error { _, err := g.DefaultBranch(t.Context(), at("group/nowhere")); return err }, fault.NotFound, "no such project"},
		{"merge request in no such project", func() error { return open(g, at("group/nowhere"), "berth/run-1", "main", "t") }, fault.NotFound, "no such project"},
		{"comment in no such project", func() error { return comment(at("group/nowhere"), forge.ThreadIssue, 1, "b") }, fault.NotFound, "no such project"},
		{"review in no such project", func() error { _, err := g.Review(t.Context(), at("group/nowhere"), 1, "b"); return err }, fault.NotFound, "no such project"},
		{"comment on no such issue", func() error { return comment(app, forge.ThreadIssue, 7, "b") }, fault.NotFound, "no issue #7"},
		{"review of no such merge request", func() error { _, err := g.Review(t.Context(), app, 7, "b"); return err }, fault.NotFound, "no merge request #7"},
		{"merge request from a branch GitLab lacks", func() error { return open(g, app, "berth/nowhere", "main", "t") }, nil, "does not exist"},
		{"merge request into a branch GitLab lacks", func() error { return open(g, app, "berth/run-1", "nowhere", "t") }, fault.Invalid, `no branch "nowhere"`},
		{"merge request from a branch into itself", func() error { return open(g, app, "main", "main", "t") }, fault.Invalid, "head branch itself"},
		{"merge request without a title", func() error { return open(g, app, "berth/run-1", "main", "") }, fault.Invalid, "title"},
		{"empty comment", func() error { return comment(app, forge.ThreadIssue, issue, " ") }, fault.Invalid, "body"},
		{"comment on neither issue nor change", func() error { return comment(app, "epic", 1, "b") }, fault.Invalid, "thread"},
		{"wrong deployment token", func() error { return open(bad, app, "berth/run-1", "main", "t") }, nil, "401"},
		{"wrong deployment token, comment", func() error {
			_, err := bad.Comment(t.Context(), app, forge.Thread{Kind: forge.ThreadIssue, Number: issue}, "b")
			return err
		}, nil, "401"},
		{"another host", func() error {
			return comment(forge.Repo{Host: "github.com", Path: "group/sub/app"}, forge.ThreadIssue, 1, "b")
		}, forge.ErrOtherHost, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
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
			if strings.Contains(err.Error(), "glpat-") {
				t.Errorf("= %v: the error shows a token", err)
			}
		})
	}
	if n := len(stand.MergeRequests("group/sub/app")); n != 0 {
		t.Errorf("GitLab has %d merge requests, want none", n)
	}
	if n := len(stand.Notes("group/sub/app", forge.ThreadIssue, issue)); n != 0 {
		t.Errorf("the issue has %d notes, want none", n)
	}
}
