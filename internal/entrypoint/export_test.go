package entrypoint

import (
	"time"

	"berth.dev/berth/internal/kelos"
)

// MainInWorkDir is Main with the agent-run modes' checkout at dir instead
// of /work (or a kelos image's /workspace/repo) and a millisecond between
// attempts at a gateway route: the in-machine run's tests clone into a
// temporary directory and must not wait seconds for a retry.
func MainInWorkDir(args []string, env Env, dir string) int {
	return MainKelos(args, env, dir, kelos.Entrypoint)
}

// MainKelos is MainInWorkDir with a kelos image's entrypoint at
// entrypoint instead of /kelos_entrypoint.sh, which no test host has.
func MainKelos(args []string, env Env, dir, entrypoint string) int {
	return start(args, env, options{workDir: dir, kelosWorkDir: dir, kelosEntrypoint: entrypoint, retryDelay: time.Millisecond})
}

// MainPostCreate is Main with the image's postCreateCommand at file
// instead of /etc/berth/post-create.json.
func MainPostCreate(args []string, env Env, file string) int {
	return start(args, env, options{workDir: workDir, kelosWorkDir: kelos.WorkDir, kelosEntrypoint: kelos.Entrypoint,
		postCreateFile: file, retryDelay: time.Millisecond})
}
