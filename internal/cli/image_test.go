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
		out, code := check(t, image, "--purpose", "agent")
		if code != 1 || !hasLine(out, "runner", "✗", "the image has no berth.runner label") {
			t.Errorf("exit %d, want 1 with runner ✗ (no label):\n%s", code, out)
		}
		for _, el := range []string{"launch", "non-root", "capabilities", "workdir", "prompt-stdin", "args", "home", "git", "missing-prompt"} {
			if !hasLine(out, el, "✓") {
				t.Errorf("no %s ✓ line:\n%s", el, out)
			}
		}
		out, code = check(t, image, "--runner", "pi")
		if !strings.Contains(out, "purpose agent, runner pi") {
			t.Errorf("--runner pi: not an agent check:\n%s", out)
		}
		if code != 1 || !hasLine(out, "runner", "✗", "pi: pi not found in PATH") {
			t.Errorf("--runner pi: exit %d, want 1 with runner ✗ (not found):\n%s", code, out)
		}
	})

	engineer := []string{"entrypoint", "sshd", "login", "non-root", "home", "local-bin", "tools"}
	t.Run("engineer image", func(t *testing.T) {
		// The sandbox image as this tree's Containerfile labels it, with a
		// devcontainer's postCreateCommand as berth image build writes it.
		image := buildTestImage(t, "localhost/berth-sandbox:latest", sandboxLabels(t)+"COPY post-create.json /etc/berth/post-create.json\n",
			map[string]string{"post-create.json": `{"deps": ["make", "deps"], "hello": "echo hello >~/hello"}`})
		out, code := check(t, image)
		if code != 0 || strings.Contains(out, "✗") || !strings.Contains(out, "purpose engineer, runner -") {
			t.Errorf("exit %d, want 0 with every engineer element holding:\n%s", code, out)
		}
		for _, el := range append(engineer, "post-create") {
			if !hasLine(out, el, "✓") {
				t.Errorf("no %s ✓ line:\n%s", el, out)
			}
		}
		for _, want := range []string{"the server says SSH-2.0-", "uid 1001", "make pkg-config python3", "2 commands, one after another: deps, hello"} {
			if !strings.Contains(out, want) {
				t.Errorf("no %q in:\n%s", want, out)
			}
		}
		if _, code := check(t, image, "--purpose", "engineer", "--runner", "pi"); code != 2 {
			t.Errorf("--purpose engineer --runner pi: exit %d, want 2", code)
		}
	})

	t.Run("editor image", func(t *testing.T) {
		image := buildTestImage(t, "localhost/berth-editor:latest", "LABEL berth.purpose=engineer\n", nil)
		out, code := check(t, image)
		if code != 0 || strings.Contains(out, "✗") || strings.Contains(out, "post-create") {
			t.Errorf("exit %d, want 0 with every engineer element holding and no post-create:\n%s", code, out)
		}
	})

	t.Run("engineer image without sshd", func(t *testing.T) {
		image := buildTestImage(t, "localhost/berth-sandbox:latest",
			"LABEL berth.purpose=engineer\nUSER 0:0\nRUN rm /usr/sbin/sshd\nUSER 1001:1001\nCOPY post-create.json /etc/berth/post-create.json\n",
			map[string]string{"post-create.json": `["make", 1]`})
		out, code := check(t, image)
		if code != 1 || !hasLine(out, "sshd", "✗", "its process exited") || !hasLine(out, "entrypoint", "✓") {
			t.Errorf("exit %d, want 1 with sshd ✗ (its process exited):\n%s", code, out)
		}
		if !hasLine(out, "post-create", "✗", "/etc/berth/post-create.json: word 1 is a number") {
			t.Errorf("want post-create ✗ naming the word:\n%s", out)
		}
		if hasLine(out, "login") {
			t.Errorf("a login line without sshd:\n%s", out)
		}
	})

	t.Run("base image", func(t *testing.T) {
		images, err := exec.Command("podman", "images", "--format", "{{.Repository}}:{{.Tag}}", "--filter", "reference=localhost/berth-sandbox-base").Output()
		if err != nil || len(strings.Fields(string(images))) == 0 {
			t.Skipf("no base image (make images): %v", err)
		}
		image := strings.Fields(string(images))[0]
		out, code := check(t, image)
		if code != 1 || !strings.Contains(out, "neither a berth.runner nor a berth.purpose label") {
			t.Errorf("no --purpose: exit %d, want 1 asking for --purpose:\n%s", code, out)
		}
		out, code = check(t, image, "--purpose", "engineer", "--timeout", "30s")
		if code != 1 || !hasLine(out, "entrypoint", "✗") || !hasLine(out, "sshd", "✗") {
			t.Errorf("--purpose engineer: exit %d, want 1 with entrypoint ✗ and sshd ✗:\n%s", code, out)
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
	return buildTestImage(t, image, "", nil)
}

// sandboxLabels is the LABEL instruction of images/sandbox/Containerfile,
// with the uid images/build gives it.
func sandboxLabels(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../images/sandbox/Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\nLABEL ")
	if !ok {
		t.Fatal("images/sandbox/Containerfile has no LABEL")
	}
	var label strings.Builder
	for line := range strings.Lines("LABEL " + rest) {
		label.WriteString(line)
		if !strings.HasSuffix(strings.TrimSpace(line), "\\") {
			break
		}
	}
	return "ARG BERTH_UID=1001\n" + label.String()
}

// buildTestImage builds, for the test's duration, an image FROM image with
// this tree's berth-init, then the instructions extra with files in the
// build's context.
func buildTestImage(t *testing.T, image, extra string, files map[string]string) string {
	t.Helper()
	if err := exec.Command("podman", "image", "exists", image).Run(); err != nil {
		t.Skipf("%s is not built (make images)", image)
	}
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "berth-init"), "berth.dev/berth/cmd/berth-init")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build berth-init: %v\n%s", err, out)
	}
	file := "FROM " + image + "\nCOPY berth-init /usr/local/bin/berth-init\n" + extra
	if err := os.WriteFile(filepath.Join(dir, "Containerfile"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	tag := "localhost/berth-test-image-check-" + strings.ToLower(rand.Text()[:10]) + ":latest"
	if out, err := exec.Command("podman", "build", "-q", "--pull=never", "-t", tag, dir).CombinedOutput(); err != nil {
		t.Fatalf("podman build: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("podman", "image", "rm", "-f", tag).Run() })
	return tag
}
