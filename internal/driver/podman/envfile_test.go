package podman_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"berth.dev/berth/internal/driver/podman"
	"berth.dev/berth/internal/sandbox"
)

// envFileArg is the --env-file of a podman command line.
func envFileArg(args []string) string {
	if i := slices.Index(args, "--env-file"); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// heldByOther reports whether somebody holds path's lock.
func heldByOther(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	return errors.Is(err, syscall.EWOULDBLOCK)
}

// TestEnvFileLivesOnlyWhilePodmanRuns: the env file podman run reads is
// 0600 in the 0700 directory, locked by the driver while podman runs,
// and gone once podman run returns, before any clean-up after a failure.
func TestEnvFileLivesOnlyWhilePodmanRuns(t *testing.T) {
	for _, fail := range []bool{false, true} {
		state := t.TempDir()
		if err := os.Mkdir(filepath.Join(state, "env"), 0o700); err != nil {
			t.Fatal(err)
		}
		var file string
		run := func(_ context.Context, _ []string, args ...string) ([]byte, error) {
			switch args[0] {
			case "volume":
				return nil, nil
			case "run":
				file = envFileArg(args)
				fi, err := os.Stat(file)
				if err != nil {
					t.Fatalf("podman run's env file: %v", err)
				}
				if fi.Mode().Perm() != 0o600 || filepath.Dir(file) != filepath.Join(state, "env") {
					t.Errorf("the env file %s is %v, want 0600 in %s/env", file, fi.Mode().Perm(), state)
				}
				if b, _ := os.ReadFile(file); !strings.Contains(string(b), "BERTH_API_KEY=berth_secret\n") {
					t.Errorf("the env file holds %q", b)
				}
				if !heldByOther(t, file) {
					t.Error("nobody holds the env file's lock while podman runs")
				}
				if fail {
					return nil, errors.New("podman run: exit status 125")
				}
				return nil, nil
			case "rm":
				if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the env file is still there when the failed container is removed: %v", err)
				}
				return nil, nil
			}
			t.Fatalf("unexpected podman %s", args[0])
			return nil, nil
		}
		d := podman.NewWithRunner(podman.Config{StateDir: state}, slog.New(slog.DiscardHandler), run)
		sb := sandbox.Sandbox{ID: sandbox.NewID(), Name: "env", Purpose: sandbox.PurposeAgent, Image: testImage}
		err := d.Start(t.Context(), sandbox.Spec{Sandbox: sb, Env: map[string]string{"BERTH_API_KEY": "berth_secret"}})
		if (err != nil) != fail {
			t.Fatalf("Start (podman run failing: %v): %v", fail, err)
		}
		if file == "" {
			t.Fatal("podman run was given no env file")
		}
		if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after podman run returned the env file is still there: %v", err)
		}
	}
}

// TestTidyRemovesEnvFilesNobodyHolds: Tidy removes the env file a killed
// gateway left, and leaves the one a live gateway holds, an empty one
// being made, and an older gateway's (which locks nothing) until it is
// older than OrphanAge.
func TestTidyRemovesEnvFilesNobodyHolds(t *testing.T) {
	state := t.TempDir()
	dir := filepath.Join(state, "env")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string, age time.Duration) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-age)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
		return p
	}
	left := write("sbx_left.123.env", "BERTH_API_KEY=k\n", 0)
	held := write("sbx_held.456.env", "BERTH_API_KEY=k\n", 0)
	making := write("sbx_making.789.env", "", 0)
	emptyLeft := write("sbx_empty.1.env", "", 2*time.Minute)
	older := write("sbx_older.env", "BERTH_API_KEY=k\n", time.Second)
	olderLeft := write("sbx_olderleft.env", "BERTH_API_KEY=k\n", 3*time.Minute)
	other := write("notes.txt", "not an env file", time.Hour)

	f, err := os.Open(held)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	run := func(_ context.Context, _ []string, args ...string) ([]byte, error) { return nil, nil } // ps: podman knows nothing
	d := podman.NewWithRunner(podman.Config{StateDir: state}, slog.New(slog.DiscardHandler), run)
	removed, err := d.Tidy(t.Context())
	if err != nil && strings.Contains(err.Error(), "env file") {
		t.Fatalf("Tidy: %v", err)
	}
	for _, c := range []struct {
		path string
		gone bool
	}{{left, true}, {emptyLeft, true}, {olderLeft, true}, {held, false}, {making, false}, {older, false}, {other, false}} {
		_, err := os.Stat(c.path)
		if gone := errors.Is(err, os.ErrNotExist); gone != c.gone {
			t.Errorf("%s: gone %v, want %v", filepath.Base(c.path), gone, c.gone)
		}
		if in := slices.Contains(removed, c.path); in != c.gone {
			t.Errorf("Tidy returned %q: %s among them %v, want %v", removed, filepath.Base(c.path), in, c.gone)
		}
	}
}

// TestNewKeepsTheEnvDirPrivate: the env files' directory is made 0700, an
// existing one open to others is closed at start, and one that is a link
// is refused.
func TestNewKeepsTheEnvDirPrivate(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	fresh := t.TempDir()
	if d, err := podman.New(podman.Config{StateDir: fresh}, log); err != nil {
		t.Fatal(err)
	} else {
		t.Cleanup(func() { d.Close() }) // its podman service, before the directory goes
	}
	open := t.TempDir()
	if err := os.Mkdir(filepath.Join(open, "env"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(open, "env"), 0o755); err != nil { // past the umask
		t.Fatal(err)
	}
	if d, err := podman.New(podman.Config{StateDir: open}, log); err != nil {
		t.Fatal(err)
	} else {
		t.Cleanup(func() { d.Close() })
	}
	for _, dir := range []string{fresh, open} {
		fi, err := os.Stat(filepath.Join(dir, "env"))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("the env files' directory is %v, want 0700", fi.Mode().Perm())
		}
	}
	linked := t.TempDir()
	if err := os.Symlink(t.TempDir(), filepath.Join(linked, "env")); err != nil {
		t.Fatal(err)
	}
	if _, err := podman.New(podman.Config{StateDir: linked}, log); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("an env directory that is a link: %v, want refused", err)
	}
}
