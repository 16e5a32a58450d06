package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/sandbox"
)

// A run's checkout is on the path of its start, so it is made without
// git's transport. `git clone --depth 1 file://` ran upload-pack (through
// a shell), pack-objects, index-pack and a connectivity walk, fsynced
// what it fetched, and took two more git runs around it (the branch
// check, forgetting the origin): about 30 ms of a one-commit repository's
// start on these machines, most of it processes. Here three git runs do
// it (start, pack-objects, read-tree) and the rest is files written here:
// the commit alone, its parents the shallow boundary Push bundles from,
// HEAD on the branch, no remote (nor the clone's refs/remotes/origin/HEAD,
// left pointing at nothing once its remote was removed).
//
// The objects are copied, never shared. A hard-linked copy (clone
// --local) would be the host repository's own files, which the chown to
// the sandbox's user would hand to the container to rewrite; alternates
// (--shared, --reference) or a worktree would put a path of the host's
// repository in the mount, which the container either cannot follow (the
// path is not inside it: the agent's git breaks) or, were it mounted,
// would read whole (every branch, other sandboxes' berth/<name>); and
// Push refuses a checkout that names other object stores.

// start is the commit of branch in the served repository src, where sb's
// run starts, in the same git call that refuses a run whose branch
// berth/<name> exists already (branchFree's rule).
func (w *Workspaces) start(ctx context.Context, sb sandbox.Sandbox, src, branch string) (string, error) {
	head, agent := "refs/heads/"+branch, forge.AgentBranch(sb.Name)
	out, err := w.run(ctx, "", "--git-dir", src, "for-each-ref", "--format=%(objectname) %(objecttype) %(refname)", "--", head, agent)
	if err != nil {
		return "", err
	}
	commit := ""
	// A pattern also matches the refs below it (refs/heads/main/x): only
	// the ref itself counts.
	for line := range strings.Lines(out) {
		id, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		kind, ref, _ := strings.Cut(rest, " ")
		switch ref {
		case agent:
			return "", errBranchTaken(sb)
		case head:
			if kind != "commit" || !objectID(id) {
				return "", fmt.Errorf("%s's branch %s is a %s, not a commit", sb.Repo, branch, kind)
			}
			commit = id
		}
	}
	if commit == "" {
		return "", fmt.Errorf("%s has no branch %s", sb.Repo, branch)
	}
	return commit, nil
}

// checkout makes dir a repository holding commit alone, shallow, checked
// out on branch: its .git written here, the commit's objects packed into
// it straight from the served repository src, and its tree read into the
// index and the work tree. dir must not exist.
func (w *Workspaces) checkout(ctx context.Context, src, dir, branch, commit string) error {
	ref := filepath.Join("refs", "heads", filepath.FromSlash(branch))
	if !filepath.IsLocal(ref) || !objectID(commit) {
		return fmt.Errorf("cannot check out %q at %q", branch, commit)
	}
	gitDir := filepath.Join(dir, ".git")
	// hooks and info empty, as tools that write there expect them.
	for _, d := range []string{filepath.Join("objects", "pack"), filepath.Join("objects", "info"), filepath.Dir(ref), filepath.Join("refs", "tags"), "hooks", "info"} {
		if err := os.MkdirAll(filepath.Join(gitDir, d), 0o755); err != nil {
			return err
		}
	}
	// What git init writes on Linux, where the checkouts are (it probes
	// the file system for the rest, and these are its answers there).
	config := "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"
	if len(commit) == 64 {
		config = "[core]\n\trepositoryformatversion = 1\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n[extensions]\n\tobjectFormat = sha256\n"
	}
	for name, content := range map[string]string{
		"config":  config,
		"HEAD":    "ref: " + filepath.ToSlash(ref) + "\n",
		ref:       commit + "\n",
		"shallow": commit + "\n",
	} {
		if err := os.WriteFile(filepath.Join(gitDir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	// --shallow cuts the walk at the commit: its tree, not its history.
	// No delta is searched for and little is compressed: the pack stays
	// on this disk, for one run. Nor is it fsynced: a checkout does not
	// outlive the machine it is mounted in, and a start begun again makes
	// it anew.
	pack := filepath.Join(gitDir, "objects", "pack", "pack")
	if _, err := w.runInput(ctx, "", "--shallow "+commit+"\n"+commit+"\n",
		"-c", "core.fsync=none", "--git-dir", src, "pack-objects", "--quiet", "--revs", "--window=0", "--compression=1", pack); err != nil {
		return fmt.Errorf("pack the commit: %w", err)
	}
	if _, err := w.run(ctx, "", "--git-dir", gitDir, "--work-tree", dir, "read-tree", "--reset", "-u", commit); err != nil {
		return fmt.Errorf("check out the commit: %w", err)
	}
	return nil
}

// errBranchTaken refuses a run whose branch berth/<name> exists already.
func errBranchTaken(sb sandbox.Sandbox) error {
	return fmt.Errorf("%s already has a branch berth/%s, another sandbox's work: name this sandbox differently (or delete that branch)",
		sb.Repo, sb.Name)
}
