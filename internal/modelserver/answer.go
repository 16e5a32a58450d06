package modelserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// conversation is what a dialect reads from a request to decide the answer.
type conversation struct {
	model       string
	stream      bool
	toolResults int      // tool results the conversation holds
	answers     int      // the model's finished answers it holds (see finished)
	userTexts   []string // the texts of its user turns, in order
	tools       []tool   // function tools the request offers
	// jsonSchema is the schema of the JSON the request asks for (Gemini's
	// router and other utility calls), nil when it asks for none.
	jsonSchema json.RawMessage
}

// tool is one function tool a request offers.
type tool struct {
	name   string
	schema json.RawMessage // JSON schema of its arguments
	// namespace and local are a namespaced tool's parts (Codex's MCP
	// tools: namespace mcp__<server>, local <tool>), called by them.
	namespace, local string
}

// reply is one model call's answer, before a dialect renders it.
type reply struct {
	text string
	call *toolCall // nil for no tool call
	fail *Failure  // set: answer with this error, nothing else
}

// toolCall is a call to the CLI's shell tool.
type toolCall struct {
	id               string // unique per server; each dialect prefixes it
	name             string
	namespace, local string // a namespaced tool's (tool)
	args             map[string]any
}

// argsJSON is the call's arguments as one JSON object.
func (c *toolCall) argsJSON() string {
	b, _ := json.Marshal(c.args) // JSON values only
	return string(b)
}

// noShellText answers a tool turn on a request that offers no shell tool
// (OpenCode's title call, say) when the turn has no text of its own.
const noShellText = "mock: no shell tool offered"

// finished counts the model's finished answers as a dialect reads a
// conversation in order. The model's reply is its messages between two of
// anyone else's (a user's prompt, a tool's result, a system message); a
// reply with text and no tool call is a finished answer. A reply counts
// once however many messages it spans: a CLI may keep one answer's text
// and tool call as a message each, and the text is then no answer.
type finished struct {
	n          int
	text, call bool // the reply being read has text, a tool call
}

// model reads one message (or Responses item) of the model's.
func (f *finished) model(text, call bool) { f.text, f.call = f.text || text, f.call || call }

// other reads anyone else's message, which ends the model's reply.
func (f *finished) other() {
	if f.text && !f.call {
		f.n++
	}
	f.text, f.call = false, false
}

// count ends the conversation and returns its finished answers.
func (f *finished) count() int {
	f.other()
	return f.n
}

// hasText reports whether any of texts is not empty.
func hasText(texts []string) bool {
	return slices.ContainsFunc(texts, func(t string) bool { return t != "" })
}

// answer picks the turn for c (see Script) and records the decision in rec.
func (s *Server) answer(c conversation, rec *Request) reply {
	rec.Model, rec.Stream, rec.ToolResults, rec.Answers = c.model, c.stream, c.toolResults, c.answers
	for _, t := range c.userTexts {
		rec.UserTexts = append(rec.UserTexts, TextOf(t))
	}
	if len(s.script.Turns) == 0 {
		return reply{fail: &Failure{Status: http.StatusInternalServerError, Message: "modelserver: script has no turns"}}
	}
	i := min(c.toolResults+c.answers, len(s.script.Turns)-1)
	rec.Turn = i
	t := s.script.Turns[i]
	if missing := missingWords(t.Requires, c.userTexts); len(missing) > 0 {
		return reply{fail: &Failure{Status: http.StatusBadRequest, Message: fmt.Sprintf(
			"modelserver: turn %d requires %s in the conversation's user turns, and none holds it (was an earlier conversation continued?)",
			i, strings.Join(missing, ", "))}}
	}
	switch {
	case t.Error != nil:
		return reply{fail: t.Error}
	case c.jsonSchema != nil:
		// A utility call that parses the answer as JSON retries anything
		// else for minutes (Gemini's router): give it JSON of its shape.
		b, _ := json.Marshal(exampleOf(c.jsonSchema))
		return reply{text: string(b)}
	}
	if t.Tool != "" {
		i := slices.IndexFunc(c.tools, func(x tool) bool { return strings.HasSuffix(x.name, t.Tool) })
		if i >= 0 {
			args := t.Input
			if args == nil {
				args = map[string]any{}
			}
			x := c.tools[i]
			return reply{text: t.Text, call: &toolCall{id: fmt.Sprintf("mock%04d", s.seq.Add(1)), name: x.name, namespace: x.namespace, local: x.local, args: args}}
		}
		if t.Text == "" {
			return reply{text: "mock: no tool named *" + t.Tool + " offered"}
		}
	}
	if t.Command != "" {
		if sh, ok := shellTool(c.tools); ok {
			return reply{text: t.Text, call: &toolCall{
				id:   fmt.Sprintf("mock%04d", s.seq.Add(1)),
				name: sh.name,
				args: shellArgs(sh.schema, t),
			}}
		}
		if t.Text == "" {
			return reply{text: noShellText}
		}
	}
	return reply{text: t.Text}
}

