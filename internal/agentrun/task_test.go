package agentrun_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/runner/runnertest"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/sandbox/sandboxtest"
)

// TestTaskReachesTheAgentOnlyThroughItsContract: a task at each
// contract's limit reaches the agent whole, in the prompt file (berth's
// contract) or as $1 (a kelos image), and no variable of the machine's
// environment holds it, or any part of it; an agent sandbox without a
// runner runs no task and is handed none.
func TestTaskReachesTheAgentOnlyThroughItsContract(t *testing.T) {
	for _, tt := range []struct {
		name, class, runner string
		task                string
	}{
		{"berth's contract at 1 MiB", "agent", "claude-code", sandboxtest.Task(sandbox.MaxTask)},
		{"a kelos image at its argument's limit", "kelos", "claude-code", sandboxtest.Task(kelos.MaxPrompt)},
		{"an agent sandbox without a runner", "agent", "", "look around"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.w.KelosClass(t)
			type given struct {
				prompt string
				args   []string
			}
			got := make(chan given, 1)
			e.drv.SetAgent(func(spec sandbox.Spec) ([]string, int) {
				b, _ := os.ReadFile(filepath.Join(spec.Run.Work, ".berth-prompt.txt"))
				got <- given{string(b), spec.Run.Args}
				return runnertest.Stream(t, "claude-text"), 0
			})
			e.run(t)
			sb, err := e.svc.Create(t.Context(), e.alice, sandbox.CreateRequest{Name: "fix", Class: tt.class, Purpose: "agent",
				Repo: "acme/app", Task: tt.task, Runner: tt.runner})
			if err != nil {
				t.Fatal(err)
			}
			var env map[string]string
			if tt.runner == "" {
				e.waitState(t, sb.ID, sandbox.StateRunning)
				env = e.drv.Env(sb.ID)
			} else {
				g := <-got
				env = e.drv.Env(sb.ID)
				e.waitState(t, sb.ID, sandbox.StateTerminated)
				switch tt.class {
				case "kelos":
					if len(g.args) != 1 || g.args[0] != tt.task {
						t.Errorf("the image's arguments: %d of them, the first %d bytes; want the task alone, %d bytes",
							len(g.args), len(first(g.args)), len(tt.task))
					}
				default:
					if g.prompt != tt.task {
						t.Errorf("the prompt file holds %d bytes, want the task's %d", len(g.prompt), len(tt.task))
					}
				}
			}
			if env == nil {
				t.Fatal("the driver was handed no environment")
			}
			if _, ok := env["BERTH_TASK"]; ok {
				t.Error("the environment names BERTH_TASK")
			}
			for k, v := range env {
				if strings.Contains(v, tt.task[:min(len(tt.task), 40)]) {
					t.Errorf("%s holds the task", k)
				}
			}
		})
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
