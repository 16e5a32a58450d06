package podman

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/secret"
)

// TestHandOverFollowsNoLink: after a first claim the control directory is
// the sandbox's, whose user may leave links there; a resume's token must
// land in the directory, never through a link onto a file of the host's,
// and the last start's ready file must go.
func TestHandOverFollowsNoLink(t *testing.T) {
	dir, host := t.TempDir(), t.TempDir()
	victim := filepath.Join(host, "victim")
	if err := os.WriteFile(victim, []byte("the host's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{claimFile, ".claim.new"} {
		if err := os.Symlink(victim, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, readyFile), []byte("ready\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := handOver(dir, secret.New("bst_TOKEN")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "the host's\n" {
		t.Errorf("the host's file now holds %q", b)
	}
	fi, err := os.Lstat(filepath.Join(dir, claimFile))
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the claim file is %v, %v; want a regular file", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, claimFile)); !strings.Contains(string(b), `berth.dev/bootstrap-token="bst_TOKEN"`) {
		t.Errorf("the claim file holds %q", b)
	}
	if _, err := os.Lstat(filepath.Join(dir, readyFile)); !os.IsNotExist(err) {
		t.Errorf("the last start's ready file is still there: %v", err)
	}
}
