package entrypoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// sshdBinary is sshd's absolute path: sshd re-executes itself for every
// connection and refuses a relative one.
const sshdBinary = "/usr/sbin/sshd"

// sshdPort is where sshd listens (S10): above 1024, since no capability
// allows a privileged port.
const sshdPort = 2222

// startSSHD makes the host key once (it lives on the HOME volume, so it is
// the same after a resume), writes sshd's configuration and execs sshd in the
// foreground. sshd then is PID 1: it handles SIGTERM, so `podman stop` is
// quick, and it reaps the processes of its sessions.
func (r *starter) startSSHD() int {
	dir := filepath.Join(r.cfg.home, ".sshd")
	if err := privateDir(dir); err != nil {
		r.logf("prepare sshd: %v", err)
		return exitFailure
	}
	key := filepath.Join(dir, "host_ed25519")
	if _, err := os.Stat(key); errors.Is(err, fs.ErrNotExist) {
		r.logf("generating the sandbox's ssh host key")
		cmd := r.command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "berth-sandbox", "-f", key)
		if err := r.env.Run(cmd); err != nil {
			r.logf("ssh-keygen: %v", err)
			return exitFailure
		}
	} else if err != nil {
		r.logf("prepare sshd: %v", err)
		return exitFailure
	}
	// sshd ignores a host key others may read, and a volume can come back
	// with its files group-read-write (a kubelet's fsGroup change walks
	// the whole volume at each mount unless told otherwise).
	if err := os.Chmod(key, 0o600); err != nil {
		r.logf("prepare sshd: %v", err)
		return exitFailure
	}
	conf := filepath.Join(dir, "sshd_config")
	if err := writeFile(conf, sshdConfig(r.cfg.home), 0o600); err != nil {
		r.logf("prepare sshd: %v", err)
		return exitFailure
	}
	r.logf("starting sshd on port %d", sshdPort)
	// sshd gets only what sessions may see: start-only values such as
	// BERTH_GIT_TOKEN would otherwise stay readable in /proc/1/environ.
	var envv []string
	for _, v := range sessionEnv(r.env.Environ()) {
		envv = append(envv, v.name+"="+v.value)
	}
	err := r.env.Exec(sshdBinary, []string{sshdBinary, "-D", "-e", "-f", conf}, envv)
	r.logf("exec %s: %v", sshdBinary, err)
	return exitFailure
}

// sshdConfig is the configuration of a non-root sshd that keeps its state in
// ~/.sshd (notes/podman.md §5): public keys only, the sandbox's environment
// from ~/.ssh/environment, no forwarding.
func sshdConfig(home string) []byte {
	dir := filepath.Join(home, ".sshd")
	return fmt.Appendf(nil, `# Written by berth-init at every start of the sandbox; edits are lost.
Port %d
HostKey %s
PidFile %s
UsePAM no
PermitRootLogin no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
AuthorizedKeysFile .ssh/authorized_keys
StrictModes yes
PermitUserEnvironment yes
AllowTcpForwarding no
X11Forwarding no
PrintMotd no
Subsystem sftp internal-sftp
`, sshdPort, filepath.Join(dir, "host_ed25519"), filepath.Join(dir, "sshd.pid"))
}
