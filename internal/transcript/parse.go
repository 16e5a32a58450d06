package transcript

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// parsers read each runner's lines into events. They decode only what a
// person reads; the totals are the runner package's (runner.ParseLine).
// A line of a shape they do not expect makes no event.
var parsers = map[string]func(*Reader, []byte) []Event{
	"claude-code": claudeLine,
	"cursor":      claudeLine, // Cursor's CLI mirrors Claude Code's stream-json
	"codex":       codexLine,
	"gemini":      geminiLine,
	"opencode":    opencodeLine,
	"pi":          piLine,
}

// block is a content block of Claude's and Pi's messages.
type block struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// tool_use (Claude), toolCall (Pi)
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	Arguments json.RawMessage `json:"arguments"`
	// tool_result (Claude)
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func blocks(raw json.RawMessage) []block {
	var bs []block
	if json.Unmarshal(raw, &bs) != nil {
		return nil
	}
	return bs
}

// claudeLine reads Claude Code's stream-json: an assistant line per
// content block (text, tool_use; a failed API call as a synthetic
// message), the tool results in user lines. The result line's text repeats
// the last message, and its totals are the runner's.
func claudeLine(r *Reader, line []byte) []Event {
	var l struct {
		Type       string `json:"type"`
		IsAPIError bool   `json:"is_api_error_message"`
		Message    *struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	if !decode(line, &l) || l.Message == nil {
		return nil
	}
	var evs []Event
	for _, b := range blocks(l.Message.Content) {
		switch {
		case l.Type == "assistant" && l.IsAPIError && b.Type == "text":
			evs = append(evs, Event{Kind: KindError, Text: b.Text})
		case l.Type == "assistant" && b.Type == "text":
			evs = append(evs, Event{Kind: KindText, Text: b.Text})
		case l.Type == "assistant" && b.Type == "tool_use":
			r.call(b.ID, b.Name)
			evs = append(evs, Event{Kind: KindToolCall, Tool: b.Name, ID: b.ID, Summary: summary(b.Input)})
		case l.Type == "user" && b.Type == "tool_result":
			evs = append(evs, Event{Kind: KindToolResult, Tool: r.named(b.ToolUseID), ID: b.ToolUseID, Text: textOf(b.Content), Failed: b.IsError})
		}
	}
	return evs
}

// codexLine reads `codex exec --json`: each finished item (the agent's
// message, a command and its output, a file change, an MCP tool call, a
// web search) and the errors. An item of type error is a warning: Codex
// carries on.
func codexLine(r *Reader, line []byte) []Event {
	var l struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Error   *struct {
			Message string `json:"message"`
		} `json:"error"`
		Item *struct {
			ID               string `json:"id"`
			Type             string `json:"type"`
			Text             string `json:"text"`
			Message          string `json:"message"`
			Command          string `json:"command"`
			AggregatedOutput string `json:"aggregated_output"`
			ExitCode         *int   `json:"exit_code"`
			Status           string `json:"status"`
			Changes          []struct {
				Path string `json:"path"`
				Kind string `json:"kind"`
			} `json:"changes"`
			Server    string          `json:"server"`
			Tool      string          `json:"tool"`
			Arguments json.RawMessage `json:"arguments"`
			Result    json.RawMessage `json:"result"`
			Query     string          `json:"query"`
			Error     *struct {
				Message string `json:"message"`
			} `json:"error"`
		} `json:"item"`
	}
	if !decode(line, &l) {
		return nil
	}
	switch l.Type {
	case "error":
		return []Event{{Kind: KindError, Text: errorMessage(l.Message)}}
	case "turn.failed":
		if l.Error != nil {
			return []Event{{Kind: KindError, Text: errorMessage(l.Error.Message)}}
		}
		return nil
	case "item.completed":
	default:
		return nil
	}
	it := l.Item
	if it == nil {
		return nil
	}
	switch it.Type {
	case "agent_message":
		return []Event{{Kind: KindText, Text: it.Text}}
	case "command_execution":
		res := Event{Kind: KindToolResult, Tool: "shell", ID: it.ID, Text: it.AggregatedOutput,
			Failed: it.Status == "failed" || (it.ExitCode != nil && *it.ExitCode != 0)}
		if it.ExitCode != nil && *it.ExitCode != 0 {
			res.Text = strings.TrimRight(res.Text, "\n") + fmt.Sprintf("\n(exit code %d)", *it.ExitCode)
		}
		return []Event{{Kind: KindToolCall, Tool: "shell", ID: it.ID, Summary: unwrapShell(it.Command)}, res}
	case "file_change":
		var paths []string
		for _, c := range it.Changes {
			paths = append(paths, strings.TrimSpace(c.Kind+" "+c.Path))
		}
		return []Event{{Kind: KindToolCall, Tool: "edit", ID: it.ID, Summary: strings.Join(paths, ", ")}}
	case "mcp_tool_call":
		tool := strings.Trim(it.Server+"."+it.Tool, ".")
		evs := []Event{{Kind: KindToolCall, Tool: tool, ID: it.ID, Summary: summary(it.Arguments)}}
		switch {
		case it.Error != nil:
			evs = append(evs, Event{Kind: KindToolResult, Tool: tool, ID: it.ID, Text: it.Error.Message, Failed: true})
		case len(it.Result) > 0:
			var res struct {
				Content json.RawMessage `json:"content"`
			}
			text := string(it.Result)
			if json.Unmarshal(it.Result, &res) == nil && len(res.Content) > 0 {
				text = textOf(res.Content)
			}
			evs = append(evs, Event{Kind: KindToolResult, Tool: tool, ID: it.ID, Text: text, Failed: it.Status == "failed"})
		}
		return evs
	case "web_search":
		return []Event{{Kind: KindToolCall, Tool: "web_search", ID: it.ID, Summary: it.Query}}
	case "error":
		return []Event{{Kind: KindNote, Text: "warning: " + errorMessage(it.Message)}}
	}
	return nil
}

