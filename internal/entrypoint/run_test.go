package entrypoint_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/entrypoint"
	"berth.dev/berth/internal/runner"
)

// TestMain lets a test run this test binary as berth-init itself, so that
// the real exec (and the real hand-over of the prompt as fd 0) can be
// watched from outside: see TestAgentRunExecsTheRunner.
func TestMain(m *testing.M) {
	if os.Getenv("BERTH_INIT_TEST_AS_MAIN") == "1" {
		os.Exit(entrypoint.Main(os.Args, entrypoint.OSEnv()))
	}
	os.Exit(m.Run())
}

const testPrompt = "Create f.txt containing hi and commit it.\nThen say done.\n"

// The "$@" slot as the host fills it, with what a careless entrypoint would
// split, expand or drop.
var slotArgs = []string{"-p", "--mode", "json", "--model", "mock model", "", "$HOME", "a'b\"c", "--", "*"}

// agentRun sets up the agent-run mode for runner: a prompt file, the
// runner's binary as a stub on PATH (a shell script running script), and
// the variables the host hands over. It returns the harness and the stub's
// path.
func agentRun(t *testing.T, runnerName, binary, script string) (*harness, string) {
	t.Helper()
	dir := t.TempDir()
	prompt := filepath.Join(dir, ".berth-prompt.txt")
	write(t, prompt, testPrompt)
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	stub := filepath.Join(bin, binary)
	if err := os.WriteFile(stub, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, map[string]string{
		"BERTH_SANDBOX_ID":      "sbx_run",
		"BERTH_SANDBOX_NAME":    "fix-1",
		"BERTH_SANDBOX_PURPOSE": "agent",
		"BERTH_RUNNER":          runnerName,
		"BERTH_PROMPT_FILE":     prompt,
		"BERTH_API_KEY":         "berth_sk_run_secret",
		"GIT_CONFIG_NOSYSTEM":   "1",
	})
	h.vars["PATH"] = bin + ":" + h.vars["PATH"]
	return h, stub
}

