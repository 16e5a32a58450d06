package workspace_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestCopyMakesTheForksOwn: a session's fork gets a copy of its source's
// checkout and home, owners, modes and links kept (a link to a file
// outside is copied as a link, never read); the copies are the fork's,
// the source's unchanged by what the fork does; a source whose checkout
// is gone leaves the fork nothing.
func TestCopyMakesTheForksOwn(t *testing.T) {
	h := newHost(t)
	src, dst := agent("talk"), agent("try")
	dir := h.checkout(t, src)
	c1 := commit(t, dir, "one.txt")
	home, err := h.w.Home(src)
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("the host's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ path, body string }{{filepath.Join(home, ".claude", "conversation"), "first\n"}, {filepath.Join(dir, "tool.sh"), "#!/bin/sh\n"}} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.path, []byte(f.body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(secret, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		if err := os.Lchown(filepath.Join(home, ".claude", "conversation"), 4242, 4242); err != nil {
			t.Fatal(err)
		}
	}

	if err := h.w.Copy(src, dst); err != nil {
		t.Fatal(err)
	}
	got := h.w.Dir(dst)
	if got == dir {
		t.Fatalf("the fork's checkout is the source's: %s", got)
	}
	if head := git(t, got, "rev-parse", "HEAD"); head != c1 {
		t.Errorf("the fork's checkout is at %s, the source's at %s", head, c1)
	}
	if fi, err := os.Stat(filepath.Join(got, "tool.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("tool.sh in the fork: %v %v", fi, err)
	}
	if target, err := os.Readlink(filepath.Join(got, "link")); err != nil || target != secret {
		t.Errorf("the link in the fork: %q %v, want a link to %s", target, err, secret)
	}
	forkHome, err := h.w.Home(dst)
	if err != nil || forkHome == home {
		t.Fatalf("the fork's home %q (%v), the source's %q", forkHome, err, home)
	}
	conv := filepath.Join(forkHome, ".claude", "conversation")
	if b, err := os.ReadFile(conv); err != nil || string(b) != "first\n" {
		t.Errorf("the fork's conversation: %q %v", b, err)
	}
	if fi, err := os.Lstat(conv); os.Getuid() == 0 && (err != nil || fi.Sys().(*syscall.Stat_t).Uid != 4242) {
		t.Errorf("the fork's conversation is not the agent's: %v %v", fi.Sys(), err)
	}
	// The fork's work is its own.
	commit(t, got, "two.txt")
	if _, err := os.Stat(filepath.Join(dir, "two.txt")); !os.IsNotExist(err) {
		t.Errorf("the fork's file is in the source's checkout: %v", err)
	}
	if head := git(t, dir, "rev-parse", "HEAD"); head != c1 {
		t.Errorf("the source moved to %s", head)
	}
	// Nothing left over beside the copies.
	if _, err := os.Stat(got + ".copying"); !os.IsNotExist(err) {
		t.Errorf("a half copy is left: %v", err)
	}

	// A source whose checkout is gone: the fork gets nothing.
	gone, other := agent("gone"), agent("other")
	if err := h.w.Copy(gone, other); err == nil {
		t.Error("a copy of a missing checkout succeeded")
	}
	for _, p := range []string{h.w.Dir(other), h.w.Dir(other) + ".home", h.w.Dir(other) + ".copying"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is left after a failed copy: %v", p, err)
		}
	}
}
