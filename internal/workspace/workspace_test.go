package workspace_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/forge/local"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/workspace"
)

// host is the gateway's side of a run: the local forge holding acme/app
// (one commit on main) and acme/secret (another organisation's work, on
// the same disk), and the checkouts.
type host struct {
	w            *workspace.Workspaces
	app, secret  string // the bare repositories
	secretCommit string
	dir          string // where the checkouts are
}

func newHost(t testing.TB) *host {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	lf := local.New(t.TempDir(), "http://gateway.test", nil, time.Now)
	h := &host{dir: t.TempDir()}
	for _, name := range []string{"acme/app", "acme/secret"} {
		seed := t.TempDir()
		git(t, seed, "init", "-q", "-b", "main")
		if err := os.WriteFile(filepath.Join(seed, "README"), []byte(name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		git(t, seed, "add", ".")
		git(t, seed, "commit", "-q", "-m", "init "+name)
		if name == "acme/secret" {
			commit(t, seed, "plans.txt") // more than a clone's one commit
		}
		bare, err := lf.Import(t.Context(), name, seed)
		if err != nil {
			t.Fatal(err)
		}
		if name == "acme/app" {
			h.app = bare
		} else {
			h.secret, h.secretCommit = bare, git(t, bare, "rev-parse", "main")
		}
	}
	h.w = workspace.New(h.dir, -1, lf, workspace.Local{Forge: lf})
	return h
}

func agent(name string) sandbox.Sandbox {
	return sandbox.Sandbox{ID: sandbox.ID("sbx_" + name), Name: name, Repo: "acme/app", Branch: "main"}
}

// checkout prepares sb's checkout, as a run's start does.
func (h *host) checkout(t testing.TB, sb sandbox.Sandbox) string {
	t.Helper()
	dir, err := h.w.Prepare(t.Context(), sb)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.com", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// branch is where refs/heads/berth/<name> of bare is; "" when absent.
func branch(bare, name string) string {
	out, err := exec.Command("git", "--git-dir", bare, "rev-parse", "--verify", "--quiet", "refs/heads/berth/"+name).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// commit makes the agent's commit in a checkout.
func commit(t testing.TB, dir, file string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, file), []byte("work\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "agent's work")
	return git(t, dir, "rev-parse", "HEAD")
}

// TestPushLandsTheAgentsWork: the host takes a clean run's commits to
// berth/<name>, and a checkout without a commit pushes nothing.
func TestPushLandsTheAgentsWork(t *testing.T) {
	h := newHost(t)
	ctx := t.Context()
	sb := agent("fix")
	dir := h.checkout(t, sb)
	if b, c, err := h.w.Push(ctx, sb, dir, ""); err != nil || b != "" || c != "" {
		t.Fatalf("push of an untouched checkout: %q %q %v; want nothing", b, c, err)
	}
	want := commit(t, dir, "f.txt")
	b, c, err := h.w.Push(ctx, sb, dir, "")
	if err != nil || b != "berth/fix" || c != want {
		t.Fatalf("push: %q %q %v; want berth/fix at %s", b, c, err, want)
	}
	if got := branch(h.app, "fix"); got != want {
		t.Errorf("berth/fix is at %q, want %s", got, want)
	}
	// Again, as a restarted gateway does: the same commit is landed.
	if _, c, err := h.w.Push(ctx, sb, dir, ""); err != nil || c != want {
		t.Errorf("push again: %q %v", c, err)
	}
}

// TestSessionPushMovesItsBranch: a session's later run moves berth/<name>
// from where its last run left it, says nothing when it committed nothing
// more, and moves nothing that another push moved meanwhile.
func TestSessionPushMovesItsBranch(t *testing.T) {
	h := newHost(t)
	ctx := t.Context()
	sb := agent("fix")
	dir := h.checkout(t, sb)
	first := commit(t, dir, "f.txt")
	if _, c, err := h.w.Push(ctx, sb, dir, ""); err != nil || c != first {
		t.Fatalf("first push: %q %v; want %s", c, err, first)
	}
	if b, c, err := h.w.Push(ctx, sb, dir, first); err != nil || b != "" || c != "" {
		t.Fatalf("second run without a commit: %q %q %v; want nothing", b, c, err)
	}
	second := commit(t, dir, "g.txt")
	if b, c, err := h.w.Push(ctx, sb, dir, first); err != nil || b != "berth/fix" || c != second {
		t.Fatalf("second push: %q %q %v; want berth/fix at %s", b, c, err, second)
	}
	if got := branch(h.app, "fix"); got != second {
		t.Errorf("berth/fix is at %q, want %s", got, second)
	}
	// Without the session's last push as onto, a branch that exists is
	// another's: the run's commit is not pushed over it.
	third := commit(t, dir, "h.txt")
	if _, _, err := h.w.Push(ctx, sb, dir, first); err == nil {
		t.Fatal("a push from a commit the branch is no longer at moved it")
	}
	if got := branch(h.app, "fix"); got != second {
		t.Errorf("berth/fix is at %q after a refused push, want %s (not %s)", got, second, third)
	}
}

// TestPushRunsNothingOfTheAgents: the host's push reads the checkout's
// objects and nothing else of its .git: no hook, no setting of the
// agent's runs as the gateway's user.
func TestPushRunsNothingOfTheAgents(t *testing.T) {
	h := newHost(t)
	ctx := t.Context()
	sb := agent("fix")
	dir := h.checkout(t, sb)
	want := commit(t, dir, "f.txt")
	marker := filepath.Join(t.TempDir(), "ran")
	script := "#!/bin/sh\necho \"$0\" >> " + marker + "\n"
	for _, hook := range []string{"pre-push", "reference-transaction", "post-update", "pre-auto-gc", "push-to-checkout"} {
		if err := os.WriteFile(filepath.Join(dir, ".git", "hooks", hook), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	prog := filepath.Join(t.TempDir(), "prog")
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{
		{"core.fsmonitor", prog}, {"push.gpgSign", "true"}, {"gpg.program", prog},
		{"core.sshCommand", prog}, {"protocol.ext.allow", "always"},
		{"url.ext::" + prog + " %S .insteadOf", "file://"},
	} {
		git(t, dir, "config", kv[0], kv[1])
	}
	if _, c, err := h.w.Push(ctx, sb, dir, ""); err != nil || c != want {
		t.Fatalf("push: %q %v; want %s", c, err, want)
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("the host's push ran the agent's programs:\n%s", b)
	}
}

// TestPushFollowsNoLinkOut: a .git that points elsewhere on the host (a
// gitfile, links, a list of other object stores) is refused before any of
// it is read, and nothing of another repository reaches the branch.
func TestPushFollowsNoLinkOut(t *testing.T) {
	tests := []struct {
		name  string
		plant func(t *testing.T, h *host, dir string)
		want  string
	}{
		{"gitfile", func(t *testing.T, h *host, dir string) {
			must(t, os.RemoveAll(filepath.Join(dir, ".git")))
			must(t, os.WriteFile(filepath.Join(dir, ".git"), []byte("gitdir: "+h.secret+"\n"), 0o644))
		}, "not the directory the clone made"},
		{"git dir link", func(t *testing.T, h *host, dir string) {
			must(t, os.RemoveAll(filepath.Join(dir, ".git")))
			must(t, os.Symlink(h.secret, filepath.Join(dir, ".git")))
		}, "not the directory the clone made"},
		{"refs link", func(t *testing.T, h *host, dir string) {
			must(t, os.RemoveAll(filepath.Join(dir, ".git", "refs")))
			must(t, os.Symlink(filepath.Join(h.secret, "refs"), filepath.Join(dir, ".git", "refs")))
		}, "HEAD"},
		{"HEAD link", func(t *testing.T, h *host, dir string) {
			must(t, os.Remove(filepath.Join(dir, ".git", "HEAD")))
			must(t, os.Symlink(filepath.Join(h.secret, "HEAD"), filepath.Join(dir, ".git", "HEAD")))
		}, "not a regular file"},
		{"objects link", func(t *testing.T, h *host, dir string) {
			must(t, os.Symlink(filepath.Join(h.secret, "objects", "pack"), filepath.Join(dir, ".git", "objects", "theirs")))
			must(t, os.WriteFile(filepath.Join(dir, ".git", "HEAD"), []byte(h.secretCommit+"\n"), 0o644))
		}, "not a regular file"},
		{"alternates", func(t *testing.T, h *host, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, ".git", "objects", "info", "alternates"), []byte(filepath.Join(h.secret, "objects")+"\n"), 0o644))
			must(t, os.WriteFile(filepath.Join(dir, ".git", "HEAD"), []byte(h.secretCommit+"\n"), 0o644))
		}, "names other object stores"},
		{"HEAD out of the .git", func(t *testing.T, h *host, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, ".git", "HEAD"), []byte("ref: refs/../../../"+h.secret+"/refs/heads/main\n"), 0o644))
		}, "not a ref"},
		{"a commit it does not have", func(t *testing.T, h *host, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, ".git", "HEAD"), []byte(h.secretCommit+"\n"), 0o644))
		}, "bundle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			sb := agent("fix")
			dir := h.checkout(t, sb)
			commit(t, dir, "f.txt")
			tt.plant(t, h, dir)
			b, c, err := h.w.Push(t.Context(), sb, dir, "")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("push: %q %q %v; want refused, saying %q", b, c, err, tt.want)
			}
			if got := branch(h.app, "fix"); got != "" {
				t.Errorf("berth/fix is at %s", got)
			}
			if exec.Command("git", "--git-dir", h.app, "cat-file", "-e", h.secretCommit).Run() == nil {
				t.Errorf("acme/secret's commit reached acme/app")
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// machineBundle is what an in-machine run sends: a bundle of its commit
// on a shallow clone of acme/app.
func machineBundle(t testing.TB, h *host, file string, refs ...string) (bundle []byte, head string) {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, "clone", "-q", "--depth", "1", "file://"+h.app, "work")
	work := filepath.Join(dir, "work")
	base := git(t, work, "rev-parse", "HEAD")
	head = commit(t, work, file)
	if len(refs) == 0 {
		refs = []string{"HEAD"}
	}
	out := filepath.Join(dir, "work.bundle")
	git(t, work, append(append([]string{"bundle", "create", "-q", out}, refs...), "^"+base)...)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b, head
}

