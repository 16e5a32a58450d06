// Package class owns classes (SPEC S4): the named machine shapes an
// organisation's sandboxes are made from. It has the fields with their
// defaults, ranges and bounds, the tiers, purposes, git modes and image
// contracts they name, the sandboxes file (bounded as written and with
// its YAML aliases expanded), the image rule, and the Service that lists,
// applies, deletes and seeds an organisation's classes. It declares the
// Store and Accounts it needs; package sandbox makes sandboxes from what
// it keeps.
package class

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"berth.dev/berth/internal/egress"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/name"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/runner"
)

// Class field defaults and ranges (SPEC S4).
const (
	DefaultCPU       = quantity.Millicores(2000)
	DefaultMemory    = quantity.Bytes(4 << 30)
	DefaultTTL       = 4 * time.Hour
	DefaultMaxTTL    = 24 * time.Hour
	MinTTL           = 5 * time.Minute
	MaxTTL           = 28 * 24 * time.Hour
	MaxWarm          = 32
	DefaultIsolation = TierIsolated
	fileTopLevel     = "sandboxes"
)

// MinSessionIdle is the shortest session_idle: a session waits at least
// this long for its next task. The longest is the class's max_ttl.
const MinSessionIdle = time.Minute

// Spec is a class as people write it: in the sandboxes file
// (BERTH_SANDBOXES_FILE), in `berth sandbox apply -f`, or as JSON.
type Spec struct {
	Name        string   `yaml:"name" json:"name"`
	Description string   `yaml:"description" json:"description,omitempty"`
	Image       string   `yaml:"image" json:"image"`
	Isolation   string   `yaml:"isolation" json:"isolation,omitempty"`
	CPU         string   `yaml:"cpu" json:"cpu,omitempty"`
	Memory      string   `yaml:"memory" json:"memory,omitempty"`
	Disk        string   `yaml:"disk" json:"disk,omitempty"`
	DefaultTTL  string   `yaml:"default_ttl" json:"default_ttl,omitempty"`
	MaxTTL      string   `yaml:"max_ttl" json:"max_ttl,omitempty"`
	Warm        int      `yaml:"warm" json:"warm,omitempty"`
	Purposes    []string `yaml:"purposes" json:"purposes,omitempty"`
	Git         string   `yaml:"git" json:"git,omitempty"`
	// Contract is the interface the image implements: berth (SPEC S13)
	// or kelos (S13.6, seeds/003).
	Contract string `yaml:"contract" json:"contract,omitempty"`
	// SetupCommand is a kelos image's KELOS_SETUP_COMMAND, in exec form.
	SetupCommand []string `yaml:"setup_command" json:"setup_command,omitempty"`
	// Runner is the runner an agent sandbox of the class gets when its
	// creator names none; "" leaves it to the deployment's default.
	Runner string `yaml:"runner" json:"runner,omitempty"`
	// Ports are the ports its engineer sandboxes serve (a devcontainer's
	// forwardPorts): berth sandbox show lists them to forward.
	Ports []int `yaml:"ports" json:"ports,omitempty"`
	// Egress is where its agent sandboxes may go out to through the
	// gateway's proxy: none, open, or hosts (package egress); unset, an
	// agent's is none and an engineer's network is open.
	Egress Egress `yaml:"egress" json:"egress,omitempty"`
	// SessionIdle is how long a session (an agent sandbox created with
	// --session) waits suspended for its next task before the sweep ends
	// it; "" or 0: until its lifetime ends. Only sessions read it.
	SessionIdle string `yaml:"session_idle" json:"session_idle,omitempty"`
}

// Egress is a class's egress as written: one word (none, open) or a
// list of hosts, in YAML either a scalar or a sequence.
type Egress []string

// UnmarshalYAML takes a scalar as a list of one.
func (e *Egress) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*e = Egress{n.Value}
		return nil
	}
	var list []string
	if err := n.Decode(&list); err != nil {
		return err
	}
	*e = list
	return nil
}

// UnmarshalJSON takes a string as a list of one.
func (e *Egress) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*e = Egress{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return err
	}
	*e = list
	return nil
}

