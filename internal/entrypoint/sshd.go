package entrypoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
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
	conf, err := r.prepareSSHD()
	if err != nil {
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
	err = r.env.Exec(sshdBinary, []string{sshdBinary, "-D", "-e", "-f", conf}, envv)
	r.logf("exec %s: %v", sshdBinary, err)
	return exitFailure
}

// prepareSSHD makes the host key once and writes sshd's configuration;
// it returns the configuration's path.
func (r *starter) prepareSSHD() (string, error) {
	dir := filepath.Join(r.cfg.home, ".sshd")
	if err := privateDir(dir); err != nil {
		return "", err
	}
	key := filepath.Join(dir, "host_ed25519")
	if _, err := os.Stat(key); errors.Is(err, fs.ErrNotExist) {
		r.logf("generating the sandbox's ssh host key")
		cmd := r.command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "berth-sandbox", "-f", key)
		if err := r.env.Run(cmd); err != nil {
			return "", fmt.Errorf("ssh-keygen: %w", err)
		}
	} else if err != nil {
		return "", err
	}
	// sshd ignores a host key others may read, and a volume can come back
	// with its files group-read-write (a kubelet's fsGroup change walks
	// the whole volume at each mount unless told otherwise).
	if err := os.Chmod(key, 0o600); err != nil {
		return "", err
	}
	strict, why := homeModes(r.cfg.home, os.Getuid())
	if !strict {
		r.logf("%s; sshd runs with StrictModes off: every process in the sandbox is its user's, so no other user can write there", why)
	}
	conf := filepath.Join(dir, "sshd_config")
	if err := writeFile(conf, sshdConfig(r.cfg.home, strict), 0o600); err != nil {
		return "", err
	}
	return conf, nil
}

// homeModes readies HOME for sshd's StrictModes, which refuses the keys
// under a HOME that others may write: one the user owns loses group and
// other write (podman's volumes are the user's); one the user cannot
// change cannot be made safe, and strict is false with why. That is
// HOME on Kubernetes: an emptyDir's root is the node's, mode 0777, and
// with fsGroup a claim's root is root's and group-writable (a kubelet
// changes its group, never its owner), which a stock OpenSSH refuses.
func homeModes(home string, uid int) (strict bool, why string) {
	fi, err := os.Stat(home)
	if err != nil || fi.Mode().Perm()&0o022 == 0 {
		return true, "" // sshd says what is wrong with a HOME it cannot read
	}
	if owner, ok := ownerOf(fi); ok && owner == uid {
		if err := os.Chmod(home, fi.Mode()&(fs.ModePerm|fs.ModeSetgid|fs.ModeSticky)&^0o022); err == nil {
			return true, ""
		}
	}
	owner, _ := ownerOf(fi)
	return false, fmt.Sprintf("HOME %s may be written by others (mode %04o, owner uid %d) and is not the sandbox user's to change", home, fi.Mode().Perm(), owner)
}

// sshdConfig is the configuration of a non-root sshd that keeps its state in
// ~/.sshd (notes/podman.md §5): public keys only, the sandbox's environment
// from ~/.ssh/environment; StrictModes unless HOME cannot be made safe for
// it (homeModes).
//
// Editors (VS Code Remote-SSH, JetBrains Gateway) start their server in
// the sandbox and reach it through a forwarded TCP port or unix socket,
// so local and remote TCP forwarding and streamlocal forwarding are on.
// They widen nothing: whoever may forward already has a shell as the
// sandbox's only user, who can dial and listen on what the forwards can,
// and the sandbox's network rules apply to both alike; that is also why
// PermitOpen and PermitListen stay unrestricted. Remote forwards bind
// loopback only (GatewayPorts no), so a -R port is not opened to the
// sandbox's network. Agent forwarding stays off (SPEC S9: no ssh agent is
// forwarded: a sandbox never gets to sign with its user's keys), as do
// X11 and tun devices. StreamLocalBindUnlink lets a reconnecting editor
// bind its remote socket again over the one its last session left.
func sshdConfig(home string, strict bool) []byte {
	dir := filepath.Join(home, ".sshd")
	modes := "yes"
	if !strict {
		modes = "no"
	}
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
StrictModes %s
PermitUserEnvironment yes
AllowTcpForwarding yes
AllowStreamLocalForwarding yes
StreamLocalBindUnlink yes
GatewayPorts no
PermitOpen any
PermitListen any
AllowAgentForwarding no
X11Forwarding no
PermitTunnel no
PrintMotd no
Subsystem sftp internal-sftp
`, sshdPort, filepath.Join(dir, "host_ed25519"), filepath.Join(dir, "sshd.pid"), modes)
}

// ownerOf is the uid that owns the file fi describes, where the system
// says.
func ownerOf(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
