package sandbox_test

import (
	"errors"
	"strings"
	"testing"

	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/sandbox/sandboxtest"
)

// TestAgentClassChosenAsAUserExpects: an agent create that names no class
// gets the only agent class; else the one whose runner is the run's (the
// creator's, else the deployment's); else the one class for agents alone
// in berth's contract (a kelos class is for one agent's image); anything
// else is refused listing the candidates. The organisation starts with
// the test file's classes: "agent" the only one for agents.
func TestAgentClassChosenAsAUserExpects(t *testing.T) {
	spec := func(name, runner, contract string, purposes ...string) class.Spec {
		c := class.Spec{Name: name, Image: "localhost/berth-agent:1", Isolation: "standard", Purposes: purposes, Runner: runner, Contract: contract}
		if contract == "kelos" {
			c.Image = sandboxtest.KelosImage
		}
		return c
	}
	for _, tt := range []struct {
		name    string
		add     []class.Spec
		runner  string // the creator's; the deployment's is claude-code
		want    string // the class chosen, or
		refused string // what the refusal says
	}{
		{name: "the only agent class", want: "agent"},
		{name: "a kelos class beside it", add: []class.Spec{spec("kelos-claude", "", "kelos", "agent")}, runner: "claude-code", want: "agent"},
		{name: "a kelos class, no runner named", add: []class.Spec{spec("kelos-claude", "", "kelos", "agent")}, want: "agent"},
		{name: "a class for both purposes beside it", add: []class.Spec{spec("general", "", "")}, want: "agent"},
		{name: "the creator's runner's class", add: []class.Spec{spec("codexes", "codex", "", "agent")}, runner: "codex", want: "codexes"},
		{name: "the deployment's runner's class", add: []class.Spec{spec("claudes", "claude-code", "", "agent")}, want: "claudes"},
		{name: "a kelos class of the runner", add: []class.Spec{spec("kelos-claude", "claude-code", "kelos", "agent")}, runner: "claude-code", want: "kelos-claude"},
		{name: "two agent classes", add: []class.Spec{spec("agent-big", "", "", "agent")},
			refused: "class: is required: this organisation has 2 agent classes (agent, agent-big); name one with --class"},
		{name: "two of the runner's", add: []class.Spec{spec("claudes", "claude-code", "", "agent"), spec("claudes-big", "claude-code", "", "agent")},
			refused: "this organisation has 3 agent classes (agent, claudes, claudes-big); name one with --class"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(c *sandbox.Config) { c.AgentRunner = "claude-code" })
			var add []class.Class
			for _, s := range tt.add {
				c, err := class.Parse(s)
				if err != nil {
					t.Fatal(err)
				}
				add = append(add, c)
			}
			if _, err := e.st.PutClasses(t.Context(), e.acme.ID, add); err != nil {
				t.Fatal(err)
			}
			sb, err := e.svc.Create(t.Context(), e.alice, sandbox.CreateRequest{Name: "fix", Purpose: "agent", Repo: "acme/app", Task: "t", Runner: tt.runner})
			if tt.refused != "" {
				var inv *fault.Error
				if !errors.As(err, &inv) || inv.Field != "class" || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("create: %v; want refused naming class: %s", err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sb.Class != tt.want {
				t.Errorf("class %s, want %s", sb.Class, tt.want)
			}
		})
	}
}
