package entrypoint

import (
	"fmt"
	"os"
	"os/exec"

	"berth.dev/berth/internal/handoff"
)

// The warm pool's mode on podman (SPEC S12). A pool member there is a
// running container whose sshd already answers, so that a claim costs
// only berth's own work. Told so by BERTH_READY_FILE (beside
// BERTH_BOOTSTRAP_FILE, in a directory of the container's own that the
// driver writes the claim's token into), berth-init starts sshd as its
// child before any claim: with no authorized keys nobody can log in, and
// with only the pool's environment it holds nothing of anybody's. Once
// claimed it trades the token, writes HOME as every start does, and then
// creates BERTH_READY_FILE, which the driver waits for. It stays PID 1:
// sshd's parent, reaping whatever else ends in the sandbox and passing
// SIGTERM on, and it ends as sshd does.

const envReadyFile = "BERTH_READY_FILE"

// The same stay beside sshd serves a machine whose tunnels hand their
// connections over (BERTH_HANDOFF_SOCKET, package handoff): berth-init
// then also takes each client's socket the gateway hands it and starts
// `sshd -i` on it, reaps it, and tells the gateway it ended.

// earlySSHD is the sshd berth-init started as its child: a pool member's
// before its claim, or a handing-over machine's.
type earlySSHD struct {
	cmd   *exec.Cmd
	conf  string // sshd's configuration
	ready string // the file that tells the driver the claim is done; "" none
}

// startEarlySSHD readies sshd in HOME (its host key is made once and
// stays on the volume, which becomes the claimed sandbox's) and starts it
// beside berth-init, with the environment of sessions only (a pool's,
// before a claim). ready is "" outside a warm pool.
func startEarlySSHD(env Env, ready string) (*earlySSHD, error) {
	// berth-init stays, holding what the claim brings (the sandbox's
	// start-only values, BERTH_GIT_TOKEN among them), beside the sessions
	// of the same uid: undumpable, its /proc/1 files are root's and ptrace
	// is refused. sshd's exec makes it dumpable again, for itself only.
	if err := undumpable(); err != nil {
		return nil, fmt.Errorf("keep berth-init's memory out of the sessions' reach: %w", err)
	}
	// A previous start's signal must not pass for this one's.
	if ready != "" {
		if err := os.Remove(ready); err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("remove %s: %w", ready, err)
		}
	}
	r := &starter{cfg: config{home: env.Getenv("HOME")}, env: env}
	conf, err := r.prepareSSHD()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(sshdBinary, "-D", "-e", "-f", conf)
	for _, v := range sessionEnv(env.Environ()) {
		cmd.Env = append(cmd.Env, v.name+"="+v.value)
	}
	cmd.Stdout, cmd.Stderr = env.Stderr, env.Stderr
	if ready != "" {
		r.logf("starting sshd on port %d before the claim (no key may log in yet)", sshdPort)
	} else {
		r.logf("starting sshd on port %d", sshdPort)
	}
	if err := env.Start(cmd); err != nil {
		return nil, fmt.Errorf("start sshd: %w", err)
	}
	return &earlySSHD{cmd: cmd, conf: conf, ready: ready}, nil
}

// stop ends sshd when the start fails after it began; it does nothing
// once sshd has ended.
func (e *earlySSHD) stop() {
	if e != nil && e.cmd.Process != nil {
		_ = e.cmd.Process.Kill()
	}
}

// serve tells the driver a claimed sandbox is ready, takes the tunnels'
// connections the gateway hands over, and stays sshd's parent until it
// ends.
func (r *starter) serve(e *earlySSHD) int {
	if e.ready != "" {
		if err := os.WriteFile(e.ready, []byte("ready\n"), 0o644); err != nil {
			r.logf("tell the driver the sandbox is ready: %v", err)
			return exitFailure
		}
		r.logf("the sandbox is ready; sshd answers on port %d", sshdPort)
	}
	var reaped func(pid int)
	if path := r.env.Getenv(handoff.EnvSocket); path != "" {
		recv := &handoff.Receiver{Path: path, Serve: func(f *os.File) (int, error) { return r.startInetd(e.conf, f) }, Logf: r.logf}
		go recv.Run()
		reaped = recv.Exited
	}
	if r.env.Supervise == nil {
		if err := e.cmd.Wait(); err != nil {
			r.logf("sshd: %v", err)
			return exitFailure
		}
		return exitOK
	}
	return r.env.Supervise(e.cmd, reaped)
}

// startInetd starts `sshd -i` on a client's socket the gateway handed
// over: the socket is its standard input and output, its log goes where
// berth-init's does, and it gets only what sessions may see.
func (r *starter) startInetd(conf string, f *os.File) (int, error) {
	cmd := exec.Command(sshdBinary, "-i", "-e", "-f", conf)
	for _, v := range sessionEnv(r.env.Environ()) {
		cmd.Env = append(cmd.Env, v.name+"="+v.value)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = f, f, r.env.Stderr
	if err := r.env.Start(cmd); err != nil {
		return 0, err
	}
	return cmd.Process.Pid, nil
}
