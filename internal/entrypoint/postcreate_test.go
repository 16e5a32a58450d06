package entrypoint_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/internal/entrypoint"
)

// TestPostCreateOnce: an engineer sandbox whose image has a
// postCreateCommand starts it beside sshd at its first start, with what
// ssh sessions see (and no start-only secret); it runs every step, logs
// them, and leaves the marker that keeps the next start from running it
// again, also when a step failed.
func TestPostCreateOnce(t *testing.T) {
	needCommand(t, "ssh-keygen", "sh")
	h := newHarness(t, engineerVars())
	file := filepath.Join(t.TempDir(), "post-create.json")
	if err := os.WriteFile(file, []byte(`{"deps": ["sh", "-c", "echo ran >> count; echo to-stderr >&2"], "fails": ["sh", "-c", "exit 3"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var started []*exec.Cmd
	start := func() {
		t.Helper()
		env := h.env()
		env.Start = func(c *exec.Cmd) error { started = append(started, c); return nil }
		h.stderr.Reset()
		if code := entrypoint.MainPostCreate([]string{"/usr/local/bin/berth-init"}, env, file); code != 1 {
			t.Fatalf("Main = %d, want 1 (exec stub); stderr:\n%s", code, h.stderr.String())
		}
		if len(h.execs) == 0 || h.execs[len(h.execs)-1].path != "/usr/sbin/sshd" {
			t.Fatalf("sshd was not exec'd after the postCreateCommand started: %+v", h.execs)
		}
	}
	start()
	if len(started) != 1 {
		t.Fatalf("%d commands started, want the postCreateCommand", len(started))
	}
	c := started[0]
	self, _ := os.Executable()
	if want := []string{self, "--berth-post-create", file, h.home}; !slices.Equal(c.Args, want) || c.Dir != h.home {
		t.Errorf("started %q in %s, want %q in HOME", c.Args, c.Dir, want)
	}
	localBin := filepath.Join(h.home, ".local", "bin")
	if !slices.Contains(c.Env, "HOME="+h.home) || !slices.ContainsFunc(c.Env, func(kv string) bool { return strings.HasPrefix(kv, "PATH="+localBin+":") }) {
		t.Errorf("postCreateCommand's environment lacks HOME or ~/.local/bin first on PATH: %q", c.Env)
	}
	for _, kv := range c.Env {
		if strings.HasPrefix(kv, "BERTH_GIT_TOKEN=") || strings.HasPrefix(kv, "BERTH_AUTHORIZED_KEYS=") {
			t.Errorf("postCreateCommand sees start-only %s", kv)
		}
	}
	log, ok := c.Stdout.(*os.File)
	if !ok || log.Name() != filepath.Join(h.home, ".berth", "post-create.log") || c.Stderr != c.Stdout {
		t.Fatalf("postCreateCommand's output goes to %v, want ~/.berth/post-create.log", c.Stdout)
	}

	// The process it started: berth-init --berth-post-create FILE DIR,
	// its output to the log as the real one's is.
	logf, err := os.OpenFile(log.Name(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	env := h.env()
	env.Stdout, env.Stderr = logf, logf
	code := entrypoint.Main(c.Args, env)
	logf.Close()
	if code != 3 {
		t.Errorf("the postCreateCommand process exited %d, want its failed step's 3", code)
	}
	if got := h.read("count"); got != "ran\n" {
		t.Errorf("the first step wrote %q, want one run", got)
	}
	logText := h.read(".berth/post-create.log")
	for _, want := range []string{"postCreateCommand deps: sh -c", "to-stderr", "postCreateCommand deps: exit 0", "postCreateCommand fails: exit 3"} {
		if !strings.Contains(logText, want) {
			t.Errorf("the log lacks %q:\n%s", want, logText)
		}
	}
	if done := h.read(".berth/post-create.done"); !strings.HasPrefix(done, "exit 3 at ") {
		t.Errorf("marker %q, want the exit of the run", done)
	}

	// The next start (a resume: HOME is the same volume) does not run it.
	start()
	if len(started) != 1 {
		t.Errorf("the postCreateCommand started again on the second start")
	}
	if !strings.Contains(h.stderr.String(), "postCreateCommand ran at this sandbox's first start; not again") {
		t.Errorf("the second start did not say why it skipped:\n%s", h.stderr.String())
	}
}

// TestNoPostCreate: an image without the file starts nothing but sshd.
func TestNoPostCreate(t *testing.T) {
	needCommand(t, "ssh-keygen")
	h := newHarness(t, engineerVars())
	env := h.env()
	env.Start = func(c *exec.Cmd) error { t.Errorf("started %q", c.Args); return nil }
	if code := entrypoint.MainPostCreate([]string{"/usr/local/bin/berth-init"}, env, filepath.Join(t.TempDir(), "none.json")); code != 1 {
		t.Fatalf("Main = %d; stderr:\n%s", code, h.stderr.String())
	}
}

// TestPostCreateNotUnderImageCheck: berth image check starts an engineer
// image to log in, and runs none of the image's own commands.
func TestPostCreateNotUnderImageCheck(t *testing.T) {
	needCommand(t, "ssh-keygen")
	vars := engineerVars()
	vars["BERTH_IMAGE_CHECK"] = "1"
	h := newHarness(t, vars)
	file := filepath.Join(t.TempDir(), "post-create.json")
	if err := os.WriteFile(file, []byte(`"touch ran"`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := h.env()
	env.Start = func(c *exec.Cmd) error { t.Errorf("started %q under image check", c.Args); return nil }
	if code := entrypoint.MainPostCreate([]string{"/usr/local/bin/berth-init"}, env, file); code != 1 {
		t.Fatalf("Main = %d; stderr:\n%s", code, h.stderr.String())
	}
	if len(h.execs) != 1 || h.execs[0].path != "/usr/sbin/sshd" {
		t.Errorf("sshd was not started under image check: %+v", h.execs)
	}
}
