package workspace_test

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/forge/local"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/workspace"
)

// importRepo puts the repository made by seed (run in a fresh working
// tree) on lf as name, and returns its bare repository.
func importRepo(t *testing.T, lf *local.Forge, name string, seed func(dir string)) string {
	t.Helper()
	dir := t.TempDir()
	seed(dir)
	bare, err := lf.Import(t.Context(), name, dir)
	if err != nil {
		t.Fatal(err)
	}
	return bare
}

// TestPrepareChecksOutTheBranchAlone: the checkout is the branch's commit
// (the default branch's when the sandbox names none) checked out whole
// (directories, an executable, a link), a shallow repository of that one
// commit with a clean status, no remote, no broken ref (git fsck: the
// clone's refs/remotes/origin/HEAD outlived its remote) and no object of
// its history, and its .git holds only directories and regular files.
func TestPrepareChecksOutTheBranchAlone(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	lf := local.New(t.TempDir(), "http://gateway.test", nil, time.Now)
	bare := importRepo(t, lf, "acme/app", func(dir string) {
		git(t, dir, "init", "-q", "-b", "main")
		commit(t, dir, "old.txt")
		must(t, os.MkdirAll(filepath.Join(dir, "src", "deep"), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "src", "deep", "a.go"), []byte("package deep\n"), 0o644))
		must(t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"), 0o755))
		must(t, os.Symlink("src/deep/a.go", filepath.Join(dir, "link")))
		commit(t, dir, "main.txt")
		git(t, dir, "checkout", "-q", "-b", "feature/x")
		commit(t, dir, "feature.txt")
		git(t, dir, "checkout", "-q", "main")
	})
	w := workspace.New(t.TempDir(), -1, lf, workspace.Local{Forge: lf})
	for _, branch := range []string{"", "main", "feature/x"} {
		t.Run("branch "+branch, func(t *testing.T) {
			sb := agent("fix")
			sb.Branch = branch
			dir, err := w.Prepare(t.Context(), sb)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Remove(sb)
			want := "main"
			if branch != "" {
				want = branch
			}
			at := git(t, bare, "rev-parse", "refs/heads/"+want)
			for _, c := range []struct{ args, want string }{
				{"rev-parse HEAD", at},
				{"symbolic-ref HEAD", "refs/heads/" + want},
				{"rev-parse --is-shallow-repository", "true"},
				{"rev-list --count HEAD", "1"},
				{"status --porcelain", ""},
				{"remote", ""},
				{"ls-files --stage", git(t, bare, "ls-tree", "-r", at)},
			} {
				got := git(t, dir, strings.Fields(c.args)...)
				if c.args == "ls-files --stage" {
					got = normalizeStage(got)
					c.want = normalizeStage(c.want)
				}
				if got != c.want {
					t.Errorf("git %s = %q, want %q", c.args, got, c.want)
				}
			}
			git(t, dir, "fsck", "--strict", "--no-dangling")
			parent := git(t, bare, "rev-parse", at+"^")
			if exec.Command("git", "-C", dir, "cat-file", "-e", parent).Run() == nil {
				t.Errorf("the checkout holds the commit's parent %s", parent)
			}
			if fi, err := os.Stat(filepath.Join(dir, "run.sh")); err != nil || fi.Mode()&0o100 == 0 {
				t.Errorf("run.sh: %v, %v; want it executable", fi, err)
			}
			if target, err := os.Readlink(filepath.Join(dir, "link")); err != nil || target != "src/deep/a.go" {
				t.Errorf("link: %q %v; want a link to src/deep/a.go", target, err)
			}
			err = filepath.WalkDir(filepath.Join(dir, ".git"), func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && !d.Type().IsRegular() {
					t.Errorf("%s is neither a directory nor a regular file", p)
				}
				return err
			})
			must(t, err)
			if _, err := os.Stat(filepath.Join(dir, ".git", "objects", "info", "alternates")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the checkout names other object stores: %v", err)
			}
		})
	}
}

// normalizeStage makes `ls-files --stage` lines ("mode id stage\tpath")
// and `ls-tree -r` lines ("mode type id\tpath") comparable.
func normalizeStage(s string) string {
	var out []string
	for line := range strings.Lines(s) {
		meta, path, _ := strings.Cut(strings.TrimSpace(line), "\t")
		var id, mode string
		for _, f := range strings.Fields(meta) {
			switch {
			case len(f) >= 40:
				id = f
			case len(f) == 6:
				mode = f
			}
		}
		out = append(out, mode+" "+id+" "+path)
	}
	return strings.Join(out, "\n")
}

