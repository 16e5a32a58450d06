// Package kelos is the Kelos "Standardized Agent Interface" (seeds/003),
// which berth runs unchanged in compatibility mode (SPEC S13.6): the
// interface's fixed points (entrypoint, uid, working directory), its
// reserved environment, and what the host reads from a run's log, the
// output block between the markers and the setup command's banners.
//
// It imports nothing of berth's: the sandbox service, the drivers and the
// workspace all take their constants from here.
package kelos

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The interface's fixed points (seeds/003 §1, §4, §5).
const (
	// Entrypoint is the executable the container runs, whatever the
	// image's own ENTRYPOINT; the prompt is its first argument.
	Entrypoint = "/kelos_entrypoint.sh"
	// UID is the agent's uid (and gid): the checkout must be its.
	UID = 61100
	// WorkDir is where the checkout is mounted, also the working directory.
	WorkDir = "/workspace/repo"
	// Home is the agent user's home in the interface's reference images
	// (useradd -m agent); the host mounts a fresh tmpfs there.
	Home = "/home/agent"
	// MaxPrompt is the longest prompt: it travels as one argument, of
	// podman's command line and then of the container's process, and
	// Linux refuses a single argument of 128 KiB or more with its NUL
	// (MAX_ARG_STRLEN). Measured: 131,071 bytes reach $1, one more fails
	// podman's own execve (E2BIG).
	MaxPrompt = 128<<10 - 1
	// PluginDir is KELOS_PLUGIN_DIR where the host mounts a run's plugins
	// (read-only), and Plugin the one plugin berth gives: its skills are
	// PluginDir/Plugin/skills/<skill>/SKILL.md.
	PluginDir = "/kelos-plugins"
	Plugin    = "berth"
)

// Run is what the reserved environment of one run says.
type Run struct {
	// AgentType is KELOS_AGENT_TYPE: the runner's name (claude-code, …).
	AgentType string
	// Model is KELOS_MODEL; empty leaves it unset.
	Model string
	// BaseBranch is KELOS_BASE_BRANCH, the branch checked out; empty
	// leaves it unset.
	BaseBranch string
	// SetupCommand is KELOS_SETUP_COMMAND, an exec-form command the
	// entrypoint runs before the agent; nil leaves it unset.
	SetupCommand []string
	// AgentsMD is KELOS_AGENTS_MD, user-level instructions, and Effort
	// KELOS_EFFORT; empty leaves each unset.
	AgentsMD, Effort string
	// PluginDir is KELOS_PLUGIN_DIR; empty leaves it unset.
	PluginDir string
}

// Env is the run's reserved environment (seeds/003 §3), less credentials.
func Env(r Run) (map[string]string, error) {
	if r.AgentType == "" {
		return nil, errors.New("kelos: no agent type")
	}
	env := map[string]string{"KELOS_AGENT_TYPE": r.AgentType, "HOME": Home}
	if r.Model != "" {
		env["KELOS_MODEL"] = r.Model
	}
	if r.BaseBranch != "" {
		env["KELOS_BASE_BRANCH"] = r.BaseBranch
	}
	if r.AgentsMD != "" {
		env["KELOS_AGENTS_MD"] = r.AgentsMD
	}
	if r.Effort != "" {
		env["KELOS_EFFORT"] = r.Effort
	}
	if r.PluginDir != "" {
		env["KELOS_PLUGIN_DIR"] = r.PluginDir
	}
	if r.SetupCommand != nil {
		if err := CheckSetupCommand(r.SetupCommand); err != nil {
			return nil, err
		}
		b, err := json.Marshal(r.SetupCommand)
		if err != nil {
			return nil, err
		}
		env["KELOS_SETUP_COMMAND"] = string(b)
	}
	return env, nil
}

// CheckSetupCommand refuses what cannot be an exec-form command: an empty
// list or program, or a NUL byte (exec cannot pass one).
func CheckSetupCommand(cmd []string) error {
	if len(cmd) == 0 || strings.TrimSpace(cmd[0]) == "" {
		return errors.New("an exec-form command names its program first")
	}
	for i, a := range cmd {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("argument %d holds a NUL byte", i)
		}
	}
	return nil
}

// CheckPrompt refuses a prompt the image cannot be given: its $1, one
// argument of podman's command line and then of the container's process,
// which Linux bounds (MaxPrompt) and which cannot hold NUL.
func CheckPrompt(prompt string) error {
	switch {
	case len(prompt) > MaxPrompt:
		return fmt.Errorf("%d bytes; at most %d bytes (a kelos image takes its task as one argument, which Linux caps at 128 KiB with its NUL)", len(prompt), MaxPrompt)
	case strings.ContainsRune(prompt, 0):
		return errors.New("holds a NUL byte, which no argument can")
	}
	return nil
}

// Reserved reports whether the interface reserves name (seeds/003 §3): a
// caller's variable of that name is dropped so the host's value wins, or
// so that none is set (KELOS_SETUP_COMMAND drives what the entrypoint
// executes, and is dropped even when the host sets none).
func Reserved(name string) bool {
	switch name {
	case "KELOS_MODEL", "KELOS_EFFORT", "KELOS_AGENT_TYPE", "KELOS_BASE_BRANCH", "KELOS_AGENTS_MD",
		"KELOS_PLUGIN_DIR", "KELOS_SETUP_COMMAND", "KELOS_SESSION_SETUP_ONLY", "KELOS_GITHUB_TOKEN_FILE":
		return true
	}
	return false
}

// Credential is the variable an image of the interface reads its API key
// from for an agent type, "" for a type the interface does not name. The
// host sets it to the sandbox's own key: every model call goes through the
// gateway, whatever the image calls its key.
func Credential(agentType string) string {
	switch agentType {
	case "claude-code":
		return "ANTHROPIC_API_KEY"
	case "codex":
		return "CODEX_API_KEY"
	case "gemini":
		return "GEMINI_API_KEY"
	case "opencode":
		return "OPENCODE_API_KEY"
	case "cursor":
		return "CURSOR_API_KEY"
	}
	return ""
}
