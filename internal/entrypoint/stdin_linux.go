package entrypoint

import (
	"os"
	"syscall"
)

// setStdin duplicates f onto file descriptor 0, without close-on-exec, so
// the next exec'd program reads f as its standard input. dup3, not dup2:
// linux/arm64 has no dup2.
func setStdin(f *os.File) error {
	return os.NewSyscallError("dup3", syscall.Dup3(int(f.Fd()), 0, 0))
}
