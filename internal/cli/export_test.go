package cli

import "time"

// WithSSOWait is env with berth login --sso waiting d for the browser
// instead of five minutes.
func WithSSOWait(env Env, d time.Duration) Env {
	env.ssoWait = d
	return env
}

// WithSSOSecond is env with a second of berth login --sso --device's grant
// (the gateway's interval and expires_in) lasting d.
func WithSSOSecond(env Env, d time.Duration) Env {
	env.ssoSecond = d
	return env
}
