package workspace

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/sandbox"
)

// An agent's work reaches the repository the gateway serves one way on
// every driver: as a git bundle, landed from a quarantine. The bundle is
// untrusted: an in-machine run's comes over HTTP from a pod the agent
// shared, and a host checkout's is made from a .git the agent wrote. So
// the host never runs git in the agent's repository (its hooks, its
// config, its links and gitfiles would be git's to follow as the
// gateway's user): it reads the checkout's objects through a view of its
// own (view), and it takes a bundle into a fresh bare repository with no
// hooks and none of the bundle's config, verified, fsck'd, and only its
// one ref, before the branch is created in the real one (land).

// incomingRef is where a quarantine keeps the bundle's one ref.
const incomingRef = "refs/berth/incoming"

// PushBundle lands an in-machine run's work: bundle holds the commits its
// machine made on the clone's commit and one ref, at commit, which
// becomes refs/heads/berth/<name> (created, never moved over another's).
func (w *Workspaces) PushBundle(ctx context.Context, sb sandbox.Sandbox, bundle []byte, commit string) (string, string, error) {
	if len(bundle) > agentrun.MaxBundle {
		return "", "", fmt.Errorf("the bundle is %d bytes, over the %d MiB an agent run may hand back", len(bundle), agentrun.MaxBundle>>20)
	}
	q, _, done, err := w.quarantine(ctx, sb)
	if err != nil {
		return "", "", err
	}
	defer done()
	file := filepath.Join(q, "work.bundle")
	if err := os.WriteFile(file, bundle, 0o600); err != nil {
		return "", "", err
	}
	return w.land(ctx, sb, q, file, commit, "")
}

// quarantine makes a fresh bare repository that borrows the served
// repository's objects (so a bundle's prerequisite, the clone's commit,
// is there) and returns it, its object format (the served one's), and a
// func that removes it.
func (w *Workspaces) quarantine(ctx context.Context, sb sandbox.Sandbox) (q, format string, done func(), err error) {
	src, err := w.source.Dir(ctx, w.repo(sb))
	if err != nil {
		return "", "", nil, err
	}
	if format, err = w.run(ctx, "", "--git-dir", src, "rev-parse", "--show-object-format"); err != nil {
		return "", "", nil, err
	}
	if err := os.MkdirAll(w.dir, 0o711); err != nil {
		return "", "", nil, err
	}
	if q, err = os.MkdirTemp(w.dir, ".incoming-"); err != nil {
		return "", "", nil, err
	}
	done = func() { _ = os.RemoveAll(q) }
	if _, err := w.safe(ctx, "", nil, "init", "--quiet", "--bare", "--object-format="+format, q); err != nil {
		done()
		return "", "", nil, err
	}
	alt := filepath.Join(q, "objects", "info", "alternates")
	if err := os.WriteFile(alt, []byte(filepath.Join(src, "objects")+"\n"), 0o600); err != nil {
		done()
		return "", "", nil, err
	}
	return q, format, done, nil
}

