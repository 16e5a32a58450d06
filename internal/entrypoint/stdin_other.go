//go:build unix && !linux

package entrypoint

import (
	"os"
	"syscall"
)

// setStdin duplicates f onto file descriptor 0, without close-on-exec, so
// the next exec'd program reads f as its standard input.
func setStdin(f *os.File) error {
	return os.NewSyscallError("dup2", syscall.Dup2(int(f.Fd()), 0))
}
