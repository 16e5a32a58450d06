package sandbox

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/secret"
)

// environment is what the gateway hands a sandbox (SPEC S15), with the
// caller's additions. It holds the sandbox's key; drivers pass it by name.
// It never holds the task (no BERTH_TASK): whatever runs in the machine
// could read it there, podman inspect shows it, and Linux caps one
// variable at 128 KiB. An agent reads its task from the prompt file on
// stdin (SPEC S13.2) or as $1 (a kelos image, S13.6); an engineer
// sandbox has none. Everything else is read from the row, so a start can
// be finished after a restart with a fresh key: sb.Model is an agent
// run's model, chosen for its runner at create (its BERTH_MODEL, which
// the run's start reads); "" tells the sandbox the first model its key
// may reach.
func (s *Service) environment(ctx context.Context, sb Sandbox, key secret.Secret, token forge.Token) (map[string]string, error) {
	owner, err := s.accounts.User(ctx, sb.Owner)
	if err != nil {
		return nil, fmt.Errorf("owner of %s: %w", sb.ID, err)
	}
	env := make(map[string]string, len(sb.Env)+20)
	for k, v := range sb.Env {
		env[k] = v
	}
	set := func(k, v string) {
		if v != "" {
			env[k] = v
		}
	}
	base := strings.TrimSuffix(s.cfg.PublicURL, "/")
	set("BERTH_API_KEY", key.Reveal())
	set("BERTH_BASE_URL", base)
	if base != "" {
		set("OPENAI_BASE_URL", base+"/v1")
		set("ANTHROPIC_BASE_URL", base)
	}
	set("BERTH_SANDBOX_ID", string(sb.ID))
	set("BERTH_SANDBOX_NAME", sb.Name)
	set("BERTH_SANDBOX_CLASS", sb.Class)
	set("BERTH_SANDBOX_PURPOSE", string(sb.Purpose))
	set("BERTH_SANDBOX_EXPIRES", sb.ExpiresAt.UTC().Format(time.RFC3339))
	keys := sb.SSHKeys
	if s.cfg.GatewayKey != nil && sb.Purpose == PurposeEngineer {
		keys = append(slices.Clip(keys), s.cfg.GatewayKey(sb.ID))
	}
	set("BERTH_AUTHORIZED_KEYS", strings.Join(keys, "\n"))
	if sb.Purpose == PurposeAgent {
		// The session header of every model call (SPEC S14): Claude Code
		// and Gemini CLI read extra headers from their own variable, both
		// as "Name: value"; the other runners' config files name
		// BERTH_SESSION.
		set("BERTH_SESSION", string(sb.ID))
		set("ANTHROPIC_CUSTOM_HEADERS", "X-Berth-Session: "+string(sb.ID))
		set("GEMINI_CLI_CUSTOM_HEADERS", "X-Berth-Session: "+string(sb.ID))
	}
	if sb.Purpose == PurposeAgent && sb.Egress != "" && sb.Egress != "none" {
		proxyEnv(base, key, set)
	}
	if err := s.addModelEnv(ctx, sb, sb.Model, env); err != nil {
		return nil, err
	}
	if sb.Purpose == PurposeAgent && s.secrets != nil {
		// Behind the egress proxy, its project's secrets are placeholders.
		vars, err := s.secrets.SandboxSecrets(ctx, sb)
		if err != nil {
			return nil, fmt.Errorf("secrets of %s: %w", sb.ID, err)
		}
		for k, v := range vars {
			env[k] = v
		}
	}
	if s.cfg.Repositories != nil {
		for k, v := range s.cfg.Repositories.Env(sb, token) {
			set(k, v)
		}
	}
	set("BERTH_RUNNER", sb.Runner)
	set("BERTH_GIT_AUTHOR_NAME", owner.Name)
	email := owner.Email
	switch {
	case email != "":
	case strings.Contains(owner.Name, "@"):
		email = owner.Name
	default:
		// git refuses to commit without an email; this one says whose
		// the commit is and cannot be mistaken for a real address.
		email = owner.Name + "@users.berth.invalid"
	}
	set("BERTH_GIT_AUTHOR_EMAIL", email)
	return env, nil
}

// SecretEnv is what an agent sandbox gets of its project's secrets (SPEC
// S13, issue 22): each secret's name with a placeholder the egress proxy
// replaces, and BERTH_CA_CERTS, the authority whose certificates the
// proxy shows for their hosts. Never a value.
type SecretEnv interface {
	SandboxSecrets(ctx context.Context, sb Sandbox) (map[string]string, error)
}

// WithSecretEnv gives the service its sandboxes' placeholders.
func WithSecretEnv(e SecretEnv) Option { return func(s *Service) { s.secrets = e } }

// ModelEnv is what inference tells sandboxes (SPEC S14, S15): BERTH_MODEL,
// ANTHROPIC_MODEL and Pi's files (BERTH_PI_CONFIG, BERTH_PI_SETTINGS) for a
// sandbox of a project, BERTH_MODEL the model given ("": the first the key
// may reach); and the names of the gateway's vendor credentials, which a
// sandbox's environment never holds.
type ModelEnv interface {
	SandboxEnv(ctx context.Context, org, project, model string) (map[string]string, error)
	Withheld() []string
}

// WithModelEnv gives the service the model variables of its sandboxes;
// without it a sandbox is told no model.
func WithModelEnv(m ModelEnv) Option { return func(s *Service) { s.modelEnv = m } }

// addModelEnv sets the model variables in env, BERTH_MODEL model ("": the
// first sb's key may reach), and takes out every vendor credential's name,
// whoever put it there.
func (s *Service) addModelEnv(ctx context.Context, sb Sandbox, model string, env map[string]string) error {
	if s.modelEnv == nil {
		return nil
	}
	vars, err := s.modelEnv.SandboxEnv(ctx, sb.Org, sb.Project, model)
	if err != nil {
		return fmt.Errorf("models of %s: %w", sb.ID, err)
	}
	for k, v := range vars {
		env[k] = v
	}
	for _, name := range s.modelEnv.Withheld() {
		delete(env, name)
	}
	return nil
}

// checkWithheld refuses caller-added variables named like a vendor
// credential the gateway holds: a sandbox reaches models through the
// gateway, and such a variable would turn on a CLI's direct route to the
// vendor (SPEC S14).
func (s *Service) checkWithheld(env map[string]string) error {
	if s.modelEnv == nil {
		return nil
	}
	for _, name := range s.modelEnv.Withheld() {
		if _, ok := env[name]; ok {
			return fault.Field("env."+name, "%s names a vendor credential; a sandbox reaches models through the gateway with its own key", name)
		}
	}
	return nil
}

func parseDuration(s string) (time.Duration, error) { return quantity.ParseDuration(s) }

// proxyEnv points an agent sandbox whose egress names hosts at the
// gateway's egress proxy, its only way out, with its own key as the
// password; the gateway itself (the model and git routes) is reached
// straight. Both spellings: curl and Python read the lower-case ones,
// Go's tools either; Node's own fetch reads neither unless
// NODE_USE_ENV_PROXY is set (measured with the agent images' Node 22:
// without it a fetch resolves the host itself and fails, as the Gemini
// CLI's remote MCP servers would).
func proxyEnv(base string, key secret.Secret, set func(k, v string)) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return
	}
	proxy := u.Scheme + "://x:" + key.Reveal() + "@" + u.Host
	for _, k := range []string{"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"} {
		set(k, proxy)
	}
	set("NO_PROXY", u.Hostname())
	set("no_proxy", u.Hostname())
	set("NODE_USE_ENV_PROXY", "1")
}
