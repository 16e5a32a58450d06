// Package runner knows the coding-agent CLIs an agent sandbox runs (SPEC
// S13): claude-code, codex, opencode, gemini, cursor and pi. For each it
// declares the command line (binary and ContainerArgs, never the prompt,
// which arrives on stdin), the credentials it needs by name, the non-secret
// environment and the config files that point it at the gateway with its
// outbound calls switched off (SPEC S14), and ParseLine, which reads the
// CLI's own NDJSON vocabulary into a Telemetry.
//
// It is a domain package with the standard library only: the in-sandbox
// program may import it. Runners are stateless values; all per-run state
// lives in the Telemetry the caller owns, so one Runner serves any number of
// runs at once.
package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode"
)

// Runner is one agent CLI, as the host and the in-sandbox program use it.
type Runner interface {
	// Name is the runner's name as users write it (SPEC S13), e.g.
	// "claude-code".
	Name() string

	// Binary is the CLI's executable in the runner's image, looked up on
	// PATH.
	Binary() string

	// ContainerArgs are the CLI's own flags for one run: its command line
	// minus the binary and minus the prompt (SPEC S13's "$@" slot). The
	// routed model always travels here. An invalid Options is an error, so
	// a run never starts on the CLI's default model.
	ContainerArgs(o Options) ([]string, error)

	// APIs are the model APIs the CLI can call the gateway in, its
	// preferred first (Speaks picks from them); none for a CLI that talks
	// to its vendor itself. A run's model must be served in one of them.
	APIs() []API

	// Credentials are the environment variables the CLI reads its key
	// from, by name only; the host forwards exactly these (-e NAME) with
	// values from its own environment. For the runners that reach models
	// through the gateway each one carries the sandbox's own key
	// (BERTH_API_KEY, SPEC S14), whatever the CLI calls it.
	Credentials() []string

	// Env is the non-secret environment the CLI needs: base URLs and the
	// switches that stop its outbound calls. Never a credential.
	Env(g Gateway) ([]EnvVar, error)

	// Files are the config files the CLI needs rendered under HOME before
	// it starts. They name credentials, never hold their values.
	Files(g Gateway, o Options) ([]File, error)

	// ParseLine reads one line of the CLI's stdout into t. It never fails:
	// a line that is not JSON, or not in the CLI's vocabulary, changes
	// nothing and is reported as ignored so the host can log it. line is
	// not retained.
	ParseLine(t *Telemetry, line []byte) Outcome
}

// VendorDirect is implemented by a runner whose CLI cannot be pointed at
// the gateway and talks to its vendor's service itself (cursor), so SPEC
// S14 cannot hold for it: its credential is a vendor key and it needs a
// network beyond the gateway. A host finds it by type assertion and refuses
// such a runner, or runs it only where that is explicitly allowed.
type VendorDirect interface {
	// VendorDirect says what the CLI reaches instead of the gateway.
	VendorDirect() string
}

// Uncounted is implemented by a runner whose CLI makes model calls it
// leaves out of the totals it reports, so the gateway meters more than
// the run says. Which calls they were is found in the gateway's records
// (their tokens are exactly the difference); Uncounted says what they are.
type Uncounted interface {
	// Uncounted names the calls the CLI does not count, as a clause.
	Uncounted() string
}

// Options is what the host decides for one run.
type Options struct {
	// Model is the routed model, as the gateway names it. Required.
	Model string
	// Effort is the reasoning effort ("low", "medium", "high", …) for the
	// CLIs that take one on the command line; the others ignore it. Empty
	// is the CLI's default.
	Effort string
	// Instructions are user-level instructions (an AGENTS.md text, the
	// project's agent configuration's), written where the CLI reads them
	// (Instructed, RunFiles); "" writes none.
	Instructions string
	// Skills are written where the CLI reads user-level skills (Skilled),
	// and MCP servers into its config (MCPConfigured).
	Skills []Skill
	MCP    []MCPServer
	// Resume continues the conversation the CLI had last in this HOME and
	// working directory instead of starting a new one: task 2..N of an
	// agent session, whose containers share the checkout and HOME. The
	// prompt is the conversation's next user turn. The CLI finds the
	// conversation in its state under HOME (Stateful); with none there,
	// each of the five gateway runners starts a new one and succeeds.
	Resume bool
}

// Gateway is what the config files point the CLI at (SPEC S14).
type Gateway struct {
	// BaseURL is the gateway as the sandbox reaches it (BERTH_BASE_URL),
	// without /v1 and without credentials.
	BaseURL string
	// Models are the models the sandbox's key may reach, in the gateway's
	// order. Pi's models.json and opencode.json list them.
	Models []Model
}

// Model is one model the gateway serves.
type Model struct {
	// ID is the model's name at the gateway.
	ID string
	// Name is a display name; empty means ID.
	Name string
	// Router marks a routing alias rather than a chat model; Pi lists
	// routers after the chat models (SPEC S14).
	Router bool
	// Reasoning marks a model that takes a reasoning effort; Pi sends its
	// thinking level only to those.
	Reasoning bool
	// ContextWindow and MaxTokens are limits in tokens; 0 is unknown.
	ContextWindow int
	MaxTokens     int
	// Price is what the gateway charges; nil is unknown. CLIs that price
	// their own runs (pi, opencode) are given it so their native cost is
	// the gateway's.
	Price *Price
	// APIs are the APIs the model's provider speaks (a router's: its
	// target's); nil is unknown. The CLIs that reach models in several
	// APIs (pi, opencode) write each model in one of its own.
	APIs []API
}

// EnvVar is one environment variable.
type EnvVar struct {
	Name, Value string
}

