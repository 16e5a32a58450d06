package workspace

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"berth.dev/berth/internal/sandbox"
)

// Copy makes dst's checkout, and its session home when src has one,
// copies of src's as they are (a session's fork, SPEC S13): every file,
// owner, mode and link kept, a link copied as a link, never followed.
// Each copy is made beside its place and renamed into it whole, so a
// gateway stopped half-way leaves no half checkout under dst's name. On
// error dst has neither.
func (w *Workspaces) Copy(src, dst sandbox.Sandbox) error {
	pairs := [][2]string{{w.Dir(src), w.Dir(dst)}, {w.homeDir(src), w.homeDir(dst)}}
	for i, p := range pairs {
		if i > 0 {
			if _, err := os.Lstat(p[0]); errors.Is(err, os.ErrNotExist) {
				continue // a session that never had a home
			}
		}
		if err := copyTree(p[0], p[1]); err != nil {
			_ = w.Remove(dst)
			return err
		}
	}
	return nil
}

// copyTree copies the directory from to a new directory to, through a
// sibling renamed into place.
func copyTree(from, to string) error {
	fi, err := os.Lstat(from)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", from)
	}
	tmp := to + ".copying"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.RemoveAll(to); err != nil {
		return err
	}
	// cp -a keeps owners, modes, times and links (-P: never followed);
	// --reflink=auto shares blocks where the file system can.
	cmd := exec.Command("cp", "-a", "--reflink=auto", "--no-target-directory", "--", from, tmp)
	cmd.SysProcAttr = ownGroup()
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("copy %s: %v: %s", from, err, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(tmp, to); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	return nil
}
