package kelos

import (
	"path"
	"strconv"
	"strings"
)

// Sessions (seeds/003 §2): for a Session, the runtime invokes the
// entrypoint with SessionSetupOnly=1 and no prompt at every start of its
// container, and the entrypoint prepares credentials, instructions,
// plugins, MCP configuration and the workspace's setup command, then
// exits 0 without starting the agent; the runtime then runs the agent's
// own CLI (which the image keeps on PATH) for each task. The providers'
// state lives on the session's volume, where the variables of SessionState
// point, so a restarted runtime continues the conversation.

// SessionSetupOnly asks the entrypoint to prepare and exit.
const SessionSetupOnly = "KELOS_SESSION_SETUP_ONLY"

// SessionState is where a session's provider keeps its state, under home
// (a directory on the session's volume): CLAUDE_CONFIG_DIR for Claude
// Code, CODEX_HOME for Codex, OPENCODE_CONFIG_DIR and XDG_DATA_HOME for
// OpenCode; none for the other agent types, whose state is under HOME.
func SessionState(agentType, home string) map[string]string {
	switch agentType {
	case "claude-code":
		return map[string]string{"CLAUDE_CONFIG_DIR": path.Join(home, ".claude")}
	case "codex":
		return map[string]string{"CODEX_HOME": path.Join(home, ".codex")}
	case "opencode":
		return map[string]string{"OPENCODE_CONFIG_DIR": path.Join(home, ".config", "opencode"), "XDG_DATA_HOME": path.Join(home, ".local", "share")}
	}
	return nil
}

// SessionShell is the shell a session's task runs under, in the image.
const SessionShell = "/bin/sh"

// sessionMark starts the line the session's runtime writes on standard
// error once the entrypoint's setup is over: SessionSetup reads it back.
const sessionMark = "berth: kelos session setup exited "

// SessionArgs are a session task's arguments to SessionShell: the
// entrypoint run with SessionSetupOnly=1, no prompt and nothing on its
// standard input; its exit told on standard error (SessionSetup reads
// it); a failed setup ends the task with its code, the agent not started;
// else the agent's CLI, cli, exec'd with the prompt file (promptVar names
// the variable holding its path) on its standard input.
func SessionArgs(promptVar string, cli []string) []string {
	script := SessionSetupOnly + "=1 " + Entrypoint + ` </dev/null
code=$?
echo "` + sessionMark + `$code" >&2
[ "$code" -eq 0 ] || exit "$code"
exec "$@" <"$` + promptVar + `"`
	return append([]string{"-c", script, "berth-kelos-session"}, cli...)
}

// SessionSetup reads a line of a session task's standard error: whether
// it is the runtime's word on the entrypoint's setup, and its exit code.
func SessionSetup(line string) (code int, ok bool) {
	rest, found := strings.CutPrefix(line, sessionMark)
	if !found {
		return 0, false
	}
	code, err := strconv.Atoi(rest)
	return code, err == nil
}
