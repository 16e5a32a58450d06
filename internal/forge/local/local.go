// Package local is the single-host forge (SPEC S9, ours): a directory of
// bare repositories on the gateway's host, served over git smart HTTP by
// the gateway itself, with tokens of its own (their hashes kept by the
// store, like berth's keys).
package local

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

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/secret"
)

// Tokens keeps the tokens the local forge mints: only their hashes, like
// berth's own keys.
type Tokens interface {
	PutForgeToken(ctx context.Context, t StoredToken) error
	// GetForgeToken is fault.NotFound for an unknown id.
	GetForgeToken(ctx context.Context, id string) (StoredToken, error)
	RevokeForgeToken(ctx context.Context, id string, at time.Time) error
}

// StoredToken is a local forge token as stored.
type StoredToken struct {
	ID        string
	Repo      string // the repository's path
	Hash      []byte
	ExpiresAt time.Time
	RevokedAt time.Time
}

// tokenTTL is how long a local forge token lasts, as GitHub's do.
const tokenTTL = time.Hour

// tokenPrefix starts every local forge token.
const tokenPrefix = "berthgit_"

// Forge is the local forge: its bare repositories, served by the gateway
// at BaseURL/forge/<path>.git. It mints its own short-lived tokens, scoped
// to one repository, for sandboxes in token mode.
type Forge struct {
	dir     string
	baseURL string
	tokens  Tokens
	now     func() time.Time
}

var _ forge.Forge = (*Forge)(nil)

// New returns the local forge over dir, reachable by sandboxes at baseURL
// (the gateway's address as a sandbox reaches it).
func New(dir, baseURL string, tokens Tokens, now func() time.Time) *Forge {
	return &Forge{dir: dir, baseURL: strings.TrimSuffix(baseURL, "/"), tokens: tokens, now: now}
}

// Kind is "local".
func (l *Forge) Kind() string { return "local" }

// Host is "": local repositories are named by their path alone.
func (l *Forge) Host() string { return "" }

// Dir is the directory of bare repositories.
func (l *Forge) Dir() string { return l.dir }

// CloneURL is where the gateway serves the repository to forge tokens.
func (l *Forge) CloneURL(r forge.Repo) string { return l.baseURL + "/forge/" + r.Path + ".git" }

// Path is the bare repository's directory, or fault.NotFound.
func (l *Forge) Path(r forge.Repo) (string, error) {
	if err := forge.CheckPath(r.Path); err != nil {
		return "", err
	}
	p := filepath.Join(l.dir, filepath.FromSlash(r.Path)+".git")
	if fi, err := os.Stat(filepath.Join(p, "HEAD")); err != nil || !fi.Mode().IsRegular() {
		return "", fault.Errorf(fault.NotFound, "repository %s: no such repository", r.Path)
	}
	return p, nil
}

// Token mints a token for r that lasts an hour.
func (l *Forge) Token(ctx context.Context, r forge.Repo, _ time.Time) (forge.Token, error) {
	if _, err := l.Path(r); err != nil {
		return forge.Token{}, err
	}
	id := strings.ToLower(rand.Text()[:16])
	value := rand.Text()
	t := StoredToken{ID: id, Repo: r.Path, Hash: hashToken(value), ExpiresAt: l.now().Add(tokenTTL)}
	if err := l.tokens.PutForgeToken(ctx, t); err != nil {
		return forge.Token{}, fmt.Errorf("local forge: %w", err)
	}
	return forge.Token{ID: id, Username: "berth", Secret: secret.New(tokenPrefix + id + "_" + value), ExpiresAt: t.ExpiresAt}, nil
}

// Revoke ends a local token at once.
func (l *Forge) Revoke(ctx context.Context, t forge.Token) error {
	if t.ID == "" {
		return nil
	}
	if err := l.tokens.RevokeForgeToken(ctx, t.ID, l.now()); err != nil && !errors.Is(err, fault.NotFound) {
		return fmt.Errorf("local forge: %w", err)
	}
	return nil
}

// Check reports whether secret is a live token for the repository at path.
func (l *Forge) Check(ctx context.Context, secret, path string) bool {
	rest, ok := strings.CutPrefix(secret, tokenPrefix)
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
func (l *Forge) Import(ctx context.Context, name, src string) (string, error) {
	r := forge.Repo{Path: name}
	if err := forge.CheckPath(name); err != nil {
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

// Repo describes one repository of the local forge.
type Repo struct {
	Name          string `json:"name"`
	Path          string `json:"path"`
	DefaultBranch string `json:"default_branch"`
}

// List returns the forge's repositories, by name.
func (l *Forge) List() ([]Repo, error) {
	var out []Repo
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
		if _, err := l.Path(forge.Repo{Path: name}); err == nil {
			out = append(out, Repo{Name: name, Path: p, DefaultBranch: forge.DefaultBranch(p)})
		}
		return fs.SkipDir
	})
	return out, err
}
