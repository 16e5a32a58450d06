package entrypoint

import "fmt"

// credentialHelperName is the name berth-init answers to as git's credential
// helper (a symlink to it in the image).
const credentialHelperName = "git-credential-berth"

// credentialMain is git-credential-berth (S9). Until the gateway serves
// repository credentials it declines every request, so git goes on to its
// next helper or fails with its own message.
func credentialMain(_ []string, env Env) int {
	fmt.Fprintln(env.Stderr, "git-credential-berth: repository credentials are not available yet in this version of berth")
	return exitFailure
}
