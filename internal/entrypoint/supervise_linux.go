package entrypoint

import (
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// supervise is PID 1's part once berth-init stays beside sshd (the warm
// pool's mode): it reaps every process that ends (orphans of the
// sandbox's sessions come to PID 1), passes SIGTERM, SIGINT and SIGHUP
// on to sshd, and returns sshd's exit code as a shell reports it once
// sshd ends. Every other process it reaps it tells reaped of, when not
// nil.
func supervise(sshd *exec.Cmd, reaped func(pid int)) int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	pid := sshd.Process.Pid
	for {
		for {
			var ws syscall.WaitStatus
			p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if err == syscall.EINTR {
				continue
			}
			if err != nil || p <= 0 {
				break
			}
			if p == pid {
				switch {
				case ws.Exited():
					return ws.ExitStatus()
				case ws.Signaled():
					return 128 + int(ws.Signal())
				}
				return exitFailure
			}
			if reaped != nil {
				reaped(p)
			}
		}
		if s := <-sigs; s != syscall.SIGCHLD {
			_ = sshd.Process.Signal(s)
		}
	}
}