// unwrapShell shows the command inside Codex's `/bin/bash -lc "…"`.
func unwrapShell(cmd string) string {
	for _, sh := range []string{"/bin/bash -lc ", "bash -lc ", "/bin/sh -c ", "sh -c "} {
		if rest, ok := strings.CutPrefix(cmd, sh); ok && len(rest) >= 2 && rest[0] == '"' && rest[len(rest)-1] == '"' {
			return strings.ReplaceAll(rest[1:len(rest)-1], `\"`, `"`)
		}
	}
	return cmd
}

// geminiLine reads Gemini CLI's stream-json: the assistant's messages (in
// deltas, joined), tool uses and results, warnings. The user's prompt is
// the task, shown apart.
func geminiLine(r *Reader, line []byte) []Event {
	var l struct {
		Type       string          `json:"type"`
		Role       string          `json:"role"`
		Content    string          `json:"content"`
		Delta      bool            `json:"delta"`
		ToolName   string          `json:"tool_name"`
		ToolID     string          `json:"tool_id"`
		Parameters json.RawMessage `json:"parameters"`
		Status     string          `json:"status"`
		Output     string          `json:"output"`
		Message    string          `json:"message"`
		Error      *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if !decode(line, &l) {
		return nil
	}
	switch l.Type {
	case "message":
		if l.Role != "assistant" {
			return nil
		}
		if l.Delta {
			r.delta(l.Content)
			return nil
		}
		return []Event{{Kind: KindText, Text: l.Content}}
	case "tool_use":
		r.call(l.ToolID, l.ToolName)
		return []Event{{Kind: KindToolCall, Tool: l.ToolName, ID: l.ToolID, Summary: summary(l.Parameters)}}
	case "tool_result":
		e := Event{Kind: KindToolResult, Tool: r.named(l.ToolID), ID: l.ToolID, Text: l.Output, Failed: l.Status == "error"}
		if l.Error != nil && l.Error.Message != "" {
			e.Text = strings.TrimSpace(e.Text + "\n" + l.Error.Message)
		}
		return []Event{e}
	case "error":
		msg := l.Message
		if msg == "" && l.Error != nil {
			msg = l.Error.Message
		}
		return []Event{{Kind: KindNote, Text: "warning: " + msg}}
	case "result":
		if l.Status == "error" && l.Error != nil {
			return []Event{{Kind: KindError, Text: errorMessage(l.Error.Message)}}
		}
	}
	return nil
}

// opencodeLine reads `opencode run --format json`: text parts, tool parts
// (finished: the call and its result together) and errors.
func opencodeLine(r *Reader, line []byte) []Event {
	var l struct {
		Type string `json:"type"`
		Part *struct {
			Text   string `json:"text"`
			Tool   string `json:"tool"`
			CallID string `json:"callID"`
			State  *struct {
				Status string          `json:"status"`
				Input  json.RawMessage `json:"input"`
				Output string          `json:"output"`
				Error  string          `json:"error"`
			} `json:"state"`
		} `json:"part"`
		Error *struct {
			Name string `json:"name"`
			Data struct {
				Message json.RawMessage `json:"message"`
			} `json:"data"`
		} `json:"error"`
	}
	if !decode(line, &l) {
		return nil
	}
	switch l.Type {
	case "text":
		if l.Part != nil {
			return []Event{{Kind: KindText, Text: l.Part.Text}}
		}
	case "tool_use":
		p := l.Part
		if p == nil || p.State == nil {
			return nil
		}
		evs := []Event{{Kind: KindToolCall, Tool: p.Tool, ID: p.CallID, Summary: summary(p.State.Input)}}
		switch p.State.Status {
		case "completed":
			evs = append(evs, Event{Kind: KindToolResult, Tool: p.Tool, ID: p.CallID, Text: p.State.Output})
		case "error":
			evs = append(evs, Event{Kind: KindToolResult, Tool: p.Tool, ID: p.CallID, Text: p.State.Error, Failed: true})
		}
		return evs
	case "error":
		if e := l.Error; e != nil {
			var msg string
			if json.Unmarshal(e.Data.Message, &msg) != nil || msg == "" {
				msg = e.Name
			}
			return []Event{{Kind: KindError, Text: msg}}
		}
	}
	return nil
}

// piLine reads `pi --mode json`: each finished assistant message (its
// text and tool calls; a failed model call's error), and each tool
// execution's end. message_update and turn_end repeat what message_end
// says.
func piLine(r *Reader, line []byte) []Event {
	var l struct {
		Type    string `json:"type"`
		Message *struct {
			Role         string          `json:"role"`
			Content      json.RawMessage `json:"content"`
			StopReason   string          `json:"stopReason"`
			ErrorMessage string          `json:"errorMessage"`
		} `json:"message"`
		ToolCallID string `json:"toolCallId"`
		ToolName   string `json:"toolName"`
		Result     *struct {
			Content json.RawMessage `json:"content"`
		} `json:"result"`
		IsError bool `json:"isError"`
	}
	if !decode(line, &l) {
		return nil
	}
	switch l.Type {
	case "message_end":
		m := l.Message
		if m == nil || m.Role != "assistant" {
			return nil
		}
		var evs []Event
		for _, b := range blocks(m.Content) {
			switch b.Type {
			case "text":
				evs = append(evs, Event{Kind: KindText, Text: b.Text})
			case "toolCall":
				r.call(b.ID, b.Name)
				evs = append(evs, Event{Kind: KindToolCall, Tool: b.Name, ID: b.ID, Summary: summary(b.Arguments)})
			}
		}
		if m.StopReason == "error" || m.StopReason == "aborted" {
			evs = append(evs, Event{Kind: KindError, Text: strings.TrimSpace(m.ErrorMessage)})
		}
		return evs
	case "tool_execution_end":
		text := ""
		if l.Result != nil {
			text = textOf(l.Result.Content)
		}
		return []Event{{Kind: KindToolResult, Tool: l.ToolName, ID: l.ToolCallID, Text: text, Failed: l.IsError}}
	}
	return nil
}

// summaryKeys are the arguments that say most of what a call does, in the
// order one is chosen: a command, a file, a search, an address.
var summaryKeys = []string{"command", "cmd", "file_path", "filePath", "path", "absolute_path", "pattern", "query", "url", "prompt", "description"}

// summary is a tool call's arguments on one line: the argument that says
// most (summaryKeys) when it is a string, beside the other files named;
// else the arguments as compact JSON.
func summary(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var args map[string]json.RawMessage
	if json.Unmarshal(raw, &args) != nil {
		return oneLine(string(raw), SummaryBytes)
	}
	for _, k := range summaryKeys {
		var v string
		if json.Unmarshal(args[k], &v) == nil && strings.TrimSpace(v) != "" {
			return v
		}
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%s", k, args[k])
		if b.Len() > SummaryBytes {
			break
		}
	}
	return b.String()
}

// textOf is a result's text: a string, or the text of its blocks.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []string
	for _, b := range blocks(raw) {
		if b.Text != "" {
			parts = append(parts, b.Text)
		} else if b.Type != "" && b.Type != "text" {
			parts = append(parts, "("+b.Type+")")
		}
	}
	return strings.Join(parts, "\n")
}

// errorMessage is the message inside an error that is itself a vendor's
// JSON body ({"error": {"message": …}}), else the error as it is.
func errorMessage(s string) string {
	var body struct {
		Message string `json:"message"`
		Error   *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "{") && json.Unmarshal([]byte(t), &body) == nil {
		if body.Error != nil && body.Error.Message != "" {
			return body.Error.Message
		}
		if body.Message != "" {
			return body.Message
		}
	}
	return s
}
