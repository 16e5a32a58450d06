package e2e_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
)

// The editor's server's addresses in the sandbox (echoserver).
const (
	editorPort   = 7001
	editorSocket = "/tmp/berth-editor.sock"
)

// TestEditorForwarding is what VS Code Remote-SSH and JetBrains Gateway do
// with the real OpenSSH client through the gateway's tunnel, on podman:
// after create --ssh-key with a key outside ~/.ssh, berth sandbox config
// and plain ssh berth-dev get in with it (IdentityFile); a server copied
// in with scp and started over ssh, bound to loopback and to a unix
// socket, is reached with -L (TCP and socket) and -D (SOCKS); -R binds the
// sandbox's loopback only; sessions and forwards share one ControlMaster,
// one tunnel connection; agent forwarding and X11 are refused.
func TestEditorForwarding(t *testing.T) {
	root := podmanRoot(t)
	// The sshd_config under test is the one this tree's berth-init writes.
	image := withThisBerthInit(t, root, sandboxImage)
	classes := filepath.Join(t.TempDir(), "classes.yaml")
	if err := os.WriteFile(classes, []byte(strings.ReplaceAll(classesYAML, sandboxImage, image)), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, "BERTH_SANDBOXES_FILE="+classes)
	alice := g.newMember(t, "alice")
	sb := alice.engineerWithKeyElsewhere(g, "dev", "standard")
	editorChecks(t, g, alice, sb)
}

// engineerWithKeyElsewhere creates an engineer sandbox of class with
// berth sandbox create --ssh-key, a key that is not in ~/.ssh, then runs
// berth sandbox config; ssh then reaches it with no -i, as a person types
// ssh berth-NAME.
func (p *person) engineerWithKeyElsewhere(g *gateway, name, class string) api.Sandbox {
	p.t.Helper()
	dir := filepath.Join(p.home, "elsewhere")
	if err := os.Mkdir(dir, 0o700); err != nil {
		p.t.Fatal(err)
	}
	key := filepath.Join(dir, "key")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", key).CombinedOutput(); err != nil {
		p.t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	p.run(berthBin, "sandbox", "create", name, "--class", class, "--ssh-key", "elsewhere/key.pub", "--timeout", "3m")
	sb, err := p.api.Sandbox(p.t.Context(), name)
	if err != nil {
		p.t.Fatal(err)
	}
	sb = g.waitState(p.api, sb.ID, "running", 2*time.Minute)
	if out := p.run(berthBin, "sandbox", "config", name); !strings.Contains(out, "ssh berth-"+name) {
		p.t.Fatalf("berth sandbox config %s: %q", name, out)
	}
	return sb
}

// plainSSH is ssh as a person runs it with berth's config entries: their
// ssh config (OpenSSH reads ~ from the password database, so a test's HOME
// is named) and no -i, so the key is the one the entry names.
func (p *person) plainSSH(args ...string) *exec.Cmd {
	cmd := exec.Command("ssh", append([]string{"-F", filepath.Join(p.home, ".ssh", "config"), "-o", "BatchMode=yes"}, args...)...)
	cmd.Env, cmd.Dir = p.env, p.home
	return cmd
}

