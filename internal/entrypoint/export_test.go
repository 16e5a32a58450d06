package entrypoint

import "time"

// MainInWorkDir is Main with the agent-run modes' checkout at dir instead
// of /work and a millisecond between attempts at a gateway route: the
// in-machine run's tests clone into a temporary directory and must not
// wait seconds for a retry.
func MainInWorkDir(args []string, env Env, dir string) int {
	return start(args, env, options{workDir: dir, retryDelay: time.Millisecond})
}
