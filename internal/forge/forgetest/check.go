package forgetest

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/forge"
)

// This file is what a forge's tests check with real git against its
// stand-in: that what the forge minted clones and pushes, and that what it
// should refuse is refused.

// WithAuth is cloneURL with user and password in it, as git takes them.
func WithAuth(t testing.TB, cloneURL, user, password string) string {
	t.Helper()
	u, err := url.Parse(cloneURL)
	if err != nil {
		t.Fatalf("url.Parse(%q): %v", cloneURL, err)
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

// cloneAndPush clones cloneURL as user:password with real git, commits,
// pushes the branch berth/test, and checks the bare repository has the
// commit.
func cloneAndPush(t *testing.T, cloneURL, user, password, bare string) {
	t.Helper()
	work := filepath.Join(t.TempDir(), "work")
	if _, err := Git(t, "", "clone", "--quiet", WithAuth(t, cloneURL, user, password), work); err != nil {
		t.Fatalf("clone with the minted token: %v", err)
	}
	if _, err := os.Stat(filepath.Join(work, "README.md")); err != nil {
		t.Fatalf("the clone has no README.md: %v", err)
	}
	if err := os.WriteFile(filepath.Join(work, "change.txt"), []byte("a change\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"add", "change.txt"},
		{"commit", "--quiet", "-m", "a change"},
		{"push", "--quiet", "origin", "HEAD:refs/heads/berth/test"},
	} {
		if _, err := Git(t, work, args...); err != nil {
			t.Fatalf("with the minted token: %v", err)
		}
	}
	want, err := Git(t, work, "rev-parse", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Git(t, "", "--git-dir="+bare, "rev-parse", "refs/heads/berth/test")
	if err != nil {
		t.Fatalf("the pushed branch is not in the bare repository: %v", err)
	}
	if strings.TrimSpace(got) != strings.TrimSpace(want) {
		t.Errorf("bare repository's berth/test = %s, want the pushed %s", got, want)
	}
}

// CheckRefused checks that git cannot reach cloneURL as user:password.
func CheckRefused(t *testing.T, cloneURL, user, password string) {
	t.Helper()
	out, err := Git(t, "", "ls-remote", WithAuth(t, cloneURL, user, password))
	if err == nil {
		t.Fatalf("git ls-remote as %s succeeded, want it refused:\n%s", user, out)
	}
	if !strings.Contains(out, "Authentication failed") {
		t.Errorf("git ls-remote as %s: %s, want an authentication failure", user, out)
	}
}

// Mint mints f's token for path, to last an hour.
func Mint(t testing.TB, f forge.Forge, path string) forge.Token {
	t.Helper()
	tok, err := f.Token(t.Context(), forge.Repo{Host: f.Host(), Path: path}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatalf("Token(%s): %v", path, err)
	}
	return tok
}

// Refusal is a credential git must be refused with.
type Refusal struct{ Name, User, Password string }

// CheckGit checks with real git that f's clone URL of path is wantURL (the
// stand-in's, bare its repository), that tok clones and pushes there, and
// that each of refusals is refused.
func CheckGit(t *testing.T, f forge.Forge, path, wantURL, bare string, tok forge.Token, refusals []Refusal) {
	t.Helper()
	cloneURL := f.CloneURL(forge.Repo{Host: f.Host(), Path: path})
	if cloneURL != wantURL {
		t.Fatalf("CloneURL(%s) = %q, want the stand-in's %q", path, cloneURL, wantURL)
	}
	t.Run("clone and push with the minted token", func(t *testing.T) {
		cloneAndPush(t, cloneURL, tok.Username, tok.Secret.Reveal(), bare)
	})
	for _, tt := range refusals {
		t.Run(tt.Name, func(t *testing.T) {
			CheckRefused(t, cloneURL, tt.User, tt.Password)
		})
	}
}
