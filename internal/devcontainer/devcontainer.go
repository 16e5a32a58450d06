// Package devcontainer reads a repository's devcontainer.json: the part
// of it berth builds a class image from (berth image build) and the
// postCreateCommand berth-init runs once per sandbox. It is the standard
// library only: berth-init imports it.
//
// The file is JSON with comments and trailing commas (the format editors
// write). What berth does not do is refused by name rather than skipped:
// an engineer who wrote "features" expects them installed.
package devcontainer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Bounds on the file and what it holds.
const (
	// MaxFile is the largest devcontainer.json read, in bytes.
	MaxFile = 1 << 20
	// MaxEnv is how many containerEnv variables a file may set.
	MaxEnv = 256
	// MaxPorts is how many forwardPorts a file may list.
	MaxPorts = 64
	// MaxCommands is how many named commands a postCreateCommand object
	// may hold.
	MaxCommands = 32
	// MinPort and MaxPort are the ports a sandbox's driver reaches.
	MinPort, MaxPort = 1024, 65535
)

// Config is what berth uses of a devcontainer.json.
type Config struct {
	Name string
	// Image is the image to start from, when the file names one.
	Image string
	// Dockerfile and Context are the build's, when the file has one:
	// paths as written, relative to the file's directory (Resolve makes
	// them absolute).
	Dockerfile, Context string
	BuildArgs           map[string]string
	Target              string
	// Env is containerEnv as a Containerfile's ENV takes it between
	// double quotes: ${containerEnv:NAME} is ${NAME}, which the build
	// expands, and every other $, \ and " is escaped.
	Env map[string]string
	// User is the account sessions run as: remoteUser, else
	// containerUser; "" when the file names neither.
	User string
	// PostCreate is postCreateCommand; nil when there is none.
	PostCreate *Command
	// Ports is forwardPorts.
	Ports []int
	// Ignored names the keys berth reads past (each with why), for the
	// build to say.
	Ignored []string
}

// file is the JSON form, with the shapes that vary left raw.
type file struct {
	Name              string            `json:"name"`
	Image             string            `json:"image"`
	Build             *build            `json:"build"`
	DockerFile        string            `json:"dockerFile"` // the older spelling of build.dockerfile
	Context           string            `json:"context"`
	ContainerEnv      map[string]string `json:"containerEnv"`
	RemoteUser        string            `json:"remoteUser"`
	ContainerUser     string            `json:"containerUser"`
	PostCreateCommand json.RawMessage   `json:"postCreateCommand"`
	ForwardPorts      []json.RawMessage `json:"forwardPorts"`
	// What berth refuses, because ignoring it would build another machine
	// than the one asked.
	DockerComposeFile json.RawMessage `json:"dockerComposeFile"`
	Features          map[string]any  `json:"features"`
	OnCreateCommand   json.RawMessage `json:"onCreateCommand"`
	UpdateContent     json.RawMessage `json:"updateContentCommand"`
	// What berth reads past, saying so.
	PostStartCommand  json.RawMessage `json:"postStartCommand"`
	PostAttachCommand json.RawMessage `json:"postAttachCommand"`
	InitializeCommand json.RawMessage `json:"initializeCommand"`
	RemoteEnv         json.RawMessage `json:"remoteEnv"`
	Mounts            json.RawMessage `json:"mounts"`
	RunArgs           json.RawMessage `json:"runArgs"`
	AppPort           json.RawMessage `json:"appPort"`
}

type build struct {
	Dockerfile string            `json:"dockerfile"`
	Context    string            `json:"context"`
	Args       map[string]string `json:"args"`
	Target     string            `json:"target"`
}

