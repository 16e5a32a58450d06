package entrypoint_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/modelserver"
	"berth.dev/berth/internal/runner"
)

// The words the tasks of TestPodmanAgentResume carry, each in one task's
// prompt only: the model server notes which of them each model call held.
const (
	markOne   = "MARKONE"   // task 1
	markTwo   = "MARKTWO"   // task 2, resumed
	markThree = "MARKTHREE" // the control: task 2 again, not resumed
)

// TestPodmanAgentResume runs an agent session's tasks with each runner's
// real CLI: every task in a new container, as a session's are, sharing
// the checkout and one HOME, a host directory owned by the sandbox's uid
// mounted at the image's HOME instead of the agent run's tmpfs. Task 2
// runs with Options.Resume, and its model calls must carry task 1's
// prompt: the CLI continued its conversation from the state it left in
// HOME. A control task then runs without Resume in the same HOME, and its
// calls must carry neither earlier prompt. The script is text only, so
// only the markers are asserted, never which turn answered. Gated like
// TestPodmanAgentRun.
func TestPodmanAgentResume(t *testing.T) {
	usePodmanRoot(t)
	needCommand(t, "podman", "git", "chown")
	host, err := hostAddress(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		runner string
		model  string
	}{
		{"claude-code", "mock-model"},
		{"codex", "gpt-5.5"},
		{"opencode", "mock-model"},
		{"gemini", "gemini-2.5-pro"},
		{"pi", "mock-model"},
	} {
		t.Run(tt.runner, func(t *testing.T) {
			image := "localhost/berth-agent-" + tt.runner + ":latest"
			if _, err := podman(t, "image", "exists", image); err != nil {
				t.Skipf("%s is not built (images/build agent %s)", image, tt.runner)
			}
			srv := modelserver.New(modelserver.Script{Turns: []modelserver.Turn{{Text: "Noted."}}},
				modelserver.WithMarkers(markOne, markTwo, markThree))
			base := serveOn(t, host, srv.Handler())
			rn, err := runner.Get(tt.runner)
			if err != nil {
				t.Fatal(err)
			}
			run := newAgentRun(t, rn, base, tt.model)
			home := t.TempDir()
			if out, err := exec.Command("chown", "1001:1001", home).CombinedOutput(); err != nil {
				t.Fatalf("chown: %v\n%s", err, out)
			}

			// task runs one task in a new container and returns the model
			// calls it made.
			task := func(what, prompt string, resume bool) []modelserver.Request {
				t.Helper()
				write(t, run.prompt, prompt+"\n")
				args, err := rn.ContainerArgs(runner.Options{Model: tt.model, Resume: resume})
				if err != nil {
					t.Fatal(err)
				}
				before := len(srv.Requests())
				stdout, stderr, code := run.podmanHome(t, image, home, args)
				session := sessionOf(rn, tt.model, stdout)
				var calls []modelserver.Request
				for _, q := range srv.Requests()[before:] {
					if q.Turn >= 0 {
						calls = append(calls, q)
					}
				}
				marked := make([][]string, len(calls))
				for i, q := range calls {
					marked[i] = q.Marked
				}
				t.Logf("%s: exit %d, session %q, %d model calls, markers per call %q", what, code, session, len(calls), marked)
				if code != 0 || len(calls) == 0 {
					t.Fatalf("%s: exit %d after %d model calls; stdout:\n%s\nstderr:\n%s", what, code, len(calls), stdout, stderr)
				}
				return calls
			}
			carry := func(calls []modelserver.Request, markers ...string) bool {
				return slices.ContainsFunc(calls, func(q modelserver.Request) bool {
					for _, m := range markers {
						if !slices.Contains(q.Marked, m) {
							return false
						}
					}
					return true
				})
			}

			one := task("task 1", "Remember the word "+markOne+" and answer briefly.", false)
			if !carry(one, markOne) {
				t.Fatalf("no model call of task 1 carried its prompt (%s)", markOne)
			}
			two := task("task 2 (resumed)", "Which word did I ask you to remember? "+markTwo, true)
			if !carry(two, markTwo, markOne) {
				t.Errorf("no model call of the resumed task 2 carried both its prompt (%s) and task 1's (%s): the conversation was not continued", markTwo, markOne)
			}
			control := task("control (not resumed)", "Which word did I ask you to remember? "+markThree, false)
			if !carry(control, markThree) {
				t.Errorf("no model call of the control task carried its prompt (%s)", markThree)
			}
			if carry(control, markOne) || carry(control, markTwo) {
				t.Errorf("a model call of the control task, not resumed, carried an earlier task's prompt: a new conversation must not see the old one")
			}
			if t.Failed() {
				logHome(t, home)
			}
		})
	}
}

// podmanHome runs image as an agent run with args, as podman does, but
// with home, a host directory, mounted at the image's HOME instead of the
// tmpfs, as an agent session's tasks share it.
func (r *agentRunSetup) podmanHome(t *testing.T, image, home string, args []string) (stdout, stderr []byte, code int) {
	t.Helper()
	name := testName()
	run := []string{"run", "--name", name}
	for i := 0; i < len(agentHardening); i++ {
		if agentHardening[i] == "--tmpfs" && strings.HasPrefix(agentHardening[i+1], "/home/berth:") {
			i++
			continue
		}
		run = append(run, agentHardening[i])
	}
	run = append(run, "-v", home+":/home/berth", "-v", r.work+":/work", "-w", "/work")
	env := os.Environ()
	for k, v := range r.env {
		run = append(run, "-e", k)
		env = append(env, k+"="+v)
	}
	run = append(append(run, image), args...)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	t.Cleanup(func() { podman(t, "rm", "-f", "-t", "0", name) })
	cmd := exec.CommandContext(ctx, "podman", run...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	t.Logf("podman run %s %q: %v, exit %d", image, args, time.Since(start).Round(10*time.Millisecond), exitCode(err))
	if ctx.Err() != nil {
		t.Fatalf("the run did not end within 3 minutes; stderr:\n%s", errb.String())
	}
	return out.Bytes(), errb.Bytes(), exitCode(err)
}

// sessionOf is the session the CLI's stdout names, read with its runner's
// ParseLine.
func sessionOf(rn runner.Runner, model string, stdout []byte) string {
	tel := runner.Telemetry{Model: model}
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		rn.ParseLine(&tel, sc.Bytes())
	}
	return tel.SessionID
}

// logHome lists what the CLI left in HOME, for a failure's reader.
func logHome(t *testing.T, home string) {
	t.Helper()
	var paths []string
	filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
		if err == nil && p != home {
			rel, _ := filepath.Rel(home, p)
			paths = append(paths, rel)
		}
		return nil
	})
	t.Logf("HOME after the tasks:\n%s", strings.Join(paths, "\n"))
}
