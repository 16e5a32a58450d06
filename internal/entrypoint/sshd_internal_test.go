package entrypoint

import (
	"os"
	"strings"
	"testing"
)

// TestHomeModes: sshd's StrictModes refuses the keys under a HOME others
// may write, as a Kubernetes emptyDir's root (0777, the node's) or a
// claim's after fsGroup (group-writable, root's) is. A HOME the user owns
// is made safe and StrictModes stays on; one that is not theirs to change
// turns it off, saying why, or sshd would refuse every key.
func TestHomeModes(t *testing.T) {
	for _, tt := range []struct {
		name     string
		mode     os.FileMode
		ours     bool
		strict   bool
		wantMode os.FileMode
	}{
		{"private", 0o700, true, true, 0o700},
		{"world-writable, ours", 0o777, true, true, 0o755},
		{"group-writable setgid, ours", 0o775 | os.ModeSetgid, true, true, 0o755 | os.ModeSetgid},
		{"emptyDir, the node's", 0o777, false, false, 0o777},
		{"claim after fsGroup, root's", 0o775 | os.ModeSetgid, false, false, 0o775 | os.ModeSetgid},
		{"not ours but safe", 0o755, false, true, 0o755},
	} {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			if err := os.Chmod(home, tt.mode); err != nil {
				t.Fatal(err)
			}
			uid := os.Getuid()
			if !tt.ours {
				uid++ // the directory's owner is someone else
			}
			strict, why := homeModes(home, uid)
			if strict != tt.strict {
				t.Errorf("strict = %v (%s), want %v", strict, why, tt.strict)
			}
			if !strict && !strings.Contains(why, home) {
				t.Errorf("why %q does not name HOME", why)
			}
			fi, err := os.Stat(home)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode() & (os.ModePerm | os.ModeSetgid); got != tt.wantMode {
				t.Errorf("HOME mode %v after, want %v", got, tt.wantMode)
			}
			conf := string(sshdConfig(home, strict))
			if want := map[bool]string{true: "StrictModes yes\n", false: "StrictModes no\n"}[strict]; !strings.Contains(conf, want) {
				t.Errorf("sshd_config lacks %q:\n%s", want, conf)
			}
		})
	}
}
