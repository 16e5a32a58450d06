package gitlab_test

import (
	"crypto/rand"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/forge/forgetest"
	"berth.dev/berth/internal/forge/gitlab"
	"berth.dev/berth/internal/secret"
	"github.com/google/go-cmp/cmp"
)

var _ forge.Forge = (*gitlab.Forge)(nil)

const adminToken = "glpat-deployment-admin-0123456789"

func TestGitLabHostAndCloneURL(t *testing.T) {
	tests := []struct {
		url, wantHost, wantClone string
	}{
		{"", "gitlab.com", "https://gitlab.com/group/sub/app.git"},
		{"https://gitlab.example.com/", "gitlab.example.com", "https://gitlab.example.com/group/sub/app.git"},
		{"https://GitLab.example.com:443", "gitlab.example.com", "https://gitlab.example.com/group/sub/app.git"},
		{"https://gitlab.example.com:8443", "gitlab.example.com:8443", "https://gitlab.example.com:8443/group/sub/app.git"},
		{"https://example.com/gitlab", "example.com", "https://example.com/gitlab/group/sub/app.git"},
		{"http://127.0.0.1:8080", "127.0.0.1:8080", "http://127.0.0.1:8080/group/sub/app.git"},
	}
	for _, tt := range tests {
		g, err := gitlab.New(gitlab.Config{URL: tt.url, Token: secret.New(adminToken)}, http.DefaultClient, time.Now)
		if err != nil {
			t.Fatalf("NewGitLab(URL %q): %v", tt.url, err)
		}
		if got := g.Host(); got != tt.wantHost {
			t.Errorf("NewGitLab(URL %q).Host() = %q, want %q", tt.url, got, tt.wantHost)
		}
		if got := g.CloneURL(forge.Repo{Host: g.Host(), Path: "group/sub/app"}); got != tt.wantClone {
			t.Errorf("NewGitLab(URL %q).CloneURL(group/sub/app) = %q, want %q", tt.url, got, tt.wantClone)
		}
	}
}

func TestNewGitLabRefuses(t *testing.T) {
	tests := []struct {
		name string
		cfg  gitlab.Config
		want string // in the error
	}{
		{"no token", gitlab.Config{}, "token"},
		{"blank token file", gitlab.Config{Token: secret.New(" \n")}, "token"},
		{"two lines", gitlab.Config{Token: secret.New("glpat-one\nglpat-two\n")}, "token"},
		{"ftp URL", gitlab.Config{URL: "ftp://gitlab.example.com", Token: secret.New(adminToken)}, "URL"},
		{"URL with a password", gitlab.Config{URL: "https://root:hunter2@gitlab.example.com", Token: secret.New(adminToken)}, "URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := gitlab.New(tt.cfg, http.DefaultClient, time.Now)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewGitLab = %v, want an error naming %q", err, tt.want)
			}
			if msg := err.Error(); strings.Contains(msg, "glpat-") || strings.Contains(msg, "hunter2") {
				t.Errorf("NewGitLab = %v: the error shows a credential", err)
			}
		})
	}
}