// Class is a named machine shape belonging to one organisation, with every
// default filled in.
type Class struct {
	Name        string
	Description string
	Image       string
	Isolation   Tier
	CPU         quantity.Millicores
	Memory      quantity.Bytes
	Disk        quantity.Bytes // 0: none
	DefaultTTL  time.Duration
	MaxTTL      time.Duration
	Warm        int
	Purposes    []Purpose // empty: both
	Git         GitMode   // how its sandboxes reach their repository
	Contract    Contract  // the interface its image implements
	// SetupCommand is what a kelos image runs before its agent, in exec
	// form; nil: none.
	SetupCommand []string
	// Runner is its agent sandboxes' default runner; "": the deployment's.
	Runner string
	// Ports are the ports its engineer sandboxes serve; nil: none named.
	Ports []int
	// Egress is its agent sandboxes' way out; Mode "": by purpose
	// (EgressFor).
	Egress egress.Policy
	// SessionIdle is how long a session of the class may wait suspended
	// for its next task before the sweep terminates it; 0: until its
	// lifetime ends. Any class may have it; only agent sessions use it.
	SessionIdle time.Duration
}

// EgressFor is the egress a sandbox of the class for purpose goes out
// under: the class's, or by default none for an agent and open for an
// engineer (whose network is open today).
func (c Class) EgressFor(p Purpose) egress.Policy {
	switch {
	case p == PurposeEngineer:
		return egress.Policy{Mode: egress.ModeOpen}
	case c.Egress.Mode == "":
		return egress.None
	}
	return c.Egress
}

// Contract is the interface an agent image implements: how the host
// mounts the checkout, hands over the task, runs the image and reads what
// it says.
type Contract string

// The contracts an image may implement.
const (
	// ContractBerth is SPEC S13: the checkout at /work, the task in a
	// prompt file on stdin, the runner's own flags in the "$@" slot.
	ContractBerth Contract = "berth"
	// ContractKelos is SPEC S13.6, the Kelos interface of seeds/003: the
	// checkout at /workspace/repo, the task as $1 of /kelos_entrypoint.sh,
	// uid 61100, the KELOS_* environment, results in output markers.
	ContractKelos Contract = "kelos"
)

// Allows reports whether the class may be used for purpose.
func (c Class) Allows(p Purpose) bool {
	return len(c.Purposes) == 0 || slices.Contains(c.Purposes, p)
}

// Only reports whether the class is for purpose p and no other.
func (c Class) Only(p Purpose) bool { return len(c.Purposes) == 1 && c.Purposes[0] == p }

// Spec returns c in the form people write, with every field explicit.
func (c Class) Spec() Spec {
	s := Spec{
		Name: c.Name, Description: c.Description, Image: c.Image, Isolation: string(c.Isolation),
		CPU: c.CPU.String(), Memory: c.Memory.String(), Disk: "none",
		DefaultTTL: quantity.FormatDuration(c.DefaultTTL), MaxTTL: quantity.FormatDuration(c.MaxTTL),
		Warm: c.Warm, Git: string(c.Git), Contract: string(c.Contract), SetupCommand: c.SetupCommand,
		Runner: c.Runner, Ports: c.Ports,
	}
	if c.Egress.Mode != "" {
		s.Egress = c.Egress.Words()
	}
	if c.Disk > 0 {
		s.Disk = c.Disk.String()
	}
	if c.SessionIdle > 0 {
		s.SessionIdle = quantity.FormatDuration(c.SessionIdle)
	}
	for _, p := range c.Purposes {
		s.Purposes = append(s.Purposes, string(p))
	}
	return s
}