// piFiles is BERTH_RUNNER_FILES as the host renders it.
func piFiles(t *testing.T) string {
	t.Helper()
	s, err := runner.FilesJSON([]runner.File{
		{Path: ".pi/agent/models.json", Content: []byte(`{"providers": {}}` + "\n")},
		{Path: ".pi/agent/settings.json", Content: []byte(`{"defaultProvider": "berth"}` + "\n")},
		{Path: "top.txt"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRunnerFilesJSON(t *testing.T) {
	if s, err := runner.FilesJSON(nil); s != "[]" || err != nil {
		t.Errorf("RunnerFilesJSON(nil) = %q, %v; want [], nil", s, err)
	}
	want := `[{"path":".pi/agent/models.json","content":"{\"providers\": {}}\n"},` +
		`{"path":".pi/agent/settings.json","content":"{\"defaultProvider\": \"berth\"}\n"},` +
		`{"path":"top.txt","content":""}]`
	if got := piFiles(t); got != want {
		t.Errorf("RunnerFilesJSON = %s\nwant %s", got, want)
	}
}

func TestAgentRunExecsTheRunnerWithThePromptOnStdin(t *testing.T) {
	h, stub := agentRun(t, "pi", "pi", "exit 0")
	h.vars["BERTH_RUNNER_FILES"] = piFiles(t)
	h.vars["BERTH_GIT_AUTHOR_NAME"] = "Ada O'Lovelace"
	h.vars["BERTH_GIT_AUTHOR_EMAIL"] = "ada@example.com"
	if code := h.main(slotArgs...); code != 126 {
		t.Fatalf("Main = %d, want 126 (the exec stub returned); stderr:\n%s", code, h.stderr.String())
	}
	if len(h.execs) != 1 {
		t.Fatalf("exec calls = %d, want 1", len(h.execs))
	}
	got := h.execs[0]
	if got.path != stub {
		t.Errorf("exec path = %s, want the runner's binary on PATH %s", got.path, stub)
	}
	if diff := cmp.Diff(append([]string{"pi"}, slotArgs...), got.argv); diff != "" {
		t.Errorf("argv: want the binary, then \"$@\" unmodified (-want +got):\n%s", diff)
	}
	if h.stdin == nil {
		t.Fatal("the prompt was not handed over as stdin")
	}
	if stdin, _ := io.ReadAll(h.stdin); string(stdin) != testPrompt {
		t.Errorf("stdin = %q, want the prompt file's %q", stdin, testPrompt)
	}
	for _, kv := range []string{
		"GIT_CONFIG_COUNT=3",
		"GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=/work",
		"GIT_CONFIG_KEY_1=user.name", "GIT_CONFIG_VALUE_1=Ada O'Lovelace",
		"GIT_CONFIG_KEY_2=user.email", "GIT_CONFIG_VALUE_2=ada@example.com",
		// The agent gets the whole environment: its credential included.
		"BERTH_API_KEY=berth_sk_run_secret",
	} {
		if !slices.Contains(got.envv, kv) {
			t.Errorf("agent environment lacks %s:\n%s", kv, strings.Join(got.envv, "\n"))
		}
	}

	// HOME holds the runner's files and nothing else berth-init wrote.
	want := map[string]string{
		".pi":                     "drwx------",
		".pi/agent":               "drwx------",
		".pi/agent/models.json":   "-rw------- " + `{"providers": {}}` + "\n",
		".pi/agent/settings.json": "-rw------- " + `{"defaultProvider": "berth"}` + "\n",
		"top.txt":                 "-rw------- ",
	}
	home := snapshot(t, h.home)
	delete(home, ".")
	if diff := cmp.Diff(want, home); diff != "" {
		t.Errorf("HOME after the start (-want +got):\n%s", diff)
	}
	if strings.Contains(h.stderr.String(), "berth_sk_run_secret") {
		t.Errorf("stderr shows the key:\n%s", h.stderr.String())
	}
	if h.stdout.Len() != 0 {
		t.Errorf("stdout = %q, want nothing: it is the agent's", h.stdout.String())
	}
	if len(h.runs) != 0 {
		t.Errorf("ran %v before the agent, want nothing (no clone, no git config)", h.runs)
	}
}

func TestAgentRunDefaultIdentity(t *testing.T) {
	h, _ := agentRun(t, "claude-code", "claude", "exit 0")
	h.vars["GIT_CONFIG_COUNT"] = "1"
	h.vars["GIT_CONFIG_KEY_0"] = "core.pager"
	h.vars["GIT_CONFIG_VALUE_0"] = "cat"
	h.vars["GIT_CONFIG_KEY_1"] = "user.name" // beyond the count: stale
	h.vars["GIT_CONFIG_VALUE_1"] = "stale"
	h.main()
	if len(h.execs) != 1 {
		t.Fatalf("exec calls = %d, want 1; stderr:\n%s", len(h.execs), h.stderr.String())
	}
	var git []string
	for _, kv := range h.execs[0].envv {
		if strings.HasPrefix(kv, "GIT_CONFIG_") && !strings.HasPrefix(kv, "GIT_CONFIG_NOSYSTEM=") {
			git = append(git, kv)
		}
	}
	want := []string{
		"GIT_CONFIG_COUNT=4",
		"GIT_CONFIG_KEY_0=core.pager", "GIT_CONFIG_KEY_1=safe.directory",
		"GIT_CONFIG_KEY_2=user.name", "GIT_CONFIG_KEY_3=user.email",
		"GIT_CONFIG_VALUE_0=cat", "GIT_CONFIG_VALUE_1=/work",
		"GIT_CONFIG_VALUE_2=berth agent", "GIT_CONFIG_VALUE_3=agent@berth.invalid",
	}
	slices.Sort(git)
	if diff := cmp.Diff(want, git); diff != "" {
		t.Errorf("git's configuration in the agent's environment (-want +got):\n%s", diff)
	}
	if got := h.execs[0].argv; !slices.Equal(got, []string{"claude"}) {
		t.Errorf("argv = %q, want [claude]: an empty \"$@\" adds nothing", got)
	}
}

func TestAgentRunRefusesAMissingPrompt(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, path string)
		want  string
	}{
		{"missing", func(t *testing.T, path string) { os.Remove(path) }, "does not exist"},
		{"empty", func(t *testing.T, path string) { write(t, path, "") }, "is empty"},
		{"blank", func(t *testing.T, path string) { write(t, path, " \n\t\n") }, "is empty"},
		{"directory", func(t *testing.T, path string) {
			os.Remove(path)
			os.Mkdir(path, 0o755)
		}, "is not a regular file"},
	}
	for _, check := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(tt.name+map[bool]string{true: "/check"}[check], func(t *testing.T) {
				h, _ := agentRun(t, "pi", "pi", "exit 0")
				h.vars["BERTH_RUNNER_FILES"] = piFiles(t)
				if check {
					h.vars["BERTH_IMAGE_CHECK"] = "1"
				}
				path := h.vars["BERTH_PROMPT_FILE"]
				tt.setup(t, path)
				if code := h.main("-p"); code != 64 {
					t.Errorf("Main = %d, want 64", code)
				}
				want := "berth-init: prompt file " + path + " " + tt.want
				if !strings.Contains(h.stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, h.stderr.String())
				}
				if len(h.execs) != 0 || len(h.runs) != 0 || h.stdout.Len() != 0 {
					t.Errorf("exec'd %v, ran %v, printed %q; want nothing", h.execs, h.runs, h.stdout.String())
				}
				if entries, _ := os.ReadDir(h.home); len(entries) != 0 {
					t.Errorf("HOME has %d entries, want nothing written before the prompt check", len(entries))
				}
			})
		}
	}
}

