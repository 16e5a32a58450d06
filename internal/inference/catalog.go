package inference

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/secret"
)

// Config is the operator's inference file (BERTH_INFERENCE_FILE): the
// upstream providers and the models the gateway serves through them.
//
//	providers:
//	  - name: anthropic
//	    kind: anthropic                   # anthropic, openai, gemini or scripted
//	    url: https://api.anthropic.com    # the vendor's root, as its own SDK takes it
//	    credential_env: ANTHROPIC_API_KEY # the NAME of the gateway's variable holding the key
//	  - name: scripted
//	    kind: scripted                    # the scripted model server, in the gateway
//	    script: tool                      # text, tool, error, or a JSON script file
//	models:
//	  - id: claude-sonnet-4-5
//	    provider: anthropic
//	    upstream: claude-sonnet-4-5-20250929  # the vendor's name; default id
//	    price: {input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}  # USD per million tokens
//	    max_tokens: 64000
//	  - id: auto
//	    router: [claude-sonnet-4-5]       # a router: the first of these the key may reach
type Config struct {
	Providers []ProviderConfig `yaml:"providers"`
	Models    []ModelConfig    `yaml:"models"`
	// DefaultMaxOutput is the output a request that names no maximum and
	// whose model sets none is reserved for (tokens); 0 means 32000.
	DefaultMaxOutput int `yaml:"default_max_output_tokens"`
}

// ProviderConfig is one upstream as the file writes it.
type ProviderConfig struct {
	Name          string `yaml:"name"`
	Kind          Kind   `yaml:"kind"`
	URL           string `yaml:"url"`
	CredentialEnv string `yaml:"credential_env"`
	Script        string `yaml:"script"`
}

// ModelConfig is one model as the file writes it.
type ModelConfig struct {
	ID            string       `yaml:"id"`
	Name          string       `yaml:"name"`
	Provider      string       `yaml:"provider"`
	Upstream      string       `yaml:"upstream"`
	Price         *PriceConfig `yaml:"price"`
	ContextWindow int          `yaml:"context_window"`
	MaxTokens     int          `yaml:"max_tokens"`
	Reasoning     bool         `yaml:"reasoning"`
	Router        []string     `yaml:"router"`
}

// PriceConfig is a price in USD per million tokens.
type PriceConfig struct {
	Input      float64 `yaml:"input"`
	Output     float64 `yaml:"output"`
	CacheRead  float64 `yaml:"cache_read"`
	CacheWrite float64 `yaml:"cache_write"`
}

// ParseConfig decodes an inference file, refusing unknown fields. It does
// not validate: NewCatalog does, with the environment at hand.
func ParseConfig(r io.Reader) (Config, error) {
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	var c Config
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("parse inference file: %w", err)
	}
	return c, nil
}

// Provider is an upstream, validated.
type Provider struct {
	Name string
	Kind Kind
	// URL is the vendor's root without a trailing slash: Anthropic's and
	// Gemini's without a version, OpenAI's with /v1, as each vendor's SDK
	// takes its base URL. Empty for the scripted provider.
	URL string
	// CredentialEnv names the gateway's variable the credential was read
	// from; "" for a provider that takes none.
	CredentialEnv string
	// Credential is that variable's value. It never leaves the gateway.
	Credential secret.Secret
	// Script is the scripted provider's script: a scenario name or a file.
	Script string
}

// Model is a model the gateway serves, validated.
type Model struct {
	ID       string // the name clients use
	Name     string // display name; ID when unset
	Provider string // "" for a router
	Upstream string // the provider's name for it
	Price    runner.Price
	// ContextWindow and MaxTokens are in tokens; 0 is unknown.
	ContextWindow int
	MaxTokens     int
	Reasoning     bool
	// Targets makes the model a router: requests go to the first target
	// the key may reach.
	Targets []string
}

// Router reports whether m is a routing alias.
func (m Model) Router() bool { return len(m.Targets) > 0 }

// Catalog is the deployment's providers and models. It is read-only once
// made, so it is shared freely.
type Catalog struct {
	providers map[string]Provider
	order     []string // provider names, in file order
	models    []Model
	byID      map[string]int
	maxOutput int
}

var modelIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$`)

// NewCatalog validates cfg and reads each provider's credential through
// getenv, reporting every problem at once. A model without a price takes
// the vendor's list price (runner.ListPrices) when its upstream name has
// one; otherwise it must give one, so every request has a cost.
func NewCatalog(cfg Config, getenv func(string) string) (*Catalog, error) {
	c := &Catalog{providers: map[string]Provider{}, byID: map[string]int{}, maxOutput: cfg.DefaultMaxOutput}
	if c.maxOutput == 0 {
		c.maxOutput = 32000
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.maxOutput < 0 {
		bad("default_max_output_tokens: %d is negative", c.maxOutput)
	}
	scripted := 0
	for i, pc := range cfg.Providers {
		at := fmt.Sprintf("providers[%d] %s", i, pc.Name)
		p := Provider{Name: pc.Name, Kind: pc.Kind, CredentialEnv: pc.CredentialEnv, Script: pc.Script}
		switch {
		case !modelIDRE.MatchString(pc.Name):
			bad("%s: a provider needs a name of letters, digits and . _ -", at)
			continue
		case c.providers[pc.Name].Name != "":
			bad("%s: a second provider of that name", at)
			continue
		}
		switch pc.Kind {
		case KindScripted:
			scripted++
			if pc.URL != "" || pc.CredentialEnv != "" {
				bad("%s: the scripted provider is served inside the gateway: it takes no url and no credential", at)
			}
			if pc.Script == "" {
				p.Script = "text"
			}
		case KindAnthropic, KindOpenAI, KindGemini:
			u, err := upstreamURL(pc.URL)
			if err != nil {
				bad("%s: url: %v", at, err)
			}
			p.URL = u
			if pc.Script != "" {
				bad("%s: only the scripted provider takes a script", at)
			}
			if pc.CredentialEnv != "" {
				if !envNameRE.MatchString(pc.CredentialEnv) || strings.HasPrefix(pc.CredentialEnv, "BERTH_") {
					bad("%s: credential_env %q is not a variable name outside BERTH_", at, pc.CredentialEnv)
				} else if p.Credential = secret.New(strings.TrimSpace(getenv(pc.CredentialEnv))); p.Credential.IsZero() {
					bad("%s: credential_env %s is not set in the gateway's environment", at, pc.CredentialEnv)
				}
			}
		default:
			bad("%s: kind %q is not anthropic, openai, gemini or scripted", at, pc.Kind)
		}
		c.providers[p.Name] = p
		c.order = append(c.order, p.Name)
	}
	if scripted > 1 {
		bad("providers: at most one scripted provider")
	}
	list := runner.ListPrices()
	for i, mc := range cfg.Models {
		at := fmt.Sprintf("models[%d] %s", i, mc.ID)
		if !modelIDRE.MatchString(mc.ID) {
			bad("%s: %q is not a model name", at, mc.ID)
			continue
		}
		if _, dup := c.byID[mc.ID]; dup {
			bad("%s: a second model of that name", at)
			continue
		}
		m := Model{ID: mc.ID, Name: mc.Name, Provider: mc.Provider, Upstream: mc.Upstream,
			ContextWindow: mc.ContextWindow, MaxTokens: mc.MaxTokens, Reasoning: mc.Reasoning, Targets: mc.Router}
		if m.Name == "" {
			m.Name = m.ID
		}
		if m.Router() {
			if mc.Provider != "" || mc.Upstream != "" || mc.Price != nil {
				bad("%s: a router names its targets only, no provider, upstream or price", at)
			}
		} else {
			if _, ok := c.providers[mc.Provider]; !ok {
				bad("%s: provider %q is not in providers", at, mc.Provider)
			}
			if m.Upstream == "" {
				m.Upstream = m.ID
			}
			switch pr, listed := list[m.Upstream]; {
			case mc.Price != nil:
				m.Price = runner.Price{Input: mc.Price.Input, Output: mc.Price.Output, CacheRead: mc.Price.CacheRead, CacheWrite: mc.Price.CacheWrite}
				if m.Price.Input < 0 || m.Price.Output < 0 || m.Price.CacheRead < 0 || m.Price.CacheWrite < 0 {
					bad("%s: a price is not negative", at)
				}
			case listed:
				m.Price = pr
			default:
				bad("%s: no price, and %s has no list price: give one (USD per million tokens)", at, m.Upstream)
			}
		}
		if m.ContextWindow < 0 || m.MaxTokens < 0 {
			bad("%s: context_window and max_tokens are not negative", at)
		}
		c.byID[m.ID] = len(c.models)
		c.models = append(c.models, m)
	}
	for _, m := range c.models {
		for _, t := range m.Targets {
			if i, ok := c.byID[t]; !ok || c.models[i].Router() {
				bad("models %s: router target %q is not a model of the file (nor may it be a router)", m.ID, t)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// upstreamURL checks a provider's address: http or https, a host, no
// credentials, query or fragment.
func upstreamURL(s string) (string, error) {
	u, err := url.Parse(s)
	switch {
	case s == "":
		return "", errors.New("required for this kind")
	case err != nil:
		return "", errors.New("does not parse")
	case u.User != nil:
		return "", errors.New("carries credentials: name them in credential_env instead")
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return "", fmt.Errorf("%q is not an http(s) URL", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("%q: want scheme, host and path only", u.Redacted())
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// Empty reports whether the catalog serves no model.
func (c *Catalog) Empty() bool { return c == nil || len(c.models) == 0 }

// Models returns every model in the file's order.
func (c *Catalog) Models() []Model {
	if c == nil {
		return nil
	}
	return slices.Clone(c.models)
}

// Model returns the model called id.
func (c *Catalog) Model(id string) (Model, bool) {
	if c == nil {
		return Model{}, false
	}
	i, ok := c.byID[id]
	if !ok {
		return Model{}, false
	}
	return c.models[i], true
}

// Provider returns the provider called name.
func (c *Catalog) Provider(name string) (Provider, bool) {
	if c == nil {
		return Provider{}, false
	}
	p, ok := c.providers[name]
	return p, ok
}

// Providers returns every provider in the file's order.
func (c *Catalog) Providers() []Provider {
	if c == nil {
		return nil
	}
	out := make([]Provider, 0, len(c.order))
	for _, n := range c.order {
		out = append(out, c.providers[n])
	}
	return out
}

// CredentialEnvs names the gateway's variables that hold a provider's
// credential: never exported into a sandbox (SPEC S14).
func (c *Catalog) CredentialEnvs() []string {
	var out []string
	for _, p := range c.Providers() {
		if p.CredentialEnv != "" {
			out = append(out, p.CredentialEnv)
		}
	}
	return out
}

// Prices is every served model's price, by its ID at the gateway.
func (c *Catalog) Prices() runner.Prices {
	out := runner.Prices{}
	for _, m := range c.Models() {
		if !m.Router() {
			out[m.ID] = m.Price
		}
	}
	return out
}

// reachable lists the models allowed lets through, in the file's order:
// a router only when one of its targets is reachable too.
func (c *Catalog) reachable(allowed func(string) bool) []Model {
	var out []Model
	for _, m := range c.Models() {
		if !allowed(m.ID) {
			continue
		}
		if m.Router() {
			if _, ok := c.route(m, allowed); !ok {
				continue
			}
		}
		out = append(out, m)
	}
	return out
}

// route returns what a request for m goes to: m itself, or a router's
// first reachable target.
func (c *Catalog) route(m Model, allowed func(string) bool) (Model, bool) {
	if !m.Router() {
		return m, true
	}
	for _, t := range m.Targets {
		if allowed(t) {
			if tm, ok := c.Model(t); ok {
				return tm, true
			}
		}
	}
	return Model{}, false
}

// ScriptFile reports whether a scripted provider's script names a file
// rather than a ready scenario.
func (p Provider) ScriptFile() bool {
	return strings.ContainsAny(p.Script, "/.")
}
