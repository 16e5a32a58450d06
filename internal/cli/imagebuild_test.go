package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/cli"
)

// TestImageBuildInput: berth image build refuses what it cannot build
// before podman runs, naming the key and exiting non-zero, and --print
// writes berth's layer without a driver (for a cluster's own build). The
// build itself is TestDevcontainerClass, end to end on podman.
func TestImageBuildInput(t *testing.T) {
	dir := t.TempDir()
	file := func(rel, text string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	vars := map[string]string{"BERTH_DATA_DIR": t.TempDir()}
	berth := func(args ...string) (string, string, int) {
		t.Helper()
		var out, errs bytes.Buffer
		env := cli.Env{Stdout: &out, Stderr: &errs, Getenv: func(k string) string { return vars[k] }, Now: time.Now}
		code := cli.Main(t.Context(), append([]string{"image", "build"}, args...), env)
		return out.String(), errs.String(), code
	}

	ok := file("ok/.devcontainer/devcontainer.json", `{
  "image": "registry.example/team/go:1.26", // the team's
  "remoteUser": "vscode",
  "postCreateCommand": ["make", "deps"],
}`)
	out, errs, code := berth("--print", "--berth-image", "registry.example/berth-sandbox:1", "localhost/team:1", filepath.Dir(filepath.Dir(ok)))
	if code != 0 {
		t.Fatalf("--print exited %d: %s", code, errs)
	}
	for _, want := range []string{"FROM registry.example/berth-sandbox:1 AS berth\nFROM registry.example/team/go:1.26\n",
		"sh /tmp/berth-layer.sh 1001 'vscode'", `'["make","deps"]' >/etc/berth/post-create.json`} {
		if !strings.Contains(out, want) {
			t.Errorf("--print lacks %q:\n%s", want, out)
		}
	}

	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no image", nil, 2, "want an image and an optional path"},
		{"bad class name", []string{"--class", "Team_App", "localhost/x:1", dir}, 2, "--class: "},
		{"nothing there", []string{"localhost/x:1", filepath.Join(dir, "missing")}, 1, "no such file or directory"},
		{"features", []string{"localhost/x:1", file("f/devcontainer.json", `{"image": "a", "features": {"go": {}}}`)}, 1,
			"features: berth does not install features (go): install what they add in the Dockerfile"},
		{"compose", []string{"localhost/x:1", file("c/.devcontainer.json", `{"dockerComposeFile": "c.yml"}`)[:len(dir)+2]}, 1,
			"dockerComposeFile: berth builds one image per sandbox"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, errs, code := berth(tt.args...)
			if code != tt.code || !strings.Contains(errs, tt.want) {
				t.Errorf("exit %d, want %d saying %q:\n%s", code, tt.code, tt.want, errs)
			}
		})
	}

	// On Kubernetes there is no builder: it says to print instead.
	vars["BERTH_SANDBOX_DRIVER"] = "kubernetes"
	vars["BERTH_SANDBOX_NAMESPACE"] = "berth"
	_, errs, code = berth("localhost/team:1", ok)
	if code != 1 || !strings.Contains(errs, "--print writes the Containerfile for the cluster's own build") {
		t.Errorf("build on kubernetes: exit %d:\n%s", code, errs)
	}
}
