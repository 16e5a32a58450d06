package kelos_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/kelos"
)

// feed reads a log given as lines, "2> " marking a line of stderr, and
// returns the lines left to the agent's stream.
func feed(c *kelos.Capture, log string) []string {
	var agent []string
	for l := range strings.Lines(log) {
		l = strings.TrimSuffix(l, "\n")
		text, stderr := strings.CutPrefix(l, "2> ")
		if !c.Line(!stderr, []byte(text)) && !stderr {
			agent = append(agent, text)
		}
	}
	return agent
}

func TestCapture(t *testing.T) {
	tests := []struct {
		name    string
		log     string
		agent   []string
		outputs []string
		results map[string]string
		setup   kelos.Setup
	}{
		{
			name: "the seed's example, after a stream",
			log: `{"type":"result"}
---KELOS_OUTPUTS_START---
branch: kelos-task-1
pr: https://github.com/org/repo/pull/123
commit: 0123abc
input-tokens: 1200
cost-usd: 0.042
a line without a key
---KELOS_OUTPUTS_END---
`,
			agent:   []string{`{"type":"result"}`},
			outputs: []string{"branch: kelos-task-1", "pr: https://github.com/org/repo/pull/123", "commit: 0123abc", "input-tokens: 1200", "cost-usd: 0.042", "a line without a key"},
			results: map[string]string{"branch": "kelos-task-1", "pr": "https://github.com/org/repo/pull/123", "commit": "0123abc", "input-tokens": "1200", "cost-usd": "0.042"},
		},
		{
			name:    "markers with carriage returns and spaces; blank lines skipped; colon without space is no key",
			log:     "---KELOS_OUTPUTS_START--- \r\n\nkey:value\r\n  spaced :  v  \r\n---KELOS_OUTPUTS_END---\r\nafter\n",
			agent:   []string{"after"},
			outputs: []string{"key:value", "  spaced :  v"},
			results: map[string]string{"spaced": "v"},
		},
		{
			name:  "an unterminated block is dropped",
			log:   "---KELOS_OUTPUTS_START---\nbranch: x\n",
			agent: nil,
		},
		{
			name:    "a later block adds, a later key wins; a stray end is the interface's",
			log:     "---KELOS_OUTPUTS_END---\n---KELOS_OUTPUTS_START---\na: 1\nb: 2\n---KELOS_OUTPUTS_END---\n---KELOS_OUTPUTS_START---\nb: 3\n---KELOS_OUTPUTS_END---\n",
			outputs: []string{"a: 1", "b: 2", "b: 3"},
			results: map[string]string{"a": "1", "b": "3"},
		},
		{
			name:    "stderr's block is its own; stdout lines between go to the agent",
			log:     "2> ---KELOS_OUTPUTS_START---\n{\"x\":1}\n2> k: v\n2> ---KELOS_OUTPUTS_END---\n",
			agent:   []string{`{"x":1}`},
			outputs: []string{"k: v"},
			results: map[string]string{"k": "v"},
		},
		{
			name:  "setup ran",
			log:   "2> ---KELOS_SETUP_COMMAND_START---\n2> installing\n2> ---KELOS_SETUP_COMMAND_DONE---\n{}\n",
			agent: []string{"{}"},
			setup: kelos.SetupOK,
		},
		{
			name:  "setup failed",
			log:   "2> ---KELOS_SETUP_COMMAND_START---\n2> ---KELOS_SETUP_COMMAND_FAILED---\n",
			setup: kelos.SetupError,
		},
		{
			name:  "setup never said",
			log:   "2> ---KELOS_SETUP_COMMAND_START---\n",
			setup: kelos.SetupStarted,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c kelos.Capture
			agent := feed(&c, tt.log)
			if diff := cmp.Diff(tt.agent, agent); diff != "" {
				t.Errorf("lines left to the agent's stream (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.outputs, c.Outputs()); diff != "" {
				t.Errorf("Outputs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.results, c.Results()); diff != "" {
				t.Errorf("Results (-want +got):\n%s", diff)
			}
			if c.Setup() != tt.setup {
				t.Errorf("Setup = %d, want %d", c.Setup(), tt.setup)
			}
		})
	}
}

func TestCaptureIsBounded(t *testing.T) {
	var c kelos.Capture
	c.Line(true, []byte(kelos.OutputsStart))
	for range 1000 {
		c.Line(true, []byte("k: "+strings.Repeat("v", 10<<10)))
	}
	c.Line(true, []byte(kelos.OutputsEnd))
	if n := len(c.Outputs()); n != 256 {
		t.Errorf("%d outputs kept, want at most 256", n)
	}
	if n := len(c.Results()["k"]); n > 4<<10+len("…") {
		t.Errorf("a result of %d bytes kept, want at most 4 KiB", n)
	}
}

func TestTotalsOf(t *testing.T) {
	for _, tt := range []struct {
		results map[string]string
		want    kelos.Totals
	}{
		{map[string]string{"input-tokens": "1200", "output-tokens": "80", "cost-usd": "0.042"},
			kelos.Totals{InputTokens: 1200, OutputTokens: 80, Tokens: true, CostUSD: 0.042, Cost: true}},
		{map[string]string{"output-tokens": "5"}, kelos.Totals{OutputTokens: 5, Tokens: true}},
		{map[string]string{"input-tokens": "many", "output-tokens": "-3", "cost-usd": "NaN"}, kelos.Totals{}},
		{map[string]string{"cost-usd": "+Inf"}, kelos.Totals{}},
		{nil, kelos.Totals{}},
	} {
		if got := kelos.TotalsOf(tt.results); got != tt.want {
			t.Errorf("TotalsOf(%v) = %+v, want %+v", tt.results, got, tt.want)
		}
	}
}

func TestEnv(t *testing.T) {
	got, err := kelos.Env(kelos.Run{AgentType: "claude-code", Model: "claude-sonnet-4-5", BaseBranch: "main",
		SetupCommand: []string{"sh", "-c", `pip install --user "x y"`}, AgentsMD: "Run the tests.\n", Effort: "high"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"KELOS_AGENT_TYPE": "claude-code", "KELOS_MODEL": "claude-sonnet-4-5", "KELOS_BASE_BRANCH": "main",
		"KELOS_SETUP_COMMAND": `["sh","-c","pip install --user \"x y\""]`, "HOME": "/home/agent",
		"KELOS_AGENTS_MD": "Run the tests.\n", "KELOS_EFFORT": "high",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Env (-want +got):\n%s", diff)
	}
	got, err = kelos.Env(kelos.Run{AgentType: "codex"})
	if err != nil || len(got) != 2 || got["KELOS_AGENT_TYPE"] != "codex" {
		t.Errorf("Env with only an agent type = %v, %v; want KELOS_AGENT_TYPE and HOME alone", got, err)
	}
	for _, bad := range [][]string{{}, {""}, {"sh", "a\x00b"}} {
		if _, err := kelos.Env(kelos.Run{AgentType: "codex", SetupCommand: bad}); err == nil {
			t.Errorf("setup command %q accepted", bad)
		}
	}
	if _, err := kelos.Env(kelos.Run{}); err == nil {
		t.Error("a run without an agent type has an environment")
	}
}

func TestReservedAndCredentials(t *testing.T) {
	for _, name := range []string{"KELOS_SETUP_COMMAND", "KELOS_AGENT_TYPE", "KELOS_MODEL", "KELOS_SESSION_SETUP_ONLY"} {
		if !kelos.Reserved(name) {
			t.Errorf("%s is not reserved", name)
		}
	}
	if kelos.Reserved("MY_VAR") {
		t.Error("MY_VAR is reserved")
	}
	for agent, want := range map[string]string{"claude-code": "ANTHROPIC_API_KEY", "codex": "CODEX_API_KEY", "gemini": "GEMINI_API_KEY",
		"opencode": "OPENCODE_API_KEY", "cursor": "CURSOR_API_KEY", "pi": ""} {
		if got := kelos.Credential(agent); got != want {
			t.Errorf("Credential(%s) = %q, want %q", agent, got, want)
		}
	}
}

func TestCheckPrompt(t *testing.T) {
	for _, tt := range []struct {
		name, prompt, want string
	}{
		{"at the limit", strings.Repeat("x", kelos.MaxPrompt), ""},
		{"one byte over", strings.Repeat("x", kelos.MaxPrompt+1), "131072 bytes; at most 131071 bytes"},
		{"a NUL byte", "fix\x00it", "NUL"},
	} {
		err := kelos.CheckPrompt(tt.prompt)
		if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestSessionArgs runs a session's script under the real sh with a
// stand-in entrypoint: setup first, alone and without the prompt, its exit
// told; then the CLI with the prompt file on its standard input; a failed
// setup starts no CLI.
func TestSessionArgs(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	prompt := filepath.Join(dir, "prompt")
	if err := os.WriteFile(prompt, []byte("the task"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		setupExit int
		wantOut   string
	}{{0, "setup only=1 args=0\ncli got: the task\n"}, {3, "setup only=1 args=0\n"}} {
		entry := filepath.Join(dir, "entry")
		script := "#!/bin/sh\necho \"setup only=$KELOS_SESSION_SETUP_ONLY args=$#\"\nexit " + strconv.Itoa(c.setupExit) + "\n"
		if err := os.WriteFile(entry, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		args := kelos.SessionArgs("PROMPT", []string{"sh", "-c", `echo "cli got: $(cat)"`})
		args[1] = strings.Replace(args[1], kelos.Entrypoint, entry, 1)
		cmd := exec.Command(kelos.SessionShell, args...)
		cmd.Env = append(os.Environ(), "PROMPT="+prompt)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			code = ee.ExitCode()
		}
		if stdout.String() != c.wantOut || code != c.setupExit {
			t.Errorf("setup exit %d: stdout %q, exit %d; want %q, %d", c.setupExit, stdout.String(), code, c.wantOut, c.setupExit)
		}
		got, ok := kelos.SessionSetup(strings.TrimSpace(stderr.String()))
		if !ok || got != c.setupExit {
			t.Errorf("setup exit %d: the runtime said %q", c.setupExit, stderr.String())
		}
	}
	if _, ok := kelos.SessionSetup("berth: kelos session setup exited soon"); ok {
		t.Error("a line that only starts like the mark was read as one")
	}
	if got := kelos.SessionState("claude-code", "/home/agent"); got["CLAUDE_CONFIG_DIR"] != "/home/agent/.claude" {
		t.Errorf("claude-code's state: %v", got)
	}
	if got := kelos.SessionState("opencode", "/h"); got["XDG_DATA_HOME"] != "/h/.local/share" || got["OPENCODE_CONFIG_DIR"] != "/h/.config/opencode" {
		t.Errorf("opencode's state: %v", got)
	}
}
