package runner

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Skills and MCP servers, CLI by CLI (measured on the pinned versions):
//
//	Claude Code  ~/.claude/skills; ~/.claude.json mcpServers; tools
//	             mcp__<server>__<tool>, put in the request's tools
//	             (ENABLE_TOOL_SEARCH=false) once the servers are up
//	             (MCP_CONNECTION_NONBLOCKING=false)
//	Codex        ~/.codex/skills; [mcp_servers.<name>] in config.toml,
//	             required, so one that does not start fails the run
//	             instead of leaving its tools out unsaid; the model calls
//	             namespace mcp__<server>, name <tool>
//	OpenCode     ~/.config/opencode/skills; opencode.json "mcp"; tools
//	             <server>_<tool>
//	Gemini CLI   ~/.gemini/skills; settings.json mcpServers, trusted
//	             (its tools are offered headless only so); tools
//	             mcp_<server>_<tool>
//	Pi           ~/.pi/agent/skills; no MCP at all (MCPConfigured is not
//	             implemented: its runs leave servers out)
//
// Every server is given a startup and call timeout, so one that hangs
// costs half a minute, not the Gemini CLI's ten.

// mcpTimeoutMS bounds a server's start and each call.
const mcpTimeoutMS = 30000

// SkillsDir: Claude Code's personal skills.
func (claudeCode) SkillsDir() string { return ".claude/skills" }

// SkillsDir: Codex's, in CODEX_HOME.
func (codex) SkillsDir() string { return ".codex/skills" }

// SkillsDir: OpenCode's global skills.
func (opencode) SkillsDir() string { return ".config/opencode/skills" }

// SkillsDir: Gemini CLI's user skills.
func (gemini) SkillsDir() string { return ".gemini/skills" }

// SkillsDir: Pi's, in its agent directory.
func (pi) SkillsDir() string { return ".pi/agent/skills" }

// fileIndex is the index of path among files, -1 when it is not there.
func fileIndex(files []File, path string) int {
	return slices.IndexFunc(files, func(f File) bool { return f.Path == path })
}

// withJSON returns files with the JSON object at path changed by edit
// (made when files has none).
func withJSON(files []File, path string, edit func(map[string]any)) ([]File, error) {
	obj := map[string]any{}
	i := fileIndex(files, path)
	if i >= 0 {
		if err := json.Unmarshal(files[i].Content, &obj); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	edit(obj)
	b, err := json.MarshalIndent(obj, "", "  ")
	if err != nil {
		return nil, err
	}
	out := slices.Clone(files)
	if i >= 0 {
		out[i].Content = b
		return out, nil
	}
	return append(out, File{Path: path, Content: b}), nil
}

func envOrEmpty(env map[string]string) map[string]string {
	if env == nil {
		return map[string]string{}
	}
	return env
}

// MCPFiles: Claude Code's user-scope servers in ~/.claude.json, which it
// then keeps its own state beside.
func (claudeCode) MCPFiles(files []File, ms []MCPServer) ([]File, error) {
	servers := map[string]any{}
	for _, m := range ms {
		if m.URL != "" {
			servers[m.Name] = map[string]any{"type": "http", "url": m.URL}
			continue
		}
		servers[m.Name] = map[string]any{"type": "stdio", "command": m.Command[0], "args": m.Command[1:], "env": envOrEmpty(m.Env)}
	}
	return withJSON(files, ".claude.json", func(o map[string]any) { o["mcpServers"] = servers })
}

// MCPFiles: Codex's [mcp_servers.<name>] tables, after its config.
func (codex) MCPFiles(files []File, ms []MCPServer) ([]File, error) {
	i := fileIndex(files, ".codex/config.toml")
	if i < 0 {
		return nil, fmt.Errorf("no config.toml to add the servers to")
	}
	var b strings.Builder
	b.Write(files[i].Content)
	for _, m := range ms {
		fmt.Fprintf(&b, "\n[mcp_servers.%s]\n", m.Name) // names are bare keys: letters, digits, _ and -
		if m.URL != "" {
			fmt.Fprintf(&b, "url = %s\n", tomlString(m.URL))
		} else {
			args := make([]string, len(m.Command)-1)
			for j, a := range m.Command[1:] {
				args[j] = tomlString(a)
			}
			fmt.Fprintf(&b, "command = %s\nargs = [%s]\n", tomlString(m.Command[0]), strings.Join(args, ", "))
			if len(m.Env) > 0 {
				var kv []string
				for _, k := range slices.Sorted(maps.Keys(m.Env)) {
					kv = append(kv, k+" = "+tomlString(m.Env[k]))
				}
				fmt.Fprintf(&b, "env = { %s }\n", strings.Join(kv, ", "))
			}
		}
		fmt.Fprintf(&b, "required = true\nstartup_timeout_sec = %d\ntool_timeout_sec = %d\n", mcpTimeoutMS/1000, mcpTimeoutMS/1000)
	}
	out := slices.Clone(files)
	out[i].Content = []byte(b.String())
	return out, nil
}

// MCPFiles: OpenCode's "mcp" in opencode.json.
func (opencode) MCPFiles(files []File, ms []MCPServer) ([]File, error) {
	servers := map[string]any{}
	for _, m := range ms {
		if m.URL != "" {
			servers[m.Name] = map[string]any{"type": "remote", "url": m.URL, "oauth": false, "enabled": true, "timeout": mcpTimeoutMS}
			continue
		}
		servers[m.Name] = map[string]any{"type": "local", "command": m.Command, "environment": envOrEmpty(m.Env), "enabled": true, "timeout": mcpTimeoutMS}
	}
	return withJSON(files, ".config/opencode/opencode.json", func(o map[string]any) { o["mcp"] = servers })
}

// MCPFiles: the Gemini CLI's mcpServers in settings.json, trusted (it
// offers an untrusted server's tools to no headless run).
func (gemini) MCPFiles(files []File, ms []MCPServer) ([]File, error) {
	servers := map[string]any{}
	for _, m := range ms {
		if m.URL != "" {
			servers[m.Name] = map[string]any{"url": m.URL, "type": "http", "trust": true, "timeout": mcpTimeoutMS}
			continue
		}
		servers[m.Name] = map[string]any{"command": m.Command[0], "args": m.Command[1:], "env": envOrEmpty(m.Env), "trust": true, "timeout": mcpTimeoutMS}
	}
	return withJSON(files, ".gemini/settings.json", func(o map[string]any) { o["mcpServers"] = servers })
}
