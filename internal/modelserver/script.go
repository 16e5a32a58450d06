package modelserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
)

// Script is what the model says, in order. The server keeps no
// conversation state: a request is answered with the turn whose index is
// the number of tool results its conversation already holds plus the
// number of the model's finished answers in it. A finished answer is a
// reply of the model (its messages, or Responses items, between two of
// anyone else's) with text and no tool call: an assistant (Gemini: model)
// message with text and no call, or in the Responses API an assistant
// message item that no function_call (or other *_call) item follows
// before anyone else's item. A turn with Text and a Command (or a Tool)
// is no finished answer: its tool result comes next.
//
// So a CLI that retries a call gets the same turn again; the turn after a
// tool call comes once the CLI sends that call's result back; and a CLI
// that resumes a session with a new prompt sends the previous task's
// answer along and gets the turn after it. The script
//
//	{"turns": [{"command": "c1"}, {"text": "first done"}, {"command": "c2"}, {"text": "second done"}]}
//
// plays task 1 as c1 then "first done" and, once the CLI resumes the
// conversation with a new prompt, task 2 as c2 then "second done". Past
// the end, the last turn answers again.
type Script struct {
	Turns []Turn `json:"turns"`
}

// Turn is one answer of the model: text, a call to the CLI's shell tool
// (optionally after some text), or an HTTP error.
type Turn struct {
	// Text is said alone, or before the tool call when Command is set.
	Text string `json:"text,omitempty"`
	// Command is run through the shell tool the request offers (Bash, bash,
	// exec_command, run_shell_command, shell). A request that offers none
	// (OpenCode's title call) gets Text, or a fixed sentence, instead.
	Command string `json:"command,omitempty"`
	// Description fills the tool's description argument when its schema
	// has one; empty means the command itself.
	Description string `json:"description,omitempty"`
	// Tool calls, instead of the shell, the first tool the request offers
	// whose name ends in Tool (CLIs prefix an MCP server's tools with its
	// name in their own ways: mcp__srv__probe, srv_probe, probe), with
	// Input as its arguments. A request that offers none gets Text, or a
	// sentence saying so.
	Tool  string         `json:"tool,omitempty"`
	Input map[string]any `json:"input,omitempty"`
	// Error, when set, answers every request at this turn with an HTTP
	// error in the dialect's own error body.
	Error *Failure `json:"error,omitempty"`
	// Requires are words the conversation's user turns must hold (any of
	// its user texts, each word somewhere): a request at this turn
	// without one of them is answered 400, naming it. A session's later
	// task so checks that its CLI continued the earlier conversation.
	Requires []string `json:"requires,omitempty"`
}

// Failure is a scripted HTTP error.
type Failure struct {
	Status  int    `json:"status"`  // 400 to 599
	Message string `json:"message"` // the error body's message
}

// Validate reports every malformed turn at once.
func (s Script) Validate() error {
	if len(s.Turns) == 0 {
		return errors.New("script has no turns")
	}
	var errs []error
	for i, t := range s.Turns {
		switch {
		case t.Error != nil && (t.Text != "" || t.Command != "" || t.Tool != ""):
			errs = append(errs, fmt.Errorf("turn %d: an error turn has no text, command or tool", i))
		case t.Command != "" && t.Tool != "":
			errs = append(errs, fmt.Errorf("turn %d: a command or a tool, not both", i))
		case t.Error != nil && (t.Error.Status < 400 || t.Error.Status > 599):
			errs = append(errs, fmt.Errorf("turn %d: error status %d is not 4xx or 5xx", i, t.Error.Status))
		case t.Error == nil && t.Text == "" && t.Command == "" && t.Tool == "":
			errs = append(errs, fmt.Errorf("turn %d: needs text, command, tool or error", i))
		case slices.Contains(t.Requires, ""):
			errs = append(errs, fmt.Errorf("turn %d: an empty word required", i))
		}
	}
	return errors.Join(errs...)
}

// ParseScript decodes a JSON script, rejecting unknown fields, and
// validates it:
//
//	{"turns": [
//	  {"text": "I'll run the command.", "command": "echo hi > f.txt", "description": "Write f.txt"},
//	  {"text": "Done."},
//	  {"error": {"status": 400, "message": "mock: scripted failure"}}
//	]}
func ParseScript(data []byte) (Script, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return Script{}, fmt.Errorf("parse script: %w", err)
	}
	if dec.More() {
		return Script{}, errors.New("parse script: data after the script")
	}
	if err := s.Validate(); err != nil {
		return Script{}, fmt.Errorf("parse script: %w", err)
	}
	return s, nil
}

// LoadScript reads and parses the JSON script file at path.
func LoadScript(path string) (Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Script{}, fmt.Errorf("load script: %w", err)
	}
	s, err := ParseScript(data)
	if err != nil {
		return Script{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// What the scenarios of the captured agent streams
// (shared/testdata/agent-streams) say and run.
const (
	HelloText       = "Hello from the mock model."
	ToolPreface     = "I'll run the command."
	ToolCommand     = "echo hi > f.txt && git add f.txt && git commit -q -m 'add f.txt' && git log --oneline | head -1"
	ToolDescription = "Write f.txt and commit it"
	DoneText        = "Done: wrote f.txt and committed it."
	FailureMessage  = "mock: scripted failure"
)

// Names of the ready scripts Scenario knows.
const (
	ScenarioText  = "text"  // one text turn: HelloText
	ScenarioTool  = "tool"  // a shell call running ToolCommand, then DoneText
	ScenarioError = "error" // every call fails with 400 FailureMessage
)

// Scenario returns the ready script of that name: ScenarioText,
// ScenarioTool or ScenarioError.
func Scenario(name string) (Script, error) {
	switch name {
	case ScenarioText:
		return Script{Turns: []Turn{{Text: HelloText}}}, nil
	case ScenarioTool:
		return Script{Turns: []Turn{
			{Text: ToolPreface, Command: ToolCommand, Description: ToolDescription},
			{Text: DoneText},
		}}, nil
	case ScenarioError:
		return Script{Turns: []Turn{{Error: &Failure{Status: 400, Message: FailureMessage}}}}, nil
	}
	return Script{}, fmt.Errorf("unknown scenario %q (want %s, %s or %s)", name, ScenarioText, ScenarioTool, ScenarioError)
}
