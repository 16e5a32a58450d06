package entrypoint

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// piFiles are Pi's configuration files the gateway renders (SPEC S14) and
// the variables that carry them.
var piFiles = []struct{ env, path string }{
	{"BERTH_PI_CONFIG", ".pi/agent/models.json"},
	{"BERTH_PI_SETTINGS", ".pi/agent/settings.json"},
}

// writePiFiles puts the gateway's rendering of Pi's files in HOME. A file
// is rewritten only while it is as berth-init last wrote it: once its user
// has changed it, it is theirs, and a new rendering waits beside it. What
// was written is remembered by hash under ~/.berth.
func (r *starter) writePiFiles() error {
	home := r.cfg.home
	for _, f := range piFiles {
		content := r.env.Getenv(f.env)
		if content == "" {
			continue
		}
		path := filepath.Join(home, f.path)
		stamp := filepath.Join(home, ".berth", "written", strings.ReplaceAll(f.path, "/", "_")+".sha256")
		cur, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err
		default:
			last, _ := os.ReadFile(stamp)
			if hash(cur) != strings.TrimSpace(string(last)) {
				if hash(cur) != hash([]byte(content)) {
					if err := writeFile(path+".berth", []byte(content), 0o600); err != nil {
						return err
					}
					r.logf("~/%s was changed since berth wrote it: left as it is; the gateway's current one is ~/%s.berth", f.path, f.path)
				}
				continue
			}
		}
		if err := privateDir(filepath.Dir(path)); err != nil {
			return err
		}
		if err := privateDir(filepath.Dir(stamp)); err != nil {
			return err
		}
		if err := writeFile(path, []byte(content), 0o600); err != nil {
			return err
		}
		if err := writeFile(stamp, []byte(hash([]byte(content))+"\n"), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func hash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