// editorChecks runs the editors' uses of ssh against the person's running
// sandbox sb, whose entry berth sandbox config wrote.
func editorChecks(t *testing.T, g *gateway, p *person, sb api.Sandbox) {
	host := "berth-" + sb.Name
	ssh := func(args ...string) string {
		t.Helper()
		cmd := p.plainSSH(args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ssh %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out)
	}
	if got := strings.TrimSpace(ssh(host, "id -un")); got != "berth" {
		t.Fatalf("ssh %s id -un with the key of create --ssh-key: %q", host, got)
	}

	// The editor's server: copied in and started, as editors do theirs.
	server := buildEchoServer(t)
	scp := exec.Command("scp", "-F", filepath.Join(p.home, ".ssh", "config"), "-o", "BatchMode=yes", "-q", server, host+":echoserver")
	scp.Env, scp.Dir = p.env, p.home
	if out, err := scp.CombinedOutput(); err != nil {
		t.Fatalf("scp the server in: %v: %s", err, out)
	}
	// The server alone goes to the background, its output to a file, so
	// the session ends (and waits for it to listen, up to 10s).
	started := ssh(host, fmt.Sprintf(`chmod +x echoserver
nohup ./echoserver -tcp 127.0.0.1:%d -unix %s >echoserver.log 2>&1 </dev/null &
for _ in $(seq 100); do [ "$(grep -c listening echoserver.log)" = 2 ] && break; sleep 0.1; done
cat echoserver.log`, editorPort, editorSocket))
	if !strings.Contains(started, "listening on unix") || !strings.Contains(started, "listening on tcp") {
		t.Fatalf("the server in the sandbox did not start: %q", started)
	}

	// -L to the loopback port and to the unix socket.
	lport := freePort(t)
	stopL := background(t, p.plainSSH("-N", "-o", "ExitOnForwardFailure=yes", "-L", "127.0.0.1:"+lport+":127.0.0.1:"+strconv.Itoa(editorPort), host))
	greeted(t, "-L to a port", func() (net.Conn, error) { return net.Dial("tcp", "127.0.0.1:"+lport) }, "hello from tcp 127.0.0.1:7001")
	sport := freePort(t)
	stopS := background(t, p.plainSSH("-N", "-o", "ExitOnForwardFailure=yes", "-L", "127.0.0.1:"+sport+":"+editorSocket, host))
	greeted(t, "-L to a unix socket", func() (net.Conn, error) { return net.Dial("tcp", "127.0.0.1:"+sport) }, "hello from unix "+editorSocket)
	stopL()
	stopS()

	// Several sessions and a forward over one master: one tunnel
	// connection carries them all.
	g.waitConnections(p.api, sb.ID, 0, 10*time.Second)
	cm, err := os.MkdirTemp("", "berth-cm-") // a socket path has at most 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(cm) })
	mux := []string{"-o", "ControlMaster=auto", "-o", "ControlPath=" + filepath.Join(cm, "%C"), "-o", "ControlPersist=60"}
	t.Cleanup(func() { _ = p.plainSSH(append(mux, "-O", "exit", host)...).Run() })
	if got := muxRun(t, p, append(mux, host, "echo first")...); got != "first" {
		t.Fatalf("the first session over the master: %q", got)
	}
	long := p.plainSSH(append(mux, host, "echo up; sleep 30")...)
	longOut := filepath.Join(cm, "long.out")
	f, err := os.Create(longOut)
	if err != nil {
		t.Fatal(err)
	}
	long.Stdout = f
	background(t, long)
	f.Close()
	eventually(t, 10*time.Second, "the long session over the master to start", func() bool {
		b, _ := os.ReadFile(longOut)
		return strings.Contains(string(b), "up")
	})
	mport := freePort(t)
	muxRun(t, p, append(mux, "-O", "forward", "-L", "127.0.0.1:"+mport+":127.0.0.1:"+strconv.Itoa(editorPort), host)...)
	greeted(t, "-L added to the master", func() (net.Conn, error) { return net.Dial("tcp", "127.0.0.1:"+mport) }, "hello from tcp 127.0.0.1:7001")
	for i := range 3 {
		if got := muxRun(t, p, append(mux, host, "echo session "+strconv.Itoa(i))...); got != "session "+strconv.Itoa(i) {
			t.Errorf("session %d over the master: %q", i, got)
		}
	}
	now, err := p.api.Sandbox(t.Context(), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if now.Connections != 1 {
		t.Errorf("%d tunnel connections with a master, a long session and a forward open, want 1 (the master's)", now.Connections)
	}
	if n := proxies(g.url); n != 0 {
		t.Errorf("%d berth sandbox proxy processes behind the master, want 0 (ProxyUseFdpass)", n)
	}
	muxRun(t, p, append(mux, "-O", "exit", host)...)
	g.waitConnections(p.api, sb.ID, 0, 10*time.Second)

	// -D: a SOCKS proxy into the sandbox, as a browser preview uses.
	dport := freePort(t)
	background(t, p.plainSSH("-N", "-o", "ExitOnForwardFailure=yes", "-D", "127.0.0.1:"+dport, host))
	greeted(t, "-D", func() (net.Conn, error) { return socks5(dport, "127.0.0.1", editorPort) }, "hello from tcp 127.0.0.1:7001")

	// -R asked for every address binds the sandbox's loopback only
	// (GatewayPorts no): the laptop's service is reached from inside, and
	// the sandbox's network sees no new port.
	laptop, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer laptop.Close()
	go func() {
		for {
			c, err := laptop.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, "hello from the laptop")
			c.Close()
		}
	}()
	const rport = 7100
	background(t, p.plainSSH("-N", "-o", "ExitOnForwardFailure=yes", "-R", fmt.Sprintf("0.0.0.0:%d:%s", rport, laptop.Addr()), host))
	var inside string
	eventually(t, 15*time.Second, "the -R port to answer in the sandbox", func() bool {
		cmd := p.plainSSH(host, fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && head -n 1 <&3", rport))
		out, _ := cmd.Output()
		inside = strings.TrimSpace(string(out))
		return inside == "hello from the laptop"
	})
	listening := listeners(ssh(host, "cat /proc/net/tcp /proc/net/tcp6"), rport)
	if len(listening) == 0 {
		t.Fatalf("nothing listens on %d in the sandbox", rport)
	}
	for _, a := range listening {
		if a != "0100007F" && a != "00000000000000000000000001000000" {
			t.Errorf("the -R port %d listens on %s in the sandbox, want loopback only (all: %v)", rport, a, listening)
		}
	}

	// No agent is forwarded (SPEC S9) and no X11, though the client asks.
	agentSock := filepath.Join(cm, "agent")
	agent := exec.Command("ssh-agent", "-D", "-a", agentSock)
	background(t, agent)
	eventually(t, 5*time.Second, "ssh-agent to listen", func() bool { _, err := os.Stat(agentSock); return err == nil })
	withAgent := p.plainSSH("-A", host, `echo "[$SSH_AUTH_SOCK]"`)
	withAgent.Env = append(withAgent.Env, "SSH_AUTH_SOCK="+agentSock)
	if out, err := withAgent.Output(); err != nil || strings.TrimSpace(string(out)) != "[]" {
		t.Errorf("ssh -A: SSH_AUTH_SOCK in the sandbox is %q (%v), want none", out, err)
	}
	withX := p.plainSSH("-X", host, `echo "[$DISPLAY]"`)
	withX.Env = append(withX.Env, "DISPLAY=:99")
	if out, err := withX.Output(); err != nil || strings.TrimSpace(string(out)) != "[]" {
		t.Errorf("ssh -X: DISPLAY in the sandbox is %q (%v), want none", out, err)
	}
}

// background starts cmd and returns what stops it; the test's end stops
// it too.
func background(t *testing.T, cmd *exec.Cmd) (stop func()) {
	t.Helper()
	var stderr syncBuffer
	if cmd.Stderr == nil {
		cmd.Stderr = &stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cmd.Process.Kill()
			<-exited
			if t.Failed() && stderr.String() != "" {
				t.Logf("%s printed:\n%s", strings.Join(cmd.Args, " "), stderr.String())
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// muxRun runs ssh with args over the master and returns its standard
// output, trimmed. Its output goes to files: the master that
// ControlPersist leaves behind keeps a pipe open for as long as it lives.
func muxRun(t *testing.T, p *person, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	errf, err := os.Create(filepath.Join(dir, "err"))
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	cmd := p.plainSSH(args...)
	cmd.Stdout, cmd.Stderr = out, errf
	if err := cmd.Run(); err != nil {
		e, _ := os.ReadFile(errf.Name())
		t.Fatalf("ssh %s: %v\n%s", strings.Join(args, " "), err, e)
	}
	b, _ := os.ReadFile(out.Name())
	return strings.TrimSpace(string(b))
}

// greeted dials until the far end greets with want (a forward's listener
// is up before ssh has its channel: an early try may be closed), then
// checks a line comes back.
func greeted(t *testing.T, what string, dial func() (net.Conn, error), want string) {
	t.Helper()
	var last string
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := dial()
		if err == nil {
			c.SetDeadline(time.Now().Add(10 * time.Second))
			r := bufio.NewReader(c)
			line, rerr := r.ReadString('\n')
			if strings.TrimSpace(line) == want {
				fmt.Fprintln(c, "ping "+what)
				back, err := r.ReadString('\n')
				c.Close()
				if strings.TrimSpace(back) != "ping "+what {
					t.Fatalf("%s: echoed %q (%v), want %q", what, back, err, "ping "+what)
				}
				return
			}
			c.Close()
			last = fmt.Sprintf("read %q (%v)", line, rerr)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no greeting %q within 15s: %s", what, want, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// socks5 connects to host:port through the SOCKS5 proxy on the local
// port, with no authentication (RFC 1928), as ssh -D serves it.
func socks5(proxyPort, host string, port int) (net.Conn, error) {
	c, err := net.Dial("tcp", "127.0.0.1:"+proxyPort)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fail := func(err error) (net.Conn, error) { c.Close(); return nil, err }
	if _, err := c.Write([]byte{5, 1, 0}); err != nil { // version 5, one method: none
		return fail(err)
	}
	reply := make([]byte, 2)
	if _, err := io.ReadFull(c, reply); err != nil || reply[1] != 0 {
		return fail(fmt.Errorf("socks greeting: %v %v", reply, err))
	}
	req := append([]byte{5, 1, 0, 3, byte(len(host))}, host...) // CONNECT to a domain name
	req = binary.BigEndian.AppendUint16(req, uint16(port))
	if _, err := c.Write(req); err != nil {
		return fail(err)
	}
	head := make([]byte, 4)
	if _, err := io.ReadFull(c, head); err != nil || head[1] != 0 {
		return fail(fmt.Errorf("socks connect: %v %v", head, err))
	}
	skip := map[byte]int{1: 4, 4: 16}[head[3]] + 2 // the bound address and port
	if head[3] == 3 {
		n := make([]byte, 1)
		if _, err := io.ReadFull(c, n); err != nil {
			return fail(err)
		}
		skip = int(n[0]) + 2
	}
	if _, err := io.ReadFull(c, make([]byte, skip)); err != nil {
		return fail(err)
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// listeners are the local addresses (hex, as /proc/net/tcp writes them)
// listening on port in a /proc/net/tcp and tcp6 listing.
func listeners(procNet string, port int) []string {
	var out []string
	suffix := fmt.Sprintf(":%04X", port)
	for line := range strings.Lines(procNet) {
		f := strings.Fields(line)
		if len(f) > 3 && f[3] == "0A" && strings.HasSuffix(f[1], suffix) {
			out = append(out, strings.TrimSuffix(f[1], suffix))
		}
	}
	return out
}

// buildEchoServer builds the editor's server for the sandbox, static.
func buildEchoServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "echoserver")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "berth.dev/berth/internal/e2e/echoserver")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the editor's server: %v\n%s", err, out)
	}
	return bin
}
