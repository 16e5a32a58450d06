package modelserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/modelserver"
)

// The real agent CLIs against the server, when BERTH_TEST_AGENT_CLIS names
// a directory where they were installed from the npm registry at the
// versions of shared/notes/agent-clis.md:
//
//	npm install --prefix DIR @mariozechner/pi-coding-agent@0.73.1 \
//	  @anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0 \
//	  @google/gemini-cli@0.61.0 opencode-ai@1.18.33
//
// A CLI missing from DIR/node_modules/.bin is skipped. Each run gets a
// throwaway git repository as cwd, a throwaway HOME and only the
// environment it needs (no key of the machine's leaks in).

// totals is a run's telemetry, normalised: input excludes cached tokens.
type totals struct {
	Input, CacheRead, CacheWrite, Output int
}

// outcome is what a CLI's stdout says about its run.
type outcome struct {
	totals
	text   string // the last thing the assistant said
	failed bool   // the CLI's own failure signal
}

// agentCLI is how one CLI is set up, run and read.
type agentCLI struct {
	bin string
	// setup writes the CLI's config under home for a server at url and
	// returns its arguments and environment.
	setup func(t *testing.T, home, url string) (args, env []string)
	read  func(t *testing.T, stdout []byte) outcome
	// errorExit is the exit code after the server's 400.
	errorExit int
}

func TestAgentCLIs(t *testing.T) {
	dir := os.Getenv("BERTH_TEST_AGENT_CLIS")
	if dir == "" {
		t.Skip("BERTH_TEST_AGENT_CLIS is not set (a directory with the agent CLIs in node_modules)")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	runs := []struct {
		name    string
		cli     agentCLI
		dialect modelserver.Dialect
		cred    string // the header that carries the key
		sc      string
	}{
		{"claude/tool", claude(), modelserver.Anthropic, "X-Api-Key", modelserver.ScenarioTool},
		{"claude/text", claude(), modelserver.Anthropic, "X-Api-Key", modelserver.ScenarioText},
		{"claude/error", claude(), modelserver.Anthropic, "X-Api-Key", modelserver.ScenarioError},
		{"pi-chat/tool", pi("openai-completions", "/v1"), modelserver.OpenAIChat, "Authorization", modelserver.ScenarioTool},
		{"pi-chat/text", pi("openai-completions", "/v1"), modelserver.OpenAIChat, "Authorization", modelserver.ScenarioText},
		{"pi-chat/error", pi("openai-completions", "/v1"), modelserver.OpenAIChat, "Authorization", modelserver.ScenarioError},
		{"pi-anthropic/tool", pi("anthropic-messages", ""), modelserver.Anthropic, "X-Api-Key", modelserver.ScenarioTool},
		{"pi-responses/tool", pi("openai-responses", "/v1"), modelserver.OpenAIResponses, "Authorization", modelserver.ScenarioTool},
		{"pi-gemini/tool", pi("google-generative-ai", "/v1beta"), modelserver.Gemini, "X-Goog-Api-Key", modelserver.ScenarioTool},
		{"codex/tool", codex(), modelserver.OpenAIResponses, "Authorization", modelserver.ScenarioTool},
		{"codex/error", codex(), modelserver.OpenAIResponses, "Authorization", modelserver.ScenarioError},
		{"gemini/tool", gemini(), modelserver.Gemini, "X-Goog-Api-Key", modelserver.ScenarioTool},
		{"gemini/error", gemini(), modelserver.Gemini, "X-Goog-Api-Key", modelserver.ScenarioError},
		{"opencode/tool", opencode("@ai-sdk/openai-compatible"), modelserver.OpenAIChat, "Authorization", modelserver.ScenarioTool},
		{"opencode-anthropic/tool", opencode("@ai-sdk/anthropic"), modelserver.Anthropic, "X-Api-Key", modelserver.ScenarioTool},
		{"opencode/error", opencode("@ai-sdk/openai-compatible"), modelserver.OpenAIChat, "Authorization", modelserver.ScenarioError},
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			bin := filepath.Join(dir, "node_modules", ".bin", r.cli.bin)
			if _, err := os.Stat(bin); err != nil {
				t.Skipf("%s is not installed in %s", r.cli.bin, dir)
			}
			srv := modelserver.New(scenario(t, r.sc))
			ts := httptest.NewServer(srv.Handler())
			defer ts.Close()
			repo, home := gitRepo(t), t.TempDir()
			args, env := r.cli.setup(t, home, ts.URL)
			prompt := "Say hello\n"
			if r.sc == modelserver.ScenarioTool {
				prompt = "Create f.txt containing hi and commit it\n"
			}
			stdout, code := runCLI(t, repo, bin, args, append(env, "HOME="+home, "PATH="+os.Getenv("PATH"), "LANG=C.UTF-8"), prompt)
			got := r.cli.read(t, stdout)

			calls := 0
			t.Logf("%d requests", len(srv.Requests()))
			for _, q := range srv.Requests() {
				if q.Dialect != r.dialect || q.Credential != r.cred {
					t.Errorf("request %+v, want dialect %s with a key in %s", q, r.dialect, r.cred)
				}
				if q.Turn >= 0 {
					calls++
				}
			}
			switch r.sc {
			case modelserver.ScenarioError:
				if code != r.cli.errorExit || !got.failed || got.totals != (totals{}) {
					t.Errorf("exit %d, outcome %+v; want exit %d, failed, no tokens", code, got, r.cli.errorExit)
				}
				return
			case modelserver.ScenarioTool:
				if log := git(t, repo, "log", "--format=%s"); log != "add f.txt\ninit\n" {
					t.Errorf("git log %q, want the scripted commit on init", log)
				}
			}
			if code != 0 || got.failed {
				t.Errorf("exit %d, failed %v; want success", code, got.failed)
			}
			n, last := expect(r.sc)
			if got.text != last {
				t.Errorf("last text %q, want %q", got.text, last)
			}
			// The title call OpenCode makes is not in its telemetry.
			if r.cli.bin == "opencode" && calls != n+1 || r.cli.bin != "opencode" && calls != n {
				t.Errorf("%d model calls, want %d (+1 title call for opencode)", calls, n)
			}
			if diff := cmp.Diff(usageOf(r.dialect, n), got.totals); diff != "" {
				t.Errorf("totals (-want +got):\n%s", diff)
			}
		})
	}
}

