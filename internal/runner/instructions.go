package runner

import "fmt"

// MaxInstructions bounds the user-level instructions a run is given (an
// AGENTS.md text; issue 23's agent configuration).
const MaxInstructions = 64 << 10

// Instructed is implemented by a runner whose CLI reads user-level
// instructions, across every working directory, from a file under HOME:
// where berth writes a project's agent configuration's instructions, so
// they never enter the checkout.
type Instructed interface {
	// InstructionsFile is that file, relative to HOME.
	InstructionsFile() string
}

// InstructionsFile: Claude Code's user memory.
func (claudeCode) InstructionsFile() string { return ".claude/CLAUDE.md" }

// InstructionsFile: Codex's global AGENTS.md, in CODEX_HOME.
func (codex) InstructionsFile() string { return ".codex/AGENTS.md" }

// InstructionsFile: Gemini CLI's global context file.
func (gemini) InstructionsFile() string { return ".gemini/GEMINI.md" }

// InstructionsFile: OpenCode's global rules.
func (opencode) InstructionsFile() string { return ".config/opencode/AGENTS.md" }

// InstructionsFile: Pi's user instructions, in its agent directory.
func (pi) InstructionsFile() string { return ".pi/agent/AGENTS.md" }

// RunFiles are the files r's CLI needs for one run with o: its Files,
// o's instructions and skills where the CLI reads them, and its MCP
// servers in its config. A CLI that reads no skills, or takes no MCP
// server, refuses them, saying so.
func RunFiles(r Runner, g Gateway, o Options) ([]File, error) {
	files, err := r.Files(g, o)
	if err != nil {
		return nil, err
	}
	if o.Instructions != "" {
		if len(o.Instructions) > MaxInstructions {
			return nil, fmt.Errorf("instructions of %d bytes: at most %d", len(o.Instructions), MaxInstructions)
		}
		in, ok := r.(Instructed)
		if !ok {
			return nil, fmt.Errorf("%s reads no instructions file", r.Name())
		}
		files = append(files, File{Path: in.InstructionsFile(), Content: []byte(o.Instructions)})
	}
	if len(o.Skills) > 0 {
		if err := CheckSkills(o.Skills); err != nil {
			return nil, err
		}
		sk, ok := r.(Skilled)
		if !ok {
			return nil, fmt.Errorf("%s reads no skills", r.Name())
		}
		for _, s := range o.Skills {
			for _, f := range s.Files {
				files = append(files, File{Path: sk.SkillsDir() + "/" + s.Name + "/" + f.Path, Content: f.Content})
			}
		}
	}
	if len(o.MCP) > 0 {
		if err := CheckMCP(o.MCP); err != nil {
			return nil, err
		}
		mc, ok := r.(MCPConfigured)
		if !ok {
			return nil, fmt.Errorf("%s takes no MCP server", r.Name())
		}
		if files, err = mc.MCPFiles(files, o.MCP); err != nil {
			return nil, fmt.Errorf("%s: MCP servers: %w", r.Name(), err)
		}
	}
	return files, nil
}