func TestAgentRunRefusesBadSettings(t *testing.T) {
	tests := []struct {
		name, runner, files string
		want                string
	}{
		{"unknown runner", "aider", "", `BERTH_RUNNER: unknown runner "aider"`},
		{"files not JSON", "pi", "{", "BERTH_RUNNER_FILES: want a JSON array"},
		{"unknown field", "pi", `[{"path": "a", "content": "", "mode": "0644"}]`, "BERTH_RUNNER_FILES: want a JSON array"},
		{"outside HOME", "pi", `[{"path": "../x", "content": ""}]`, `BERTH_RUNNER_FILES: path "../x": want a clean path relative to HOME`},
		{"absolute", "pi", `[{"path": "/etc/x", "content": ""}]`, `path "/etc/x"`},
		{"unclean", "pi", `[{"path": "a//b", "content": ""}]`, `path "a//b"`},
		{"empty path", "pi", `[{"path": "", "content": ""}]`, `path ""`},
		{"twice", "pi", `[{"path": "a", "content": ""}, {"path": "a", "content": ""}]`, `path "a" is given twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := agentRun(t, tt.runner, "pi", "exit 0")
			h.vars["BERTH_RUNNER_FILES"] = tt.files
			if code := h.main("-p"); code != 64 {
				t.Errorf("Main = %d, want 64", code)
			}
			if !strings.Contains(h.stderr.String(), tt.want) {
				t.Errorf("stderr lacks %q:\n%s", tt.want, h.stderr.String())
			}
			if entries, _ := os.ReadDir(h.home); len(entries) != 0 || len(h.execs) != 0 {
				t.Errorf("HOME has %d entries and exec'd %v, want nothing", len(entries), h.execs)
			}
		})
	}
}

func TestAgentRunRunnerNotInstalled(t *testing.T) {
	h, _ := agentRun(t, "codex", "not-codex", "exit 0")
	if code := h.main(); code != 127 {
		t.Errorf("Main = %d, want 127", code)
	}
	if want := "runner codex: codex not found in PATH"; !strings.Contains(h.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, h.stderr.String())
	}
}

// TestAgentRunExecsTheRunner runs berth-init as its own process (this test
// binary, see TestMain) with a runner stub that records what it got: the
// stub must be berth-init's process itself (exec, not a child), end the run
// with its own exit code, and read the prompt to EOF although berth-init's
// own stdin is a pipe that never closes.
func TestAgentRunExecsTheRunner(t *testing.T) {
	needCommand(t, "sh", "cat", "env")
	out := t.TempDir()
	h, _ := agentRun(t, "pi", "pi", `echo $$ > "$STUB_OUT/pid"
for a; do printf '%s\0' "$a"; done > "$STUB_OUT/argv"
cat > "$STUB_OUT/stdin"
env > "$STUB_OUT/env"
exit 7`)
	h.vars["STUB_OUT"] = out
	h.vars["BERTH_INIT_TEST_AS_MAIN"] = "1"

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, slotArgs...)
	cmd.Env = h.env().Environ()
	cmd.Dir = out
	cmd.WaitDelay = 5 * time.Second // the stub's cat outlives a killed sh
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close() // held open: a stub reading this stdin would hang
	cmd.Stdin = pr
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("berth-init did not end within 30s: the stub waits on stdin; stderr:\n%s", stderr.String())
	}
	if code := exitCode(err); code != 7 {
		t.Fatalf("exit code = %d, want the runner's 7; stderr:\n%s", code, stderr.String())
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatalf("the stub wrote no %s: %v", name, err)
		}
		return string(b)
	}
	if pid := strings.TrimSpace(read("pid")); pid != strconv.Itoa(cmd.Process.Pid) {
		t.Errorf("the runner ran as pid %s, berth-init as %d: want exec, not a child", pid, cmd.Process.Pid)
	}
	argv := strings.Split(strings.TrimSuffix(read("argv"), "\x00"), "\x00")
	if diff := cmp.Diff(slotArgs, argv); diff != "" {
		t.Errorf("the runner's arguments (-want +got):\n%s", diff)
	}
	if got := read("stdin"); got != testPrompt {
		t.Errorf("the runner's stdin = %q, want the prompt %q", got, testPrompt)
	}
	env := strings.Split(read("env"), "\n")
	for _, kv := range []string{"GIT_CONFIG_COUNT=3", "GIT_CONFIG_VALUE_0=/work", "BERTH_SANDBOX_ID=sbx_run"} {
		if !slices.Contains(env, kv) {
			t.Errorf("the runner's environment lacks %s", kv)
		}
	}
}

// check runs the harness in check mode and decodes its report.
func (h *harness) check(args ...string) (api.CheckReport, map[string]api.CheckElement) {
	h.t.Helper()
	h.vars["BERTH_IMAGE_CHECK"] = "1"
	if code := h.main(args...); code != 0 {
		h.t.Fatalf("Main = %d, want 0; stderr:\n%s", code, h.stderr.String())
	}
	var rep api.CheckReport
	if err := json.Unmarshal(h.stdout.Bytes(), &rep); err != nil {
		h.t.Fatalf("stdout is not a check report: %v\n%s", err, h.stdout.String())
	}
	els := map[string]api.CheckElement{}
	var names []string
	for _, e := range rep.Elements {
		els[e.Name] = e
		names = append(names, e.Name)
	}
	want := []string{"non-root", "capabilities", "no-new-privileges", "workdir", "workdir-writable",
		"prompt-stdin", "home", "runner-files", "git", "runner"}
	if diff := cmp.Diff(want, names); diff != "" {
		h.t.Errorf("elements (-want +got):\n%s", diff)
	}
	return rep, els
}

func TestImageCheck(t *testing.T) {
	needCommand(t, "git", "sh")
	h, stub := agentRun(t, "pi", "pi", "echo the agent ran >&2; exit 1")
	h.vars["BERTH_RUNNER_FILES"] = piFiles(t)
	h.vars["BERTH_GIT_AUTHOR_NAME"] = "Ada"
	h.vars["BERTH_GIT_AUTHOR_EMAIL"] = "ada@example.com"
	rep, els := h.check(slotArgs...)

	if len(h.execs) != 0 || strings.Contains(h.stderr.String(), "the agent ran") {
		t.Errorf("check mode started the agent: %v\n%s", h.execs, h.stderr.String())
	}
	sum := sha256.Sum256([]byte(testPrompt))
	if want := (api.CheckStdin{Bytes: int64(len(testPrompt)), SHA256: hex.EncodeToString(sum[:])}); rep.Stdin != want {
		t.Errorf("stdin = %+v, want %+v", rep.Stdin, want)
	}
	if diff := cmp.Diff(append([]string{"pi"}, slotArgs...), rep.Argv); diff != "" || rep.Runner != "pi" {
		t.Errorf("runner %q, argv (-want +got):\n%s", rep.Runner, diff)
	}
	for name, detail := range map[string]string{
		"workdir-writable": "created and removed a file",
		"prompt-stdin":     fmt.Sprintf("%d bytes, then EOF", len(testPrompt)),
		"home":             "HOME " + h.home + " is writable, and a program written there runs",
		"runner-files":     "wrote ~/.pi/agent/models.json, ~/.pi/agent/settings.json, ~/top.txt (0600)",
		"git":              "commits as Ada <ada@example.com>; safe.directory /work",
		"runner":           "pi: pi → " + stub,
	} {
		if e := els[name]; !e.OK || !strings.Contains(e.Detail, detail) {
			t.Errorf("element %s = %+v, want ok with %q", name, e, detail)
		}
	}
	// This test's own process decides these; inside an image they hold.
	if cwd, _ := os.Getwd(); cwd != "/work" {
		if e := els["workdir"]; e.OK || !strings.Contains(e.Detail, "cwd "+cwd+", want /work") {
			t.Errorf("element workdir = %+v, want it to fail outside /work", e)
		}
	}
	if e := els["non-root"]; e.OK != (os.Getuid() != 0) {
		t.Errorf("element non-root = %+v as uid %d", e, os.Getuid())
	}
	// The check left nothing of its own behind.
	if entries, _ := filepath.Glob(filepath.Join(h.home, ".berth-image-check-*")); len(entries) != 0 {
		t.Errorf("probe files left in HOME: %v", entries)
	}
}

func TestImageCheckFindsFaults(t *testing.T) {
	needCommand(t, "git", "sh")

	t.Run("no runner", func(t *testing.T) {
		h, _ := agentRun(t, "", "pi", "exit 0")
		rep, els := h.check()
		if e := els["runner"]; e.OK || e.Detail != "no runner named (BERTH_RUNNER)" {
			t.Errorf("element runner = %+v, want it to fail: no runner named", e)
		}
		if rep.Runner != "" || len(rep.Argv) != 0 {
			t.Errorf("runner %q, argv %q; want none", rep.Runner, rep.Argv)
		}
	})

	t.Run("runner not installed", func(t *testing.T) {
		h, _ := agentRun(t, "gemini", "not-gemini", "exit 0")
		_, els := h.check()
		if e := els["runner"]; e.OK || e.Detail != "gemini: gemini not found in PATH" {
			t.Errorf("element runner = %+v, want it to fail: not found", e)
		}
	})

	t.Run("HOME not writable", func(t *testing.T) {
		if os.Getuid() == 0 {
			t.Skip("root writes anywhere")
		}
		h, _ := agentRun(t, "pi", "pi", "exit 0")
		if err := os.Chmod(h.home, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(h.home, 0o700) })
		_, els := h.check()
		if e := els["home"]; e.OK || !strings.Contains(e.Detail, "permission denied") {
			t.Errorf("element home = %+v, want it to fail", e)
		}
	})

	t.Run("HOME noexec", func(t *testing.T) {
		h, _ := agentRun(t, "pi", "pi", "exit 0")
		// A HOME where a written program cannot run: the harness's Run
		// refuses to start anything from it, as a noexec mount would.
		env := h.env()
		run := env.Run
		env.Run = func(c *exec.Cmd) error {
			if strings.HasPrefix(c.Path, h.home) {
				return &fs.PathError{Op: "fork/exec", Path: c.Path, Err: fs.ErrPermission}
			}
			return run(c)
		}
		env.Getenv = func(k string) string {
			if k == "BERTH_IMAGE_CHECK" {
				return "1"
			}
			return h.vars[k]
		}
		if code := entrypoint.Main([]string{"berth-init"}, env); code != 0 {
			t.Fatalf("Main = %d; stderr:\n%s", code, h.stderr.String())
		}
		var rep api.CheckReport
		if err := json.Unmarshal(h.stdout.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(rep.Elements, func(e api.CheckElement) bool { return e.Name == "home" })
		if i < 0 || rep.Elements[i].OK || !strings.Contains(rep.Elements[i].Detail, "a program written there does not run") {
			t.Errorf("elements %+v, want home to fail", rep.Elements)
		}
	})
}
