package sandbox

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/quantity"
)

// environment is what the gateway hands a sandbox (SPEC S15), with the
// caller's additions. It holds the sandbox's key; drivers pass it by name.
func (s *Service) environment(ctx context.Context, sb Sandbox, secret account.Secret, token forge.Token) (map[string]string, error) {
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
	set("BERTH_API_KEY", secret.Reveal())
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
	set("BERTH_AUTHORIZED_KEYS", strings.Join(sb.SSHKeys, "\n"))
	if sb.Purpose == PurposeAgent {
		set("BERTH_SESSION", string(sb.ID))
		set("ANTHROPIC_CUSTOM_HEADERS", "X-Berth-Session: "+string(sb.ID))
	}
	set("BERTH_TASK", sb.Task)
	for k, v := range s.gitEnv(sb, token) {
		set(k, v)
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

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkEnv refuses caller-added variables that are not names, or that name a
// BERTH_ variable: those are the gateway's (SPEC S3).
func checkEnv(env map[string]string) error {
	for k, v := range env {
		field := "env." + k
		switch {
		case !envNameRE.MatchString(k):
			return invalid(field, "%q is not an environment variable name", k)
		case strings.HasPrefix(strings.ToUpper(k), "BERTH_"):
			return invalid(field, "%s is the gateway's: a sandbox's own environment may not name a BERTH_ variable", k)
		case strings.ContainsRune(v, 0):
			return invalid(field, "the value holds a NUL byte")
		case len(v) > 32<<10:
			return invalid(field, "the value is longer than 32 KiB")
		}
	}
	if len(env) > 100 {
		return invalid("env", "%d variables; at most 100", len(env))
	}
	return nil
}

// checkAuthorizedKey accepts one ssh public key in authorized_keys form.
func checkAuthorizedKey(line string) error {
	if strings.ContainsAny(line, "\r\n") {
		return fmt.Errorf("one key per entry, without line breaks")
	}
	if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line)); err != nil {
		return fmt.Errorf("not an ssh public key: %v", err)
	}
	return nil
}

func parseDuration(s string) (time.Duration, error) { return quantity.ParseDuration(s) }
