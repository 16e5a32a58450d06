package class

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/quantity"
)

// The bounds of a class and of a sandboxes file (SPEC S4). Each field is
// bounded where it is read, so the sandboxes file at start-up, `berth
// sandbox apply -f` (PUT /sandbox/v1/classes) and the panel's class forms
// refuse the same things; and an organisation's classes are bounded in
// number, so every list of them is bounded too.
const (
	// MaxFile is the most a sandboxes file holds, in bytes, both as
	// written and as its YAML aliases expand.
	MaxFile = 1 << 20
	// MaxClasses is the most classes a file names and an organisation has.
	MaxClasses = 100
	// MaxDescription is the longest description, in bytes.
	MaxDescription = 1 << 10
	// MaxPorts is how many ports a class may name; MinPort and MaxPort
	// are the ones every driver reaches.
	MaxPorts         = 64
	MinPort, MaxPort = 1024, 65535
	// MaxImage is the longest image reference, in bytes.
	MaxImage = 512
	// maxWord is the longest value of a field that is one word or number
	// (isolation, cpu, memory, disk, the TTLs, session_idle, git, contract,
	// runner, each purpose).
	maxWord = 64
	// MaxSetupArgs is the most arguments a setup command has, and
	// MaxSetupCommand the most bytes they hold together.
	MaxSetupArgs    = 64
	MaxSetupCommand = 16 << 10
)

// checkSpecBounds refuses the fields of s past their bounds. Parse
// reads nothing further of a spec it refuses, so no message repeats a
// value of any length.
func checkSpecBounds(s Spec) []error {
	var errs []error
	long := func(field, v string, limit int) {
		if len(v) > limit {
			errs = append(errs, fault.Field(field, "is %d bytes; at most %d", len(v), limit))
		}
	}
	long("name", s.Name, maxWord)
	long("description", s.Description, MaxDescription)
	long("image", s.Image, MaxImage)
	for _, f := range []struct{ name, v string }{{"isolation", s.Isolation}, {"cpu", s.CPU}, {"memory", s.Memory}, {"disk", s.Disk},
		{"default_ttl", s.DefaultTTL}, {"max_ttl", s.MaxTTL}, {"git", s.Git}, {"contract", s.Contract}, {"runner", s.Runner}, {"session_idle", s.SessionIdle}} {
		long(f.name, f.v, maxWord)
	}
	if len(s.Purposes) > 2 {
		errs = append(errs, fault.Field("purposes", "has %d entries; at most 2 (engineer, agent)", len(s.Purposes)))
	} else {
		for _, p := range s.Purposes {
			long("purposes", p, maxWord)
		}
	}
	size := 0
	for _, a := range s.SetupCommand {
		size += len(a)
	}
	if len(s.Ports) > MaxPorts {
		errs = append(errs, fault.Field("ports", "has %d entries; at most %d", len(s.Ports), MaxPorts))
	}
	switch {
	case len(s.SetupCommand) > MaxSetupArgs:
		errs = append(errs, fault.Field("setup_command", "has %d arguments; at most %d", len(s.SetupCommand), MaxSetupArgs))
	case size > MaxSetupCommand:
		errs = append(errs, fault.Field("setup_command", "is %d bytes; at most %d", size, MaxSetupCommand))
	}
	return errs
}

// checkExpansion refuses a document whose YAML aliases expand it past
// MaxFile bytes, before anything decodes it: a small file that
// aliases one long string thousands of times would otherwise become a
// huge class in memory, in the database and in every list of classes.
// Aliases within the budget are fine (a shared setup command, say). The
// walk stops as soon as the budget is spent, so it costs no more than the
// budget whatever the document; every node counts at least one byte, so a
// cycle ends too.
func checkExpansion(n *yaml.Node) error {
	budget := MaxFile
	var walk func(n *yaml.Node) bool
	walk = func(n *yaml.Node) bool {
		budget -= 1 + len(n.Value)
		if budget < 0 {
			return false
		}
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			return walk(n.Alias)
		}
		for _, c := range n.Content {
			if !walk(c) {
				return false
			}
		}
		return true
	}
	if !walk(n) {
		return fault.Field(fileTopLevel, "the file, its YAML aliases expanded, is larger than %s (%d bytes), the most a sandboxes file holds",
			quantity.Bytes(MaxFile), MaxFile)
	}
	return nil
}

// checkShape refuses what would make decoding costly or ambiguous: a
// mapping with a key twice, anywhere in the document (the YAML library
// would find it too, but by comparing every key of a mapping with every
// other, and report each pair). The walk does not follow aliases: what
// they name is in the tree already. A document that is not a mapping is
// left to the caller to refuse.
func checkShape(root *yaml.Node) error {
	var errs []error
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			seen := make(map[string]int, len(n.Content)/2)
			for k := 0; k+1 < len(n.Content); k += 2 {
				key := n.Content[k]
				if key.Kind != yaml.ScalarNode {
					continue
				}
				if line, dup := seen[key.Value]; dup {
					errs = append(errs, fmt.Errorf("line %d: %s is also on line %d", key.Line, key.Value, line))
					continue
				}
				seen[key.Value] = key.Line
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(root)
	if len(errs) > 0 {
		return fault.Field(fileTopLevel, "a key is given twice: %v", &FileError{Errs: errs})
	}
	return nil
}

// errFileTooLarge refuses a sandboxes file longer than MaxFile.
func errFileTooLarge() error {
	return fault.Field(fileTopLevel, "the file is larger than %s (%d bytes), the most a sandboxes file holds", quantity.Bytes(MaxFile), MaxFile)
}