// TestPushBundle: an in-machine run's bundle becomes berth/<name> at its
// commit; one that is not a bundle of this repository's work, carries
// more than its HEAD, says another commit or is too large is refused with
// why, and leaves no branch.
func TestPushBundle(t *testing.T) {
	h := newHost(t)
	ctx := t.Context()
	good, head := machineBundle(t, h, "f.txt")
	two, _ := machineBundle(t, h, "g.txt", "HEAD", "main")
	secretDir := t.TempDir()
	git(t, secretDir, "clone", "-q", "file://"+h.secret, "s")
	foreignHead := commit(t, filepath.Join(secretDir, "s"), "x.txt")
	git(t, filepath.Join(secretDir, "s"), "bundle", "create", "-q", filepath.Join(secretDir, "b"), "HEAD", "^"+h.secretCommit)
	foreign, _ := os.ReadFile(filepath.Join(secretDir, "b"))
	tests := []struct {
		name   string
		bundle []byte
		commit string
		want   string
	}{
		{"garbage", []byte("not a bundle\n"), "", "is not one of this repository's work"},
		{"truncated", good[:len(good)/2], head, "does not hold its commits whole"},
		{"header only", []byte("# v2 git bundle\n" + head + " HEAD\n\n"), head, "bundle"},
		{"another repository's", foreign, foreignHead, "is not one of this repository's work"},
		{"two refs", two, "", "carries 2 refs"},
		{"another commit", good, strings.Repeat("b", 40), "its bundle holds " + head},
		{"oversized", bytes.Repeat([]byte("x"), agentrun.MaxBundle+1), head, "over the 64 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := agent("bad-" + strings.ReplaceAll(tt.name, " ", "-"))
			b, c, err := h.w.PushBundle(ctx, sb, tt.bundle, tt.commit)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("push bundle: %q %q %v; want refused, saying %q", b, c, err, tt.want)
			}
			if got := branch(h.app, sb.Name); got != "" {
				t.Errorf("%s is at %s", sb.Name, got)
			}
		})
	}
	if exec.Command("git", "--git-dir", h.app, "cat-file", "-e", head).Run() == nil {
		t.Fatalf("a refused bundle's commit %s is in acme/app", head)
	}

	if b, c, err := h.w.PushBundle(ctx, agent("fix"), good, head); err != nil || b != "berth/fix" || c != head {
		t.Fatalf("push bundle: %q %q %v; want berth/fix at %s", b, c, err, head)
	}
	if got := branch(h.app, "fix"); got != head {
		t.Errorf("berth/fix is at %q, want %s", got, head)
	}
	// Another's branch of the same name is never moved.
	other, otherHead := machineBundle(t, h, "other.txt")
	if _, _, err := h.w.PushBundle(ctx, agent("fix"), other, otherHead); err == nil || !strings.Contains(err.Error(), "from elsewhere") {
		t.Errorf("a bundle over another's berth/fix: %v, want refused", err)
	}
	if got := branch(h.app, "fix"); got != head {
		t.Errorf("berth/fix moved to %s", got)
	}
	leftovers, _ := filepath.Glob(filepath.Join(h.dir, ".*"))
	if len(leftovers) > 0 {
		t.Errorf("quarantines left behind: %v", leftovers)
	}
}