func TestGitLabTrimsToken(t *testing.T) {
	stand := forgetest.NewGitLab(t, adminToken, "group/app")
	g, err := gitlab.New(gitlab.Config{URL: stand.URL(), Token: secret.New("  " + adminToken + "\n")}, stand.Client(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Token(t.Context(), forge.Repo{Host: g.Host(), Path: "group/app"}, time.Now().Add(time.Hour)); err != nil {
		t.Errorf("Token with the token file's line end trimmed = %v, want a token", err)
	}
}

func TestGitLabToken(t *testing.T) {
	stand := forgetest.NewGitLab(t, adminToken, "group/app", "group/sub/app")
	now := time.Now()
	y, m, d := now.UTC().Date()
	day := time.Date(y, m, d+3, 0, 0, 0, 0, time.UTC) // a day in the sandbox's future
	midnight := func(days int) time.Time { return day.AddDate(0, 0, days) }

	tests := []struct {
		name       string
		admin      string
		repo       string
		until      time.Time
		wantExpiry time.Time // the midnight UTC the token ends at
		wantErr    error
		wantMsg    string // in the error
	}{
		{name: "afternoon", repo: "group/app", until: day.Add(17 * time.Hour), wantExpiry: midnight(1)},
		{name: "last second of the day", repo: "group/app", until: day.Add(24*time.Hour - time.Second), wantExpiry: midnight(1)},
		{name: "at midnight", repo: "group/app", until: midnight(1), wantExpiry: midnight(2)},
		{name: "evening west of UTC is the next UTC day", repo: "group/app", until: time.Date(y, m, d+3, 20, 0, 0, 0, time.FixedZone("EST", -5*3600)), wantExpiry: midnight(2)},
		{name: "within the hour", repo: "group/app", until: now.Add(time.Hour), wantExpiry: midnightAfter(now.Add(time.Hour))},
		{name: "nested group", repo: "group/sub/app", until: day.Add(12 * time.Hour), wantExpiry: midnight(1)},
		{name: "no such project", repo: "group/nowhere", until: day, wantErr: fault.NotFound, wantMsg: "404"},
		{name: "wrong deployment token", admin: "glpat-not-the-admin", repo: "group/app", until: day, wantMsg: "401"},
		{name: "sandbox already ended", repo: "group/app", until: now.Add(-time.Minute), wantMsg: "past"},
		{name: "beyond GitLab's year", repo: "group/app", until: now.AddDate(2, 0, 0), wantMsg: "expires_at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := gitlab.Config{URL: stand.URL(), Token: secret.New(adminToken)}
			if tt.admin != "" {
				cfg.Token = secret.New(tt.admin)
			}
			g, err := gitlab.New(cfg, stand.Client(), func() time.Time { return now })
			if err != nil {
				t.Fatal(err)
			}
			before := len(stand.Minted())
			tok, err := g.Token(t.Context(), forge.Repo{Host: g.Host(), Path: tt.repo}, tt.until)

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
				if msg := err.Error(); strings.Contains(msg, "glpat-") {
					t.Errorf("Token(%s) = %v: the error shows a token", tt.repo, err)
				}
				if got := len(stand.Minted()); got != before {
					t.Errorf("the stand-in minted %d tokens, want none", got-before)
				}
				return
			}

			if err != nil {
				t.Fatalf("Token(%s, until %s) = %v", tt.repo, tt.until, err)
			}
			minted := stand.Minted()
			if len(minted) != before+1 {
				t.Fatalf("the stand-in minted %d tokens, want 1", len(minted)-before)
			}
			m := minted[len(minted)-1]
			wantTok := forge.Token{
				ID:        strings.ReplaceAll(tt.repo, "/", "%2F") + "/" + strconv.FormatInt(m.ID, 10),
				Username:  "oauth2",
				Secret:    secret.New(m.Token),
				ExpiresAt: tt.wantExpiry,
			}
			if diff := cmp.Diff(wantTok, tok); diff != "" {
				t.Errorf("Token(%s, until %s) (-want +got):\n%s", tt.repo, tt.until, diff)
			}
			if tok.Secret.Reveal() != m.Token {
				t.Errorf("Token(%s).Secret is not the token minted", tt.repo)
			}
			wantMinted := forgetest.GitLabToken{
				ID:          m.ID,
				Project:     tt.repo,
				Name:        m.Name,
				Scopes:      []string{"read_repository", "write_repository"},
				AccessLevel: 30,
				ExpiresAt:   tt.wantExpiry.Format(time.DateOnly),
				Token:       m.Token,
			}
			if diff := cmp.Diff(wantMinted, m); diff != "" {
				t.Errorf("minted (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(m.Name, "berth ") {
				t.Errorf("token name %q, want it to start with berth", m.Name)
			}
		})
	}
}

// midnightAfter is the midnight UTC that ends t's UTC day.
func midnightAfter(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

func TestGitLabTokenOtherHost(t *testing.T) {
	g, err := gitlab.New(gitlab.Config{Token: secret.New(adminToken)}, http.DefaultClient, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Token(t.Context(), forge.Repo{Host: "github.com", Path: "group/app"}, time.Now().Add(time.Hour))
	if !errors.Is(err, forge.ErrOtherHost) {
		t.Errorf("Token(github.com/group/app) = %v, want ErrOtherHost", err)
	}
}

func TestGitLabRevoke(t *testing.T) {
	stand := forgetest.NewGitLab(t, adminToken, "group/sub/app")
	g, err := gitlab.New(gitlab.Config{URL: stand.URL(), Token: secret.New(adminToken)}, stand.Client(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	repo := forge.Repo{Host: g.Host(), Path: "group/sub/app"}
	tok := forgetest.Mint(t, g, repo.Path)
	if _, err := forgetest.Git(t, "", "ls-remote", forgetest.WithAuth(t, g.CloneURL(repo), tok.Username, tok.Secret.Reveal())); err != nil {
		t.Fatalf("before Revoke: %v", err)
	}

	if err := g.Revoke(t.Context(), tok); err != nil {
		t.Fatalf("Revoke(%s) = %v", tok.ID, err)
	}
	revoked := stand.Revoked()
	if len(revoked) != 1 || revoked[0].Token != tok.Secret.Reveal() {
		t.Fatalf("the stand-in revoked %d tokens, want the one minted", len(revoked))
	}
	forgetest.CheckRefused(t, g.CloneURL(repo), tok.Username, tok.Secret.Reveal())
	if err := g.Revoke(t.Context(), tok); err != nil {
		t.Errorf("Revoke(%s) again = %v, want nil: a token gone is revoked", tok.ID, err)
	}
	if err := g.Revoke(t.Context(), forge.Token{}); err != nil {
		t.Errorf("Revoke(a token without ID) = %v, want nil", err)
	}

	for _, id := range []string{"42", "group%2Fsub%2Fapp/x", "group%2Fsub%2Fapp/-1", "group/sub/app/1", "..%2Fetc/1", "/1"} {
		if err := g.Revoke(t.Context(), forge.Token{ID: id}); err == nil {
			t.Errorf("Revoke(ID %q) = nil, want an error: not a token id Token makes", id)
		}
	}

	bad, err := gitlab.New(gitlab.Config{URL: stand.URL(), Token: secret.New("glpat-not-the-admin")}, stand.Client(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	err = bad.Revoke(t.Context(), forgetest.Mint(t, g, repo.Path))
	if err == nil || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "glpat-") {
		t.Errorf("Revoke with a wrong deployment token = %v, want a 401 that shows no token", err)
	}
}

func TestGitLabGit(t *testing.T) {
	stand := forgetest.NewGitLab(t, adminToken, "group/sub/app", "group/other")
	g, err := gitlab.New(gitlab.Config{URL: stand.URL(), Token: secret.New(adminToken)}, stand.Client(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	tok, other, expired := forgetest.Mint(t, g, "group/sub/app"), forgetest.Mint(t, g, "group/other"), forgetest.Mint(t, g, "group/sub/app")
	stand.Expire(expired.Secret.Reveal())
	forgetest.CheckGit(t, g, "group/sub/app", stand.CloneURL("group/sub/app"), stand.BarePath("group/sub/app"), tok, []forgetest.Refusal{
		{Name: "a wrong token", User: "oauth2", Password: "glpat-00000000000000000000"},
		{Name: "the deployment's own token", User: "oauth2", Password: adminToken},
		{Name: "another username", User: "x-access-token", Password: tok.Secret.Reveal()},
		{Name: "another project's token", User: "oauth2", Password: other.Secret.Reveal()},
		{Name: "an expired token", User: "oauth2", Password: expired.Secret.Reveal()},
	})
}

// A push bigger than git's post buffer (1 MiB) goes as a chunked request
// body, which the stand-in must take as GitLab does.
func TestGitLabGitLargePush(t *testing.T) {
	stand := forgetest.NewGitLab(t, adminToken, "group/app")
	g, err := gitlab.New(gitlab.Config{URL: stand.URL(), Token: secret.New(adminToken)}, stand.Client(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	tok := forgetest.Mint(t, g, "group/app")
	work := filepath.Join(t.TempDir(), "work")
	remote := forgetest.WithAuth(t, g.CloneURL(forge.Repo{Host: g.Host(), Path: "group/app"}), tok.Username, tok.Secret.Reveal())
	if _, err := forgetest.Git(t, "", "clone", "--quiet", remote, work); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 3<<20) // random, so that it does not compress below the buffer
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "big.bin"}, {"commit", "--quiet", "-m", "big"}, {"push", "--quiet", "origin", "HEAD:refs/heads/big"}} {
		if _, err := forgetest.Git(t, work, args...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := forgetest.Git(t, "", "--git-dir="+stand.BarePath("group/app"), "cat-file", "-e", "refs/heads/big:big.bin"); err != nil {
		t.Errorf("the bare repository lacks the pushed file: %v", err)
	}
}
