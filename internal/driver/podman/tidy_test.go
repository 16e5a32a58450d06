package podman_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/driver/podman"
)

// TestTidyRemovesOrphanedRuntimeContainers: what a podman killed during a
// create leaves in runc (notes/podman.md §9: its state and a `runc init`
// waiting in its cgroup, after the container itself is gone) is removed;
// a container podman knows, running beside it, is not.
func TestTidyRemovesOrphanedRuntimeContainers(t *testing.T) {
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Skip("no runc on PATH")
	}
	testTidy(t, runc, nil)
}

// TestTidyRemovesOrphanedRunscContainers: the same for gVisor's runsc,
// the isolated tier's runtime, which keeps state of its own and says no
// creation time in its listing.
func TestTidyRemovesOrphanedRunscContainers(t *testing.T) {
	runsc := os.Getenv("BERTH_TEST_RUNSC")
	if runsc == "" {
		t.Skip("set BERTH_TEST_RUNSC to a runsc binary (scripts/build-runsc) to tidy gVisor's orphans")
	}
	testTidy(t, runsc, map[string]string{"runsc": runsc})
}

func testTidy(t *testing.T, bin string, runtimes map[string]string) {
	root := podmanRoot(t)
	cfg := podman.Config{StateDir: root, OrphanAge: time.Second, Runtimes: runtimes}
	d := newDriverWith(t, cfg)
	if filepath.Base(bin) == "runsc" {
		// runsc's state is berth's own, under the wrapper podman runs.
		bin = filepath.Join(root, "runtimes", "runsc")
	}
	podmanOut := func(args ...string) ([]byte, error) {
		cmd := exec.Command("podman", args...)
		cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+root+"/containers.conf", "CONTAINERS_STORAGE_CONF="+root+"/storage.conf")
		return cmd.CombinedOutput()
	}
	podmanCmd := func(args ...string) string {
		t.Helper()
		out, err := podmanOut(args...)
		if err != nil {
			t.Fatalf("podman %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}

	// A container podman knows, running.
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "berthtest-tidy-" + hex.EncodeToString(b)
	known := podmanCmd("run", "-d", "--rm", "--name", name, "--entrypoint", "sleep", testImage, "120")
	t.Cleanup(func() { _, _ = podmanOut("rm", "-f", "-t", "0", name) })

	// The orphan: runtime state whose bundle is in the driver's store,
	// made the way podman makes it (create: an init waits), with no
	// container of podman's.
	rootfs := podmanCmd("image", "mount", testImage)
	t.Cleanup(func() { podmanCmd("image", "unmount", testImage) })
	orphan := hex.EncodeToString(append(b, make([]byte, 28)...))
	bundle := filepath.Join(root, "storage", "overlay-containers", orphan, "userdata")
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command(bin, "delete", "--force", orphan).Run()
		os.RemoveAll(filepath.Dir(bundle))
	})
	spec := exec.Command("runc", "spec")
	spec.Dir = bundle
	if out, err := spec.CombinedOutput(); err != nil {
		t.Fatalf("runc spec: %v: %s", err, out)
	}
	var oci map[string]any
	raw, _ := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err := json.Unmarshal(raw, &oci); err != nil {
		t.Fatal(err)
	}
	oci["root"] = map[string]any{"path": rootfs, "readonly": true}
	process := oci["process"].(map[string]any)
	process["args"], process["terminal"] = []string{"sleep", "120"}, false
	raw, _ = json.Marshal(oci)
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	// No pipes: the waiting init would hold them open, and the test with
	// them.
	args := []string{"create", "--bundle", bundle, orphan}
	if filepath.Base(bin) == "runsc" {
		// Its overlay in memory: by default runsc keeps the root's writes
		// in a file in the root itself, the shared image mount, which may
		// be unmounted (another test's clean-up) before Tidy deletes it.
		args = append([]string{"--overlay2=root:memory"}, args...)
	}
	if err := exec.Command(bin, args...).Run(); err != nil {
		t.Fatalf("%s create: %v", filepath.Base(bin), err)
	}
	initPid := runtimePid(t, bin, orphan)
	time.Sleep(1100 * time.Millisecond) // past OrphanAge

	removed, err := d.Tidy(context.Background())
	if err != nil {
		t.Fatalf("Tidy: %v", err)
	}
	if !slices.Contains(removed, orphan) {
		t.Errorf("Tidy removed %v, want the orphan %s among them", removed, orphan)
	}
	if slices.Contains(removed, known) {
		t.Errorf("Tidy removed %s, a container podman knows", known)
	}
	if err := exec.Command(bin, "state", orphan).Run(); err == nil {
		t.Errorf("%s still has the orphan's state", filepath.Base(bin))
	}
	if !gone(initPid, 5*time.Second) {
		t.Errorf("the orphan's init (pid %d) is still there", initPid)
	}
	if state := podmanCmd("inspect", "--format", "{{.State.Status}}", name); state != "running" {
		t.Errorf("the container podman knows is %s after Tidy, want running", state)
	}
}

// runtimePid is the pid the runtime's state names for id.
func runtimePid(t *testing.T, bin, id string) int {
	t.Helper()
	out, err := exec.Command(bin, "state", id).Output()
	if err != nil {
		t.Fatalf("%s state %s: %v", filepath.Base(bin), id, err)
	}
	var st struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal(out, &st); err != nil || st.Pid == 0 {
		t.Fatalf("%s state %s: %s (%v)", filepath.Base(bin), id, out, err)
	}
	return st.Pid
}

// gone reports whether process pid ends (or is only a zombie left for its
// parent to reap) within d.
func gone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		// pid (comm) state …: the state follows the last parenthesis.
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && strings.HasPrefix(string(stat[i+1:]), " Z") {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
