package entrypoint

import "syscall"

// undumpable keeps the agent, which berth-init starts as the same uid,
// out of berth-init: with PR_SET_DUMPABLE 0 its /proc/<pid> files (mem,
// environ, fd) are root's and ptrace is refused, so the agent cannot
// read the output spool or change the exit report berth-init holds. The
// agent's own exec makes it dumpable again, for itself only.
func undumpable() error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); e != 0 {
		return e
	}
	return nil
}