// isShellTool reports whether name is an agent CLI's shell tool: Claude
// Code's Bash, Pi's and OpenCode's bash, Codex's exec_command (and its
// older shell), Gemini CLI's run_shell_command.
func isShellTool(name string) bool {
	switch name {
	case "Bash", "bash", "exec_command", "shell", "run_shell_command":
		return true
	}
	return false
}

// shellTool returns the first shell tool among tools.
func shellTool(tools []tool) (tool, bool) {
	i := slices.IndexFunc(tools, func(t tool) bool { return isShellTool(t.name) })
	if i < 0 {
		return tool{}, false
	}
	return tools[i], true
}

// schema is the part of a JSON schema (or Gemini's upper-case variant)
// the server reads.
type schema struct {
	Type       any                `json:"type"` // a name, or a list of names
	Properties map[string]*schema `json:"properties"`
	Required   []string           `json:"required"`
	Enum       []any              `json:"enum"`
	Minimum    *float64           `json:"minimum"`
}

// is reports whether the schema's type is name (case-insensitive, also
// within a list of types such as ["string", "null"]).
func (s *schema) is(name string) bool {
	switch t := s.Type.(type) {
	case string:
		return strings.EqualFold(t, name)
	case []any:
		for _, v := range t {
			if n, ok := v.(string); ok && strings.EqualFold(n, name) {
				return true
			}
		}
	}
	return false
}

// shellArgs builds the shell tool's arguments from its schema: the command
// under "command" or "cmd" (as argv when the schema wants an array), a
// description when the schema has one, and false for any other required
// boolean.
func shellArgs(raw json.RawMessage, t Turn) map[string]any {
	var sc schema
	_ = json.Unmarshal(raw, &sc) // an unreadable schema still gets "command"
	key := "command"
	if _, ok := sc.Properties["command"]; !ok {
		if _, ok := sc.Properties["cmd"]; ok {
			key = "cmd"
		}
	}
	args := map[string]any{key: t.Command}
	if p := sc.Properties[key]; p != nil && p.is("array") {
		args[key] = []string{"bash", "-lc", t.Command}
	}
	if _, ok := sc.Properties["description"]; ok {
		desc := t.Description
		if desc == "" {
			desc = t.Command
		}
		args["description"] = desc
	}
	for _, name := range sc.Required {
		if p := sc.Properties[name]; p != nil && p.is("boolean") && args[name] == nil {
			args[name] = false
		}
	}
	return args
}

// exampleOf returns a value of the shape raw describes: objects with every
// property, the first enum value, "mock" for strings, the minimum (or 1)
// for numbers.
func exampleOf(raw json.RawMessage) any {
	var sc schema
	if json.Unmarshal(raw, &sc) != nil {
		return map[string]any{}
	}
	if v := example(&sc, 0); v != nil {
		return v
	}
	return map[string]any{}
}

func example(sc *schema, depth int) any {
	switch {
	case sc == nil || depth > 8:
		return nil
	case len(sc.Enum) > 0:
		return sc.Enum[0]
	case sc.is("object") || sc.Type == nil && sc.Properties != nil:
		obj := map[string]any{}
		for name, p := range sc.Properties {
			obj[name] = example(p, depth+1)
		}
		return obj
	case sc.is("array"):
		return []any{}
	case sc.is("string"):
		return "mock"
	case sc.is("integer"), sc.is("number"):
		// 1, not 0: Gemini CLI's numerical router wants a score of 1 to
		// 100 without saying so in the schema.
		if sc.Minimum != nil {
			return *sc.Minimum
		}
		return 1
	case sc.is("boolean"):
		return false
	}
	return nil
}

// contentTexts reads a message's content as the dialects write it: a
// string, or a list of parts of which those of type kind carry "text".
func contentTexts(raw json.RawMessage, kind string) []string {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return nil
	}
	var out []string
	for _, p := range parts {
		if p.Type == kind {
			out = append(out, p.Text)
		}
	}
	return out
}

// missingWords are the words of required that none of texts holds.
func missingWords(required, texts []string) []string {
	var missing []string
	for _, w := range required {
		if !slices.ContainsFunc(texts, func(t string) bool { return strings.Contains(t, w) }) {
			missing = append(missing, w)
		}
	}
	return missing
}
