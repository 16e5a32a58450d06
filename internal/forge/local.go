package forge

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"berth.dev/berth/internal/secret"
)

// LocalTokens keeps the tokens the local forge mints: only their hashes,
// like berth's own keys.
type LocalTokens interface {
	PutForgeToken(ctx context.Context, t LocalToken) error
	// GetForgeToken is ErrNotFound for an unknown id.
	GetForgeToken(ctx context.Context, id string) (LocalToken, error)
	RevokeForgeToken(ctx context.Context, id string, at time.Time) error
}

// LocalToken is a local forge token as stored.
type LocalToken struct {
	ID        string
	Repo      string // the repository's path
	Hash      []byte
	ExpiresAt time.Time
	RevokedAt time.Time
}

// localTokenTTL is how long a local forge token lasts, as GitHub's do.
const localTokenTTL = time.Hour

// localTokenPrefix starts every local forge token.
const localTokenPrefix = "berthgit_"

// Local is the single-host forge (SPEC S9, ours): a directory of bare
// repositories on the gateway's host, served over git smart HTTP by the
// gateway itself at BaseURL/forge/<path>.git. It mints its own short-lived
// tokens, scoped to one repository, for sandboxes in token mode.
type Local struct {
	dir     string
	baseURL string
	tokens  LocalTokens
	now     func() time.Time
}

var _ Forge = (*Local)(nil)

// NewLocal returns the local forge over dir, reachable by sandboxes at
// baseURL (the gateway's address as a sandbox reaches it).
func NewLocal(dir, baseURL string, tokens LocalTokens, now func() time.Time) *Local {
	return &Local{dir: dir, baseURL: strings.TrimSuffix(baseURL, "/"), tokens: tokens, now: now}
}

// Kind is "local".
func (l *Local) Kind() string { return "local" }

// Host is "": local repositories are named by their path alone.
func (l *Local) Host() string { return "" }

// Dir is the directory of bare repositories.
func (l *Local) Dir() string { return l.dir }

// CloneURL is where the gateway serves the repository to forge tokens.
func (l *Local) CloneURL(r Repo) string { return l.baseURL + "/forge/" + r.Path + ".git" }

// Path is the bare repository's directory, or ErrNotFound.
func (l *Local) Path(r Repo) (string, error) {
	if err := CheckPath(r.Path); err != nil {
		return "", err
	}
	p := filepath.Join(l.dir, filepath.FromSlash(r.Path)+".git")
	if fi, err := os.Stat(filepath.Join(p, "HEAD")); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("repository %s: %w", r.Path, ErrNotFound)
	}
	return p, nil
}

// Token mints a token for r that lasts an hour.
func (l *Local) Token(ctx context.Context, r Repo, _ time.Time) (Token, error) {
	if _, err := l.Path(r); err != nil {
		return Token{}, err
	}
	id := strings.ToLower(rand.Text()[:16])
	value := rand.Text()
	t := LocalToken{ID: id, Repo: r.Path, Hash: hashToken(value), ExpiresAt: l.now().Add(localTokenTTL)}
	if err := l.tokens.PutForgeToken(ctx, t); err != nil {
		return Token{}, fmt.Errorf("local forge: %w", err)
	}
	return Token{ID: id, Username: "berth", Secret: secret.New(localTokenPrefix + id + "_" + value), ExpiresAt: t.ExpiresAt}, nil
}

// Revoke ends a local token at once.
func (l *Local) Revoke(ctx context.Context, t Token) error {
	if t.ID == "" {
		return nil
	}
	if err := l.tokens.RevokeForgeToken(ctx, t.ID, l.now()); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("local forge: %w", err)
	}
	return nil
}

// Check reports whether secret is a live token for the repository at path.
func (l *Local) Check(ctx context.Context, secret, path string) bool {
	rest, ok := strings.CutPrefix(secret, localTokenPrefix)
	if !ok {
		return false
	}
	id, s, ok := strings.Cut(rest, "_")
	if !ok {
		return false
	}
	t, err := l.tokens.GetForgeToken(ctx, id)
	if err != nil || !t.RevokedAt.IsZero() || !l.now().Before(t.ExpiresAt) || t.Repo != path {
		return false
	}
	return bytes.Equal(t.Hash, hashToken(s))
}

func hashToken(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// Import makes the bare repository name from the git repository at src
// (a working tree or a bare repository): all its branches and tags.
func (l *Local) Import(ctx context.Context, name, src string) (string, error) {
	r := Repo{Path: name}
	if err := CheckPath(name); err != nil {
		return "", err
	}
	dst := filepath.Join(l.dir, filepath.FromSlash(name)+".git")
	if _, err := os.Stat(dst); err == nil {
		return "", fmt.Errorf("repository %s exists already (%s)", name, dst)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	if out, err := exec.CommandContext(ctx, "git", "clone", "--bare", "--quiet", "--", src, dst).CombinedOutput(); err != nil {
		os.RemoveAll(dst)
		return "", fmt.Errorf("import %s from %s: %v: %s", r.Path, src, err, strings.TrimSpace(string(out)))
	}
	// The import's origin is the importer's disk: leave no trace of it.
	_ = exec.CommandContext(ctx, "git", "-C", dst, "remote", "remove", "origin").Run()
	return dst, nil
}

// LocalRepo describes one repository of the local forge.
type LocalRepo struct {
	Name          string `json:"name"`
	Path          string `json:"path"`
	DefaultBranch string `json:"default_branch"`
}

// List returns the forge's repositories, by name.
func (l *Local) List() ([]LocalRepo, error) {
	var out []LocalRepo
	err := filepath.WalkDir(l.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == l.dir {
				return fs.SkipAll
			}
			return err
		}
		if !d.IsDir() || !strings.HasSuffix(p, ".git") {
			return nil
		}
		rel, _ := filepath.Rel(l.dir, p)
		name := strings.TrimSuffix(filepath.ToSlash(rel), ".git")
		if _, err := l.Path(Repo{Path: name}); err == nil {
			out = append(out, LocalRepo{Name: name, Path: p, DefaultBranch: DefaultBranch(p)})
		}
		return fs.SkipDir
	})
	return out, err
}

// DefaultBranch is the branch a bare repository's HEAD names, such as main.
func DefaultBranch(bare string) string {
	b, err := os.ReadFile(filepath.Join(bare, "HEAD"))
	if err != nil {
		return ""
	}
	ref, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "ref: refs/heads/")
	if !ok {
		return ""
	}
	return ref
}
