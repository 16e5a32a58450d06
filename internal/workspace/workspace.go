// Package workspace makes the host-side checkouts agent runs work on (SPEC
// S13.1: the checkout is the only mount, at /work) and pushes their work
// back as the sandbox's branch after a clean run. The container never
// holds a forge credential and never pushes: the host does, here.
package workspace

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/sandbox"
)

// Source is where the gateway keeps a repository it serves: the local
// forge's bare repository, or the mirror of a remote one.
type Source interface {
	Dir(ctx context.Context, repo forge.Repo) (string, error)
	// Pushed sends what a push did to the source on to the forge (a
	// mirror's upstream); nil for the local forge.
	Pushed(ctx context.Context, repo forge.Repo, done []forge.RefUpdate) error
}

// Workspaces keeps checkouts under a directory.
type Workspaces struct {
	dir    string
	uid    int
	host   string // the forge's host, to name repositories
	source Source
	git    string
}

var _ agentrun.Workspaces = (*Workspaces)(nil)

// New keeps checkouts under dir, owned by uid (the sandbox user of berth's
// image contract: the container runs as it with no capability to override
// permissions), a kelos image's by kelos.UID, the uid its interface fixes
// (SPEC S13.6). A negative uid leaves every checkout as made: a driver
// that runs nothing needs no owner.
func New(dir string, uid int, f forge.Forge, source Source) *Workspaces {
	git := "git"
	if p, err := exec.LookPath(git); err == nil {
		git = p
	}
	host := ""
	if f != nil {
		host = f.Host()
	}
	return &Workspaces{dir: dir, uid: uid, host: host, source: source, git: git}
}

// Dir is where sb's checkout is.
func (w *Workspaces) Dir(sb sandbox.Sandbox) string { return filepath.Join(w.dir, string(sb.ID)) }

func (w *Workspaces) repo(sb sandbox.Sandbox) forge.Repo {
	return forge.Repo{Host: w.host, Path: strings.TrimPrefix(sb.Repo, w.host+"/")}
}

// Prepare makes sb's checkout in a fresh directory the sandbox's user
// owns: the commit of its branch (the repository's default branch when
// it names none) alone, a shallow repository with no remote
// (checkout.go).
func (w *Workspaces) Prepare(ctx context.Context, sb sandbox.Sandbox) (string, error) {
	if sb.Repo == "" {
		return "", errors.New("an agent run needs a repository")
	}
	src, err := w.source.Dir(ctx, w.repo(sb))
	if err != nil {
		return "", err
	}
	branch := cmp.Or(sb.Branch, forge.DefaultBranch(src))
	if branch == "" {
		return "", fmt.Errorf("%s: its HEAD names no branch: name the branch the run starts from", sb.Repo)
	}
	commit, err := w.start(ctx, sb, src, branch)
	if err != nil {
		return "", err
	}
	dir := w.Dir(sb)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(w.dir, 0o711); err != nil {
		return "", err
	}
	if err := w.checkout(ctx, src, dir, branch, commit); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	uid := w.owner(sb)
	if uid < 0 {
		return dir, nil
	}
	if err := chownAll(dir, uid); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("give the checkout to uid %d: %w", uid, err)
	}
	return dir, nil
}

// owner is the uid sb's checkout belongs to: the user its image runs as.
func (w *Workspaces) owner(sb sandbox.Sandbox) int {
	if w.uid >= 0 && sb.Contract == sandbox.ContractKelos {
		return kelos.UID
	}
	return w.uid
}

// Push takes the checkout's HEAD to refs/heads/berth/<name> in the source
// (and on to the forge, for a mirror), through a bundle made from a view
// of the checkout's objects and landed from a quarantine (land.go): the
// host runs no git in the .git the agent wrote. A checkout with no commit
// of the agent's pushes nothing and says so with an empty commit.
func (w *Workspaces) Push(ctx context.Context, sb sandbox.Sandbox, dir, onto string) (string, string, error) {
	q, format, done, err := w.quarantine(ctx, sb)
	if err != nil {
		return "", "", err
	}
	defer done()
	env, head, base, doneView, err := w.view(dir, format)
	if err != nil {
		return "", "", err
	}
	defer doneView()
	// The clone is shallow: its boundary is where the run started (a
	// session's later run, where its last one left the branch).
	if slices.Contains(base, head) || head == onto {
		return "", "", nil
	}
	file := filepath.Join(q, "work.bundle")
	args := []string{"bundle", "create", "--quiet", file, "HEAD"}
	for _, b := range base {
		args = append(args, "^"+b)
	}
	if _, err := w.safe(ctx, q, env, args...); err != nil {
		return "", "", fmt.Errorf("bundle the agent's work: %w", err)
	}
	return w.land(ctx, sb, q, file, head, onto)
}

// BranchFree refuses a run whose branch berth/<name> exists already in the
// repository the gateway serves: sandbox names repeat, so it is another
// sandbox's work, and a run that would end by moving it does not start.
func (w *Workspaces) BranchFree(ctx context.Context, sb sandbox.Sandbox) error {
	if sb.Repo == "" {
		return errors.New("an agent run needs a repository")
	}
	src, err := w.source.Dir(ctx, w.repo(sb))
	if err != nil {
		return err
	}
	return w.branchFree(ctx, sb, src)
}

func (w *Workspaces) branchFree(ctx context.Context, sb sandbox.Sandbox, src string) error {
	if w.branchAt(ctx, src, forge.AgentBranch(sb.Name)) != "" {
		return errBranchTaken(sb)
	}
	return nil
}

// branchAt is the commit ref points at in the bare repository src, or ""
// when it has no such ref.
func (w *Workspaces) branchAt(ctx context.Context, src, ref string) string {
	commit, _ := w.run(ctx, "", "--git-dir", src, "rev-parse", "--verify", "--quiet", ref)
	return commit
}