// Parse checks a spec and fills in the defaults. Every problem is
// reported at once, each naming its field.
func Parse(s Spec) (Class, error) {
	if errs := checkSpecBounds(s); len(errs) > 0 {
		return Class{}, errors.Join(errs...)
	}
	var errs []error
	c := Class{Name: s.Name, Description: s.Description, Image: strings.TrimSpace(s.Image), Warm: s.Warm}
	if err := name.Check(s.Name); err != nil {
		errs = append(errs, fault.Field("name", "%v", err))
	}
	if c.Image == "" {
		errs = append(errs, fault.Field("image", "is required"))
	} else if strings.ContainsAny(c.Image, " \t\n") {
		errs = append(errs, fault.Field("image", "%q is not an image reference", c.Image))
	}
	switch t := Tier(s.Isolation); t {
	case "":
		c.Isolation = DefaultIsolation
	case TierStandard, TierIsolated, TierVM:
		c.Isolation = t
	default:
		errs = append(errs, fault.Field("isolation", "%q is not a tier (standard, isolated or vm)", s.Isolation))
	}
	c.CPU = DefaultCPU
	if s.CPU != "" {
		cpu, err := quantity.ParseCPU(s.CPU)
		switch {
		case err != nil:
			errs = append(errs, fault.Field("cpu", "%v", err))
		case cpu <= 0:
			errs = append(errs, fault.Field("cpu", "%q must be more than 0", s.CPU))
		}
		c.CPU = cpu
	}
	c.Memory = DefaultMemory
	if s.Memory != "" {
		mem, err := quantity.ParseBytes(s.Memory)
		switch {
		case err != nil:
			errs = append(errs, fault.Field("memory", "%v", err))
		case mem <= 0:
			errs = append(errs, fault.Field("memory", "%q must be more than 0", s.Memory))
		}
		c.Memory = mem
	}
	if s.Disk != "" && s.Disk != "none" {
		disk, err := quantity.ParseBytes(s.Disk)
		switch {
		case err != nil:
			errs = append(errs, fault.Field("disk", "%v", err))
		case disk <= 0:
			errs = append(errs, fault.Field("disk", "%q must be none or more than 0", s.Disk))
		}
		c.Disk = disk
	}
	var err error
	if c.DefaultTTL, err = parseTTL("default_ttl", s.DefaultTTL, DefaultTTL); err != nil {
		errs = append(errs, err)
	}
	if c.MaxTTL, err = parseTTL("max_ttl", s.MaxTTL, DefaultMaxTTL); err != nil {
		errs = append(errs, err)
	}
	if c.MaxTTL < c.DefaultTTL {
		errs = append(errs, fault.Field("max_ttl", "%s is shorter than default_ttl %s",
			quantity.FormatDuration(c.MaxTTL), quantity.FormatDuration(c.DefaultTTL)))
	}
	if c.SessionIdle, err = parseSessionIdle(s.SessionIdle, c.MaxTTL); err != nil {
		errs = append(errs, err)
	}
	if s.Warm < 0 || s.Warm > MaxWarm {
		errs = append(errs, fault.Field("warm", "%d is outside 0 to %d", s.Warm, MaxWarm))
	}
	for _, p := range s.Purposes {
		switch pp := Purpose(p); pp {
		case PurposeEngineer, PurposeAgent:
			if !slices.Contains(c.Purposes, pp) {
				c.Purposes = append(c.Purposes, pp)
			}
		default:
			errs = append(errs, fault.Field("purposes", "%q is not a purpose (engineer or agent)", p))
		}
	}
	if len(c.Purposes) == 2 {
		c.Purposes = nil // both, written the short way
	}
	switch g := GitMode(s.Git); g {
	case "", GitGateway:
		c.Git = GitGateway
	case GitToken:
		c.Git = GitToken
		// SPEC S17: forge tokens never enter agent sandboxes.
		if !c.Only(PurposeEngineer) {
			errs = append(errs, fault.Field("git", "token mode puts a forge token in the sandbox: a class with git: token must be for engineers only (purposes: [engineer])"))
		}
	default:
		errs = append(errs, fault.Field("git", "%q is not a git mode (gateway or token)", s.Git))
	}
	errs = append(errs, parseContract(s, &c)...)
	if s.Runner != "" {
		c.Runner = s.Runner
		if err := runner.Runnable(s.Runner); err != nil {
			errs = append(errs, fault.Field("runner", "%v", err))
		} else if !c.Allows(PurposeAgent) {
			errs = append(errs, fault.Field("runner", "a runner is what an agent sandbox runs: this class is for engineers only (purposes: [engineer])"))
		}
	}
	errs = append(errs, parsePorts(s, &c)...)
	errs = append(errs, parseEgress(s, &c)...)
	// SPEC S12: only engineer sandboxes come from a pool.
	if c.Warm > 0 && c.Only(PurposeAgent) {
		errs = append(errs, fault.Field("warm", "a class only agents may use cannot have a warm pool (agent sandboxes always start cold)"))
	}
	return c, errors.Join(errs...)
}

