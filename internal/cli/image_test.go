package cli_test

import (
	"bytes"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/cli"
)

// TestImageCheck runs berth image check against real images under real
// podman. Gated: BERTH_TEST_PODMAN names the podman root holding the images
// (make images; images/build agent), and it needs root. The agent image
// must pass every element; the plain sandbox image, given this tree's
// berth-init, launches and takes the prompt but has no runner.
func TestImageCheck(t *testing.T) {
	root := os.Getenv("BERTH_TEST_PODMAN")
	if root == "" {
		t.Skip("set BERTH_TEST_PODMAN to a podman root holding the images (make images, images/build agent)")
	}
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("no podman")
	}
	t.Setenv("CONTAINERS_CONF", filepath.Join(root, "containers.conf"))
	t.Setenv("CONTAINERS_STORAGE_CONF", filepath.Join(root, "storage.conf"))
	vars := map[string]string{"BERTH_SANDBOX_PODMAN_ROOT": root, "BERTH_DATA_DIR": t.TempDir()}
	check := func(t *testing.T, args ...string) (string, int) {
		t.Helper()
		var out bytes.Buffer
		env := cli.Env{Stdout: &out, Stderr: &out, Getenv: func(k string) string { return vars[k] }, Now: time.Now}
		start := time.Now()
		code := cli.Main(t.Context(), append([]string{"image", "check"}, args...), env)
		t.Logf("berth image check %s: exit %d in %v\n%s", strings.Join(args, " "), code, time.Since(start).Round(10*time.Millisecond), out.String())
		return out.String(), code
	}

	t.Run("agent image", func(t *testing.T) {
		const image = "localhost/berth-agent-pi:latest"
		if err := exec.Command("podman", "image", "exists", image).Run(); err != nil {
			t.Skipf("%s is not built (images/build agent pi)", image)
		}
		out, code := check(t, image)
		if code != 0 || strings.Contains(out, "✗") {
			t.Errorf("exit %d, want 0 with every element holding:\n%s", code, out)
		}
		for _, el := range []string{"launch", "prompt-stdin", "args", "runner-files", "git", "runner", "missing-prompt"} {
			if !hasLine(out, el, "✓") {
				t.Errorf("no %s ✓ line:\n%s", el, out)
			}
		}
	})

	t.Run("sandbox image", func(t *testing.T) {
		image := withThisBerthInit(t, "localhost/berth-sandbox:latest")
		out, code := check(t, image)
		if code != 1 || !hasLine(out, "runner", "✗", "the image has no berth.runner label") {
			t.Errorf("exit %d, want 1 with runner ✗ (no label):\n%s", code, out)
		}
		for _, el := range []string{"launch", "non-root", "capabilities", "workdir", "prompt-stdin", "args", "home", "git", "missing-prompt"} {
			if !hasLine(out, el, "✓") {
				t.Errorf("no %s ✓ line:\n%s", el, out)
			}
		}
		out, code = check(t, image, "--runner", "pi")
		if code != 1 || !hasLine(out, "runner", "✗", "pi: pi not found in PATH") {
			t.Errorf("--runner pi: exit %d, want 1 with runner ✗ (not found):\n%s", code, out)
		}
	})

	t.Run("not an image", func(t *testing.T) {
		out, code := check(t, "localhost/berth-test-no-such-image:latest")
		if code != 1 || !strings.Contains(out, "is not in the podman driver's store") {
			t.Errorf("exit %d, want 1 saying the image is missing:\n%s", code, out)
		}
	})
}

// hasLine reports whether out has a table line for element whose other
// cells start with the given words.
func hasLine(out, element string, cells ...string) bool {
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) > 1 && f[0] == element && strings.HasPrefix(strings.Join(f[1:], " "), strings.Join(cells, " ")) {
			return true
		}
	}
	return false
}

// withThisBerthInit builds, for the test's duration, an image FROM image
// with this tree's berth-init: the store's sandbox image may predate the
// check mode.
func withThisBerthInit(t *testing.T, image string) string {
	t.Helper()
	if err := exec.Command("podman", "image", "exists", image).Run(); err != nil {
		t.Skipf("%s is not built (make images)", image)
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "berth-init"), "berth.dev/berth/cmd/berth-init")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build berth-init: %v\n%s", err, out)
	}
	file := "FROM " + image + "\nCOPY berth-init /usr/local/bin/berth-init\n"
	if err := os.WriteFile(filepath.Join(dir, "Containerfile"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	tag := "localhost/berth-test-" + strings.ToLower(rand.Text()[:10]) + ":latest"
	if out, err := exec.Command("podman", "build", "-q", "--pull=never", "-t", tag, dir).CombinedOutput(); err != nil {
		t.Fatalf("podman build: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("podman", "image", "rm", "-f", tag).Run() })
	return tag
}
