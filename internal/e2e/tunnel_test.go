package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
)

// person is a user of the gateway with their own key, HOME and ssh key,
// running the berth binary as they would.
type person struct {
	t    *testing.T
	home string
	key  string // their ssh private key
	env  []string
	api  *client.Client
}

// newMember makes a member of the operator's organisation with a key, a
// HOME of their own and an ssh key in ~/.ssh.
func (g *gateway) newMember(t *testing.T, name string) *person {
	t.Helper()
	return g.newPerson(t, name, "member")
}

// newPerson is newMember with another role ("admin").
func (g *gateway) newPerson(t *testing.T, name, role string) *person {
	t.Helper()
	ctx := context.Background()
	who, err := g.operator.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u, err := g.operator.CreateUser(ctx, who.Organisation.ID, api.CreateUser{Name: name, Role: role})
	if err != nil {
		t.Fatal(err)
	}
	k, err := g.operator.CreateKey(ctx, api.CreateKey{User: u.ID})
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(home, ".ssh", "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	return &person{t: t, home: home, key: key, api: client.New(g.url, k.Secret, nil),
		env: append(os.Environ(), "HOME="+home, "BERTH_URL="+g.url, "BERTH_API_KEY="+k.Secret, "BERTH_CONFIG="+filepath.Join(home, "berth.json"))}
}

// run runs a program as the person and returns its standard output.
// engineer creates an engineer sandbox of the person's with their ssh
// key, and waits until it runs.
func (p *person) engineer(g *gateway, name string) api.Sandbox {
	p.t.Helper()
	pub, err := os.ReadFile(p.key + ".pub")
	if err != nil {
		p.t.Fatal(err)
	}
	sb, err := p.api.CreateSandbox(context.Background(), api.CreateSandbox{Name: name, Class: "standard", SSHKeys: []string{strings.TrimSpace(string(pub))}})
	if err != nil {
		p.t.Fatal(err)
	}
	return g.waitState(p.api, sb.ID, "running", 2*time.Minute)
}