// FuzzPushBundle: whatever bytes a machine sends as its bundle, they land
// as berth/<name> at the commit they carry, or are refused and leave no
// branch; nothing else in the repository moves.
func FuzzPushBundle(f *testing.F) {
	h := newHost(f)
	good, head := machineBundle(f, h, "f.txt")
	f.Add(good, head)
	f.Add(good[:40], head)
	f.Add([]byte("# v3 git bundle\n@object-format=sha1\n@filter=blob:none\n"+head+" HEAD\n\n"), head)
	f.Add([]byte("# v2 git bundle\n-"+head+"\n"+head+" refs/heads/main\n\nPACK"), "")
	f.Add([]byte{}, "")
	before := git(f, h.app, "for-each-ref")
	n := 0
	f.Fuzz(func(t *testing.T, bundle []byte, commit string) {
		n++
		sb := agent("fuzz-" + strings.Repeat("x", n%7) + string(rune('a'+n%26)))
		_ = exec.Command("git", "--git-dir", h.app, "update-ref", "-d", "refs/heads/berth/"+sb.Name).Run()
		_, c, err := h.w.PushBundle(context.Background(), sb, bundle, commit)
		got := branch(h.app, sb.Name)
		switch {
		case err != nil && got != "":
			t.Fatalf("refused (%v) but %s is at %s", err, sb.Name, got)
		case err == nil && got != c:
			t.Fatalf("landed %s but the branch is at %q", c, got)
		}
		_ = exec.Command("git", "--git-dir", h.app, "update-ref", "-d", "refs/heads/berth/"+sb.Name).Run()
		if after := git(t, h.app, "for-each-ref"); after != before {
			t.Fatalf("other refs moved:\n%s\nwas\n%s", after, before)
		}
	})
}