// Parse reads a devcontainer.json. Every problem is reported at once, each
// naming its key.
func Parse(data []byte) (Config, error) {
	if len(data) > MaxFile {
		return Config{}, fmt.Errorf("devcontainer.json is %d bytes; the limit is %d", len(data), MaxFile)
	}
	plain, err := Standardize(data)
	if err != nil {
		return Config{}, fmt.Errorf("devcontainer.json: %w", err)
	}
	var f file
	dec := json.NewDecoder(bytes.NewReader(plain))
	if err := dec.Decode(&f); err != nil {
		if se, ok := errors.AsType[*json.SyntaxError](err); ok {
			line, col := position(plain, se.Offset)
			return Config{}, fmt.Errorf("devcontainer.json: line %d, column %d: %w", line, col, err)
		}
		return Config{}, fmt.Errorf("devcontainer.json: %w", err)
	}
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, a...)))
	}
	c := Config{Name: f.Name, Image: strings.TrimSpace(f.Image)}
	if f.Build != nil {
		c.Dockerfile, c.Context, c.BuildArgs, c.Target = f.Build.Dockerfile, f.Build.Context, f.Build.Args, f.Build.Target
	}
	if f.DockerFile != "" {
		if c.Dockerfile != "" {
			bad("dockerFile", "give build.dockerfile or dockerFile, not both")
		}
		c.Dockerfile = f.DockerFile
		if c.Context == "" {
			c.Context = f.Context
		}
	}
	switch {
	case len(f.DockerComposeFile) > 0 && string(f.DockerComposeFile) != "null":
		bad("dockerComposeFile", "berth builds one image per sandbox, not a compose project: give image or build.dockerfile")
	case c.Image == "" && c.Dockerfile == "":
		bad("image", "give image or build.dockerfile: the file names nothing to build from")
	case c.Image != "" && c.Dockerfile != "":
		bad("image", "give image or build.dockerfile, not both")
	}
	if c.Image != "" && strings.ContainsAny(c.Image, " \t\r\n") {
		bad("image", "%q is not an image reference", c.Image)
	}
	if c.Dockerfile != "" && c.Context == "" {
		c.Context = "."
	}
	if len(f.Features) > 0 {
		names := make([]string, 0, len(f.Features))
		for k := range f.Features {
			names = append(names, k)
		}
		slices.Sort(names)
		bad("features", "berth does not install features (%s): install what they add in the Dockerfile", strings.Join(names, ", "))
	}
	for key, raw := range map[string]json.RawMessage{"onCreateCommand": f.OnCreateCommand, "updateContentCommand": f.UpdateContent} {
		if len(raw) > 0 && string(raw) != "null" {
			bad(key, "berth runs postCreateCommand only: move this command there")
		}
	}

	if len(f.ContainerEnv) > MaxEnv {
		bad("containerEnv", "%d variables; the limit is %d", len(f.ContainerEnv), MaxEnv)
	}
	for k, v := range f.ContainerEnv {
		if !envName.MatchString(k) {
			bad("containerEnv", "%q is not a variable name (letters, digits and _, not starting with a digit)", k)
			continue
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			bad("containerEnv."+k, "a value holds no newline or NUL")
			continue
		}
		ev, err := envValue(v)
		if err != nil {
			bad("containerEnv."+k, "%v", err)
			continue
		}
		if c.Env == nil {
			c.Env = map[string]string{}
		}
		c.Env[k] = ev
	}

	c.User = f.RemoteUser
	if c.User == "" {
		c.User = f.ContainerUser
	}
	if c.User != "" && !userName.MatchString(c.User) {
		bad("remoteUser", "%q is not a user name", c.User)
	}
	if c.User == "root" || c.User == "0" {
		bad("remoteUser", "a sandbox never runs as root: name the image's own user, or leave it out")
	}

	if len(f.PostCreateCommand) > 0 && string(f.PostCreateCommand) != "null" {
		cmd, err := ParseCommand(f.PostCreateCommand)
		if err != nil {
			bad("postCreateCommand", "%v", err)
		} else {
			c.PostCreate = &cmd
		}
	}

	if len(f.ForwardPorts) > MaxPorts {
		bad("forwardPorts", "%d ports; the limit is %d", len(f.ForwardPorts), MaxPorts)
	}
	for i, raw := range f.ForwardPorts {
		p, err := forwardPort(raw)
		if err != nil {
			bad(fmt.Sprintf("forwardPorts[%d]", i), "%v", err)
			continue
		}
		if !slices.Contains(c.Ports, p) {
			c.Ports = append(c.Ports, p)
		}
	}

	for key, raw := range map[string]json.RawMessage{
		"postStartCommand":  f.PostStartCommand,
		"postAttachCommand": f.PostAttachCommand,
		"initializeCommand": f.InitializeCommand,
		"remoteEnv":         f.RemoteEnv,
		"mounts":            f.Mounts,
		"runArgs":           f.RunArgs,
		"appPort":           f.AppPort,
	} {
		if len(raw) > 0 && string(raw) != "null" {
			c.Ignored = append(c.Ignored, key+": "+ignoredWhy[key])
		}
	}
	slices.Sort(c.Ignored)
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