// land takes the one ref of the bundle file into quarantine q, checks it
// is the commit the run reported (when it reported one), and creates
// refs/heads/berth/<name> at it in the served repository (and the forge,
// for a mirror). A branch already at that commit is taken as landed: a
// gateway restarted before it recorded the run lands it again.
func (w *Workspaces) land(ctx context.Context, sb sandbox.Sandbox, q, file, want, onto string) (string, string, error) {
	in := []string{"GIT_DIR=" + q}
	if _, err := w.safe(ctx, q, in, "bundle", "verify", "--quiet", file); err != nil {
		return "", "", fmt.Errorf("the run's bundle is not one of this repository's work: %w", err)
	}
	heads, err := w.safe(ctx, q, in, "bundle", "list-heads", file)
	if err != nil {
		return "", "", fmt.Errorf("the run's bundle: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(heads), "\n")
	if len(lines) != 1 || lines[0] == "" {
		return "", "", fmt.Errorf("the run's bundle carries %d refs; an agent run's carries one, its HEAD", len(lines))
	}
	at, ref, _ := strings.Cut(lines[0], " ")
	if want != "" && at != want {
		return "", "", fmt.Errorf("the run reported commit %s, but its bundle holds %s", want, at)
	}
	if _, err := w.safe(ctx, q, in, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", file, ref+":"+incomingRef); err != nil {
		return "", "", fmt.Errorf("the run's bundle does not hold its commits whole: %w", err)
	}
	head, err := w.safe(ctx, q, in, "rev-parse", "--verify", "--quiet", incomingRef+"^{commit}")
	if err != nil || head != at {
		return "", "", fmt.Errorf("the run's bundle holds %s, which is not a commit", at)
	}
	repo := w.repo(sb)
	src, err := w.source.Dir(ctx, repo)
	if err != nil {
		return "", "", err
	}
	branch := forge.AgentBranch(sb.Name)
	switch old := w.branchAt(ctx, src, branch); old {
	case "":
		// Created only where there is none, whatever happened meanwhile.
		if _, err := w.safe(ctx, q, in, "push", "--quiet", "--force-with-lease="+branch+":", "file://"+src, head+":"+branch); err != nil {
			return "", "", fmt.Errorf("create %s: %w", strings.TrimPrefix(branch, "refs/heads/"), err)
		}
	case head:
		// Landed already: it still goes on to the forge below (the
		// mirror's push is a force push of the same commit).
	case onto:
		// A session's later run: the branch moves from where its last run
		// left it, and from nowhere else.
		if _, err := w.safe(ctx, q, in, "push", "--quiet", "--force-with-lease="+branch+":"+onto, "file://"+src, head+":"+branch); err != nil {
			return "", "", fmt.Errorf("move %s: %w", strings.TrimPrefix(branch, "refs/heads/"), err)
		}
	default:
		return "", "", fmt.Errorf("%s got a branch %s from elsewhere while this run ran; the run's commit %s was not pushed over it",
			sb.Repo, strings.TrimPrefix(branch, "refs/heads/"), head)
	}
	if err := w.source.Pushed(ctx, repo, []forge.RefUpdate{{Old: cmp.Or(onto, strings.Repeat("0", len(head))), New: head, Ref: branch}}); err != nil {
		return "", "", err
	}
	return strings.TrimPrefix(branch, "refs/heads/"), head, nil
}

// view is a repository of the host's own that sees the objects of the
// checkout dir, a .git the agent wrote: its HEAD resolved and its shallow
// list read here (no link leaving the .git followed), its objects read in
// place once no link, device or list of other object stores is among
// them, and none of its config, hooks or info. format is the served
// repository's object format, the clone's. It returns the view's git
// environment, the commit at HEAD and the clone's commits (the shallow
// boundary), and a func that removes the view.
func (w *Workspaces) view(dir, format string) (env []string, head string, base []string, done func(), err error) {
	gitDir := filepath.Join(dir, ".git")
	if fi, err := os.Lstat(gitDir); err != nil || !fi.IsDir() {
		return nil, "", nil, nil, errors.New("the checkout's .git is not the directory the clone made (a link or a gitfile is not followed)")
	}
	objects := filepath.Join(gitDir, "objects")
	if err := plainTree(objects); err != nil {
		return nil, "", nil, nil, err
	}
	root, err := os.OpenRoot(gitDir)
	if err != nil {
		return nil, "", nil, nil, err
	}
	defer root.Close()
	if head, err = resolveHead(root); err != nil {
		return nil, "", nil, nil, err
	}
	b, err := readSmall(root, "shallow", 1<<20)
	if err != nil {
		return nil, "", nil, nil, fmt.Errorf("the checkout is not the shallow clone berth made: %w", err)
	}
	for _, id := range strings.Fields(string(b)) {
		if !objectID(id) {
			return nil, "", nil, nil, fmt.Errorf("the checkout's .git/shallow lists %.80q, not a commit id", id)
		}
		base = append(base, id)
	}
	if !objectID(head) {
		return nil, "", nil, nil, fmt.Errorf("the checkout's HEAD is %.80q, not a commit", head)
	}
	v, err := os.MkdirTemp(w.dir, ".view-")
	if err != nil {
		return nil, "", nil, nil, err
	}
	done = func() { _ = os.RemoveAll(v) }
	// The agent's commit-graph and multi-pack index are not read: what
	// they say of the objects is the agent's.
	config := "[core]\n\trepositoryformatversion = 1\n\tbare = true\n\tcommitGraph = false\n\tmultiPackIndex = false\n[extensions]\n\tobjectFormat = " + format + "\n"
	for name, content := range map[string]string{"config": config, "HEAD": head + "\n", "shallow": strings.Join(base, "\n") + "\n"} {
		if err := os.WriteFile(filepath.Join(v, name), []byte(content), 0o600); err != nil {
			done()
			return nil, "", nil, nil, err
		}
	}
	if err := os.Mkdir(filepath.Join(v, "refs"), 0o700); err != nil {
		done()
		return nil, "", nil, nil, err
	}
	return []string{"GIT_DIR=" + v, "GIT_OBJECT_DIRECTORY=" + objects}, head, base, done, nil
}

// resolveHead follows the checkout's HEAD to a commit id: a loose ref or
// one in packed-refs, inside the .git only.
func resolveHead(root *os.Root) (string, error) {
	b, err := readSmall(root, "HEAD", 4096)
	if err != nil {
		return "", fmt.Errorf("the checkout's HEAD: %w", err)
	}
	head := strings.TrimSpace(string(b))
	for range 5 { // a symbolic ref may name another; not forever
		ref, ok := strings.CutPrefix(head, "ref: ")
		if !ok {
			return head, nil
		}
		if !strings.HasPrefix(ref, "refs/") || !filepath.IsLocal(ref) {
			return "", fmt.Errorf("the checkout's HEAD names %.80q, not a ref", ref)
		}
		b, err := readSmall(root, ref, 4096)
		switch {
		case err == nil:
			head = strings.TrimSpace(string(b))
			continue
		case !errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("the checkout's HEAD names %s: %w", ref, err)
		}
		packed, err := readSmall(root, "packed-refs", 64<<20)
		if err != nil {
			return "", fmt.Errorf("the checkout's HEAD names %s, which it does not have", ref)
		}
		head = ""
		for line := range strings.Lines(string(packed)) {
			if id, name, ok := strings.Cut(strings.TrimSpace(line), " "); ok && name == ref {
				head = id
				break
			}
		}
		if head == "" {
			return "", fmt.Errorf("the checkout's HEAD names %s, which it does not have", ref)
		}
	}
	return "", errors.New("the checkout's HEAD names refs that name refs without end")
}

// readSmall reads a regular file of the checkout's .git, at most max
// bytes of it.
func readSmall(root *os.Root, name string, max int64) ([]byte, error) {
	fi, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("the checkout's .git/%s is not a regular file: not followed", name)
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}

// objectID reports whether s is a SHA-1 or SHA-256 object id.
func objectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	return strings.Trim(s, "0123456789abcdef") == ""
}

// plainTree refuses an object store that holds anything but directories
// and regular files, or names other stores to read.
func plainTree(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case !d.IsDir() && !d.Type().IsRegular():
			return fmt.Errorf("the checkout's .git/objects/%s is not a regular file: not followed", filepath.ToSlash(rel))
		case rel == filepath.Join("info", "alternates") || rel == filepath.Join("info", "http-alternates"):
			return fmt.Errorf("the checkout's .git/objects/%s names other object stores: not followed", filepath.ToSlash(rel))
		}
		return nil
	})
}

// safe runs git on what the agent made, as git takes untrusted input: no
// machine, user or repository hooks, no protocol but local files, every
// object fetched checked, packs kept as they came (not unpacked into
// loose objects).
func (w *Workspaces) safe(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, w.git, args...)
	cmd.SysProcAttr = ownGroup()
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + w.dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0", "GIT_ALLOW_PROTOCOL=file",
		"GIT_CONFIG_COUNT=5",
		"GIT_CONFIG_KEY_0=core.hooksPath", "GIT_CONFIG_VALUE_0=/dev/null",
		"GIT_CONFIG_KEY_1=fetch.fsckObjects", "GIT_CONFIG_VALUE_1=true",
		"GIT_CONFIG_KEY_2=transfer.unpackLimit", "GIT_CONFIG_VALUE_2=1",
		"GIT_CONFIG_KEY_3=receive.fsckObjects", "GIT_CONFIG_VALUE_3=true",
		"GIT_CONFIG_KEY_4=safe.directory", "GIT_CONFIG_VALUE_4=*",
	}, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", args[0], err, oneLine(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// oneLine is git's complaint, short enough for a run's reason.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}
