package workspace

import "testing"

// TestSubcommand: a failed git run is named by its command, not by the
// options before it.
func TestSubcommand(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"clone", "--quiet", "x"}, "clone"},
		{[]string{"--git-dir", "/srv/a.git", "rev-parse", "HEAD"}, "rev-parse"},
		{[]string{"-c", "core.fsync=none", "--git-dir", "/srv/a.git", "pack-objects", "--revs"}, "pack-objects"},
		{[]string{"--git-dir", "/x/.git", "--work-tree", "/x", "read-tree", "-u"}, "read-tree"},
		{[]string{"--version"}, "--version"},
	} {
		if got := subcommand(tt.args); got != tt.want {
			t.Errorf("subcommand(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}