// TestPrepareNeedsABranchWithACommit: a run whose branch has no commit
// (named, or the default one a repository's HEAD names before its first
// push) or whose repository's HEAD names no branch is refused saying why,
// and leaves no checkout.
func TestPrepareNeedsABranchWithACommit(t *testing.T) {
	h := newHost(t)
	tests := []struct {
		name   string
		branch string
		head   []string // how acme/app's HEAD is set first
		want   string
	}{
		{"a branch it does not have", "nope", nil, "has no branch nope"},
		{"a default branch with no commit", "", []string{"symbolic-ref", "HEAD", "refs/heads/gone"}, "has no branch gone"},
		{"a detached HEAD", "", []string{"update-ref", "--no-deref", "HEAD", "main"}, "names no branch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.head != nil {
				old := git(t, h.app, "symbolic-ref", "HEAD")
				git(t, h.app, tt.head...)
				defer git(t, h.app, "symbolic-ref", "HEAD", old)
			}
			sb := agent("fix")
			sb.Branch = tt.branch
			dir, err := h.w.Prepare(t.Context(), sb)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Prepare = %q, %v; want refused, saying %q", dir, err, tt.want)
			}
			if _, err := os.Stat(h.w.Dir(sb)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a checkout was left behind: %v", err)
			}
		})
	}
}

// TestPrepareRefusesAnotherSandboxsBranch: a run whose berth/<name> is in
// the repository already does not start; another name's branch, even one
// that begins with it, is no obstacle.
func TestPrepareRefusesAnotherSandboxsBranch(t *testing.T) {
	h := newHost(t)
	git(t, h.app, "branch", "berth/fix", "main")
	git(t, h.app, "branch", "berth/fixed", "main")
	if dir, err := h.w.Prepare(t.Context(), agent("fix")); err == nil || !strings.Contains(err.Error(), "already has a branch berth/fix") {
		t.Errorf("Prepare = %q, %v; want refused", dir, err)
	}
	if _, err := os.Stat(h.w.Dir(agent("fix"))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a checkout was left behind: %v", err)
	}
	h.checkout(t, agent("fi"))
}

// TestPrepareOfASHA256Repository: a repository of SHA-256 objects is
// checked out in its format, and the agent's work on it lands.
func TestPrepareOfASHA256Repository(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	lf := local.New(t.TempDir(), "http://gateway.test", nil, time.Now)
	bare := importRepo(t, lf, "acme/app", func(dir string) {
		git(t, dir, "init", "-q", "-b", "main", "--object-format=sha256")
		commit(t, dir, "a.txt")
	})
	w := workspace.New(t.TempDir(), -1, lf, workspace.Local{Forge: lf})
	sb := agent("fix")
	dir, err := w.Prepare(t.Context(), sb)
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, dir, "rev-parse", "--show-object-format"); got != "sha256" {
		t.Errorf("the checkout's object format is %s, want sha256", got)
	}
	git(t, dir, "fsck", "--strict", "--no-dangling")
	want := commit(t, dir, "f.txt")
	if b, c, err := w.Push(t.Context(), sb, dir, ""); err != nil || b != "berth/fix" || c != want {
		t.Fatalf("push: %q %q %v; want berth/fix at %s", b, c, err, want)
	}
	if got := branch(bare, "fix"); got != want {
		t.Errorf("berth/fix is at %q, want %s", got, want)
	}
}

// TestPrepareUsesNoTransport: the checkout is made from the served
// repository's objects on this disk, not fetched through git's transport
// (clone or fetch, an upload-pack and an index-pack): that was most of an
// agent run's start.
func TestPrepareUsesNoTransport(t *testing.T) {
	real, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	bin := t.TempDir()
	log := filepath.Join(t.TempDir(), "git.log")
	script := "#!/bin/sh\necho \"$*\" >> " + log + "\nexec " + real + " \"$@\"\n"
	must(t, os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	h := newHost(t)
	must(t, os.Remove(log))
	h.checkout(t, sandbox.Sandbox{ID: "sbx_fix", Name: "fix", Repo: "acme/app"})
	b, err := os.ReadFile(log)
	must(t, err)
	for line := range strings.Lines(string(b)) {
		for _, transport := range []string{"clone", "fetch", "upload-pack", "index-pack"} {
			if strings.Contains(" "+line, " "+transport+" ") {
				t.Errorf("Prepare ran git %s", strings.TrimSpace(line))
			}
		}
	}
}
