//go:build !linux

package entrypoint

import "os/exec"

// supervise waits for sshd where there is no PID 1 to be (not Linux).
func supervise(sshd *exec.Cmd, _ func(pid int)) int {
	if err := sshd.Wait(); err != nil {
		return exitFailure
	}
	return exitOK
}
