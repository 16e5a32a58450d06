package podman

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/entrypoint"
	"berth.dev/berth/internal/golden"
)

// TestRunscWrapper runs the runtime wrapper berth writes for runsc with
// the real sh, over a stand-in runsc that records its arguments: every
// call gets berth's state directory and the pinned platform; podman's
// create is always runsc's create (the standby a suspended machine waits
// in); podman's start of a container with a note becomes runsc's restore
// into it of the checkpoint the note links to, with podman's own flags
// kept; the note is used once, and a dangling one restores nothing.
func TestRunscWrapper(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	runsc := filepath.Join(dir, "bin", "runsc")
	if err := os.MkdirAll(filepath.Dir(runsc), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(runsc, []byte("#!/bin/sh\necho \"$*\" >> '"+calls+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := Config{StateDir: filepath.Join(dir, "state"), Runtimes: map[string]string{"runsc": runsc}}
	if err := cfg.WriteConfig(); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "runsc-wrapper", []byte(strings.ReplaceAll(cfg.runscWrapper("runsc"), dir, "/DIR")))
	if conf, _ := os.ReadFile(filepath.Join(cfg.StateDir, "containers.conf")); !strings.Contains(string(conf), `runsc = ["`+cfg.runtimePath("runsc")+`"]`) {
		t.Errorf("containers.conf does not run the wrapper:\n%s", conf)
	}
	wrapper := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(cfg.runtimePath("runsc"), args...).CombinedOutput(); err != nil {
			t.Fatalf("wrapper %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	id, other := strings.Repeat("ab", 32), strings.Repeat("cd", 32)
	image := cfg.imageDir("berth-sbx_x")
	if err := os.MkdirAll(image, 0o700); err != nil {
		t.Fatal(err)
	}
	wrapper("create", "--bundle", "/b", "--pid-file", "/p", id)
	wrapper("start", id)
	if err := cfg.linkNote(id, "berth-sbx_x"); err != nil {
		t.Fatal(err)
	}
	if got := cfg.notesOf("berth-sbx_x"); len(got) != 1 || got[0] != cfg.noteOf(id) {
		t.Errorf("notesOf = %v, want [%s]", got, cfg.noteOf(id))
	}
	if err := cfg.linkNote(other, "berth-sbx_gone"); err != nil { // its checkpoint was dropped
		t.Fatal(err)
	}
	wrapper("--systemd-cgroup", "create", "--bundle", "/b", "--pid-file", "/p", "--console-socket", "/c", id)
	wrapper("--systemd-cgroup", "start", id)
	if _, err := os.Lstat(cfg.noteOf(id)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the restore left its note (%v)", err)
	}
	wrapper("start", id) // the note is spent: a plain start
	wrapper("start", other)
	wrapper("checkpoint", "--image-path", image, id)
	got, _ := os.ReadFile(calls)
	root := "--root=" + filepath.Join(cfg.StateDir, "runsc") + " --platform=systrap "
	want := strings.Join([]string{
		root + "create --bundle /b --pid-file /p " + id,
		root + "start " + id,
		root + "--systemd-cgroup create --bundle /b --pid-file /p --console-socket /c " + id,
		root + "--systemd-cgroup restore --detach --background --image-path " + cfg.noteOf(id) + " " + id,
		root + "start " + id,
		root + "start " + other,
		root + "checkpoint --image-path " + image + " " + id,
	}, "\n") + "\n"
	if string(got) != want {
		t.Errorf("runsc was called with\n%s\nwant\n%s", got, want)
	}
}

// TestRefreshHomeArg: the driver asks berth-init for the refresh by the
// argument berth-init knows.
func TestRefreshHomeArg(t *testing.T) {
	if refreshHomeArg != entrypoint.RefreshHomeArg {
		t.Errorf("the driver runs berth-init %s, which takes %s", refreshHomeArg, entrypoint.RefreshHomeArg)
	}
}

// TestConfigKeepsRuntimesInUse: a gateway configured without a runtime
// that another on the same podman root registered keeps it in
// containers.conf while its program is there (podman can neither stop
// nor remove a container whose runtime its configuration lost: CI's
// "runtime runsc is missing"), and drops it once the program is gone.
func TestConfigKeepsRuntimesInUse(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(t.TempDir(), "kata-runtime")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	conf := func() string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, "containers.conf"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	with := Config{StateDir: dir, Runtimes: map[string]string{"kata": bin}}
	without := Config{StateDir: dir, Runtimes: map[string]string{"other": "/bin/sh"}}
	if err := with.WriteConfig(); err != nil {
		t.Fatal(err)
	}
	if err := without.WriteConfig(); err != nil {
		t.Fatal(err)
	}
	line := `kata = ["` + bin + `"]`
	if got := conf(); !strings.Contains(got, line) || !strings.Contains(got, `other = ["/bin/sh"]`) {
		t.Errorf("containers.conf of a gateway without kata, after one with it:\n%s\nwant %s kept beside its own", got, line)
	}
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	if err := without.WriteConfig(); err != nil {
		t.Fatal(err)
	}
	if got := conf(); strings.Contains(got, "kata") {
		t.Errorf("containers.conf keeps a runtime whose program is gone:\n%s", got)
	}
}

// TestSettleWaitsForTheExitsHandlers: after a checkpoint, the standby
// is made only once the container's old conmon and the clean-up it
// started (`podman container cleanup ID`) are gone; a process that only
// names the container is no reason to wait, and a wait that outlasts its
// bound says so. Real processes stand in for conmon and podman, under
// their argv.
func TestSettleWaitsForTheExitsHandlers(t *testing.T) {
	full := strings.Repeat("5e", 32)
	run := func(seconds string, argv ...string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command("/bin/sh", append([]string{"-c", "sleep " + seconds}, argv[1:]...)...)
		cmd.Args[0] = argv[0]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	ctx := context.Background()
	for _, argv := range [][]string{
		{"/usr/bin/conmon", "--api-version", "1", "-c", full},
		{"/usr/bin/podman", "--root", "/r", "container", "cleanup", full},
	} {
		cmd := run("0.4", argv...)
		go func() { _ = cmd.Wait() }()
		if !pendingExit(full) {
			t.Errorf("%s running: nothing pending", argv[0])
		}
		began := time.Now()
		if err := settle(ctx, full, 10*time.Second); err != nil {
			t.Errorf("settle with %s running: %v", argv[0], err)
		}
		if took := time.Since(began); took < 200*time.Millisecond {
			t.Errorf("settle returned after %s, with %s running for 0.4 s", took, argv[0])
		}
		if pendingExit(full) {
			t.Errorf("after %s ended something is still pending", argv[0])
		}
	}
	run("5", "/usr/bin/podman", "logs", "--follow", full)
	if pendingExit(full) {
		t.Error("a process that only names the container is pending")
	}
	run("5", "/usr/bin/conmon", "-c", full)
	if err := settle(ctx, full, 100*time.Millisecond); err == nil {
		t.Error("settle with conmon running for 5 s returned no error within 100 ms")
	}
}
