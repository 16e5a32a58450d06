// Command berth-init is the entrypoint of every sandbox image (SPEC S15):
// it prepares HOME, checks out the repository and then execs sshd (engineer)
// or the agent (agent). Called as git-credential-berth it is git's
// credential helper. See package entrypoint for the environment it reads.
package main

import (
	"os"

	"berth.dev/berth/internal/entrypoint"
)

func main() {
	os.Exit(entrypoint.Main(os.Args, entrypoint.OSEnv()))
}
