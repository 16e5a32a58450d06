package podman

import "syscall"

// ownGroup puts a podman (or runtime) process in a process group of its
// own. In the gateway's group it would get the signals meant for the
// gateway (a terminal's Ctrl-C, `kill -- -PGID`): a `podman run` killed
// half way leaves a container half made (notes/podman.md §9), and a
// start the gateway was letting finish fails. The gateway decides when
// its children end: through their context, or never, when it exits at
// once (a second signal), as a crash would.
func ownGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
