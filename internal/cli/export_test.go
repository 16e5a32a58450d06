package cli

import "time"

// WithSSOWait is env with berth login --sso waiting d for the browser
// instead of five minutes.
func WithSSOWait(env Env, d time.Duration) Env {
	env.ssoWait = d
	return env
}
