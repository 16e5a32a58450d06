package entrypoint

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// configureGit sets the global author (~/.gitconfig) when the gateway gives
// one; it leaves the user's own setting alone otherwise.
func (r *starter) configureGit() error {
	settings := [][2]string{{"user.name", r.cfg.authorName}, {"user.email", r.cfg.authorEmail}}
	// git-credential-berth answers for the repository's own address only
	// (SPEC S9): configured for that URL, so git asks it for nothing else.
	if prefix, ok := credentialURL(r.cfg.repo); ok {
		helper, err := r.credentialHelper()
		if err != nil {
			return err
		}
		settings = append(settings, [2]string{"credential." + prefix + ".helper", helper})
	}
	for _, kv := range settings {
		if kv[1] == "" {
			continue
		}
		if err := r.env.Run(r.command("git", "config", "--global", kv[0], kv[1])); err != nil {
			return fmt.Errorf("git config --global %s: %w", kv[0], err)
		}
	}
	return r.seedTokenCache()
}

// credentialHelper is how git's configuration names git-credential-berth:
// "berth", which git finds on PATH, in berth's own images; its path beside
// berth-init in a kelos image's pod, where berth-init is a guest in a
// directory of its own (the pod's init container copied both there) that
// no PATH of the image names.
func (r *starter) credentialHelper() (string, error) {
	if r.cfg.contract != contractKelos {
		return "berth", nil
	}
	self := r.self
	if !filepath.IsAbs(self) {
		var err error
		if self, err = os.Executable(); err != nil {
			return "", fmt.Errorf("find berth-init's own path for git-credential-berth: %w", err)
		}
	}
	helper := filepath.Join(filepath.Dir(self), credentialHelperName)
	if _, err := os.Stat(helper); err != nil {
		return "", fmt.Errorf("%s is not beside berth-init (%v): the pod's init container copies both", credentialHelperName, unwrapPath(err))
	}
	return helper, nil
}

// checkout clones BERTH_REPO into ~/<name>, shallow, at BERTH_BRANCH, unless
// that directory exists already (a resumed sandbox keeps its work).
func (r *starter) checkout() error {
	if r.cfg.repo == "" {
		return nil
	}
	if !cloneable(r.cfg.repo) {
		// A forge path such as acme/app names the repository but not where
		// to clone it from; until the gateway hands an address, there is
		// nothing to check out.
		r.logf("repository %s has no clone address; not checking it out", r.cfg.repo)
		return nil
	}
	name, err := repoDir(r.cfg.repo)
	if err != nil {
		return err
	}
	dir := filepath.Join(r.cfg.home, name)
	if _, err := os.Lstat(dir); err == nil {
		r.logf("checkout ~/%s exists; not cloning again", name)
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	args := []string{"clone", "--depth", "1"}
	if r.cfg.branch != "" {
		args = append(args, "--branch", r.cfg.branch)
	}
	args = append(args, "--", r.cfg.repo, dir)
	r.logf("cloning %s into ~/%s", redactURL(r.cfg.repo), name)
	cmd := r.command("git", args...)
	// Nobody can answer a prompt here: fail instead of waiting.
	cmd.Env = append(cmd.Env, "GIT_TERMINAL_PROMPT=0")
	if err := r.env.Run(cmd); err != nil {
		return fmt.Errorf("git clone: %w", err)
	}
	return nil
}

// repoDir is the directory name a clone of repo gets: its last path element
// without ".git", as git itself would choose for most addresses
// (https://host/group/app.git, git@host:group/app.git, /srv/app.git → app).
func repoDir(repo string) (string, error) {
	p := repo
	if u, err := url.Parse(repo); err == nil && strings.Contains(repo, "://") {
		p = u.Path
	} else if i := strings.Index(p, ":"); i > 0 && !strings.Contains(p[:i], "/") {
		p = p[i+1:] // scp-like host:path
	}
	p = strings.TrimRight(p, "/")
	name := strings.TrimSuffix(p[strings.LastIndex(p, "/")+1:], ".git")
	if name == "" || name == "." || name == ".." || strings.HasPrefix(name, "-") {
		return "", fmt.Errorf("cannot name a checkout directory after %q", redactURL(repo))
	}
	return name, nil
}

// redactURL drops the user information of a URL-style address, which may
// carry a token; other forms are returned as they are.
func redactURL(repo string) string {
	u, err := url.Parse(repo)
	if err != nil || !strings.Contains(repo, "://") || u.User == nil {
		return repo
	}
	u.User = nil
	return u.String()
}

// cloneable reports whether repo is an address git can clone from: a URL,
// an scp-like user@host:path, or an absolute path.
func cloneable(repo string) bool {
	if strings.Contains(repo, "://") || strings.HasPrefix(repo, "/") {
		return true
	}
	at, colon := strings.Index(repo, "@"), strings.Index(repo, ":")
	return at > 0 && colon > at
}
