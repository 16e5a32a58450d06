package podman

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"berth.dev/berth/internal/sandbox"
)

// A container's single-line variables reach podman in an env file, never
// in argv. The file holds the sandbox's key, so it is 0600 in a directory
// only the gateway's user may enter (0700, checked at start), it lives only
// while `podman run` reads it, and its maker holds a lock on it (flock)
// for as long as it exists. A gateway killed meanwhile leaves it behind,
// and its lock goes with the process: Tidy removes every env file nobody
// holds, while gateways sharing the podman root go on making theirs.

// envDir is the env files' directory.
func (c Config) envDir() string { return filepath.Join(c.StateDir, "env") }

// privateDir makes dir, or makes sure it is, a directory of the gateway's
// user that nobody else may enter. It says whether it had to take access
// away; a symlink or another user's directory is refused.
func privateDir(dir string) (fixed bool, err error) {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return false, err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return false, err
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("%s is not a directory (%s)", dir, fi.Mode().Type())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return false, fmt.Errorf("%s belongs to uid %d, not to the gateway's %d", dir, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm() == 0o700 {
		return false, nil
	}
	return true, os.Chmod(dir, 0o700)
}

// envFile is one container's env file, locked by the driver while it
// exists.
type envFile struct{ f *os.File }

// writeEnvFile makes an env file for sandbox id in dir holding body. The
// name is new each time (the same sandbox may be started twice), and the
// file is locked before a byte is in it: an empty file may be one that is
// being made, and Tidy leaves it alone.
func writeEnvFile(dir string, id sandbox.ID, body string) (*envFile, error) {
	f, err := os.CreateTemp(dir, string(id)+".*.env") // O_EXCL, 0600
	if err != nil {
		return nil, err
	}
	e := &envFile{f}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = e.remove()
		return nil, err
	}
	if _, err := f.WriteString(body); err != nil {
		_ = e.remove()
		return nil, err
	}
	return e, nil
}

func (e *envFile) name() string { return e.f.Name() }

// remove deletes the file, then lets go of its lock.
func (e *envFile) remove() error {
	err := os.Remove(e.f.Name())
	e.f.Close()
	return err
}

// tidyEnvFiles removes the env files no gateway holds: what one killed
// during `podman run` left, with a key in it. A file of an older gateway,
// which did not lock its files (named <id>.env), is taken only once it is
// older than OrphanAge; an empty one, only after a minute. It returns the
// paths it removed.
func (d *Driver) tidyEnvFiles(ctx context.Context) ([]string, error) {
	dir := d.cfg.envDir()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("env files: %w", err)
	}
	var removed []string
	for _, ent := range entries {
		name := ent.Name()
		if !ent.Type().IsRegular() || !strings.HasSuffix(name, ".env") {
			continue
		}
		path := filepath.Join(dir, name)
		legacy := strings.Count(name, ".") == 1
		ok, err := d.takeEnvFile(path, legacy)
		if err != nil {
			return removed, fmt.Errorf("env file %s: %w", name, err)
		}
		if ok {
			d.log.InfoContext(ctx, "env file a killed gateway left removed", "file", name)
			removed = append(removed, path)
		}
	}
	return removed, nil
}

// takeEnvFile removes path if nobody holds it, holding its lock meanwhile.
func (d *Driver) takeEnvFile(path string, legacy bool) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // its gateway removed it meanwhile
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil // a live gateway's podman run is reading it
	} else if err != nil {
		return false, err
	}
	held, err := f.Stat()
	if err != nil {
		return false, err
	}
	age := time.Since(held.ModTime())
	switch {
	case held.Size() == 0 && age < time.Minute:
		return false, nil // made, not yet locked by its maker
	case legacy && age < d.cfg.OrphanAge:
		return false, nil // an older gateway's, which locks nothing
	}
	// The name may have gone to another file since it was opened: only
	// the one held is removed.
	if cur, err := os.Lstat(path); err != nil || !os.SameFile(cur, held) {
		return false, nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, nil
}
