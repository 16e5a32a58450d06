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

// RunFiles are the files r's CLI needs for one run with o: its Files, and
// o's instructions where the CLI reads them.
func RunFiles(r Runner, g Gateway, o Options) ([]File, error) {
	files, err := r.Files(g, o)
	if err != nil || o.Instructions == "" {
		return files, err
	}
	if len(o.Instructions) > MaxInstructions {
		return nil, fmt.Errorf("instructions of %d bytes: at most %d", len(o.Instructions), MaxInstructions)
	}
	in, ok := r.(Instructed)
	if !ok {
		return nil, fmt.Errorf("%s reads no instructions file", r.Name())
	}
	return append(files, File{Path: in.InstructionsFile(), Content: []byte(o.Instructions)}), nil
}
