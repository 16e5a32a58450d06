package entrypoint_test

import "syscall"

// processDumpable reports whether this process (where the tests run
// berth-init) is dumpable: PR_GET_DUMPABLE.
func processDumpable() bool {
	v, _, _ := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_GET_DUMPABLE, 0, 0)
	return v != 0
}