// parseContract reads the contract and the setup command into c, whose
// purposes are already read.
func parseContract(s Spec, c *Class) []error {
	var errs []error
	switch ct := Contract(s.Contract); ct {
	case "", ContractBerth:
		c.Contract = ContractBerth
	case ContractKelos:
		c.Contract = ContractKelos
		// A Kelos image has no sshd and no berth-init: nobody can work in it.
		if !c.Only(PurposeAgent) {
			errs = append(errs, fault.Field("contract", "a kelos image runs an agent and nothing else: a class with contract: kelos is for agents only (purposes: [agent])"))
		}
	default:
		errs = append(errs, fault.Field("contract", "%q is not a contract (berth or kelos)", s.Contract))
	}
	if s.SetupCommand != nil {
		c.SetupCommand = s.SetupCommand
		switch {
		case c.Contract != ContractKelos:
			errs = append(errs, fault.Field("setup_command", "only a class with contract: kelos has one (its image runs it from KELOS_SETUP_COMMAND)"))
		default:
			if err := kelos.CheckSetupCommand(s.SetupCommand); err != nil {
				errs = append(errs, fault.Field("setup_command", "%v", err))
			}
		}
	}
	return errs
}

// parseEgress reads the egress into c, whose purposes are already read.
// An engineer's network is open on either driver today, so a class
// engineers may use cannot name a narrower egress than open.
func parseEgress(s Spec, c *Class) []error {
	if len(s.Egress) == 0 {
		return nil
	}
	p, err := egress.ParseWords(s.Egress)
	if err != nil {
		return []error{fault.Field("egress", "%v", err)}
	}
	if p.Mode != egress.ModeOpen && c.Allows(PurposeEngineer) {
		return []error{fault.Field("egress", "an engineer sandbox's network is open: a class engineers may use says egress: open or nothing (purposes: [agent] for %s)", p)}
	}
	c.Egress = p
	return nil
}

// parsePorts reads the ports into c, whose purposes are already read:
// ports a driver reaches, each once, for a class engineers may use.
func parsePorts(s Spec, c *Class) []error {
	var errs []error
	for _, p := range s.Ports {
		switch {
		case p < MinPort || p > MaxPort:
			errs = append(errs, fault.Field("ports", "%d is not reachable: a sandbox's ports are %d–%d", p, MinPort, MaxPort))
		case slices.Contains(c.Ports, p):
			errs = append(errs, fault.Field("ports", "%d is given twice", p))
		default:
			c.Ports = append(c.Ports, p)
		}
	}
	if len(c.Ports) > 0 && !c.Allows(PurposeEngineer) {
		errs = append(errs, fault.Field("ports", "ports are what an engineer forwards: this class is for agents only (purposes: [agent])"))
	}
	return errs
}

func parseTTL(field, s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := quantity.ParseDuration(s)
	if err != nil {
		return def, fault.Field(field, "%v", err)
	}
	if d < MinTTL || d > MaxTTL {
		return d, fault.Field(field, "%s is outside 5m to 28d", s)
	}
	return d, nil
}

// parseSessionIdle reads session_idle: empty or 0 is none (a session
// waits until its lifetime ends); else at least MinSessionIdle and at most
// the class's max_ttl, past which a session would have expired anyway.
func parseSessionIdle(s string, maxTTL time.Duration) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := quantity.ParseDuration(s)
	if err != nil {
		return 0, fault.Field("session_idle", "%v", err)
	}
	if d != 0 && (d < MinSessionIdle || d > maxTTL) {
		return 0, fault.Field("session_idle", "%s is outside %s to max_ttl %s (0 or nothing: a session waits until its lifetime ends)",
			s, quantity.FormatDuration(MinSessionIdle), quantity.FormatDuration(maxTTL))
	}
	return d, nil
}

