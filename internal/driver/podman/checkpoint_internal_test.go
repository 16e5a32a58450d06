package podman

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/entrypoint"
	"berth.dev/berth/internal/golden"
)

// TestRunscWrapper runs the runtime wrapper berth writes for runsc with
// the real sh, over a stand-in runsc that records its arguments: every
// call gets berth's state directory and the pinned platform; podman's
// create of a container with a note becomes runsc's restore of the
// checkpoint the note names, with podman's own flags kept, and the start
// that follows does nothing; the note is used once.
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
	id := strings.Repeat("ab", 32)
	image := filepath.Join(cfg.checkpointDir(), "berth-sbx_x", "image")
	wrapper("create", "--bundle", "/b", "--pid-file", "/p", id)
	wrapper("start", id)
	if err := os.WriteFile(filepath.Join(cfg.checkpointDir(), id+".restore"), []byte(image), 0o600); err != nil {
		t.Fatal(err)
	}
	wrapper("--systemd-cgroup", "create", "--bundle", "/b", "--pid-file", "/p", "--console-socket", "/c", id)
	wrapper("start", id)
	wrapper("create", "--bundle", "/b", "--pid-file", "/p", id) // the note is spent: a cold create
	wrapper("checkpoint", "--image-path", image, id)
	got, _ := os.ReadFile(calls)
	root := "--root=" + filepath.Join(cfg.StateDir, "runsc") + " --platform=systrap "
	want := strings.Join([]string{
		root + "create --bundle /b --pid-file /p " + id,
		root + "start " + id,
		root + "--systemd-cgroup restore --detach --background --image-path " + image + " --bundle /b --pid-file /p --console-socket /c " + id,
		root + "create --bundle /b --pid-file /p " + id,
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