func (p *person) run(name string, args ...string) string {
	p.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env, cmd.Dir = p.env, p.home
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		p.t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// sshArgs point the real ssh tools at the person's own config and key:
// OpenSSH reads ~ from the password database, not $HOME, so a test's
// HOME has to be named.
func (p *person) sshArgs() []string {
	return []string{"-F", filepath.Join(p.home, ".ssh", "config"), "-i", p.key, "-o", "BatchMode=yes"}
}

// TestSSHThroughTheGateway is the tunnel issue's acceptance with the real
// OpenSSH client and a podman sandbox: berth sandbox ssh runs a command as
// the sandbox's non-root user; the ssh config berth sandbox config writes
// carries scp, sftp and a pty session through the gateway; an open session
// shows in the sandbox's connections.
func TestSSHThroughTheGateway(t *testing.T) {
	g := startGateway(t)
	alice := g.newMember(t, "alice")
	sb := alice.engineer(g, "dev")

	// One step: berth sandbox ssh.
	got := lines(alice.run(berthBin, "sandbox", "ssh", "dev", "-i", alice.key, "--", "id -un; id -u; echo $BERTH_SANDBOX_NAME"))
	if strings.Join(got, " ") != "berth 1001 dev" {
		t.Fatalf("berth sandbox ssh dev -- id: %q, want the non-root user berth (1001) in dev", got)
	}

	// The config entries, then the ssh tools as an editor would run them.
	out := alice.run(berthBin, "sandbox", "config")
	if !strings.Contains(out, "ssh berth-dev") {
		t.Fatalf("berth sandbox config: %q", out)
	}
	ssh := func(args ...string) string {
		return alice.run("ssh", append(alice.sshArgs(), args...)...)
	}
	if got := strings.TrimSpace(ssh("berth-dev", "id -un")); got != "berth" {
		t.Errorf("ssh berth-dev id -un: %q", got)
	}

	payload := make([]byte, 3<<20)
	rand.Read(payload)
	local := filepath.Join(alice.home, "payload.bin")
	if err := os.WriteFile(local, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	alice.run("scp", append(alice.sshArgs(), "-q", local, "berth-dev:scp.bin")...)
	alice.run("scp", append(alice.sshArgs(), "-q", "berth-dev:scp.bin", filepath.Join(alice.home, "scp-back.bin"))...)
	sameFile(t, "scp", filepath.Join(alice.home, "scp-back.bin"), payload)

	batch := filepath.Join(alice.home, "sftp.batch")
	if err := os.WriteFile(batch, []byte("put payload.bin sftp.bin\nget sftp.bin sftp-back.bin\nls sftp.bin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out = alice.run("sftp", append(alice.sshArgs(), "-b", batch, "berth-dev")...)
	if !strings.Contains(out, "sftp.bin") {
		t.Errorf("sftp ls: %q", out)
	}
	sameFile(t, "sftp", filepath.Join(alice.home, "sftp-back.bin"), payload)

	// A pty session.
	if got := ssh("-tt", "berth-dev", "tty; echo $TERM"); !regexp.MustCompile(`^/dev/pts/\d+\r?\n`).MatchString(got) {
		t.Errorf("ssh -tt berth-dev tty: %q, want a pty", got)
	}

	// An open session is a connection the sandbox shows; it goes when the
	// session ends. ssh took the connection itself (ProxyUseFdpass): no
	// berth sandbox proxy is left copying bytes. The sessions before it
	// must have left first: the gateway sees a tunnel close a moment after
	// its ssh client exits.
	g.waitConnections(alice.api, sb.ID, 0, 5*time.Second)
	bg := exec.Command("ssh", append(alice.sshArgs(), "berth-dev", "sleep 4")...)
	bg.Env = alice.env
	if err := bg.Start(); err != nil {
		t.Fatal(err)
	}
	g.waitConnections(alice.api, sb.ID, 1, 5*time.Second)
	show := alice.run(berthBin, "sandbox", "show", "dev")
	if !regexp.MustCompile(`(?m)^connections: +1$`).MatchString(show) || !strings.Contains(show, "last activity:") {
		t.Errorf("berth sandbox show during a session:\n%s", show)
	}
	if n := proxies(g.url); n != 0 {
		t.Errorf("%d berth sandbox proxy processes during a session with ProxyUseFdpass, want 0", n)
	}
	if err := bg.Wait(); err != nil {
		t.Fatalf("ssh sleep: %v", err)
	}
	g.waitConnections(alice.api, sb.ID, 0, 5*time.Second)

	// A client that ignores ProxyUseFdpass (JetBrains' own ssh, say) gives
	// the proxy pipes: it copies instead.
	bg = exec.Command("ssh", append(alice.sshArgs(), "-o", "ProxyUseFdpass=no", "berth-dev", "sleep 3; id -un")...)
	bg.Env = alice.env
	var bgOut bytes.Buffer
	bg.Stdout = &bgOut
	if err := bg.Start(); err != nil {
		t.Fatal(err)
	}
	g.waitConnections(alice.api, sb.ID, 1, 5*time.Second)
	if n := proxies(g.url); n != 1 {
		t.Errorf("%d berth sandbox proxy processes during a session over pipes, want 1", n)
	}
	if err := bg.Wait(); err != nil || strings.TrimSpace(bgOut.String()) != "berth" {
		t.Fatalf("ssh over pipes: %q, %v", bgOut.String(), err)
	}
}

// proxies counts the berth sandbox proxy processes for the gateway at url.
func proxies(url string) int {
	n := 0
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 3 && args[0] == berthBin && args[1] == "sandbox" && args[2] == "proxy" && slices.Contains(args, url) {
			n++
		}
	}
	return n
}

// sameFile checks path holds want.
func sameFile(t *testing.T, what, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: the copy back differs (%d bytes, want %d)", what, len(got), len(want))
	}
}

// waitConnections polls until the sandbox reports n open connections.
func (g *gateway) waitConnections(c *client.Client, id string, n int, within time.Duration) {
	g.t.Helper()
	g.waitSandbox(c, id, within, func(sb api.Sandbox, late bool) bool {
		if late && sb.Connections != n {
			g.t.Fatalf("sandbox %s has %d connections after %s, want %d", id, sb.Connections, within, n)
		}
		return sb.Connections == n
	})
}