// ParseFile reads a sandboxes file: a YAML (or JSON) document with a
// top-level `sandboxes:` list. It validates the whole file and returns
// every problem, each with its entry, line and field; unknown fields and
// duplicate names are errors. Nothing is returned unless all is well. The
// file, and the file with its YAML aliases expanded, hold at most
// MaxFile bytes, and name at most MaxClasses classes.
func ParseFile(r io.Reader) ([]Class, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFile {
		return nil, errFileTooLarge()
	}
	// Read as nodes only: decoding into Go values has the YAML library
	// compare every key of a mapping with every other, so the file's
	// shape is checked first (checkShape), and only then is each entry
	// decoded.
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fault.Field(fileTopLevel, "the file is empty; it needs a top-level sandboxes: list")
		}
		return nil, fault.Field(fileTopLevel, "%v", err)
	}
	if err := dec.Decode(new(yaml.Node)); !errors.Is(err, io.EOF) {
		return nil, fault.Field(fileTopLevel, "the file holds more than one YAML document (---); a sandboxes file is one")
	}
	if err := checkExpansion(&root); err != nil {
		return nil, err
	}
	if err := checkShape(&root); err != nil {
		return nil, err
	}
	var doc struct{ Sandboxes yaml.Node }
	if len(root.Content) == 1 && root.Content[0].Kind == yaml.MappingNode {
		top := root.Content[0]
		var unknown []error
		for k := 0; k+1 < len(top.Content); k += 2 {
			if key := top.Content[k]; key.Value == fileTopLevel {
				doc.Sandboxes = *top.Content[k+1]
			} else {
				unknown = append(unknown, fmt.Errorf("line %d: unknown field %s (a sandboxes file has only sandboxes:)", key.Line, key.Value))
			}
		}
		if len(unknown) > 0 {
			return nil, fault.Field(fileTopLevel, "%v", &FileError{Errs: unknown})
		}
	}
	if doc.Sandboxes.Kind != yaml.SequenceNode {
		return nil, fault.Field(fileTopLevel, "the file needs a top-level sandboxes: list")
	}
	if n := len(doc.Sandboxes.Content); n > MaxClasses {
		return nil, fault.Field(fileTopLevel, "the file names %d classes; at most %d", n, MaxClasses)
	}
	var (
		classes []Class
		errs    []error
		seen    = map[string]int{}
	)
	for i, n := range doc.Sandboxes.Content {
		entry := fmt.Sprintf("sandboxes[%d]", i)
		if name := fieldOf(n, "name"); name != "" && len(name) <= maxWord {
			entry = fmt.Sprintf("sandboxes[%d] %s", i, name)
			if j, dup := seen[name]; dup {
				errs = append(errs, fmt.Errorf("%s (line %d): %w", entry, lineOf(n, "name"), fault.Field("name", "%q is also sandboxes[%d]", name, j)))
			} else {
				seen[name] = i
			}
		}
		// Each problem on the line of its field (the entry's when the
		// field is missing), and every one of them: a field that is
		// unknown or of the wrong type leaves the others to be checked.
		at := func(err error) error {
			line := n.Line
			if fe, ok := errors.AsType[*fault.Error](err); ok {
				line = lineOf(n, fe.Field)
			}
			return fmt.Errorf("%s (line %d): %w", entry, line, err)
		}
		spec, bad := decodeSpec(n)
		for _, err := range bad {
			errs = append(errs, at(err))
		}
		c, err := Parse(spec)
		if err != nil || len(bad) > 0 {
			for _, e := range each(err) {
				if fe, ok := errors.AsType[*fault.Error](e); ok && undecoded(bad, fe.Field) {
					continue // already said: it could not be read
				}
				errs = append(errs, at(e))
			}
			continue
		}
		classes = append(classes, c)
	}
	if len(errs) > 0 {
		return nil, &FileError{Errs: errs}
	}
	return classes, nil
}

// FileError lists every problem of a sandboxes file. It is a fault.Invalid.
type FileError struct{ Errs []error }

func (e *FileError) Error() string {
	var lines []string
	for i, err := range e.Errs {
		if i == maxProblems {
			lines = append(lines, fmt.Sprintf("… and %d more problems", len(e.Errs)-i))
			break
		}
		lines = append(lines, err.Error())
	}
	return strings.Join(lines, "\n")
}

