package podman_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/driver/podman"
	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/sandbox"
)

// buildKelosImage builds testdata/kelos (a Kelos-shaped image FROM the
// sandbox image) into the test's podman root under a tag of its own, and
// removes it when the test ends.
func buildKelosImage(t *testing.T, root string) string {
	t.Helper()
	tag := "localhost/berth-test-kelos-" + strings.ToLower(rand.Text()[:8]) + ":latest"
	env := podman.Config{StateDir: root}.Env()
	build := exec.CommandContext(t.Context(), "podman", "build", "--pull=never", "--network", "none", "--quiet",
		"--tag", tag, "--file", filepath.Join("testdata", "kelos", "Containerfile"), filepath.Join("testdata", "kelos"))
	build.Env = env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("podman build: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		rm := exec.Command("podman", "rmi", "--force", tag)
		rm.Env = env
		if out, err := rm.CombinedOutput(); err != nil {
			t.Errorf("podman rmi %s: %v\n%s", tag, err, out)
		}
	})
	return tag
}

// kelosCheckout is a repository with one commit, owned by the interface's
// uid as the workspace leaves it.
func kelosCheckout(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"commit", "-q", "--allow-empty", "-m", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	err := filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, kelos.UID, kelos.UID)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestKelosImageRunsUnchanged runs a Kelos-shaped image through the driver
// as the sandbox service would (SPEC S13.6): the prompt reaches it as $1
// whole, it runs as 61100 in /workspace/repo under the agent hardening,
// its setup command runs from KELOS_SETUP_COMMAND, and its log lines,
// output block included, come back through Follow.
func TestKelosImageRunsUnchanged(t *testing.T) {
	root := podmanRoot(t)
	image := buildKelosImage(t, root)
	d := newDriverWith(t, podman.Config{Network: "none"})
	work := kelosCheckout(t)

	prompt := `--fix the "greeting"; echo $HOME and a * glob`
	env, err := kelos.Env(kelos.Run{AgentType: "claude-code", Model: "claude-sonnet-4-5", BaseBranch: "main",
		SetupCommand: []string{"sh", "-c", `echo "setup ran" > "$HOME/setup.txt"`}})
	if err != nil {
		t.Fatal(err)
	}
	sb := sandbox.Sandbox{
		ID: sandbox.NewID(), Name: "kelos", Org: "org_1", Project: "prj_1", Owner: "usr_1", Purpose: sandbox.PurposeAgent,
		Class: "kelos", Image: image, Isolation: sandbox.TierStandard, CPU: quantity.Millicores(1000), Memory: quantity.Bytes(512 << 20),
		Runner: "claude-code", Contract: sandbox.ContractKelos,
	}
	spec := sandbox.Spec{Sandbox: sb, Env: env,
		Run: &sandbox.RunSpec{Contract: sandbox.ContractKelos, Work: work, Args: []string{prompt}, Network: "open"}}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := d.Start(ctx, spec); err != nil {
		t.Fatalf("Start: %v", err)
	}
	var stdout, stderr []string
	if err := d.Follow(ctx, sb.ID, func(out bool, b []byte) {
		if out {
			stdout = append(stdout, string(b))
		} else {
			stderr = append(stderr, string(b))
		}
	}); err != nil {
		t.Fatalf("Follow: %v", err)
	}
	m, err := d.Inspect(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != sandbox.MachineStopped || m.ExitCode != 0 {
		t.Fatalf("the container is %s, exit %d; want it done, exit 0\nstdout: %q\nstderr: %q", m.Status, m.ExitCode, stdout, stderr)
	}

	if len(stdout) == 0 {
		t.Fatalf("no stdout came through Follow (stderr %q)", stderr)
	}
	var seen struct {
		Type      string `json:"type"`
		Prompt    string `json:"prompt"`
		Args      int    `json:"args"`
		UID       int    `json:"uid"`
		GID       int    `json:"gid"`
		Cwd       string `json:"cwd"`
		Home      string `json:"home"`
		AgentType string `json:"agent_type"`
		Model     string `json:"model"`
		Setup     string `json:"setup"`
		SetupFile string `json:"setup_file"`
		Root      string `json:"root"`
		CapEff    string `json:"cap_eff"`
	}
	if err := json.Unmarshal([]byte(stdout[0]), &seen); err != nil {
		t.Fatalf("the image's first line %q: %v", stdout[0], err)
	}
	for _, c := range []struct{ what, got, want string }{
		{"type", seen.Type, "kelos-test"},
		{"$1", seen.Prompt, prompt},
		{"working directory", seen.Cwd, kelos.WorkDir},
		{"HOME", seen.Home, kelos.Home},
		{"KELOS_AGENT_TYPE", seen.AgentType, "claude-code"},
		{"KELOS_MODEL", seen.Model, "claude-sonnet-4-5"},
		{"KELOS_SETUP_COMMAND", seen.Setup, env["KELOS_SETUP_COMMAND"]},
		{"what the setup command wrote in HOME", seen.SetupFile, "setup ran"},
		{"the root file system", seen.Root, "ro"},
		{"effective capabilities", seen.CapEff, "0000000000000000"},
	} {
		if c.got != c.want {
			t.Errorf("%s in the container: %q, want %q", c.what, c.got, c.want)
		}
	}
	if seen.Args != 1 || seen.UID != kelos.UID || seen.GID != kelos.UID {
		t.Errorf("the container had %d arguments and ran as %d:%d; want 1, as %d:%d", seen.Args, seen.UID, seen.GID, kelos.UID, kelos.UID)
	}
	// Every line once, in its stream: Follow's end is podman wait's, and
	// what it had not yet read comes from a second, plain podman logs.
	head := strings.TrimSpace(gitOut(t, work, "rev-parse", "HEAD"))
	if want := []string{kelos.OutputsStart, "commit: " + head, "input-tokens: 12", "a line without a key", kelos.OutputsEnd}; !slices.Equal(stdout[1:], want) {
		t.Errorf("stdout after the JSON line: %q, want %q", stdout[1:], want)
	}
	if want := []string{kelos.SetupStart, kelos.SetupDone}; !slices.Equal(stderr, want) {
		t.Errorf("stderr %q, want the setup banners alone", stderr)
	}

	var c kelos.Capture
	for _, l := range stdout {
		c.Line(true, []byte(l))
	}
	for _, l := range stderr {
		c.Line(false, []byte(l))
	}
	if got := c.Results(); got["commit"] != head || got["input-tokens"] != "12" {
		t.Errorf("results %v, want the commit the image made (%s) and its token count", got, head)
	}
	if !slices.Contains(c.Outputs(), "a line without a key") || c.Setup() != kelos.SetupOK {
		t.Errorf("outputs %q, setup %d; want the line without a key kept, setup done", c.Outputs(), c.Setup())
	}
	if files := strings.TrimSpace(gitOut(t, work, "show", "--name-only", "--format=", "HEAD")); files != "kelos.txt" {
		t.Errorf("the image's commit holds %q, want kelos.txt", files)
	}
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "safe.directory=*"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}
