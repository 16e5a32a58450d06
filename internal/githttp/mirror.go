package githttp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"berth.dev/berth/internal/forge"
)

// Mirrors keeps a bare mirror of each remote-forge repository the gateway
// serves (SPEC S17): clones come from the mirror (fast, and free for the
// forge), and pushes go into the mirror and then, with the deployment's
// forge credential, to the forge. The credential never reaches a sandbox,
// nor git's argv: it travels in git's environment as an HTTP header.
type Mirrors struct {
	dir    string
	forge  forge.Forge
	git    string
	fresh  time.Duration
	now    func() time.Time
	mu     sync.Mutex
	repos  map[string]*mirror
	exec   func(ctx context.Context, dir string, env []string, args ...string) (string, error)
	logErr func(ctx context.Context, msg string, err error)
}

type mirror struct {
	mu      sync.Mutex
	fetched time.Time
}

// NewMirrors keeps mirrors of f's repositories under dir, fetching one at
// most every fresh (0: 10 seconds).
func NewMirrors(dir string, f forge.Forge, fresh time.Duration, now func() time.Time) *Mirrors {
	if fresh == 0 {
		fresh = 10 * time.Second
	}
	git := "git"
	if p, err := exec.LookPath(git); err == nil {
		git = p
	}
	m := &Mirrors{dir: dir, forge: f, git: git, fresh: fresh, now: now, repos: map[string]*mirror{}}
	m.exec = m.runGit
	return m
}

func (m *Mirrors) mirrorOf(r forge.Repo) *mirror {
	m.mu.Lock()
	defer m.mu.Unlock()
	mr, ok := m.repos[r.String()]
	if !ok {
		mr = &mirror{}
		m.repos[r.String()] = mr
	}
	return mr
}

// path is where r's mirror lives.
func (m *Mirrors) path(r forge.Repo) string {
	host := strings.NewReplacer(":", "_", "/", "_").Replace(r.Host)
	return filepath.Join(m.dir, host, filepath.FromSlash(r.Path)+".git")
}

// Sync makes r's mirror exist and fetches it when it is older than the
// freshness window, then returns its directory.
func (m *Mirrors) Sync(ctx context.Context, r forge.Repo) (string, error) {
	mr := m.mirrorOf(r)
	mr.mu.Lock()
	defer mr.mu.Unlock()
	dir := m.path(r)
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		if _, err := m.exec(ctx, dir, nil, "init", "--quiet", "--bare"); err != nil {
			return "", err
		}
		for _, kv := range [][]string{
			{"remote.origin.url", m.forge.CloneURL(r)},
			{"remote.origin.fetch", "+refs/heads/*:refs/heads/*"},
		} {
			if _, err := m.exec(ctx, dir, nil, "config", kv[0], kv[1]); err != nil {
				return "", err
			}
		}
		if _, err := m.exec(ctx, dir, nil, "config", "--add", "remote.origin.fetch", "+refs/tags/*:refs/tags/*"); err != nil {
			return "", err
		}
	} else if m.now().Sub(mr.fetched) < m.fresh {
		return dir, nil
	}
	env, err := m.credential(ctx, r)
	if err != nil {
		return "", err
	}
	if _, err := m.exec(ctx, dir, env, "fetch", "--quiet", "--prune", "origin"); err != nil {
		return "", fmt.Errorf("fetch %s from the forge: %w", r, err)
	}
	// Follow the forge's default branch.
	if out, err := m.exec(ctx, dir, env, "ls-remote", "--symref", "origin", "HEAD"); err == nil {
		if ref, ok := headRef(out); ok {
			_, _ = m.exec(ctx, dir, nil, "symbolic-ref", "HEAD", ref)
		}
	}
	mr.fetched = m.now()
	return dir, nil
}

// headRef reads "ref: refs/heads/main\tHEAD" from ls-remote --symref.
func headRef(out string) (string, bool) {
	for line := range strings.Lines(out) {
		if rest, ok := strings.CutPrefix(line, "ref: "); ok {
			ref, _, _ := strings.Cut(rest, "\t")
			return strings.TrimSpace(ref), strings.HasPrefix(ref, "refs/heads/")
		}
	}
	return "", false
}

// Push sends what a push did to the mirror on to the forge. Should the forge
// refuse, the mirror's refs are put back and the error says why.
func (m *Mirrors) Push(ctx context.Context, r forge.Repo, done []forge.RefUpdate) error {
	mr := m.mirrorOf(r)
	mr.mu.Lock()
	defer mr.mu.Unlock()
	dir := m.path(r)
	env, err := m.credential(ctx, r)
	if err != nil {
		return m.undo(ctx, dir, done, err)
	}
	args := []string{"push", "--quiet", "--porcelain", "origin"}
	for _, u := range done {
		if u.IsDelete() {
			args = append(args, ":"+u.Ref)
		} else {
			args = append(args, "+"+u.New+":"+u.Ref)
		}
	}
	if _, err := m.exec(ctx, dir, env, args...); err != nil {
		return m.undo(ctx, dir, done, fmt.Errorf("the forge refused the push: %w", err))
	}
	return nil
}

// undo puts the mirror's refs back as they were before a push.
func (m *Mirrors) undo(ctx context.Context, dir string, done []forge.RefUpdate, cause error) error {
	for _, u := range done {
		var err error
		if u.IsCreate() {
			_, err = m.exec(ctx, dir, nil, "update-ref", "-d", u.Ref)
		} else {
			_, err = m.exec(ctx, dir, nil, "update-ref", u.Ref, u.Old)
		}
		if err != nil && m.logErr != nil {
			m.logErr(ctx, "could not undo a mirror's ref", err)
		}
	}
	return cause
}

// credential is git's environment carrying a forge token for r as an
// Authorization header: not in argv, not in the mirror's config.
func (m *Mirrors) credential(ctx context.Context, r forge.Repo) ([]string, error) {
	t, err := m.forge.Token(ctx, r, m.now().Add(10*time.Minute))
	if err != nil {
		return nil, fmt.Errorf("a token for %s: %w", r, err)
	}
	basic := base64.StdEncoding.EncodeToString([]byte(t.Username + ":" + t.Secret.Reveal()))
	return []string{
		"GIT_CONFIG_COUNT=1",
		"GIT_CONFIG_KEY_0=http.extraHeader",
		"GIT_CONFIG_VALUE_0=Authorization: Basic " + basic,
	}, nil
}

// runGit runs git in dir with no machine or user configuration and no
// prompt; stderr becomes the error.
func (m *Mirrors) runGit(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, m.git, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"}, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