// maxProblems is how many problems a FileError lists; the rest it counts.
const maxProblems = 20

// Is makes a FileError a fault.Invalid.
func (e *FileError) Is(target error) bool { return target == fault.Invalid }

// Unwrap gives errors.As each problem: the first InvalidError names the
// field of the first problem.
func (e *FileError) Unwrap() []error { return e.Errs }

// each is the problems err joins (errors.Join), or err alone; none for nil.
func each(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// fieldOf returns the scalar value of a mapping node's field, or "".
func fieldOf(n *yaml.Node, field string) string {
	if n.Kind != yaml.MappingNode {
		return ""
	}
	for k := 0; k+1 < len(n.Content); k += 2 {
		if n.Content[k].Value == field && n.Content[k+1].Kind == yaml.ScalarNode {
			return n.Content[k+1].Value
		}
	}
	return ""
}

// specFields are the fields a class may have, as people write them.
var specFields = []string{"name", "description", "image", "isolation", "cpu", "memory", "disk", "default_ttl", "max_ttl", "warm", "purposes", "git",
	"contract", "setup_command", "runner", "ports", "egress", "session_idle"}

// decodeSpec decodes one entry of the sandboxes list. It refuses fields a
// class does not have and values of the wrong type, one error each (a
// fault.Field naming the field), and decodes every other field, so the
// entry's remaining problems can be found too.
func decodeSpec(n *yaml.Node) (Spec, []error) {
	var spec Spec
	if n.Kind != yaml.MappingNode {
		return spec, []error{fault.Field("class", "each entry is a set of fields such as name: and image:")}
	}
	var errs []error
	for k := 0; k+1 < len(n.Content); k += 2 {
		key, val := n.Content[k], n.Content[k+1]
		if !slices.Contains(specFields, key.Value) {
			errs = append(errs, fault.Field(key.Value, "unknown field (a class has %s)", strings.Join(specFields, ", ")))
			continue
		}
		one := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{key, val}}
		if err := one.Decode(&spec); err != nil {
			msg := strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n")
			msg = lineTag.ReplaceAllString(strings.TrimSpace(msg), "")
			errs = append(errs, fault.Field(key.Value, "%s", msg))
		}
	}
	return spec, errs
}

// lineTag is the "line N: " the YAML library starts its messages with;
// ParseFile says the line itself.
var lineTag = regexp.MustCompile(`(?m)^\s*line \d+: `)

// undecoded reports whether field is one decodeSpec could not read.
func undecoded(bad []error, field string) bool {
	for _, err := range bad {
		if fe, ok := errors.AsType[*fault.Error](err); ok && fe.Field == field {
			return true
		}
	}
	return false
}

// lineOf is the line of a mapping node's field, else the node's own.
func lineOf(n *yaml.Node, field string) int {
	if n.Kind == yaml.MappingNode {
		for k := 0; k+1 < len(n.Content); k += 2 {
			if n.Content[k].Value == field {
				return n.Content[k].Line
			}
		}
	}
	return n.Line
}

// ImagePolicy is the image rule of SPEC S4: an administrator may give a class
// an image that a template class uses, one BERTH_SANDBOX_IMAGES allows, or
// the class's current image. Anything else needs an operator.
type ImagePolicy struct {
	Template []string // the images of the sandboxes file's classes
	Allowed  []string // BERTH_SANDBOX_IMAGES: an entry ending in "/" allows everything under it
}

// Allows reports whether an administrator may set image on a class whose
// current image is current ("" for a new class).
func (p ImagePolicy) Allows(image, current string) bool {
	if image == current || slices.Contains(p.Template, image) {
		return true
	}
	for _, a := range p.Allowed {
		if strings.HasSuffix(a, "/") {
			if strings.HasPrefix(image, a) {
				return true
			}
			continue
		}
		if repository(image) == repository(a) {
			return true
		}
	}
	return false
}

// repository strips the tag or digest from an image reference, minding that
// a registry host may carry a port ("host:5000/app:1" → "host:5000/app").
func repository(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	slash := strings.LastIndexByte(image, '/')
	if colon := strings.LastIndexByte(image, ':'); colon > slash {
		image = image[:colon]
	}
	return image
}