// Diff is what commit changed against its merge base with sb's branch
// (the repository's HEAD when sb names none), in the repository the
// gateway serves: the landed work, never the agent's checkout. No
// external diff or textconv runs, and the answer stops at
// agentrun.MaxDiff bytes.
func (w *Workspaces) Diff(ctx context.Context, sb sandbox.Sandbox, commit string) (string, bool, error) {
	if !objectID(commit) {
		return "", false, fmt.Errorf("%q is not a commit id", commit)
	}
	src, err := w.source.Dir(ctx, w.repo(sb))
	if err != nil {
		return "", false, err
	}
	start := "HEAD"
	if sb.Branch != "" {
		start = "refs/heads/" + sb.Branch
	}
	base, err := w.run(ctx, "", "--git-dir", src, "merge-base", start, commit)
	if err != nil {
		return "", false, fmt.Errorf("where the work of %s started: %w", sb.Name, err)
	}
	cmd := exec.CommandContext(ctx, w.git, "--git-dir", src, "diff", "--no-color", "--no-ext-diff", "--no-textconv", "-M", "--stat", "--patch", base, commit)
	cmd.SysProcAttr = ownGroup()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + w.dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", false, err
	}
	if err := cmd.Start(); err != nil {
		return "", false, err
	}
	b, rerr := io.ReadAll(io.LimitReader(out, agentrun.MaxDiff+1))
	cut := len(b) > agentrun.MaxDiff
	if cut {
		b = b[:agentrun.MaxDiff]
		_ = cmd.Process.Kill()
	}
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil && !cut {
		return "", false, fmt.Errorf("git diff: %w", err)
	}
	return string(b), cut, rerr
}

// Remove deletes sb's checkout, and a session's home beside it.
func (w *Workspaces) Remove(sb sandbox.Sandbox) error {
	return errors.Join(os.RemoveAll(w.Dir(sb)), os.RemoveAll(w.homeDir(sb)))
}

func (w *Workspaces) homeDir(sb sandbox.Sandbox) string { return w.Dir(sb) + ".home" }

// Home makes a session's home beside its checkout, owned as the checkout
// is (by the user its image runs as), or keeps the one it has: the agent
// CLI's own state, its conversation, outlives each task's machine.
func (w *Workspaces) Home(sb sandbox.Sandbox) (string, error) {
	dir := w.homeDir(sb)
	if err := os.MkdirAll(w.dir, 0o711); err != nil {
		return "", err
	}
	switch err := os.Mkdir(dir, 0o700); {
	case errors.Is(err, os.ErrExist):
		fi, err := os.Lstat(dir)
		if err != nil {
			return "", err
		}
		if !fi.IsDir() {
			return "", fmt.Errorf("%s is not a directory", dir)
		}
		return dir, nil
	case err != nil:
		return "", err
	}
	if uid := w.owner(sb); uid >= 0 {
		if err := os.Lchown(dir, uid, uid); err != nil {
			os.Remove(dir)
			return "", fmt.Errorf("give the session's home to uid %d: %w", uid, err)
		}
	}
	return dir, nil
}

// run runs git as root on a checkout the sandbox's user owns: safe.directory
// through the environment, nothing of this host's configuration.
func (w *Workspaces) run(ctx context.Context, dir string, args ...string) (string, error) {
	return w.runInput(ctx, dir, "", args...)
}

// runInput is run with stdin on git's standard input.
func (w *Workspaces) runInput(ctx context.Context, dir, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, w.git, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	cmd.SysProcAttr = ownGroup()
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + w.dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*"}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", subcommand(args), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// subcommand is the git command args run, past git's own options, for
// an error to name.
func subcommand(args []string) string {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-c" || a == "--git-dir" || a == "--work-tree":
			i++
		case !strings.HasPrefix(a, "-"):
			return a
		}
	}
	return strings.Join(args, " ")
}

func chownAll(dir string, uid int) error {
	return filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}

// Bare is what Local needs of the local forge (package local): where each
// of its bare repositories is.
type Bare interface {
	Path(r forge.Repo) (string, error)
}

// Local is the Source of the local forge: its own bare repositories.
type Local struct{ Forge Bare }

// Dir is the bare repository.
func (l Local) Dir(_ context.Context, r forge.Repo) (string, error) { return l.Forge.Path(r) }

// Pushed has nothing further to do: the bare repository is the forge.
func (Local) Pushed(context.Context, forge.Repo, []forge.RefUpdate) error { return nil }

// Mirrors is what Mirrored needs of the gateway's mirrors of a remote
// forge (githttp.Mirrors).
type Mirrors interface {
	Sync(ctx context.Context, repo forge.Repo) (string, error)
	Push(ctx context.Context, repo forge.Repo, done []forge.RefUpdate) error
}

// Mirrored is the Source of a remote forge: the gateway's mirror, brought
// up to date before a clone, and a push sent on to the forge (undone in
// the mirror when the forge refuses it).
type Mirrored struct{ Mirrors Mirrors }

// Dir syncs the mirror and returns it.
func (m Mirrored) Dir(ctx context.Context, r forge.Repo) (string, error) {
	return m.Mirrors.Sync(ctx, r)
}

// Pushed sends the push on to the forge.
func (m Mirrored) Pushed(ctx context.Context, r forge.Repo, done []forge.RefUpdate) error {
	return m.Mirrors.Push(ctx, r, done)
}

// ownGroup puts git in a process group of its own, so the signals meant
// for the gateway (a terminal's Ctrl-C) do not end a checkout the gateway
// lets finish as it stops; its context ends it.
func ownGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
