package devcontainer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// MaxCommand is the longest a command may be, in bytes of its JSON.
const MaxCommand = 64 << 10

// PostCreateFile is where a class image keeps its postCreateCommand, in
// the form Command's MarshalJSON writes: berth image build writes it,
// berth-init runs it, berth image check reads it.
const PostCreateFile = "/etc/berth/post-create.json"

// Command is a lifecycle command as devcontainer.json writes it: a string
// (run by /bin/sh -c), an array (run as it is, no shell), or an object of
// named commands, each a string or an array.
type Command struct {
	// Steps are the commands to run, one after another; an object's in
	// the order of their names.
	Steps []Step
}

// Step is one command of a Command.
type Step struct {
	Name string   // the object's key; "" for a string or an array
	Argv []string // what to exec
}

// ParseCommand reads a command in any of its three forms.
func ParseCommand(raw json.RawMessage) (Command, error) {
	if len(raw) > MaxCommand {
		return Command{}, fmt.Errorf("%d bytes; the limit is %d", len(raw), MaxCommand)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '{' {
		var named map[string]json.RawMessage
		if err := json.Unmarshal(raw, &named); err != nil {
			return Command{}, err
		}
		if len(named) == 0 {
			return Command{}, errors.New("an object of commands names none")
		}
		if len(named) > MaxCommands {
			return Command{}, fmt.Errorf("%d commands; the limit is %d", len(named), MaxCommands)
		}
		var c Command
		for _, name := range slices.Sorted(maps.Keys(named)) {
			argv, err := oneCommand(named[name])
			if err != nil {
				return Command{}, fmt.Errorf("%s: %w", name, err)
			}
			c.Steps = append(c.Steps, Step{Name: name, Argv: argv})
		}
		return c, nil
	}
	argv, err := oneCommand(raw)
	if err != nil {
		return Command{}, err
	}
	return Command{Steps: []Step{{Argv: argv}}}, nil
}

// oneCommand is a string or an array of strings as argv.
func oneCommand(raw json.RawMessage) ([]string, error) {
	if kind(raw) == "null" {
		return nil, errors.New("it is null; give a string, an array of strings, or an object of them")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if strings.TrimSpace(s) == "" {
			return nil, errors.New("the command is empty")
		}
		if strings.ContainsRune(s, 0) {
			return nil, errors.New("the command holds a NUL")
		}
		return []string{"/bin/sh", "-c", s}, nil
	}
	var words []json.RawMessage
	if err := json.Unmarshal(raw, &words); err != nil {
		if !json.Valid(raw) {
			return nil, fmt.Errorf("not JSON: %w", err)
		}
		return nil, fmt.Errorf("it is %s; give a string, an array of strings, or an object of them", kind(raw))
	}
	if len(words) == 0 {
		return nil, errors.New("the command is empty")
	}
	argv := make([]string, len(words))
	for i, w := range words {
		if err := json.Unmarshal(w, &argv[i]); err != nil || kind(w) == "null" {
			return nil, fmt.Errorf("word %d is %s; want a string", i, kind(w))
		}
		if strings.ContainsRune(argv[i], 0) {
			return nil, fmt.Errorf("word %d holds a NUL", i)
		}
	}
	if argv[0] == "" {
		return nil, errors.New("the command is empty")
	}
	return argv, nil
}

// kind names a JSON value's type, for an error.
func kind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// Describe says what the command runs, for a person.
func (c Command) Describe() string {
	if len(c.Steps) == 1 && c.Steps[0].Name == "" {
		argv := c.Steps[0].Argv
		if len(argv) == 3 && argv[0] == "/bin/sh" && argv[1] == "-c" {
			return "run by the shell: " + argv[2]
		}
		return "run without a shell: " + strings.Join(argv, " ")
	}
	names := make([]string, len(c.Steps))
	for i, s := range c.Steps {
		names[i] = s.Name
	}
	return fmt.Sprintf("%d commands, one after another: %s", len(names), strings.Join(names, ", "))
}

// MarshalJSON writes the command in the array-and-object form
// ParseCommand reads back: what berth image build leaves in the image.
func (c Command) MarshalJSON() ([]byte, error) {
	var v any
	if len(c.Steps) == 1 && c.Steps[0].Name == "" {
		v = c.Steps[0].Argv
	} else {
		named := map[string][]string{}
		for _, s := range c.Steps {
			named[s.Name] = s.Argv
		}
		v = named
	}
	// As written: a command's < > & stay themselves, for whoever reads
	// the file in the image.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSpace(b.Bytes()), nil
}