var ignoredWhy = map[string]string{
	"postStartCommand":  "not run (berth runs postCreateCommand only)",
	"postAttachCommand": "not run (berth runs postCreateCommand only)",
	"initializeCommand": "not run (it runs on the developer's own machine)",
	"remoteEnv":         "not set (put the variables in containerEnv)",
	"mounts":            "not mounted (a sandbox mounts only its HOME volume)",
	"runArgs":           "not passed (the sandbox's class decides how it runs)",
	"appPort":           "not published (use forwardPorts)",
}

var (
	envName  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	userName = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)
	// substitution is a devcontainer variable: ${kind:name} or ${name}.
	substitution = regexp.MustCompile(`\$\{([^}]*)\}`)
)

// envValue writes a containerEnv value as a Containerfile's ENV takes it
// between double quotes: the container's own variables
// (${containerEnv:NAME}) become ${NAME}, which the build expands; every
// other $, \ and " is escaped, so it stays as written. The developer
// machine's variables (${localEnv:…}, ${localWorkspaceFolder}) do not
// exist where berth builds, and are refused.
func envValue(v string) (string, error) {
	esc := strings.NewReplacer(`\`, `\\`, `$`, `\$`, `"`, `\"`)
	var b strings.Builder
	last := 0
	for _, m := range substitution.FindAllStringSubmatchIndex(v, -1) {
		kind, name, ok := strings.Cut(v[m[2]:m[3]], ":")
		if !ok || kind != "containerEnv" || !envName.MatchString(name) {
			return "", fmt.Errorf("%s: berth expands only ${containerEnv:NAME}: the build runs on the gateway's host, not the developer's machine", v[m[0]:m[1]])
		}
		b.WriteString(esc.Replace(v[last:m[0]]))
		b.WriteString("${" + name + "}")
		last = m[1]
	}
	b.WriteString(esc.Replace(v[last:]))
	return b.String(), nil
}

// forwardPort reads one forwardPorts entry: a number, or "localhost:N"
// (a port of another host is a compose service's, which berth has not).
func forwardPort(raw json.RawMessage) (int, error) {
	var n int
	if err := json.Unmarshal(raw, &n); err != nil {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("%s is not a port: give a number or \"localhost:PORT\"", raw)
		}
		host, port, ok := strings.Cut(s, ":")
		if !ok || (host != "localhost" && host != "127.0.0.1") {
			return 0, fmt.Errorf("%q is another host's port: a sandbox forwards only its own", s)
		}
		if n, err = strconv.Atoi(port); err != nil {
			return 0, fmt.Errorf("%q is not a port", s)
		}
	}
	if n < MinPort || n > MaxPort {
		return 0, fmt.Errorf("%d is not reachable: sandboxes' ports are %d–%d", n, MinPort, MaxPort)
	}
	return n, nil
}

// position is the line and column (from 1) of byte offset in data.
func position(data []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	return line, int(offset) - (bytes.LastIndexByte(before, '\n') + 1)
}

// Resolve makes the build's paths absolute against dir, the directory of
// the devcontainer.json.
func (c *Config) Resolve(dir string) {
	if c.Dockerfile == "" {
		return
	}
	if !filepath.IsAbs(c.Context) {
		c.Context = filepath.Join(dir, c.Context)
	}
	if !filepath.IsAbs(c.Dockerfile) {
		c.Dockerfile = filepath.Join(dir, c.Dockerfile)
	}
}