// usageOf is what n calls in dialect d add up to: only Anthropic reports
// cache writes.
func usageOf(d modelserver.Dialect, n int) totals {
	u := modelserver.DefaultUsage()
	got := totals{Input: n * u.Input, CacheRead: n * u.CacheRead, Output: n * u.Output}
	if d == modelserver.Anthropic {
		got.CacheWrite = n * u.CacheWrite
	}
	return got
}

// gitRepo is a fresh repository on main with one commit, "init".
func gitRepo(t *testing.T) string {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "config", "user.email", "probe@example.com")
	git(t, dir, "config", "user.name", "probe")
	git(t, dir, "commit", "-q", "--allow-empty", "-m", "init")
	return dir
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// runCLI runs bin in dir with only env, the prompt on stdin (then closed),
// and returns its stdout and exit code.
func runCLI(t *testing.T, dir, bin string, args, env []string, prompt string) ([]byte, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env, cmd.Stdin = dir, env, strings.NewReader(prompt)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s ran %s, exit %d", filepath.Base(bin), time.Since(start).Round(100*time.Millisecond), cmd.ProcessState.ExitCode())
	if exit, ok := errors.AsType[*exec.ExitError](err); ok && ctx.Err() == nil {
		return stdout.Bytes(), exit.ExitCode()
	}
	if err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", bin, err, stderr.String())
	}
	return stdout.Bytes(), 0
}

// lines decodes each NDJSON line of out into a fresh T and calls f.
func lines[T any](t *testing.T, out []byte, f func(T)) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("stdout line %q: %v", sc.Text(), err)
		}
		f(v)
	}
}

// writeFile writes data (a string, or a value as JSON) under dir.
func writeFile(t *testing.T, dir, name string, data any) {
	t.Helper()
	b, ok := data.(string)
	if !ok {
		j, err := json.Marshal(data)
		if err != nil {
			t.Fatal(err)
		}
		b = string(j)
	}
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b), 0o600); err != nil {
		t.Fatal(err)
	}
}

// expect is what a successful run of a scenario makes: its model calls
// and the assistant's last text.
func expect(sc string) (calls int, last string) {
	if sc == modelserver.ScenarioTool {
		return 2, modelserver.DoneText
	}
	return 1, modelserver.HelloText
}