// File is one config file to render.
type File struct {
	// Path is relative to HOME, with forward slashes.
	Path string
	// Content is the whole file.
	Content []byte
}

// Outcome says what ParseLine made of a line.
type Outcome uint8

const (
	// Parsed: a line of the CLI's vocabulary (it may carry no telemetry).
	Parsed Outcome = iota
	// Unknown: a JSON object whose type the runner does not know.
	Unknown
	// Invalid: not a JSON object, or a known type with fields of the wrong
	// shape. Nothing of it was used.
	Invalid
)

// Ignored reports whether the line was not used, for the host to log.
func (o Outcome) Ignored() bool { return o != Parsed }

func (o Outcome) String() string {
	switch o {
	case Parsed:
		return "parsed"
	case Unknown:
		return "unknown"
	case Invalid:
		return "invalid"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// ErrUnknown is returned by Get for a name that is not a runner.
var ErrUnknown = errors.New("unknown runner")

// all is the name → implementation table, in SPEC S13's order. Built on
// each call: there is no package state to register into.
func all() []Runner {
	return []Runner{claudeCode{}, codex{}, opencode{}, gemini{}, cursor{}, pi{}}
}

// Names returns every runner's name, in SPEC S13's order.
func Names() []string {
	rs := all()
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.Name()
	}
	return names
}

// Get returns the runner called name, or an error wrapping ErrUnknown: an
// unmapped runner is refused, never defaulted.
func Get(name string) (Runner, error) {
	for _, r := range all() {
		if r.Name() == name {
			return r, nil
		}
	}
	return nil, fmt.Errorf("%w %q (one of %s)", ErrUnknown, name, strings.Join(Names(), ", "))
}

// Runnable says why berth does not run the runner called name: it is no
// runner, or its CLI talks to its vendor itself (VendorDirect), so its
// calls would not go through the gateway; nil for one berth runs.
func Runnable(name string) error {
	r, err := Get(name)
	if err != nil {
		return fmt.Errorf("%q is not a runner (one of %s)", name, strings.Join(Names(), ", "))
	}
	if _, direct := r.(VendorDirect); direct {
		return fmt.Errorf("%s talks to its vendor itself, not through the gateway, so berth does not run it", name)
	}
	return nil
}

// checkOptions refuses what must not reach argv: a missing model (the CLI
// would fall back to its own default, the #761 class of bug) and values
// that could be read as flags or split by a shell.
func checkOptions(o Options) error {
	if o.Model == "" {
		return errors.New("no model: a run names its routed model")
	}
	if err := checkArg("model", o.Model); err != nil {
		return err
	}
	if o.Effort != "" {
		return checkArg("effort", o.Effort)
	}
	return nil
}

func checkArg(what, v string) error {
	if strings.HasPrefix(v, "-") {
		return fmt.Errorf("%s %q starts with '-'", what, v)
	}
	for _, c := range v {
		if unicode.IsSpace(c) || unicode.IsControl(c) {
			return fmt.Errorf("%s %q holds white space or a control character", what, v)
		}
	}
	return nil
}

// baseURL checks the gateway's address and returns it without a trailing
// slash. Credentials in the URL are refused (they would be written into
// config files) and never repeated in an error.
func (g Gateway) baseURL() (string, error) {
	if g.BaseURL == "" {
		return "", errors.New("gateway: no base URL")
	}
	u, err := url.Parse(g.BaseURL)
	if err != nil {
		return "", errors.New("gateway: the base URL does not parse")
	}
	switch {
	case u.User != nil:
		return "", errors.New("gateway: the base URL carries credentials")
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("gateway: base URL %q: want http or https", u.Redacted())
	case u.Host == "":
		return "", fmt.Errorf("gateway: base URL %q has no host", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return "", fmt.Errorf("gateway: base URL %q: want scheme, host and path only", u.Redacted())
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// forRun checks what every config file needs: the run's options, the
// gateway's address and its models. It returns the base URL and the models
// with the run's among them.
func (g Gateway) forRun(o Options) (base string, models []Model, err error) {
	if err := checkOptions(o); err != nil {
		return "", nil, err
	}
	if base, err = g.baseURL(); err != nil {
		return "", nil, err
	}
	if models, err = g.models(o.Model); err != nil {
		return "", nil, err
	}
	return base, models, nil
}

// models returns the gateway's models with the run's model among them:
// chat models first, then routers, each group in the gateway's order. A
// model ID that could break out of a config file is refused.
func (g Gateway) models(run string) ([]Model, error) {
	var chat, routers []Model
	seen := map[string]bool{}
	for _, m := range g.Models {
		if err := checkArg("model", m.ID); err != nil || m.ID == "" {
			return nil, fmt.Errorf("gateway: model %q: not a model name", m.ID)
		}
		if seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		if m.Name == "" {
			m.Name = m.ID
		}
		if m.Router {
			routers = append(routers, m)
		} else {
			chat = append(chat, m)
		}
	}
	if run != "" && !seen[run] {
		chat = append(chat, Model{ID: run, Name: run})
	}
	return append(chat, routers...), nil
}

// FilesJSON renders a runner's config files as the value of
// BERTH_RUNNER_FILES, the form berth-init reads in the agent-run mode
// (api.RunnerFile): a JSON array of {"path", "content"}, "[]" for none.
func FilesJSON(files []File) (string, error) {
	type entry struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	list := make([]entry, 0, len(files))
	for _, f := range files {
		list = append(list, entry{Path: f.Path, Content: string(f.Content)})
	}
	b, err := json.Marshal(list)
	return string(b), err
}
